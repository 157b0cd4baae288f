"""Live engines (vLLM, SGLang), pure: their wire formats (KV events, logs, Prometheus metrics) and
what those say, one tracker per input (kv_event_tracker, log_tracker, metrics_tracker) that takes
raw input with its time and gives accesses, engine readings, timeline events and health parts.
No sockets, no threads, no files: the sources in kvset.sources do the I/O."""

from kvset.quantities import MIB

# What the command line offers for the engines' inputs (kvset.cli.flags): here, where building a
# parser loads neither numpy nor prometheus_client.
DEFAULT_MEDIUM = "GPU"  # what events without a medium field (older vLLM, SGLang) describe
ENGINES = ("auto", "vllm", "sglang")  # who wrote a log
TRUNCATED_POLICIES = ("skip", "prefix")  # what a log's cut prompt id lists become
# The largest /metrics body read (a poller's default; --metrics-max-bytes): an engine's is tens of KiB.
DEFAULT_MAX_BODY_BYTES = 16 * MIB
