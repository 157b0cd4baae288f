"""Every command-line flag of `kvset` and `kvset-top`, each defined once (name, type, check, help).

The commands put the groups they need on their parser: `add_input_arguments` (analyze, verify),
`add_monitor_arguments` (kvset-top, serve), `add_events_arguments` (record, kvset-top), the model and
geometry flags (analyze, model, kvset-top) and `add_exporter_arguments` (serve, kvset-top). The
figures' own options (targets, --capacity, tiers, the hybrid reserve's concurrency and context, ...)
are declared as data by the figures (kvset.figures) and put on the parsers by
kvset.cli.figure_flags. A flag a command shares with another keeps one meaning.
Engine-source flags other than --log and --metrics carry a prefix so they cannot collide with a
command's own (--interval of the UI). The stream's units have one set of flags whatever the source
(`add_units_arguments`: --block-size, --hash-algo, --python-hash-seed); flags that once said them
per source are refused with the one to give instead (`REMOVED_FLAGS`).
"""

from __future__ import annotations

import argparse

from kvset.cli.argtypes import (
    byte_quantity,
    dtype_name,
    listen_address,
    non_negative_int,
    positive_int,
    sample_rate,
    seconds,
    speed,
)
from kvset.cli.figure_flags import add_figure_arguments
from kvset.cli.shell_completion import SHELLS, PrintCompletion
from kvset.core import DEFAULT_HORIZON, LIVE_HORIZON, ORDERS
from kvset.engine import DEFAULT_MAX_BODY_BYTES, DEFAULT_MEDIUM, ENGINES, TRUNCATED_POLICIES
from kvset.figures.base import SERVE, TOP
from kvset.formats import FORMATS, HASH_ALGOS
from kvset.geometry.dtypes import AUTO
from kvset.types import RADIX_EVICTION_POLICIES as RADIX_POLICIES
from kvset.units import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO

# argparse's parser and its argument groups both have add_argument
Parser = argparse.ArgumentParser | argparse._ArgumentGroup

DEMO_ACCESSES = 2_000_000  # size of `kvset analyze --demo`


# -- every command ---------------------------------------------------------------------------------
def add_completion_argument(p: argparse.ArgumentParser) -> None:
    """kvset-top's --completion (kvset has a `completion` subcommand instead)."""
    p.add_argument(
        "--completion",
        action=PrintCompletion,
        choices=SHELLS,
        metavar="SHELL",
        help="print a shell completion script (bash or zsh) and exit: source <(kvset-top --completion bash)",
    )


def add_force_argument(p: Parser, what: str) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help=f"replace {what} if it exists (an input of the same run is never replaced)",
    )


def add_csv_argument(p: Parser, meaning: str) -> None:
    p.add_argument("--csv", action="store_true", help=meaning)


# -- the stream's units: one set of flags, whatever the source ---------------------------------------
STREAM_BLOCK_SIZE = (
    "tokens per block of the stream: a trace's (default: its format's, 512 mooncake, 16 bailian, or "
    "as its lines say), the engine's for --events whose events do not carry it and for --log, whose "
    f"prompts are hashed with it (default {DEFAULT_BLOCK_SIZE}, vLLM's), the demo's"
)


def add_block_size_argument(p: Parser, default: int | None = None, meaning: str = STREAM_BLOCK_SIZE) -> None:
    p.add_argument(
        "--block-size",
        type=positive_int,
        default=default,
        metavar="TOKENS",
        help=meaning,
    )


def add_units_arguments(p: Parser) -> None:
    """The stream's units (kvset.units.StreamUnits): its block size, and the hash kvset makes block
    keys with from token ids (token-id traces, vLLM logs); the flags once given per source are refused."""
    add_block_size_argument(p)
    p.add_argument(
        "--hash-algo",
        choices=HASH_ALGOS,
        default=DEFAULT_HASH_ALGO,
        help=f"how token ids in a trace or a log become block keys: vLLM's --prefix-caching-hash-algo, or sglang for SGLang's page hash (default {DEFAULT_HASH_ALGO})",
    )
    p.add_argument("--python-hash-seed", metavar="SEED", help="the engine's PYTHONHASHSEED, if it had one")
    add_removed_arguments(p)


