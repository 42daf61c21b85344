"""The decode kernel compiles for the H200's architecture (sm_90) on a CPU machine, and its
main loop issues the tensor-core work the tile calls for (bench/sass_loop.py)."""
import pytest

import submission as sub
from bench import sass_loop
from tools import external_programs


@pytest.mark.parametrize("kv_format,stages", [("fp8", 3), ("mxfp4", 1)])
def test_main_loop_mmas_per_tile(kv_format, stages):
    # 4 warps split a 32-token tile 4 ways for S = Q.K^T (16 x 8 each, K = 576: 36
    # m16n8k16 MMAs) and split V's 512 columns 4 ways for P.V (16 x 128, K = 32: 32 MMAs).
    if (problem := external_programs.problem("nvdisasm")) is not None:
        pytest.skip(problem)
    compiled = sass_loop.compile_kernel(kv_format, sub.KernelLaunch(2, 32, 4, stages))
    mix = sass_loop.main_loop_mix(sass_loop.disassemble(compiled.asm["cubin"]))
    if kv_format == "fp8":  # fp16 operands; e4m3 -> fp16 one instruction a pair of values
        assert mix["HMMA.16816.F32"] == 36 + 32 and mix["HMMA.16816.F32.BF16"] == 0
        assert mix["F2FP.F16.E4M3.UNPACK_B"] == (8 * 576 + 32 * 128) // 32 // 2
    else:  # bf16 operands, decoded in registers
        assert mix["HMMA.16816.F32.BF16"] == 36 + 32 and mix["HMMA.16816.F32"] == 0
