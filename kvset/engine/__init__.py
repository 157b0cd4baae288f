"""Live engines (vLLM, SGLang), pure: their wire formats (KV events, logs, Prometheus metrics) and
what those say, one tracker per input (kv_event_tracker, log_tracker, metrics_tracker) that takes
raw input with its time and gives accesses, engine readings, timeline events and health parts.
No sockets, no threads, no files: the sources in kvset.sources do the I/O."""

# What the command line offers for the engines' inputs (kvset.cli.flags): here, where building a
# parser loads no numpy.
DEFAULT_MEDIUM = "GPU"  # what events without a medium field (older vLLM, SGLang) describe
ENGINES = ("auto", "vllm", "sglang")  # who wrote a log
TRUNCATED_POLICIES = ("skip", "prefix")  # what a log's cut prompt id lists become