# old flag -> the one that replaced it
REMOVED_FLAGS = {
    "--log-block-size": "--block-size",
    "--events-block-size": "--block-size",
    "--log-hash-algo": "--hash-algo",
    "--log-hash-seed": "--python-hash-seed",
}


class _Removed(argparse.Action):
    """A flag that is gone: a one-line usage error naming the one to give instead."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001 - argparse's
        instead = REMOVED_FLAGS[str(option_string)]
        parser.error(
            f"{option_string} is gone: give {instead} {values}, which means the same for every source"
        )


def add_removed_arguments(p: Parser, flags=tuple(REMOVED_FLAGS)) -> None:
    for flag in flags:
        p.add_argument(flag, action=_Removed, help=argparse.SUPPRESS, metavar="VALUE")


# -- what is read: a trace, the demo ----------------------------------------------------------------
def add_trace_arguments(p: Parser) -> None:
    """How a trace file is read: its format (its units: add_units_arguments)."""
    p.add_argument(
        "--format", choices=FORMATS, help="trace format (default: detected from the first request)"
    )


def add_demo_argument(p: Parser) -> None:
    p.add_argument(
        "--demo",
        action="store_true",
        help="the built-in synthetic agentic workload instead of a trace (kvset-top: played live, "
        "the default without a source)",
    )


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    """What `kvset analyze` and `kvset verify` read: a trace, the demo or a whole engine log."""
    p.add_argument("trace", nargs="?", help="trace file (JSONL, .gz ok) or - for stdin")
    add_demo_argument(p)
    p.add_argument(
        "--demo-accesses",
        type=positive_int,
        default=DEMO_ACCESSES,
        metavar="N",
        help=f"size of the demo workload (default {DEMO_ACCESSES:,})",
    )
    add_trace_arguments(p)
    add_units_arguments(p)
    p.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="give the figures of an input that ends early (truncated .gz) instead of exit code 3",
    )
    add_log_arguments(p, live=False)


# -- the analysis ----------------------------------------------------------------------------------
def add_analysis_arguments(p: Parser, default_horizon: int = DEFAULT_HORIZON) -> None:
    """--order and --horizon; a live monitor's horizon defaults to LIVE_HORIZON (its tables are
    allocated at once), a file's analysis to DEFAULT_HORIZON (they grow with the blocks seen)."""
    p.add_argument(
        "--order",
        choices=ORDERS,
        default="forward",
        help="order of a request's blocks: forward (default) or reverse (vLLM's free order)",
    )
    p.add_argument(
        "--horizon",
        type=positive_int,
        default=default_horizon,
        metavar="BLOCKS",
        help=f"most blocks tracked; the curve is exact up to it, and stops there (default {default_horizon:,})",
    )


def add_sampling_arguments(p: Parser) -> None:
    """--sample R or --sample-size S, and --seed: estimate from a spatial sample of the blocks."""
    one = p.add_mutually_exclusive_group()
    one.add_argument(
        "--sample",
        type=sample_rate,
        metavar="R",
        help="estimate from a spatial sample: keep blocks at rate R (e.g. 0.01 or 1%%; the first "
        "blocks of each request more often); every number is then an estimate, shown with "
        "its error bound",
    )
    one.add_argument(
        "--sample-size",
        type=positive_int,
        metavar="BLOCKS",
        help="estimate from a sample of at most BLOCKS tracked blocks: the rate falls as the "
        "stream grows, memory stays bounded",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="seed of the hash that picks the sampled blocks (default 0); another seed gives an "
        "independent estimate",
    )


