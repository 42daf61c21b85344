"""Why the MXFP4 Gluon form does not copy its tiles global -> LDS by gfx950's buffer loads to
LDS: a loop with a 3-stage ring of such copies (cdna4.async_copy.buffer_load_to_shared,
wait_group, load_shared_relaxed) and, inside it, one exchange through shared memory
between the waves (a local store, as P's and the row maxima's exchanges need; or a layout
conversion through shared memory). Compiled for gfx950 (Triton 3.6, no GPU), the loop's
waits and the bytes in flight at its MFMAs are printed: LLVM (SIInsertWaitcnts) makes an
LDS access it cannot prove apart from the copies wait for all of them, s_waitcnt vmcnt(0)
before the exchange. Gluon 3.6 marks only load_shared_relaxed's reads as apart.

    python3 -m bench.lds_dma_alias_probe > results/2026-12-01-gfx950-mxfp4-v2/lds_dma_alias_probe.txt
"""
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.amd import cdna4
from triton.experimental.gluon._runtime import GluonASTSource

from tools import amdgcn


@gluon.jit
def ring_with_exchange(kv_ptr, out_ptr, n, MODE: gl.constexpr):
    COPY: gl.constexpr = gl.BlockedLayout([1, 8], [4, 16], [4, 1], [1, 0])
    PLAIN: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    MMA: gl.constexpr = cdna4.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                            warps_per_cta=[4, 1])
    MMA2: gl.constexpr = cdna4.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                             warps_per_cta=[1, 4])
    ring = gl.allocate_shared_memory(gl.bfloat16, [3, 64, 128], PLAIN)
    xch = gl.allocate_shared_memory(gl.float32, [64, 16], PLAIN)
    rows = (gl.arange(0, 64, layout=gl.SliceLayout(1, COPY))[:, None] * 128
            + gl.arange(0, 128, layout=gl.SliceLayout(0, COPY))[None, :])
    for stage in gl.static_range(2):
        cdna4.async_copy.buffer_load_to_shared(ring.index(stage), kv_ptr, rows + stage * 64 * 128)
        cdna4.async_copy.commit_group()
    acc = gl.zeros([16, 64], gl.float32, MMA2)
    q = gl.full([128, 16], 1.0, gl.bfloat16, gl.DotOperandLayout(1, MMA, 8))
    v = gl.full([64, 64], 1.0, gl.bfloat16, gl.DotOperandLayout(1, MMA2, 8))
    t = 0
    for i in range(n):
        cdna4.async_copy.buffer_load_to_shared(ring.index((t + 2) % 3), kv_ptr, rows + (i + 2) * 64 * 128)
        cdna4.async_copy.commit_group()
        cdna4.async_copy.wait_group(2)
        k = cdna4.async_copy.load_shared_relaxed(ring.index(t % 3), gl.DotOperandLayout(0, MMA, 8))
        s = cdna4.mfma(k, q, gl.zeros([64, 16], gl.float32, MMA))  # [64 rows over the waves, 16]
        if MODE == "store":  # an explicit exchange: store, barrier, relaxed read
            xch.store(s)
            gl.thread_barrier()
            p = cdna4.async_copy.load_shared_relaxed(xch.permute((1, 0)), gl.DotOperandLayout(0, MMA2, 8))
            gl.thread_barrier()
        else:  # the compiler's own exchange (a layout conversion through shared memory)
            p = gl.convert_layout(s.permute((1, 0)), gl.DotOperandLayout(0, MMA2, 8))
        acc = cdna4.mfma(p.to(gl.bfloat16), v, acc)
        t += 1
    cdna4.async_copy.wait_group(0)
    gl.store(out_ptr + gl.arange(0, 16, layout=gl.SliceLayout(1, MMA2))[:, None] * 64
             + gl.arange(0, 64, layout=gl.SliceLayout(0, MMA2))[None, :], acc)


def main() -> None:
    for mode in ("store", "convert"):
        source = GluonASTSource(ring_with_exchange, {"kv_ptr": "*bf16", "out_ptr": "*fp32", "n": "i32",
                                                     "MODE": "constexpr"}, {(3,): mode},
                                {(0,): [["tt.divisibility", 16], ["tt.pointer_range", 32]],
                                 (1,): [["tt.divisibility", 16]]})
        kernel = triton.compile(source, target=GPUTarget("hip", "gfx950", 64), options={"num_warps": 4})
        instructions, labels = amdgcn.parse(kernel.asm["amdgcn"])
        first, last = amdgcn.main_loop_span(instructions, labels)
        loop = instructions[first:last + 1]
        print(f"{mode}: the loop's vmcnt waits: "
              + ", ".join(ops for m, ops in loop if m == "s_waitcnt" and "vmcnt" in ops)
              + f"; load bytes a wave has in flight at its MFMAs: {amdgcn.loads_in_flight_at_mfmas(loop)}")


if __name__ == "__main__":
    main()
