"""generate_input's contract, the independent fp32 attention, and ref_kernel against it on
small shapes (uniform, variable lengths, q_seq_len 2): the a8w8 emulation, and aiter's
decode where aiter is importable and takes the input (every sequence >= 196 tokens).
Inputs are built on the device under test unless a test says otherwise."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import reference
from conftest import DEVICE, REPO_ROOT

UPSTREAM_CONFIG_KEYS = {"batch_size", "num_heads", "num_kv_heads", "qk_head_dim",
                        "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "q_seq_len",
                        "kv_seq_len", "sm_scale"}


def indptr(lengths: list[int], device=DEVICE) -> torch.Tensor:
    return torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).to(device)


def variable_input(q_lens: list[int], kv_lens: list[int], seed: int):
    """An input tuple with the given per-sequence lengths (generate_input is uniform), on
    the device under test."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(q_lens), 16, 576, generator=generator).to(torch.bfloat16).to(DEVICE)
    kv = torch.randn(sum(kv_lens), 1, 576, generator=generator).to(torch.bfloat16).to(DEVICE)
    kv_data = {"bf16": kv, "fp8": reference.quantize_fp8(kv), "mxfp4": reference.quantize_mxfp4(kv)}
    config = {"batch_size": len(q_lens), "num_heads": 16, "num_kv_heads": 1,
              "qk_head_dim": 576, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
              "v_head_dim": 512, "q_seq_len": max(q_lens), "kv_seq_len": max(kv_lens),
              "sm_scale": reference.SM_SCALE}
    return q, kv_data, indptr(q_lens), indptr(kv_lens), config


def a8w8_oracle(data) -> torch.Tensor:
    """attention_fp32 on the dequantized fp8 Q and KV that ref_kernel reads."""
    q, kv_data, qo_indptr, kv_indptr, _ = data
    q8, q_scale = reference.quantize_fp8(q)
    kv8, kv_scale = kv_data["fp8"]
    return reference.attention_fp32(q8.float() * q_scale, (kv8.float() * kv_scale)[:, 0],
                                    qo_indptr, kv_indptr, reference.SM_SCALE)


def test_generate_input_matches_the_upstream_contract():
    q, kv_data, qo_indptr, kv_indptr, config = reference.generate_input(3, 1, 40, seed=7)
    assert (q.shape, q.dtype, q.device.type) == ((3, 16, 576), torch.bfloat16, DEVICE.type)
    assert all(t.device.type == DEVICE.type for t in (kv_data["bf16"], *kv_data["fp8"],
                                                       *kv_data["mxfp4"], qo_indptr, kv_indptr))
    assert kv_data["bf16"].shape == (120, 1, 576) and kv_data["bf16"].dtype == torch.bfloat16
    fp8, fp8_scale = kv_data["fp8"]
    assert (fp8.shape, fp8.dtype, fp8_scale.shape, fp8_scale.dtype) == (
        (120, 1, 576), reference.FP8_DTYPE, (1,), torch.float32)
    fp4, fp4_scales = kv_data["mxfp4"]
    assert (fp4.shape, fp4.dtype) == ((120, 1, 288), torch.float4_e2m1fn_x2)
    assert (fp4_scales.shape, fp4_scales.dtype) == ((120, 18), torch.float8_e8m0fnu)
    assert qo_indptr.tolist() == [0, 1, 2, 3] and kv_indptr.tolist() == [0, 40, 80, 120]
    on_cpu = reference.generate_input(3, 1, 40, seed=7, device="cpu")
    assert on_cpu[0].device.type == "cpu" and on_cpu[1]["mxfp4"][1].device.type == "cpu"
    assert qo_indptr.dtype == kv_indptr.dtype == torch.int32
    assert set(config) == UPSTREAM_CONFIG_KEYS
    assert (config["batch_size"], config["kv_seq_len"], config["sm_scale"]) == (
        3, 40, 1 / 576 ** 0.5)
    # The quantized formats are of the same bf16 cache.
    assert torch.equal(fp8.view(torch.uint8), reference.quantize_fp8(kv_data["bf16"])[0].view(torch.uint8))
    assert torch.equal(fp4.view(torch.uint8),
                       reference.quantize_mxfp4(kv_data["bf16"])[0].view(torch.uint8))
    assert 0.9 < kv_data["bf16"].float().std() < 1.1   # unit variance, as upstream now


