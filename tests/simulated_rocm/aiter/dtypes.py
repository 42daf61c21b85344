"""aiter.dtypes of the simulated stack: gfx950's formats (fp8 is e4m3fn there)."""
import torch

from tools.fake_aiter import HW_FP8

fp8 = HW_FP8["gfx950"]
fp4x2 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
fp8_e8m0 = getattr(torch, "float8_e8m0fnu", torch.uint8)
bf16 = torch.bfloat16
fp32 = torch.float32
