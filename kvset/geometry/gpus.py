"""Working sets in GPUs: how many GPUs' worth of KV cache a working set is, at this model.

What an operator means by "a GPU's worth of KV" is the part of its memory the engine gives the KV
cache: vLLM takes `--gpu-memory-utilization` of the memory (0.9 by default), keeps the weights' share
of this GPU in it (the weights over `--tp`) and activations, and makes KV blocks of the rest. kvset
does not know a model's weights or its activations, so the KV share is

- given: `--kv-fraction F`, the share of each GPU's memory that holds KV; or
- derived: 90 % of the memory less `--weights` over `--tp` (activations and CUDA graphs not counted,
  so an upper bound on the KV share and a lower bound on the GPUs); or, with neither,
- 90 % of the memory, weights not subtracted: the GPU count is then a lower bound, and says so.

Tensor parallelism splits a token's KV heads over the `--tp` GPUs of one engine, so a GPU holds its
share of the KV of every cached token: the GPUs a working set needs do not depend on `--tp`, except
where the heads do not split. A model with fewer KV heads than `--tp` has its heads copied (vLLM
gives every GPU at least one), and an MLA model (DeepSeek) keeps its whole latent on every GPU:
each cached token then takes `replicas` times its KV bytes across the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvset.geometry.model import ModelGeometry
from kvset.quantities import MIB, format_gib, percent

VLLM_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default --gpu-memory-utilization


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int


# The memory each device reports (nvidia-smi / rocm-smi total), which is what an engine sizes against:
# the "80GB" of an H100 is 81,559 MiB (79.6 GiB).
GPUS: tuple[Gpu, ...] = (
    Gpu("H100", 81_559 * MIB),
    Gpu("H200", 143_771 * MIB),
    Gpu("B200", 183_359 * MIB),
    Gpu("MI300X", 196_288 * MIB),
)


def gpu_named(name: str) -> Gpu:
    """A preset GPU by name, any case; a ValueError naming the known ones."""
    for gpu in GPUS:
        if gpu.name.lower() == name.strip().lower():
            return gpu
    known = ", ".join(g.name for g in GPUS)
    raise ValueError(f"unknown GPU {name!r} (known: {known}; or give its memory: --gpu-memory 80GiB)")


def gpu_of_memory(memory_bytes: int) -> Gpu:
    """A GPU known by its memory only (--gpu-memory)."""
    return Gpu("GPU", memory_bytes)


def kv_replicas(geometry: ModelGeometry | None, tp: int) -> float:
    """How many copies of each token's KV an engine of `tp` GPUs keeps (see the module docstring)."""
    if geometry is None or tp <= 1:
        return 1.0
    if geometry.is_mla:
        return float(tp)
    heads = geometry.kv_heads
    if not heads:
        return 1.0
    return tp * max(1, heads // tp) / heads


@dataclass(frozen=True)
class GpuBudget:
    """The KV share of one GPU, and how it was found (`kv_from`), for the reports to say."""

    gpu: Gpu
    tp: int
    kv_bytes_per_gpu: int
    kv_from: str
    lower_bound: bool = False  # the weights were not subtracted: the GPU counts are at least these
    replicas: float = 1.0

    def gpus(self, kv_bytes: int | None) -> float | None:
        """GPUs' worth of KV cache of `kv_bytes` of the model's KV (None: bytes not known)."""
        if kv_bytes is None:
            return None
        return kv_bytes * self.replicas / self.kv_bytes_per_gpu

    def short(self) -> str:
        """The panels' note: "GPUs (a model): H100, 71.7 GiB of KV each; ≥: weights not counted"."""
        kv = format_gib(self.kv_bytes_per_gpu, significant=3)
        note = f"GPUs (a model): {self.gpu.name}, {kv} of KV each"
        if self.replicas != 1:
            note += f", KV held {self.replicas:g}x at --tp {self.tp}"
        return note + ("; ≥: weights not counted" if self.lower_bound else "")

    def describe(self) -> str:
        """One line for the reports: the GPU, its KV share and what was assumed (it is a model)."""
        kv = format_gib(self.kv_bytes_per_gpu, significant=3)
        line = f"GPUs (a model): {self.gpu.name} {format_gib(self.gpu.memory_bytes, significant=3)}, {kv} of KV each ({self.kv_from})"
        if self.tp > 1:
            held = format_gib(self.tp * self.kv_bytes_per_gpu / self.replicas, significant=3)
            line += f"; an engine of --tp {self.tp} holds {held} of the model's KV"
            if self.replicas != 1:
                line += f" (each token's KV kept {self.replicas:g} times across its GPUs)"
        return line


def gpu_budget(
    gpu: Gpu,
    tp: int = 1,
    kv_fraction: float | None = None,
    weights_bytes: int | None = None,
    geometry: ModelGeometry | None = None,
) -> GpuBudget:
    """The KV share of one GPU from what was given; a ValueError when the weights leave no room."""
    replicas = kv_replicas(geometry, tp)
    if kv_fraction is not None:
        return GpuBudget(
            gpu,
            tp,
            int(gpu.memory_bytes * kv_fraction),
            f"--kv-fraction {percent(kv_fraction, 0)}",
            replicas=replicas,
        )
    usable = int(gpu.memory_bytes * VLLM_GPU_MEMORY_UTILIZATION)
    share = f"{percent(VLLM_GPU_MEMORY_UTILIZATION, 0)} of its memory, vLLM's default"
    if weights_bytes is None:
        kv_from = f"{share}, weights not counted: at least this many GPUs; give --weights or --kv-fraction"
        return GpuBudget(gpu, tp, usable, kv_from, lower_bound=True, replicas=replicas)
    per_gpu = -(-weights_bytes // tp)
    if per_gpu >= usable:
        raise ValueError(
            f"--weights {format_gib(weights_bytes, significant=3)} over --tp {tp} is "
            f"{format_gib(per_gpu, significant=3)} per GPU: no room for KV in "
            f"{percent(VLLM_GPU_MEMORY_UTILIZATION, 0)} of one {gpu.name}'s {format_gib(gpu.memory_bytes, significant=3)}; "
            "raise --tp"
        )
    kv_from = (
        f"{share}, less the weights' {format_gib(per_gpu, significant=3)} per GPU; activations not counted"
    )
    return GpuBudget(gpu, tp, usable - per_gpu, kv_from, replicas=replicas)
