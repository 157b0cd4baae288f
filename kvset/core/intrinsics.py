"""LLVM intrinsics for the kernels: prefetch, count leading zeros, population count.

numba has no spelling for these; each compiles to one instruction where the CPU has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from kvset.core.kernel_types import Int

if TYPE_CHECKING:
    # What a kernel calls. @intrinsic's own function takes numba's typing context first and returns
    # a signature and a code generator (llvmlite, untyped), so mypy is shown the call instead.
    def prefetch(arr: np.ndarray, idx: Int) -> None: ...
    def prefetch_read(arr: np.ndarray, idx: Int) -> None: ...
    def ctlz(x: np.uint64) -> np.uint64: ...
    def ctpop(x: np.uint64) -> np.uint64: ...

else:

    def _prefetch_codegen(write: int):
        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(
                context, builder, aryty, ary, [args[1]], wraparound=False, boundscheck=False
            )
            i8p = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i8p, ir.IntType(32), ir.IntType(32), ir.IntType(32)])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
            i32 = ir.IntType(32)
            builder.call(
                fn,
                [
                    builder.bitcast(ptr, i8p),
                    ir.Constant(i32, write),
                    ir.Constant(i32, 3),
                    ir.Constant(i32, 1),
                ],
            )
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def prefetch(typingctx, arr, idx):
        """LLVM's prefetch of arr[idx] for writing: starts the cache miss without waiting for it."""
        return types.void(arr, idx), _prefetch_codegen(1)

    @intrinsic
    def prefetch_read(typingctx, arr, idx):
        """The same for data that is only read (no request for ownership of the line)."""
        return types.void(arr, idx), _prefetch_codegen(0)

    @intrinsic
    def ctlz(typingctx, x):
        """LLVM's ctlz: count leading zeros in one instruction (lzcnt/bsr)."""
        sig = types.uint64(types.uint64)

        def codegen(context, builder, signature, args):
            return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

        return sig, codegen

    @intrinsic
    def ctpop(typingctx, x):
        """LLVM's ctpop: one popcnt instruction where the CPU has it."""
        sig = types.uint64(types.uint64)

        def codegen(context, builder, signature, args):
            return builder.ctpop(args[0])

        return sig, codegen


@njit(inline="always")
def popcount(x: np.uint64 | Int) -> np.int64:
    return np.int64(ctpop(np.uint64(x)))
