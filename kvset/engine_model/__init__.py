"""The engine model: what the engine itself will hit, as opposed to an ideal LRU of its pool.

One package for the one idea (README: "The engine model"):

- `free_queue`: vLLM's block pool as a stack (pinned blocks, then the free queue, newest release first),
  compiled, giving every query block the pool size from which it is a hit;
- `replay`: one engine's (one rank's) BlockStored events grouped into requests, and the pool replayed on
  their admissions and estimated finishes (`RequestReplay`); `records`: what it keeps, and the
  `EngineModelDelta` it hands over (a contract type, defined with the others in kvset.types, because it
  crosses from a source's thread to the pipeline's);
- `radix_cache`: SGLang's radix cache replayed on its events the same way (`RadixReplay`), its lookups
  read off the parent links of `prefix_chain` (`PrefixChain`, which vLLM's default mode reads too);
- `summed`: the deltas of every source summed into the model's figures at any pool size (`EngineModel`),
  which the operating-point figure (kvset.figures.operating_point) reads.

Pure: values in, values out, no sockets, no threads.
"""

from kvset.engine_model.free_queue import FreeQueue
from kvset.engine_model.replay import RequestReplay
from kvset.engine_model.summed import MODEL_NAME, EngineModel, ModelAt
from kvset.types import EngineModelDelta

__all__ = ["MODEL_NAME", "EngineModel", "EngineModelDelta", "FreeQueue", "ModelAt", "RequestReplay"]