def add_opt_argument(p: Parser, meaning: str) -> None:
    """--opt: Belady MIN's curve beside LRU's, from one pass over a whole trace file (never a live source)."""
    p.add_argument(
        "--opt",
        action="store_true",
        help=f"{meaning}; Belady MIN (a policy with foresight) at every capacity, from one offline "
        "pass: needs a whole trace file, not a live source",
    )


def add_capacities_argument(p: Parser, meaning: str) -> None:
    """The exporter's --capacities (kvset analyze's are the curve figure's: kvset.figures.curve)."""
    p.add_argument("--capacities", metavar="C1,C2,..", help=meaning)


def add_json_argument(p: Parser, meaning: str = "print one JSON object instead of text") -> None:
    p.add_argument("--json", action="store_true", help=meaning)


# -- the model: bytes per block and the hybrid reserve ------------------------------------------------
# flag -> ModelGeometry field, with help text. Every geometry number can be overridden.
OVERRIDE_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--layers", "num_layers", "number of decoder layers"),
    (
        "--full-attention-layers",
        "full_attention_layers",
        "layers with full attention (their KV is the prefix cache)",
    ),
    ("--sliding-window-layers", "sliding_window_layers", "layers with sliding-window attention"),
    ("--linear-attention-layers", "linear_attention_layers", "linear-attention (Gated DeltaNet) layers"),
    ("--mamba-layers", "mamba_layers", "Mamba / SSM layers"),
    ("--kv-heads", "kv_heads", "KV heads per attention layer"),
    ("--head-dim", "head_dim", "dimension of one KV head"),
    ("--sliding-window", "sliding_window", "sliding window in tokens"),
    ("--kv-lora-rank", "kv_lora_rank", "MLA latent size per token per layer"),
    ("--qk-rope-head-dim", "qk_rope_head_dim", "MLA RoPE key size per token per layer"),
    ("--linear-conv-elements", "linear_conv_elements", "conv state elements per linear-attention layer"),
    (
        "--linear-state-elements",
        "linear_recurrent_elements",
        "recurrent state elements per linear-attention layer",
    ),
    ("--mamba-conv-elements", "mamba_conv_elements", "conv state elements per Mamba layer"),
    ("--mamba-state-elements", "mamba_ssm_elements", "SSM state elements per Mamba layer"),
)


def add_model_argument(p: Parser) -> None:
    p.add_argument(
        "--model",
        metavar="NAME|config.json",
        help="model preset or local Hugging Face config.json: capacities also in GiB, plus the "
        "hybrid-layer reserve (see `kvset model --list`)",
    )


def add_kv_dtype_argument(p: Parser) -> None:
    p.add_argument(
        "--kv-dtype",
        type=dtype_name,
        default=AUTO,
        metavar="DTYPE",
        help="KV cache dtype: auto (the model's dtype), bf16, fp16, fp8 (fp8_e4m3, fp8_e5m2), fp32 (default: auto)",
    )


def add_kv_cache_arguments(p: Parser) -> None:
    """`kvset model`: the KV dtype and the block its bytes per block are counted in."""
    add_kv_dtype_argument(p)
    add_block_size_argument(
        p, default=DEFAULT_BLOCK_SIZE, meaning=f"tokens per KV block (default {DEFAULT_BLOCK_SIZE}, vLLM's)"
    )


def add_override_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("geometry overrides (replace the numbers read from the config)")
    for flag, _field, text in OVERRIDE_FLAGS:
        group.add_argument(flag, type=non_negative_int, default=None, metavar="N", help=text)
    group.add_argument(
        "--state-dtype",
        type=dtype_name,
        default=None,
        metavar="DTYPE",
        help="dtype of linear-attention and SSM state (default: the config's mamba_ssm_dtype, else the model dtype)",
    )
    group.add_argument(
        "--model-dtype",
        type=dtype_name,
        default=None,
        metavar="DTYPE",
        help="the model's dtype (what --kv-dtype auto means)",
    )