def test_generate_input_is_deterministic_per_seed():
    first, again, other = (reference.generate_input(2, 1, 16, seed) for seed in (5, 5, 6))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1]["bf16"], again[1]["bf16"])
    assert not torch.equal(first[0], other[0])


def python_with(variables: dict[str, str]) -> dict[str, str]:
    """This process's environment (its PYTHONPATH: aiter, if importable here, stays so)
    without MLA_ variables, plus `variables`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MLA_")}
    return dict(env, **variables)


def test_legacy_generation_pads_the_scales_unless_aiter_quantizes():
    """MLA_MXFP4_GENERATION chooses the torch quantizer's generation; where aiter takes the
    input, aiter's own quantizer decides (its current generation: trimmed scales)."""
    code = ("import reference; d = reference.generate_input(2, 1, 40, 1); "
            "print(reference.MXFP4_GENERATION, reference.HAVE_AITER, tuple(d[1]['mxfp4'][1].shape))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, env=python_with({"MLA_MXFP4_GENERATION": "legacy"}),
                         check=True).stdout
    legacy, have_aiter, *shape = out.split()
    assert (legacy, have_aiter) == ("legacy", str(reference.HAVE_AITER))
    assert shape == (["(80,", "18)"] if reference.HAVE_AITER else ["(256,", "24)"])


def test_constants_and_platform():
    assert (reference.NUM_HEADS, reference.NUM_KV_HEADS, reference.QK_HEAD_DIM,
            reference.V_HEAD_DIM, reference.KV_LORA_RANK, reference.QK_ROPE_HEAD_DIM) == (
        16, 1, 576, 512, 512, 64)
    assert (reference.PAGE_SIZE, reference.NUM_KV_SPLITS) == (1, 32)
    assert (reference.Q_DTYPE, reference.KV_DTYPE) == ("fp8", "fp8")
    assert reference.HAVE_AITER == reference._aiter_importable()
    assert reference.MXFP4_GENERATION == "current"


def test_attention_fp32_against_sdpa_for_single_queries():
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(2, 16, 576, generator=generator).to(DEVICE)
    kv = torch.randn(70, 576, generator=generator).to(DEVICE)
    out = reference.attention_fp32(q, kv, indptr([1, 1]), indptr([30, 40]), 0.05)
    for b, (start, stop) in enumerate(((0, 30), (30, 70))):
        keys = kv[start:stop].double()
        expected = F.scaled_dot_product_attention(
            q[b:b + 1].double(), keys[None], keys[None, :, :512], scale=0.05)
        assert torch.allclose(out[b].double(), expected[0], atol=1e-6)


def test_attention_fp32_causal_rule_and_empty_sequences():
    """Query i of q_len queries over L tokens sees the first L - q_len + 1 + i tokens."""
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(3, 16, 576, generator=generator).to(DEVICE)
    kv = torch.randn(10, 576, generator=generator).to(DEVICE)
    out = reference.attention_fp32(q, kv, indptr([3, 0]), indptr([10, 0]), 0.04)
    for i in range(3):
        alone = reference.attention_fp32(q[i:i + 1], kv[:8 + i], indptr([1]), indptr([8 + i]), 0.04)
        assert torch.allclose(out[i], alone[0], atol=1e-6)
    zero_kv = reference.attention_fp32(q[:1], kv[:0], indptr([1]), indptr([0]), 0.04)
    assert bool((zero_kv == 0).all())


SHAPES = {  # name: (q lengths, kv lengths)
    "one_token": ([1], [1]),
    "len31_batch2": ([1, 1], [31, 31]),
    "len64_batch3": ([1, 1, 1], [64, 64, 64]),
    "len300": ([1], [300]),
    "variable": ([1, 1, 1], [300, 1, 31]),
    "qlen2_variable": ([2, 2], [64, 31]),
    "empty_sequence": ([1, 1], [0, 64]),
}


@pytest.mark.parametrize("name", SHAPES)
def test_ref_kernel_emulation_matches_the_fp32_oracle(name):
    data = variable_input(*SHAPES[name], seed=len(name))
    out = reference.ref_kernel(data)
    assert out.shape == (sum(SHAPES[name][0]), 16, 512) and out.dtype == torch.bfloat16
    oracle = a8w8_oracle(data)
    # Same inputs, same math: the only difference is fp32 vs fp64 and the bf16 output.
    torch.testing.assert_close(out.float(), oracle, rtol=8e-3, atol=1e-4)


