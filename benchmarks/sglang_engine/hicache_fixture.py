"""Record a small HiCache-shaped KV-event stream with SGLang 0.5.23's own event code (SGLang venv).

SGLang's HiCache writes every radix node through to host memory: its events are a BlockStored of
medium GPU when a node is inserted, a BlockStored of medium CPU_PINNED when its copy reaches the host,
a BlockRemoved of GPU when the device evicts it (the host copy stays), and a BlockRemoved of CPU_PINNED
when the host evicts its copy. The GPU path-copying kernels do not run on CPU, so the tree here is the
plain RadixCache with its real allocator; the host tier's events are SGLang's own recorder
(`KVCacheEventRecorder.record_store/record_remove` with `StorageMedium.CPU`, what its hierarchical
tree calls), published by its ZmqEventPublisher on 127.0.0.1 and recorded by a SUB byte for byte.
`--truth` writes the pages each medium holds at the end, counted on SGLang's own tree.

    python hicache_fixture.py --port P --out hicache.zmqframes.gz --truth hicache.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from array import array
from pathlib import Path

import torch
from driver import start_publishing
from sglang.srt.disaggregation.kv_events import KVEventBatch, StorageMedium
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

PAGE = 16


def leaves(tree: RadixCache) -> list:
    out, stack = [], [tree.root_node]
    while stack:
        node = stack.pop()
        kids = list(node.children.values())
        if not kids and node is not tree.root_node:
            out.append(node)
        stack.extend(kids)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--truth", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    publisher, recorder = start_publishing(args.port, args.out)
    rng = random.Random(args.seed)
    allocator = PagedTokenToKVPoolAllocator(4096, PAGE, torch.int64, "cpu", kvcache=None, need_sort=False)
    tree = RadixCache(
        CacheInitParams(
            disable=False,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=allocator,
            page_size=PAGE,
            eviction_policy="lru",
            enable_kv_cache_events=True,
        )
    )
    system = [rng.randrange(1, 30000) for _ in range(4 * PAGE)]
    host_nodes: dict[int, object] = {}  # node id -> node, while its host copy lives
    host_pages = 0
    for step in range(12):
        prompt = system + [rng.randrange(1, 30000) for _ in range(rng.randint(2, 6) * PAGE)]
        before = {id(n) for n in leaves(tree)}
        tree.insert(InsertParams(key=RadixKey(array("q", prompt)), value=allocator.alloc(len(prompt))))
        for node in leaves(tree):  # write-through: each new node's copy reaches the host
            if id(node) not in before and id(node) not in host_nodes:
                tree.kv_events.record_store(node, medium=StorageMedium.CPU)
                host_nodes[id(node)] = node
                host_pages += len(node.key) // PAGE
        if step % 4 == 3:
            tree.evict(EvictParams(num_tokens=3 * PAGE))  # the device evicts; the host copy stays
        if step == 9:  # the host evicts its oldest copy too
            oldest = next(iter(host_nodes))
            node = host_nodes.pop(oldest)
            tree.kv_events.record_remove(node, medium=StorageMedium.CPU)
            host_pages -= len(node.key) // PAGE
        publisher.publish(KVEventBatch(ts=time.time(), events=tree.kv_events.take()))
        time.sleep(0.05)
    time.sleep(1.0)
    publisher.shutdown()
    recorder.stop.set()
    recorder.join()
    truth = {
        "page_size": PAGE,
        "batches": 12,
        "messages_recorded": recorder.messages,
        "gpu_pages": tree.total_size() // PAGE,
        "cpu_pinned_pages": host_pages,
    }
    args.truth.write_text(json.dumps(truth, indent=1))
    print(json.dumps(truth))


if __name__ == "__main__":
    main()
