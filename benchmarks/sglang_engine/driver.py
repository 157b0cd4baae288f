"""Drive SGLang 0.5.23's real RadixCache, token-to-KV pool allocator and ZmqEventPublisher on CPU.

Runs in the SGLang venv (setup.sh). A step of the loop is a scheduler step, as SGLang's scheduler
does it for the tree (what is SGLang's code and what is ours: README.md):
- admission: waiting turns are looked up (`RadixCache.match_prefix`), their matched node locked
  (`inc_lock_ref`), while the pool (free plus evictable, `available_size` + `evictable_size`) holds
  the prompt and the output still to come of every running request (SGLang reserves it too);
- prefill: the prompt's new pages are allocated (`PagedTokenToKVPoolAllocator.alloc`, after
  `RadixCache.evict` when it is short) and the page-aligned prompt inserted (`insert`, what
  `checkpoint` does after a prefill); the lock moves to the new node;
- decode: one token per running request, a page allocated when one fills; a request that is done
  inserts prompt and output (`insert`), frees what the tree did not take and unlocks;
- the step's events (`kv_events.take()`) are published as one `KVEventBatch`.
The cached tokens of a request are SGLang's own count: `match_prefix`'s device_prefix_len at its
admission (what sglang:cached_tokens_total adds up). A SUB on 127.0.0.1 records every frame.

    python driver.py --pool-tokens 40000 --policy lru --out run.zmqframes.gz --truth truth.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import torch
import zmq
from sglang.srt.disaggregation.kv_events import BlockStored, KVEventBatch, ZmqEventPublisher
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "vllm_engine"))
import frames as framesfile  # noqa: E402


@dataclass
class Turn:
    agent: int
    prompt: list[int]
    output: list[int]
    ready_step: int


@dataclass
class Running:
    turn: Turn
    node: object
    kv: torch.Tensor  # indices of its tokens so far (prefix from the tree, then its own pages)
    protected: int  # tokens owned by the tree
    allocated: int  # tokens its pages cover
    generated: int = 0
    prefilled: bool = False
    inserted: int = 0  # tokens it has inserted (req.kv.cache_inserted_len: hit counts count once)


@dataclass
class Agent:
    history: list[int] = field(default_factory=list)
    turns_left: int = 0


class Workload:
    """Agentic sessions: a shared system prompt, a task, then turns that re-send the conversation."""

    def __init__(self, rng: random.Random, agents: int, system_tokens: int = 800) -> None:
        self.rng = rng
        self.system = [rng.randrange(1, 30000) for _ in range(system_tokens)]
        self.agents = [Agent() for _ in range(agents)]

    def tokens(self, n: int) -> list[int]:
        return [self.rng.randrange(1, 30000) for _ in range(n)]

    def next_turn(self, a: int, step: int) -> Turn:
        agent = self.agents[a]
        if agent.turns_left <= 0 or len(agent.history) > 9000:
            agent.history = self.system + self.tokens(self.rng.randint(60, 300))
            agent.turns_left = self.rng.randint(4, 20)
        else:
            tool = min(2000, int(self.rng.lognormvariate(5.3, 0.8)))
            agent.history = agent.history + self.tokens(tool)
        agent.turns_left -= 1
        output = self.tokens(self.rng.randint(24, 160))
        return Turn(a, list(agent.history), output, step)

    def finished(self, turn: Turn, step: int) -> Turn:
        agent = self.agents[turn.agent]
        agent.history = turn.prompt + turn.output
        return self.next_turn(turn.agent, step + self.rng.randint(1, 20))


class Recorder(threading.Thread):
    def __init__(self, endpoint: str, path: Path) -> None:
        super().__init__(daemon=True)
        self.sock = zmq.Context.instance().socket(zmq.SUB)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.connect(endpoint)
        self.writer = framesfile.Writer(path)
        self.stop = threading.Event()
        self.messages = 0

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop.is_set() or poller.poll(200):
            if poller.poll(50):
                self.writer.write(time.time(), self.sock.recv_multipart())
                self.messages += 1
        self.writer.close()


class Engine:
    def __init__(self, pool_tokens: int, page_size: int, policy: str, max_running: int) -> None:
        self.page = page_size
        self.allocator = PagedTokenToKVPoolAllocator(
            pool_tokens, page_size, torch.int64, "cpu", kvcache=None, need_sort=False
        )
        self.tree = RadixCache(
            CacheInitParams(
                disable=False,
                req_to_token_pool=None,
                token_to_kv_pool_allocator=self.allocator,
                page_size=page_size,
                eviction_policy=policy,
                enable_kv_cache_events=True,
            )
        )
        self.max_running = max_running
        self.running: list[Running] = []
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.requests = 0
        self.locked_samples: list[float] = []
        self.pool_tokens = self.allocator.size

    def _alloc(self, tokens: int) -> torch.Tensor:
        if self.allocator.available_size() < tokens:
            self.tree.evict(EvictParams(num_tokens=tokens - self.allocator.available_size()))
        out = self.allocator.alloc(tokens)
        if out is None:
            raise RuntimeError("pool exhausted: admission let in more than fits")
        return out

    def _pages(self, tokens: int) -> int:
        return -(-tokens // self.page) * self.page

    def reserved(self) -> int:
        """Tokens the running requests may still need (their output to come), page-rounded."""
        return sum(self._pages(len(r.turn.prompt) + len(r.turn.output)) - r.allocated for r in self.running)

    def try_admit(self, turn: Turn) -> bool:
        if len(self.running) >= self.max_running:
            return False
        key = RadixKey(array("q", turn.prompt))
        match = self.tree.match_prefix(MatchPrefixParams(key=key))
        prefix = match.device_prefix_len
        need = self._pages(len(turn.prompt) + len(turn.output)) - prefix
        room = self.allocator.available_size() + self.tree.evictable_size()
        node = match.last_device_node
        # the matched path stops being evictable once locked: take it out of the room
        path_evictable = 0
        n = node
        while n is not self.tree.root_node:
            if n.lock_ref == 0:
                path_evictable += len(n.key)
            n = n.parent
        if need + self.reserved() > room - path_evictable:
            return False
        self.tree.inc_lock_ref(node)
        kv = self.tree.path_device_indices(node) if prefix else torch.empty(0, dtype=torch.int64)
        self.running.append(Running(turn, node, kv, prefix, prefix))
        self.prompt_tokens += len(turn.prompt)
        self.cached_tokens += prefix
        self.requests += 1
        return True

    def _insert(self, r: Running, tokens: list[int]) -> None:
        """What RadixCache._insert_cache and checkpoint do: insert, free duplicates, move the lock."""
        key_len = len(tokens) // self.page * self.page
        if key_len <= r.protected:
            return
        key = RadixKey(array("q", tokens[:key_len]))
        values = r.kv[:key_len].clone()
        result = self.tree.insert(InsertParams(key=key, value=values, inserted_len=r.inserted))
        r.inserted = max(r.inserted, key_len)
        prompt_len = len(r.turn.prompt) // self.page * self.page
        if 0 < prompt_len < key_len:
            # checkpoint's split_prompt: the prompt again, one priority up, so that eviction can drop
            # the output without the prompt
            prompt_key = RadixKey(array("q", tokens[:prompt_len]))
            self.tree.insert(
                InsertParams(key=prompt_key, value=values[:prompt_len], inserted_len=prompt_len, priority=1)
            )
        if result.prefix_len > r.protected:
            self.allocator.free(r.kv[r.protected : result.prefix_len])
        match = self.tree.match_prefix(MatchPrefixParams(key=key))
        indices = self.tree.path_device_indices(match.last_device_node)
        r.kv = torch.cat([indices, r.kv[key_len:]])
        r.protected = key_len
        self.tree.inc_lock_ref(match.last_device_node)
        self.tree.dec_lock_ref(r.node)
        r.node = match.last_device_node

    def step(self) -> list[Turn]:
        finished: list[Turn] = []
        for r in self.running:
            if not r.prefilled:
                prompt = len(r.turn.prompt)
                grow = self._pages(prompt) - r.allocated
                if grow > 0:
                    r.kv = torch.cat([r.kv, self._alloc(grow)])
                    r.allocated += grow
                r.prefilled = True
                self._insert(r, r.turn.prompt)
                continue
            r.generated += 1
            length = len(r.turn.prompt) + r.generated
            if length > r.allocated:
                r.kv = torch.cat([r.kv, self._alloc(self.page)])
                r.allocated += self.page
            if r.generated >= len(r.turn.output):
                # the last token's KV is never computed: the tree gets prompt + output[:-1]
                self._insert(r, r.turn.prompt + r.turn.output[:-1])
                if r.allocated > r.protected:
                    self.allocator.free(r.kv[r.protected : r.allocated])
                self.tree.dec_lock_ref(r.node)
                finished.append(r.turn)
        self.running = [r for r in self.running if r.turn not in finished]
        self.locked_samples.append(self.tree.protected_size() / self.pool_tokens)
        return finished


UINT64 = (1 << 64) - 1


def reshape(events: list, wire: str, reports: list[list[int]], page_size: int) -> list:
    """The step's events as published: SGLang's own (coalesced per insert), or, for the shape tests,
    re-cut into one BlockStored per page ("per-page"), and with the matched pages of each lookup
    re-reported first, parentless and unsigned, as a hit-reporting publisher does ("per-page-hits")."""
    if wire == "coalesced":
        return events
    unsigned = wire == "per-page-hits"

    def h(x):
        return x & UINT64 if unsigned and x is not None else x

    out = []
    for pages in reports if unsigned else []:
        for page in pages:
            out.append(BlockStored([h(page)], None, [], page_size, None, "GPU"))
    for e in events:
        if not isinstance(e, BlockStored):
            if hasattr(e, "block_hashes"):
                e.block_hashes = [h(x) for x in e.block_hashes]
            out.append(e)
            continue
        parent = e.parent_block_hash
        size = e.block_size
        for i, page in enumerate(e.block_hashes):
            tokens = e.token_ids[i * size : (i + 1) * size]
            out.append(BlockStored([h(page)], h(parent), tokens, size, e.lora_id, e.medium))
            parent = page
    return out


def start_publishing(port: int, out: Path) -> tuple[ZmqEventPublisher, Recorder]:
    """SGLang's publisher on 127.0.0.1:port (its replay ROUTER on port + 1), a SUB recording to `out`."""
    endpoint = f"tcp://127.0.0.1:{port}"
    publisher = ZmqEventPublisher(
        attn_dp_rank=0, endpoint=endpoint, replay_endpoint=f"tcp://127.0.0.1:{port + 1}", bind=True
    )
    recorder = Recorder(endpoint, out)
    recorder.start()
    time.sleep(1.0)  # the SUB joins before the first batch
    return publisher, recorder