@pytest.mark.parametrize("q_lens, kv_lens, aiter_defined", [
    ([1, 1], [300, 196], True), ([1, 1, 1], [300, 1, 31], False), ([2, 2], [300, 300], False)])
def test_ref_kernel_calls_aiter_exactly_where_its_decode_is_defined(monkeypatch, q_lens, kv_lens,
                                                                    aiter_defined):
    """With aiter importable (an MI355X, or tests/simulated_rocm), inputs on its device with
    q_seq_len 1 and sequences of >= 196 tokens go to aiter's decode; without, none do."""
    calls = []
    decode = reference._aiter_mla_decode
    monkeypatch.setattr(reference, "_aiter_mla_decode", lambda *args: calls.append(1) or decode(*args))
    data = variable_input(q_lens, kv_lens, seed=8)
    torch.testing.assert_close(reference.ref_kernel(data).float(), a8w8_oracle(data),
                               rtol=8e-3, atol=1e-4)
    assert len(calls) == (1 if aiter_defined and reference.HAVE_AITER else 0)


def test_ref_kernel_online_softmax_over_token_chunks(monkeypatch):
    """Sequences longer than a token chunk go through the running-max path."""
    data = variable_input([1, 2], [300, 150], seed=3)
    monkeypatch.setattr(reference, "_TOKEN_CHUNK", 64)
    torch.testing.assert_close(reference.ref_kernel(data).float(), a8w8_oracle(data),
                               rtol=8e-3, atol=1e-4)


def test_ref_kernel_splits_equal_length_runs_into_bounded_groups(monkeypatch):
    """Runs of equal-length sequences are batched; a small row budget forces many groups."""
    q_lens, kv_lens = [1] * 7 + [2, 2], [31] * 5 + [64, 64, 40, 40]
    data = variable_input(q_lens, kv_lens, seed=6)
    monkeypatch.setattr(reference, "_ROW_CHUNK", 64)
    groups = list(reference._equal_length_groups(data[2].tolist(), data[3].tolist()))
    assert groups == [(0, 2, 1, 31), (2, 2, 1, 31), (4, 1, 1, 31), (5, 1, 1, 64), (6, 1, 1, 64),
                      (7, 1, 2, 40), (8, 1, 2, 40)]
    torch.testing.assert_close(reference.ref_kernel(data).float(), a8w8_oracle(data),
                               rtol=8e-3, atol=1e-4)


def test_ref_kernel_is_close_to_exact_attention_on_bf16():
    """a8w8 against exact attention on the unquantized cache: within the current rule."""
    data = variable_input([1, 1], [256, 100], seed=4)
    q, kv_data, qo_indptr, kv_indptr, _ = data
    exact = reference.attention_fp32(q.float(), kv_data["bf16"].float()[:, 0], qo_indptr,
                                     kv_indptr, reference.SM_SCALE)
    error = (reference.ref_kernel(data).float() - exact).abs()
    assert error.max() < 0.05


def test_check_implementation_uses_the_current_rule():
    assert (reference.CHECK_RTOL, reference.CHECK_ATOL, reference.CHECK_MISMATCH_ALLOWANCE) == (
        0.1, 0.1, 0.05)
    data = reference.generate_input(2, 1, 64, seed=9)
    good, message = reference.check_implementation(data, reference.ref_kernel(data))
    assert (good, message) == (True, "Maximum error: 0")
    zeros = torch.zeros(2, 16, 512, dtype=torch.bfloat16, device=data[0].device)
    good, message = reference.check_implementation(data, zeros)
    assert not good and "mismatch" in message


@pytest.mark.parametrize("rule, tolerance", [("2e-2", 0.02), ("1e-2", 0.01), ("current", 0.1)])
def test_older_check_rules_are_selectable(rule, tolerance):
    code = "import reference; print(reference.CHECK_RTOL, reference.CHECK_ATOL)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, env=python_with({"MLA_CHECK_RULE": rule}), check=True).stdout
    assert out.split() == [str(tolerance)] * 2


def test_unknown_check_rule_is_refused():
    proc = subprocess.run([sys.executable, "-c", "import reference"], cwd=REPO_ROOT,
                          capture_output=True, text=True, env=python_with({"MLA_CHECK_RULE": "loose"}))
    assert proc.returncode != 0 and "MLA_CHECK_RULE" in proc.stderr
