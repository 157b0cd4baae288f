"""Live engines (vLLM, SGLang), pure: their wire formats (KV events, logs, Prometheus metrics) and
what those say, one tracker per input (kv_event_tracker, log_tracker, metrics_tracker) that takes
raw input with its time and gives accesses, engine readings, timeline events and health parts.
No sockets, no threads, no files: the sources in kvset.sources do the I/O."""
