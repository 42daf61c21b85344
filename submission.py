#!POPCORN leaderboard amd-mixed-mla
#!POPCORN gpu MI355X
"""MLA decode (DeepSeek-R1 forward_absorb) over a bf16 / fp8 / MXFP4 KV cache.

Plan once, run thin: everything that depends only on the shape of the call is decided
and allocated once per plan key; the per-call path only launches.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

# ==== Triton kernels ====
# (the Triton MXFP4 / fp8 split-K decode kernels and their launchers live here)
# ==== end Triton kernels ====