# -- the engine sources ----------------------------------------------------------------------------
def add_log_arguments(parser: argparse.ArgumentParser, live: bool = True) -> None:
    """The --log flags; `live`: the log is followed (kvset-top, serve), not read whole (analyze)."""
    g = parser.add_argument_group("engine log (--log)")
    g.add_argument("--log", metavar="PATH", help="a vLLM or SGLang log file (plain or .gz when read whole)")
    g.add_argument("--log-engine", choices=ENGINES, default="auto", help="which engine wrote the log")
    g.add_argument(
        "--log-max-log-len",
        type=positive_int,
        metavar="N",
        help="vLLM's --max-log-len, if set (else inferred)",
    )
    g.add_argument(
        "--log-truncated",
        choices=TRUNCATED_POLICIES,
        default="skip",
        help="prompts with cut id lists: skip them (default) or use their first blocks",
    )
    if live:
        g.add_argument("--log-from-end", action="store_true", help="follow only what is written from now on")


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("engine metrics (--metrics)")
    g.add_argument(
        "--metrics",
        metavar="URL",
        help="the engine's Prometheus endpoint, e.g. http://127.0.0.1:8000/metrics",
    )
    g.add_argument("--metrics-interval", type=seconds, default=1.0, metavar="S", help="poll every S seconds")
    g.add_argument("--metrics-timeout", type=seconds, default=2.0, metavar="S", help="request timeout")
    g.add_argument(
        "--metrics-window", type=seconds, default=60.0, metavar="S", help="hit-rate window in seconds"
    )
    g.add_argument(
        "--metrics-max-bytes",
        type=byte_quantity,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="SIZE",
        help="largest /metrics response read, e.g. 16MiB (default); a larger one is refused",
    )


def add_events_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    group = parser.add_argument_group("KV events over ZMQ (vLLM, SGLang)")
    group.add_argument(
        "--events",
        action="append",
        metavar="ENDPOINT",
        required=required,
        help="the engine's KV-event PUB endpoint, e.g. tcp://HOST:5557; repeat it or give a port range "
        "(tcp://HOST:5557-5560) for data-parallel ranks, which publish on port + rank",
    )
    group.add_argument(
        "--replay-endpoint",
        action="append",
        metavar="ENDPOINT",
        help="the engine's replay ROUTER endpoint (its replay_endpoint), used to recover sequence gaps; "
        "one per --events endpoint, or one that is offset by rank like the engine does",
    )
    group.add_argument(
        "--topic", default="", help="the engine's event topic (default: empty, vLLM's default)"
    )
    group.add_argument(
        "--medium",
        default=DEFAULT_MEDIUM,
        help="which cache tier's events count: GPU (default), CPU, STORAGE, CPU_PINNED, DISK, EXTERNAL, or all",
    )
    group.add_argument(
        "--radix-eviction-policy",
        default=RADIX_POLICIES[0],
        choices=RADIX_POLICIES,
        help="SGLang's --radix-eviction-policy, which the engine model of an SGLang stream replays "
        f"({', '.join(RADIX_POLICIES)}; default {RADIX_POLICIES[0]}, SGLang's)",
    )
    group.add_argument(
        "--group-idx",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="count only this KV cache group's events (default: the group the events call full attention, "
        "else the first group seen)",
    )
    group.add_argument(
        "--replay-timeout",
        type=seconds,
        default=1.0,
        metavar="S",
        help="how long to wait for a replay before counting the missing batches as lost (default 1 s)",
    )


