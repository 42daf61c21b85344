"""Types of the amd-mixed-mla task, with the names upstream's task.py uses.

Input: (q, kv_data, qo_indptr, kv_indptr, config)
  q          (total_q, 16, 576) bfloat16, absorbed query
  kv_data    {"bf16":  (total_kv, 1, 576) bfloat16,
              "fp8":   ((total_kv, 1, 576) fp8 e4m3, float32 scale of shape (1,)),
              "mxfp4": ((total_kv, 1, 288) fp4x2, e8m0 block scales (rows, cols))}
  qo_indptr  (batch + 1,) int32 prefix sums of query lengths
  kv_indptr  (batch + 1,) int32 prefix sums of KV lengths
  config     dict of the MLA parameters
Output: (total_q, 16, 512) bfloat16. Keys are all 576 dims of a KV row, values its first 512.
"""
from typing import TypedDict, TypeVar

import torch

input_t = TypeVar("input_t", bound=tuple[torch.Tensor, dict, torch.Tensor, torch.Tensor, dict])
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    batchsize: int
    qseqlen: int
    kvseqlen: int
    seed: int
