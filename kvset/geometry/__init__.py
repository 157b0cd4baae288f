"""Model KV geometry: bytes per token and per block, and the hybrid-layer reserve."""