# -- the live monitor (kvset-top) ------------------------------------------------------------------
def add_monitor_arguments(p: argparse.ArgumentParser, service: bool = False) -> None:
    """The sources, analysis, model and one-shot flags of the live monitor (the UI adds its own). As a
    service (`kvset serve`): no one-shot flags, and no demo unless asked."""
    src = p.add_argument_group("sources (at least one)" if service else "sources (default: --demo)")
    add_demo_argument(src)
    src.add_argument(
        "--replay", metavar="TRACE", help="replay a trace file (mooncake, bailian or token-id JSONL)"
    )
    src.add_argument(
        "--follow",
        action="store_true",
        help="with --replay: tail the growing file like tail -F (rotation and truncation handled)",
    )
    src.add_argument(
        "--record",
        metavar="FILE",
        help="also save every access the sources deliver as a trace file (.gz ok) to replay later",
    )
    add_force_argument(src, "the --record file")
    # no default in the namespace: --once --replay refuses a --speed that was given (see check_flags)
    src.add_argument(
        "--speed",
        type=speed,
        default=argparse.SUPPRESS,
        metavar="X",
        help="replay/demo speed: trace seconds per second, or 'max' (default 1)",
    )
    add_trace_arguments(src)
    add_units_arguments(src)

    add_events_arguments(p)
    add_log_arguments(p)
    add_metrics_arguments(p)

    ana = p.add_argument_group("analysis")
    mod = p.add_argument_group("model (capacities in GiB and the hybrid reserve)")
    add_analysis_arguments(ana, default_horizon=LIVE_HORIZON)
    add_sampling_arguments(ana)
    add_model_argument(mod)
    add_kv_dtype_argument(mod)
    command = SERVE if service else TOP
    p.set_defaults(pipeline=command)  # whose options build_monitor reads (kvset.cli.figure_flags)
    add_figure_arguments(ana, command, {"model": mod})
    if not service:
        add_opt_argument(
            ana,
            "with --replay FILE: MIN's curve, working sets and its gap to LRU, once the whole "
            "file has been replayed",
        )
    ana.add_argument(
        "--interval", type=seconds, default=1.0, metavar="SECONDS", help="refresh interval (default 1)"
    )
    add_override_arguments(p)

    if service:
        p.set_defaults(once=False, json=False, csv=False, duration=None, opt=False)
        return
    once = p.add_argument_group("one-shot report")
    once.add_argument(
        "--once", action="store_true", help="print one report and exit (no UI, no terminal needed)"
    )
    add_json_argument(once, "with --once: the snapshot as JSON")
    add_csv_argument(once, "with --once: the all-time curve as CSV (one row per capacity)")
    once.add_argument(
        "--duration",
        type=seconds,
        metavar="SECONDS",
        help="with --once: how long to listen to live sources (default 10 s; files and the "
        "demo are read to the end)",
    )


# -- the Prometheus exporter (kvset serve, kvset-top --serve-metrics) --------------------------------
EXPORTED_CAPACITIES = (
    "capacities whose hit rates are exported (kvset_hit_rate), besides the engine's pool, "
    "e.g. 1000,10000 (the histogram kvset_stack_distance_blocks has every bucket edge)"
)


def add_exporter_arguments(p: argparse.ArgumentParser, beside_ui: bool = False) -> None:
    """`kvset serve`: --listen and --textfile; kvset-top (beside_ui): --serve-metrics. Nothing listens
    unless one is given, and only on 127.0.0.1 unless a host is."""
    g = p.add_argument_group("Prometheus exporter (nothing listens unless asked)")
    if beside_ui:
        g.add_argument(
            "--serve-metrics",
            type=listen_address,
            metavar="[HOST:]PORT",
            help="also serve the metrics of `kvset serve` on HOST:PORT (HOST default 127.0.0.1) while "
            "the app runs; not with --once",
        )
    else:
        g.add_argument(
            "--listen",
            type=listen_address,
            metavar="[HOST:]PORT",
            help="serve /metrics on HOST:PORT (HOST default 127.0.0.1; 0.0.0.0 or [::] for every "
            "interface; PORT 0 picks a free one, printed on stderr)",
        )
        g.add_argument(
            "--textfile",
            metavar="PATH",
            help="write the same metrics to PATH (atomically, every refresh) for node_exporter's "
            "textfile collector, which reads *.prom files",
        )
    add_capacities_argument(g, EXPORTED_CAPACITIES)
