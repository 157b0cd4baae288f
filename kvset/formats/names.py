"""The names the command line offers for the trace files (kvset.cli.flags), in a module of their own
that loads no numpy and imports nothing of the formats."""

# The trace formats, and the hashes that make block keys of token ids (vLLM's
# --prefix-caching-hash-algo values, and SGLang's page hash).
FORMATS = ("mooncake", "bailian", "tokens")
HASH_ALGOS = ("sha256", "sha256_cbor", "sglang")
