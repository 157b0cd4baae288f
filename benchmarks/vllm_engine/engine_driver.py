"""One run of vLLM's real v1 scheduler, KV cache manager and block pool, without a GPU.

Runs in the engine venv (setup.sh). The model runner is the only fake: after each
`Scheduler.schedule()` this driver builds a `ModelRunnerOutput` that "samples" the next token of
the turn's pre-generated answer for every request whose prompt is computed, and hands it to
`Scheduler.update_from_output()`, which is where vLLM appends the token, hashes and caches full
blocks, finishes requests, frees their blocks, and publishes the step's KV events.

With --events-port, vLLM's own ZmqEventPublisher publishes on tcp://127.0.0.1:PORT (and its replay
ROUTER on --replay-port) and vLLM's own PrometheusStatLogger is served on 127.0.0.1:--metrics-port.
Without them (a dry run) the schedule is the same step for step: events do not change what the
scheduler does, so a dry run gives the step count (to size kvset-top's --duration) and the ground
truth for both report modes.

Protocol with run.py (one JSON object per stdout line): {"ready": ...} once bound; then it waits
for --subscribers SUB connections on the publisher socket; {"done": ...} at the end with the
ground truth; then it keeps /metrics up until a line arrives on stdin (or stdin closes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tenants as tenant_workload  # noqa: E402
import workload  # noqa: E402

BLOCK_SIZE = 16
MAX_MODEL_LEN = 32768

# A small llama-like architecture: ModelConfig needs a config.json to inspect; no weights exist or
# are loaded (the model runner is faked), and the tokenizer is not initialised.
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 32000,  # covers the tokenizer's 30,522 ids
    "max_position_embeddings": MAX_MODEL_LEN,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float16",
    "bos_token_id": 101,
    "eos_token_id": 102,
    "tie_word_embeddings": False,
}


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def build_scheduler(args, model_dir: str):
    import torch
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        KVEventsConfig,
        ModelConfig,
        SchedulerConfig,
        VllmConfig,
    )
    from vllm.distributed.kv_events import EventPublisherFactory, ZmqEventPublisher
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        MambaSpec,
        SlidingWindowSpec,
    )
    from vllm.v1.structured_output import StructuredOutputManager

    class LoopbackZmqEventPublisher(ZmqEventPublisher):
        """vLLM's publisher, binding tcp://127.0.0.1:P itself.

        vLLM binds only endpoints that contain '*' or '::' (else it connects); tcp://*:P would
        listen on every interface. Everything else, socket options, sequence numbers, the replay
        buffer and ROUTER, is vLLM's own code.
        """

        @staticmethod
        def _is_bind_endpoint(endpoint: str) -> bool:
            return endpoint.startswith("tcp://127.0.0.1:") or ZmqEventPublisher._is_bind_endpoint(endpoint)

    EventPublisherFactory._registry["zmq"] = LoopbackZmqEventPublisher

    model_config = ModelConfig(
        model=model_dir,
        skip_tokenizer_init=True,
        dtype="float16",
        seed=0,
        max_model_len=MAX_MODEL_LEN,
        served_model_name="kvset-validate",
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_model_len=MAX_MODEL_LEN,
        enable_chunked_prefill=True,
        is_encoder_decoder=False,
    )
    cache_config = CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=True)
    kv_events_config = None
    if args.events_port:
        kv_events_config = KVEventsConfig(
            enable_kv_cache_events=True,
            publisher="zmq",
            endpoint=f"tcp://127.0.0.1:{args.events_port}",
            replay_endpoint=f"tcp://127.0.0.1:{args.replay_port}" if args.replay_port else None,
        )
    vllm_config = VllmConfig(
        model_config=model_config,
        scheduler_config=scheduler_config,
        cache_config=cache_config,
        device_config=DeviceConfig(device="cpu"),
        kv_events_config=kv_events_config,
    )
    # What the GPU worker would report after profiling: the pool size, one full-attention group; with
    # --sliding-window a hybrid model's: layer 0 full attention, layer 1 a sliding window of that many
    # tokens, two groups in one pool (vLLM's HybridKVCacheCoordinator); with --mamba layer 1 is a Mamba
    # layer instead, one state block per cached position, in "align" mode (the only one vLLM 0.33 allows
    # with prefix caching: MambaManager asserts it).
    full = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=2, head_size=64, dtype=torch.float16)
    if getattr(args, "mamba", False):
        state = MambaSpec(
            block_size=BLOCK_SIZE,
            shapes=((2, 64), (4, 32)),
            dtypes=(torch.float16, torch.float16),
            mamba_cache_mode="align",
        )
        groups = [
            KVCacheGroupSpec(["model.layers.0.self_attn.attn"], full),
            KVCacheGroupSpec(["model.layers.1.mixer"], state),
        ]
    elif args.sliding_window:
        window = SlidingWindowSpec(
            block_size=BLOCK_SIZE,
            num_kv_heads=2,
            head_size=64,
            dtype=torch.float16,
            sliding_window=args.sliding_window,
        )
        groups = [
            KVCacheGroupSpec(["model.layers.0.self_attn.attn"], full),
            KVCacheGroupSpec(["model.layers.1.self_attn.attn"], window),
        ]
    else:
        groups = [KVCacheGroupSpec(["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"], full)]
    kv_cache_config = KVCacheConfig(num_blocks=args.pool_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    cache_config.num_gpu_blocks = args.pool_blocks
    scheduler = Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=BLOCK_SIZE,
        log_stats=True,
    )
    return vllm_config, scheduler


def make_block_hasher(vllm_config):
    """Block hashing as the engine core sets it up: the configured hash, NONE_HASH seeded."""
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
    init_none_hash(fn)
    return get_request_block_hasher(BLOCK_SIZE, fn, vllm_config.num_hash_lookahead_tokens)


class GroundTruth:
    """What the harness reads from the engine itself (not from its events) for diagnosis.

    Wraps a few bound methods of this scheduler instance to count calls; vLLM's code is unchanged.
    """

    def __init__(self, scheduler, pool_blocks: int):
        self.s = scheduler
        self.pool = pool_blocks
        kvm = scheduler.kv_cache_manager
        self.block_pool = kvm.block_pool
        self.usable = pool_blocks - 1  # block 0 is vLLM's null block
        self.lookups = 0
        self.lookups_with_hits = 0
        self.lookup_hit_blocks = 0  # blocks a lookup found (each one a BlockStored in full mode)
        self.lookup_hit_blocks_admitted = 0
        self.admissions = 0  # first admissions (counted in vllm:prefix_cache_*)
        self.readmissions = 0  # admissions after a preemption (vLLM counts them apart)
        self.preemptions = 0
        self.last_token_rule_blocks = 0  # a cached last block not used: the last token must be computed
        self.partial_tail_tokens = 0  # query tokens past the last full block (never cacheable)
        self.query_tokens = 0
        self.hit_tokens = 0
        self.preempted_query_tokens = 0
        self.preempted_hit_tokens = 0
        self.decode_blocks = 0  # full blocks filled by output tokens (stored, never queried)
        self.steps = 0
        self.busy_steps = 0
        self._pinned_sum = 0
        self._pinned_max = 0
        self._held_sum = 0
        self._running_sum = 0
        self._waiting_sum = 0
        self._last_lookup: dict[str, int] = {}
        self.requests_finished = 0
        self.requests_added = 0
        # --study: per request its scheduler steps, and per step the sequence number of its batch
        self.study: dict[str, dict] = {}
        self.study_steps = False  # --study: keep each step's per-group pins too
        self.step_batch: list[int] = []

        orig_get = kvm.get_computed_blocks
        orig_record = kvm.record_prefix_cache_stats
        orig_preempt = scheduler._preempt_request
        coord = kvm.coordinator

        def get_computed_blocks(request, max_cache_hit_length=None):
            blocks, n_hit, boundary = orig_get(request, max_cache_hit_length)
            self.lookups += 1
            n_blocks = n_hit // BLOCK_SIZE
            if n_hit:
                self.lookups_with_hits += 1
                self.lookup_hit_blocks += n_blocks
            self._last_lookup[request.request_id] = n_blocks
            return blocks, n_hit, boundary

        def record_prefix_cache_stats(request, num_hits):
            orig_record(request, num_hits)
            n_blocks = self._last_lookup.pop(request.request_id, 0)
            self.lookup_hit_blocks_admitted += n_blocks
            entry = self.study.setdefault(request.request_id, {"prompt_tokens": request.num_prompt_tokens})
            full = request.num_prompt_tokens // BLOCK_SIZE
            if (
                full and "prompt_last_hash" not in entry
            ):  # the key of the prompt's last full block, as events give it
                entry["prompt_last_hash"] = int.from_bytes(request.block_hashes[full - 1][-8:], "big")
            entry.setdefault("admitted", []).append([self.steps, request.num_tokens, num_hits])
            if request.cache_salt is not None or request.session_id is not None:  # --tenants
                entry["cache_salt"], entry["session_id"] = request.cache_salt, request.session_id
            if request.num_preemptions > 0:
                self.readmissions += 1
                self.preempted_query_tokens += request.num_tokens
                self.preempted_hit_tokens += num_hits
                return
            self.admissions += 1
            self.query_tokens += request.num_tokens
            self.hit_tokens += num_hits
            self.partial_tail_tokens += request.num_tokens % BLOCK_SIZE
            # vLLM caps a hit at num_tokens - 1 (the last prompt token is always computed):
            # a prompt of whole blocks, all cached, still misses its last block.
            full = request.num_tokens // BLOCK_SIZE
            if request.num_tokens % BLOCK_SIZE == 0 and num_hits == (full - 1) * BLOCK_SIZE and full > 0:
                uncapped, n_uncapped, _ = coord.find_longest_cache_hit(
                    request.block_hashes, request.num_tokens
                )
                if n_uncapped == full * BLOCK_SIZE:
                    self.last_token_rule_blocks += 1

        def preempt(request, timestamp, drop_stale_output=False):
            self.preemptions += 1
            self.study.setdefault(request.request_id, {}).setdefault("preempted", []).append(self.steps)
            return orig_preempt(request, timestamp, drop_stale_output=drop_stale_output)

        kvm.get_computed_blocks = get_computed_blocks
        kvm.record_prefix_cache_stats = record_prefix_cache_stats
        scheduler._preempt_request = preempt
        self.single = kvm.coordinator.single_type_managers[0]
        self.managers = kvm.coordinator.single_type_managers
        # per KV cache group: its distinct blocks held by requests, summed over steps (a hybrid model's
        # groups share the pool, so this says which group's pins kvset's replay gets wrong)
        self._group_pinned_sum = [0] * len(self.managers)
        self.step_group_pinned: list[list[int]] = []  # --study: per step, per group

    def after_step(self, busy: bool) -> None:
        self.steps += 1
        self.busy_steps += busy
        pinned = self.usable - self.block_pool.get_num_free_blocks()  # blocks with ref_cnt > 0
        self._pinned_sum += pinned
        self._pinned_max = max(self._pinned_max, pinned)
        self._held_sum += sum(len(b) for b in self.single.req_to_blocks.values())
        if len(self.managers) > 1:
            counts = [
                len({b.block_id for blocks in m.req_to_blocks.values() for b in blocks if not b.is_null})
                for m in self.managers
            ]
            for g, n in enumerate(counts):
                self._group_pinned_sum[g] += n
            if self.study_steps:
                self.step_group_pinned.append(counts)
        self._running_sum += len(self.s.running)
        self._waiting_sum += len(self.s.waiting) + len(self.s.kv_holding_waiting)

    def finished(self, request) -> None:
        self.requests_finished += 1
        self.study.setdefault(request.request_id, {})["finished"] = self.steps
        self.decode_blocks += request.num_tokens // BLOCK_SIZE - request.num_prompt_tokens // BLOCK_SIZE

    def result(self) -> dict:
        steps = max(self.steps, 1)
        pinned = self._pinned_sum / steps
        return {
            "pool_blocks": self.pool,
            "usable_blocks": self.usable,
            "requests_added": self.requests_added,
            "requests_finished": self.requests_finished,
            "steps": self.steps,
            "busy_steps": self.busy_steps,
            "measured_token_hit_rate": self.hit_tokens / self.query_tokens if self.query_tokens else None,
            "query_tokens": self.query_tokens,
            "hit_tokens": self.hit_tokens,
            "preempted_query_tokens": self.preempted_query_tokens,
            "preempted_hit_tokens": self.preempted_hit_tokens,
            "partial_tail_tokens": self.partial_tail_tokens,
            "last_token_rule_blocks": self.last_token_rule_blocks,
            "decode_blocks": self.decode_blocks,
            "lookups": self.lookups,
            "lookups_with_hits": self.lookups_with_hits,
            "admissions": self.admissions,
            "readmissions_after_preemption": self.readmissions,
            "lookups_not_admitted": self.lookups - self.admissions - self.readmissions,
            "lookup_hit_blocks": self.lookup_hit_blocks,
            "lookup_hit_blocks_admitted": self.lookup_hit_blocks_admitted,
            "preemptions": self.preemptions,
            "avg_pinned_blocks": pinned,
            "max_pinned_blocks": self._pinned_max,
            "avg_pinned_share": pinned / self.usable,
            "avg_blocks_held_by_requests": self._held_sum / steps,  # shared blocks once per holder
            "avg_pinned_blocks_by_group": [n / steps for n in self._group_pinned_sum]
            if len(self.managers) > 1
            else None,
            "avg_effective_lru_blocks": self.usable - pinned,
            "avg_running": self._running_sum / steps,
            "avg_waiting": self._waiting_sum / steps,
        }


class Agents:
    """Closed-loop agents: each sends its next turn think_steps steps after its last answer."""

    def __init__(self, system, sessions_per_agent, mode: str, hasher, tenant_of=None):
        """system: the shared system prompt, or one per agent (--tenants); tenant_of: each agent's
        tenant, sent as the request's cache_salt, its session as session_id (None: neither)."""
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        self.Request = Request
        self.SamplingParams = SamplingParams
        self.systems = (
            system if system and isinstance(system[0], list) else [system] * len(sessions_per_agent)
        )
        self.tenant_of = tenant_of
        self.mode = mode
        self.hasher = hasher
        self.queues = [deque((s, i) for s in ss for i in range(len(s.turns))) for ss in sessions_per_agent]
        self.context: list[list[int]] = [[] for _ in sessions_per_agent]
        self.due: list[int | None] = [0 if q else None for q in self.queues]
        self.inflight: dict[str, tuple[int, object]] = {}  # request id -> (agent, turn)

    def done(self) -> bool:
        return not self.inflight and all(d is None for d in self.due)

    def submit_due(self, scheduler, step: int, truth: GroundTruth) -> None:
        for a, due in enumerate(self.due):
            if due is None or step < due:
                continue
            session, i = self.queues[a].popleft()
            turn = session.turns[i]
            if i == 0:
                self.context[a] = list(self.systems[a])
            self.context[a] += turn.new_tokens
            extra = {"kv_cache_report_mode": "full"} if self.mode == "full" else None
            params = self.SamplingParams(max_tokens=len(turn.answer), ignore_eos=True, extra_args=extra)
            rid = f"a{a}-s{session.index}-t{i}"
            principal = {}
            if self.tenant_of is not None:
                tenant = self.tenant_of[a]
                principal = {"cache_salt": tenant, "session_id": f"{tenant}/a{a}-s{session.index}"}
            req = self.Request(
                **principal,
                request_id=rid,
                prompt_token_ids=list(self.context[a]),
                sampling_params=params,
                pooling_params=None,
                block_hasher=self.hasher,
            )
            scheduler.add_request(req)
            truth.requests_added += 1
            self.inflight[rid] = (a, turn)
            self.due[a] = None

    def model_runner_output(self, scheduler, out):
        """The fake GPU step: the next answer token for every request whose prompt is computed."""
        from vllm.v1.outputs import ModelRunnerOutput

        req_ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in req_ids:
            req = scheduler.requests[rid]
            if req.is_prefill_chunk:
                sampled.append([])
            else:
                _, turn = self.inflight[rid]
                sampled.append([turn.answer[req.num_output_tokens]])
        return ModelRunnerOutput(
            req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)}, sampled_token_ids=sampled
        )

    def finish(self, rid: str, step: int, truth: GroundTruth, request) -> None:
        a, turn = self.inflight.pop(rid)
        self.context[a] += turn.answer
        truth.finished(request)
        if self.queues[a]:
            session, i = self.queues[a][0]
            self.due[a] = step + 1 + session.turns[i].think_steps