def page_hashes(tree: RadixCache, node) -> list[int]:
    """The event hashes of the pages on the path to `node` (root first), as its BlockStored named them."""
    from sglang.srt.mem_cache.utils import hash_str_to_int64

    chain = []
    while node is not tree.root_node:
        chain.append([hash_str_to_int64(v) for v in tree.kv_events._node_event_hash_values(node)])
        node = node.parent
    return [x for part in reversed(chain) for x in part]


def probe_replay(endpoint: str, start: int, path: Path) -> None:
    """A DEALER asks SGLang's replay ROUTER for every batch from `start`; each reply is recorded as
    the DEALER receives it (["", topic, seq, payload], then the end marker)."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(endpoint)
    sock.send_multipart([b"", start.to_bytes(8, "big")])
    writer = framesfile.Writer(path)
    while sock.poll(5000):
        reply = sock.recv_multipart()
        writer.write(time.time(), reply)
        if reply[-2] == ZmqEventPublisher.END_SEQ:
            break
    writer.close()
    sock.close(linger=0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool-tokens", type=int, required=True)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--policy", default="lru")
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--agents", type=int, default=24)
    ap.add_argument("--max-running", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--truth", type=Path, required=True)
    ap.add_argument("--steps-per-second", type=float, default=2000.0)
    ap.add_argument(
        "--replay-probe", type=Path, help="ask the replay ROUTER for the last 3 batches; record its replies"
    )
    ap.add_argument("--wire", choices=("coalesced", "per-page", "per-page-hits"), default="coalesced")
    args = ap.parse_args()

    publisher, recorder = start_publishing(args.port, args.out)

    rng = random.Random(args.seed)
    workload = Workload(rng, args.agents)
    engine = Engine(args.pool_tokens, args.page_size, args.policy, args.max_running)
    waiting = [workload.next_turn(a, rng.randint(0, 40)) for a in range(args.agents)]
    step = 0
    submitted = len(waiting)
    t0 = time.time()
    batches = 0
    published_pages = 0
    while engine.requests < args.requests or engine.running:
        waiting.sort(key=lambda t: t.ready_step)
        reports: list[list[int]] = []
        while engine.requests < args.requests and waiting and waiting[0].ready_step <= step:
            if not engine.try_admit(waiting[0]):
                break
            waiting.pop(0)
            if args.wire == "per-page-hits":
                reports.append(page_hashes(engine.tree, engine.running[-1].node))
        for turn in engine.step():
            if submitted < args.requests:
                waiting.append(workload.finished(turn, step))
                submitted += 1
        events = reshape(engine.tree.kv_events.take(), args.wire, reports, args.page_size)
        published_pages += sum(len(e.block_hashes) for e in events if isinstance(e, BlockStored))
        if events:
            publisher.publish(KVEventBatch(ts=time.time(), events=events))
            batches += 1
        step += 1
        if args.steps_per_second:
            ahead = step / args.steps_per_second - (time.time() - t0)
            if ahead > 0:
                time.sleep(ahead)
    time.sleep(1.0)
    if args.replay_probe:
        probe_replay(f"tcp://127.0.0.1:{args.port + 1}", max(0, batches - 3), args.replay_probe)
    publisher.shutdown()
    recorder.stop.set()
    recorder.join()
    locked = sorted(engine.locked_samples)
    truth = {
        "pool_tokens": engine.pool_tokens,
        "page_size": args.page_size,
        "policy": args.policy,
        "requests": engine.requests,
        "steps": step,
        "batches": batches,
        "wire": args.wire,
        "published_pages": published_pages,
        "messages_recorded": recorder.messages,
        "prompt_tokens": engine.prompt_tokens,
        "cached_tokens": engine.cached_tokens,
        "hit_rate": engine.cached_tokens / engine.prompt_tokens,
        "locked_share_median": locked[len(locked) // 2],
        "locked_share_p90": locked[int(len(locked) * 0.9)],
        "seconds": time.time() - t0,
    }
    args.truth.write_text(json.dumps(truth, indent=1))
    print(json.dumps(truth))


if __name__ == "__main__":
    main()
