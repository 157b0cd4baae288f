"""Wire formats of live engines (vLLM, SGLang): KV events, logs, Prometheus metrics."""
