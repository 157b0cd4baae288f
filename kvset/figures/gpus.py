"""The options that put the working sets in GPUs (--gpu or --gpu-memory, --tp, --kv-fraction, --weights),
read once per snapshot into the budget the working-set rows are divided by (kvset.geometry.gpus)."""

from __future__ import annotations

from kvset.figures.base import Option, OptionValues
from kvset.geometry.gpus import GPUS, Gpu, GpuBudget, gpu_budget, gpu_named, gpu_of_memory
from kvset.geometry.model import ModelGeometry
from kvset.quantities import parse_fraction

GPU: Option[Gpu | None] = Option(
    "--gpu",
    "gpu",
    None,
    "the working sets also in GPUs' worth of KV cache of this GPU (its memory as the device reports it; "
    "a model: see --kv-fraction, --weights)",
    parse=gpu_named,
    metavar="|".join(g.name for g in GPUS),
    group="model",
)
GPU_MEMORY: Option[int | None] = Option(
    "--gpu-memory",
    "gpu_memory",
    None,
    "instead of --gpu: the memory of one GPU, e.g. 80GiB",
    argtype="byte_quantity",
    metavar="SIZE",
    group="model",
)
TP: Option[int | None] = Option(
    "--tp",
    "tp",
    None,
    "GPUs per engine (tensor parallel size): each holds 1/N of the weights (default 1)",
    argtype="positive_int",
    metavar="N",
    group="model",
)
KV_FRACTION: Option[float | None] = Option(
    "--kv-fraction",
    "kv_fraction",
    None,
    "the share of each GPU's memory that holds KV, e.g. 0.4 or 40% (default: 90 %, vLLM's "
    "--gpu-memory-utilization, less the weights' share with --weights)",
    parse=lambda text: parse_fraction(text, "--kv-fraction"),
    metavar="F",
    group="model",
)
WEIGHTS: Option[int | None] = Option(
    "--weights",
    "weights",
    None,
    "the model's weights in bytes, e.g. 140GB (a 70B model in bf16): subtracted from each GPU's KV "
    "share over --tp",
    argtype="byte_quantity",
    metavar="SIZE",
    group="model",
)
OPTIONS = (GPU, GPU_MEMORY, TP, KV_FRACTION, WEIGHTS)


def the_gpu(options: OptionValues) -> Gpu | None:
    memory = options.get(GPU_MEMORY)
    return options.get(GPU) or (gpu_of_memory(memory) if memory else None)


def check(options: OptionValues, bytes_from: str | None) -> None:
    """The GPU flags that do not fit together, each refused in one line (a ValueError)."""
    if options.given(GPU) and options.given(GPU_MEMORY):
        raise ValueError("give --gpu or --gpu-memory, not both")
    gpu = the_gpu(options)
    if gpu is None:
        given = [o.flag for o in (TP, KV_FRACTION, WEIGHTS) if options.given(o)]
        if given:
            raise ValueError(f"{given[0]} needs --gpu or --gpu-memory: the GPU whose memory holds the KV")
        return
    if options.given(KV_FRACTION) and options.given(WEIGHTS):
        raise ValueError(
            "give --kv-fraction or --weights, not both: --weights is how the KV share is derived"
        )
    if bytes_from is not None:
        flag = GPU.flag if options.given(GPU) else GPU_MEMORY.flag
        raise ValueError(f"{flag}: working sets in GPUs need the KV bytes per block; give {bytes_from}")
    budget(options, None)  # the weights may leave no room for KV on that GPU


def budget(options: OptionValues, geometry: ModelGeometry | None) -> GpuBudget | None:
    """The KV share of one GPU the working sets are counted in (None: no GPU given)."""
    gpu = the_gpu(options)
    if gpu is None:
        return None
    return gpu_budget(gpu, options.get(TP) or 1, options.get(KV_FRACTION), options.get(WEIGHTS), geometry)
