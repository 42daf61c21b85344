"""Triton's own MXFP4 upcast compiled for gfx950: a tl.dot_scaled with a bf16 left side and
an e2m1 right side (with its e8m0 scales), which Triton lowers by upcasting the e2m1
operand to bf16 before a bf16 MFMA.

    python3 tests/triton_mxfp4_upcast.py   (TRITON_INTERPRET unset) -> JSON on stdout:
    {"llir": the LLVM IR, "amdgcn": the gfx950 assembly}

Run as a subprocess by tests/test_gfx950_inline_asm.py: Triton decides interpret-or-compile
when a kernel is decorated, so this must not run under TRITON_INTERPRET=1.
"""
import json
import os
import sys

if os.environ.get("TRITON_INTERPRET") == "1":
    raise RuntimeError("compiles for gfx950: run with TRITON_INTERPRET unset")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402


@triton.jit
def bf16_x_e2m1_kernel(a_ptr, b_ptr, b_scale_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    # out (M, N) = a (M, K) bf16 . b (K, N) e2m1, b packed two codes a byte along K, with
    # one e8m0 scale per 32 values of K for each of its N columns.
    rows, cols = tl.arange(0, M), tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K // 2)[:, None] * N + cols[None, :])
    b_scale = tl.load(b_scale_ptr + cols[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    out = tl.dot_scaled(a, None, "bf16", b, b_scale, "e2m1")
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], out)


def compile_for_gfx950() -> dict:
    signature = {"a_ptr": "*bf16", "b_ptr": "*u8", "b_scale_ptr": "*u8", "out_ptr": "*fp32",
                 "M": "constexpr", "N": "constexpr", "K": "constexpr"}
    constexprs = {(4,): 32, (5,): 32, (6,): 64}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    compiled = triton.compile(ASTSource(bf16_x_e2m1_kernel, signature, constexprs, aligned),
                              target=GPUTarget("hip", "gfx950", 64), options={"num_warps": 4})
    return {"llir": compiled.asm["llir"], "amdgcn": compiled.asm["amdgcn"]}


if __name__ == "__main__":
    json.dump(compile_for_gfx950(), sys.stdout)