def watch_handshakes(publisher):
    """A zmq monitor on vLLM's PUB socket, attached before run.py is told "ready": a subscriber that
    connects between "ready" and the monitor would not be counted (on a loaded machine the recorder
    did, and the driver then waited out --subscriber-timeout while kvset-top's --duration ran)."""
    import zmq

    return publisher._pub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)


def wait_for_subscribers(publisher, mon, n: int, timeout: float) -> int:
    """Count ZMTP handshakes seen by `mon` (watch_handshakes; nothing is published yet)."""
    import zmq
    from zmq.utils.monitor import recv_monitor_message

    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while seen < n and time.monotonic() < deadline:
            if mon.poll(100):
                msg = recv_monitor_message(mon)
                if msg["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    seen += 1
    finally:
        publisher._pub.disable_monitor()
        mon.close(linger=0)
    time.sleep(0.5)  # the subscriptions follow the handshake
    return seen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pool-blocks", type=int, required=True)
    p.add_argument("--mode", choices=["full", "incremental"], default="full")
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument(
        "--sliding-window", type=int, default=0, help="a hybrid model: a second group, this window (tokens)"
    )
    p.add_argument(
        "--mamba", action="store_true", help="a hybrid model: a second group of Mamba state (align mode)"
    )
    p.add_argument("--events-port", type=int, default=0, help="publish KV events (0: a dry run)")
    p.add_argument("--replay-port", type=int, default=0)
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--subscribers", type=int, default=0, help="wait for this many SUB connections")
    # kvset-top's first start after a change compiles its numba kernels: over a minute on a loaded machine
    p.add_argument("--subscriber-timeout", type=float, default=300.0)
    p.add_argument(
        "--steps-per-second", type=float, default=0.0, help="pace the engine (0: as fast as it goes)"
    )
    p.add_argument(
        "--hold", action="store_true", help="after the run keep /metrics up until stdin has a line"
    )
    p.add_argument(
        "--tenants",
        default="",
        help="a multi-tenant workload (tenants.py), e.g. acme:6:600,flood:3:300:flood",
    )
    p.add_argument(
        "--study",
        type=Path,
        help="write each request's admission, preemption and finish steps, "
        "and each step's batch sequence number, to this JSON file (for studies of kvset's model)",
    )
    args = p.parse_args(argv)

    t0 = time.monotonic()
    cfg = workload.WorkloadConfig(requests=args.requests, agents=args.agents, seed=args.seed)
    tenant_of = None
    if args.tenants:
        system, sessions, tenant_of = tenant_workload.build(args.tenants, args.seed)
        described = {"tenants": tenant_workload.summary(system, sessions, tenant_of)}
    else:
        system, sessions = workload.build(cfg)
        described = workload.summary(system, sessions)
    tenant_truth = tenant_workload.TenantTruth()
    t_workload = time.monotonic() - t0

    with tempfile.TemporaryDirectory(prefix="kvset-vllm-model-") as model_dir:
        Path(model_dir, "config.json").write_text(json.dumps(MODEL_CONFIG))
        vllm_config, scheduler = build_scheduler(args, model_dir)
    hasher = make_block_hasher(vllm_config)
    truth = GroundTruth(scheduler, args.pool_blocks)
    truth.study_steps = args.study is not None

    prom = http = None
    if args.metrics_port:
        import prometheus_client
        from vllm.v1.metrics.loggers import PrometheusStatLogger
        from vllm.v1.metrics.stats import FinishedRequestStats, IterationStats

        prom = PrometheusStatLogger(vllm_config, engine_indexes=[0])
        prom.log_engine_initialized()
        http, _ = prometheus_client.start_http_server(args.metrics_port, addr="127.0.0.1")

    published = [0]
    publisher = scheduler.kv_event_publisher
    if args.events_port:
        orig_publish = publisher.publish

        def publish(batch):
            published[0] += 1
            orig_publish(batch)

        publisher.publish = publish

    mon = watch_handshakes(publisher) if args.events_port and args.subscribers else None
    emit({"ready": True, "pid": os.getpid(), "workload": described})
    subscribed = 0
    if mon is not None:
        subscribed = wait_for_subscribers(publisher, mon, args.subscribers, args.subscriber_timeout)
        emit({"subscribed": subscribed})

    agents = Agents(system, sessions, args.mode, hasher, tenant_of)
    step = 0
    t_run = time.monotonic()
    period = 1.0 / args.steps_per_second if args.steps_per_second > 0 else 0.0
    next_t = time.monotonic()
    last_progress = time.monotonic()
    while not agents.done():
        agents.submit_due(scheduler, step, truth)
        published_before = published[0]
        out = scheduler.schedule()
        mro = agents.model_runner_output(scheduler, out)
        scheduled = {rid: scheduler.requests[rid] for rid in out.num_scheduled_tokens}
        eco = scheduler.update_from_output(out, mro)
        stats = None
        finished = []
        for outs in eco.values():
            if outs.scheduler_stats is not None:
                stats = outs.scheduler_stats
            for o in outs.outputs:
                if tenant_of is not None and o.prefill_stats is not None:
                    tenant_truth.add(tenant_of[agents.inflight[o.request_id][0]], o.prefill_stats)
                if o.finish_reason is not None:
                    agents.finish(o.request_id, step, truth, scheduled[o.request_id])
                    if prom is not None:
                        finished.append(
                            FinishedRequestStats(finish_reason=o.finish_reason, request_id=o.request_id)
                        )
        if prom is not None and stats is not None:
            # the finished requests as vLLM's output processor would count them (vllm:request_success)
            iteration = IterationStats()
            iteration.finished_requests = finished
            prom.record(scheduler_stats=stats, iteration_stats=iteration)
        truth.step_batch.append(published[0] - 1 if published[0] > published_before else -1)
        truth.after_step(bool(out.num_scheduled_tokens))
        step += 1
        if period:
            next_t += period
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                next_t = time.monotonic()  # fell behind: do not burst to catch up
        if time.monotonic() - last_progress > 10:
            last_progress = time.monotonic()
            emit({"progress": step, "finished": truth.requests_finished})
        if step > 50_000_000:
            raise SystemExit("the engine made no progress")
    run_seconds = time.monotonic() - t_run

    # let the publisher thread drain its queue onto the socket
    if args.events_port:
        deadline = time.monotonic() + 30
        while publisher._event_queue.qsize() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    result = truth.result()
    result.update(
        {
            "mode": args.mode,
            "requests": args.requests,
            "agents": args.agents,
            "seed": args.seed,
            "block_size": BLOCK_SIZE,
            "max_num_seqs": args.max_num_seqs,
            "max_num_batched_tokens": args.max_num_batched_tokens,
            "sliding_window": args.sliding_window or None,
            "mamba": args.mamba,
            "batches_published": published[0],
            "subscribed": subscribed,
            "workload_seconds": round(t_workload, 2),
            "run_seconds": round(run_seconds, 2),
            "steps_per_second": round(step / run_seconds, 1) if run_seconds else None,
            "workload": described,
            "tenants": tenant_truth.result() if tenant_of is not None else None,
        }
    )
    if args.study:
        args.study.write_text(
            json.dumps(
                {
                    "step_batch": truth.step_batch,
                    "requests": truth.study,
                    "step_group_pinned": truth.step_group_pinned,
                }
            )
        )
    emit({"done": result})
    if args.hold:
        sys.stdin.readline()  # run.py writes a line (or closes stdin) once kvset-top has finished
    if http is not None:
        http.shutdown()
    scheduler.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
