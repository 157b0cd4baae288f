"""The types of the compiled kernels' parameters, for mypy (numba itself ignores annotations).

numba types a kernel from the values it is called with, so one integer parameter receives a Python
int from the caller and a numpy int64 from another kernel (a value read from an array, or made by
np.int64 to fix the machine type); numba unifies the two, mypy's numpy stubs do not. `Int` says
both. Arrays are np.ndarray, whose elements mypy treats as Any: the kernels read them with whatever
dtype the caller allocated, which numba checks when it compiles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

import numpy as np

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher

Int: TypeAlias = int | np.int64

_Kernel = TypeVar("_Kernel", bound=Callable[..., object])


class Jit(Protocol):
    """What njit(options) returns: a decorator from a function to its compiled dispatcher, which
    keeps the function's signature for mypy. For a decorator made with an option numba's stubs do
    not list (such as the private _nrt), where njit(...) itself is untyped."""

    def __call__(self, fn: _Kernel, /) -> Dispatcher[_Kernel]: ...
