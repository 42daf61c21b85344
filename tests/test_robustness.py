"""Issue 5: malformed inputs are refused with a message naming the field; odd but valid
inputs get the right answer.

Where: validation and the CPU's per-call checks are host logic, their inputs pinned to the
CPU; odd but valid inputs go through the automatic route on the device under test (the
torch route on a CPU, the compiled Triton routes on a GPU); the Triton routes under the
interpreter run on the CPU everywhere; on a GPU, bench/robustness_gpu.py runs its cases for
every route and kernel form that can run there, compiled.

Right means: exact attention (reference.attention_fp32, float64) over the KV format the
route read, NaN and Inf in the same places and finite elements within 1% of the output's
scale for the torch route (bench/robustness_gpu.py's tolerances for the Triton routes,
whose products round to fp16, bf16 or e4m3), and,
where the leaderboard's a8w8 reference can judge the input, its check
(reference.check_implementation). Inputs built by hand get their KV formats from
reference's quantizers (bench/robustness_gpu.py holds the builders the GPU script shares).
Faults (a route raising mid-run, device errors) are tests/test_autopick.py's.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

import reference
import submission
from conftest import DEVICE, NO_GPU_ENV, REPO_ROOT, cpu_only, needs_gpu, runnable_forms
from reference import check_implementation, generate_input
from tools.robustness import (MAGNITUDES, NONFINITE, ROUTES, SHORT_BUFFER_LENGTHS, empty_cache, exact_attention, exact_attention_ieee,
                              format_read_by, in_larger_buffers, kv_formats, mxfp4_only, oracle_mismatch, oracle_tolerance, ragged_input,
                              widened_scales, with_kv, with_nonfinite)

TOL = 1e-2


pytestmark = pytest.mark.usefixtures("fresh_plans")


def assert_correct(data, out, rule_data=None, oracle=exact_attention):
    """out (of the plan of data) against exact attention over the format its route read
    and, unless rule_data is False, the reference rule on rule_data (default: data)."""
    route = submission.describe_route(data)
    tolerance = TOL if route.startswith("torch") else oracle_tolerance(route)
    problem = oracle_mismatch(out, oracle(data, format_read_by(route)), tolerance)
    assert problem is None, problem
    if rule_data is not False:
        good, message = check_implementation(data if rule_data is None else rule_data, out)
        assert good, message


# ------------------------------------------------------------------------------------
# 1. Malformed inputs
# ------------------------------------------------------------------------------------
FIELDS = ("q", "kv_data", "qo_indptr", "kv_indptr", "config")
TOTAL_KV = 80  # valid(): 2 sequences of 40 tokens


def valid():
    """Two sequences of 40 tokens, on the CPU: validation is host logic."""
    return generate_input(2, 1, 40, 3, device="cpu")


def replaced(data, **parts):
    return tuple(parts.get(name, value) for name, value in zip(FIELDS, data))


def config(data, **changes):
    return replaced(data, config={**data[4], **changes})


def kv(data, **formats):
    """kv_data with some formats replaced (None removes one)."""
    changed = {**data[1], **formats}
    return replaced(data, kv_data={k: v for k, v in changed.items() if v is not None})


def ptr(values, device="cpu"):
    return torch.tensor(values, dtype=torch.int32, device=device)


def strided_last_dim(t):
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    wide[..., ::2] = t
    return wide[..., ::2]


# name: (mutation of valid(), exception type, fragments the message must contain)
MALFORMED = {
    "data_not_5_items": (lambda d: d[:4], TypeError, ["data", "(q, kv_data, qo_indptr, kv_indptr, config)"]),
    "config_missing_key": (lambda d: replaced(d, config={k: v for k, v in d[4].items() if k != "sm_scale"}),
                           ValueError, ["config", "missing", "sm_scale"]),
    "config_not_a_dict": (lambda d: replaced(d, config=list(d[4].items())), TypeError, ["config", "dict"]),
    "q_not_a_tensor": (lambda d: replaced(d, q=None), TypeError, ["q:", "torch.Tensor", "NoneType"]),
    "q_float32": (lambda d: replaced(d, q=d[0].float()), TypeError, ["q:", "torch.bfloat16", "torch.float32"]),
    "q_fp16": (lambda d: replaced(d, q=d[0].half()), TypeError, ["q:", "torch.bfloat16", "torch.float16"]),
    "q_head_dim_512": (lambda d: replaced(d, q=d[0][..., :512]), ValueError, ["q:", "576", "(2, 16, 512)"]),
    "q_8_heads": (lambda d: replaced(d, q=d[0][:, :8]), ValueError, ["q:", "16", "(2, 8, 576)"]),
    "q_2d": (lambda d: replaced(d, q=d[0].reshape(2, -1)), ValueError, ["q:", "(2, 9216)"]),
    "config_num_heads": (lambda d: config(d, num_heads=8), ValueError, ["num_heads", "16", "8"]),
    "config_qk_head_dim": (lambda d: config(d, qk_head_dim=512), ValueError, ["qk_head_dim", "576", "512"]),
    "config_v_head_dim": (lambda d: config(d, v_head_dim=576), ValueError, ["v_head_dim", "512", "576"]),
    "config_num_kv_heads": (lambda d: config(d, num_kv_heads=2), ValueError, ["num_kv_heads", "1", "2"]),
    "config_kv_lora_rank": (lambda d: config(d, kv_lora_rank=576), ValueError, ["kv_lora_rank", "512", "576"]),
    "config_qk_rope_head_dim": (lambda d: config(d, qk_rope_head_dim=0), ValueError,
                                ["qk_rope_head_dim", "64", "got 0"]),
    "config_batch_size_float": (lambda d: config(d, batch_size=2.0), ValueError, ["batch_size", "positive int", "2.0"]),
    "config_q_seq_len_0": (lambda d: config(d, q_seq_len=0), ValueError, ["q_seq_len", "positive int", "0"]),
    "config_batch_size_3": (lambda d: config(d, batch_size=3), ValueError, ["batch_size", "3", "got 2"]),
    "config_batch_size_0": (lambda d: config(d, batch_size=0), ValueError, ["batch_size", "positive", "0"]),
    "config_q_seq_len_2": (lambda d: config(d, q_seq_len=2), ValueError, ["q_seq_len", "4", "got 2"]),
    "config_sm_scale_str": (lambda d: config(d, sm_scale="0.04"), TypeError, ["sm_scale", "float", "'0.04'"]),
    "qo_indptr_too_long": (lambda d: replaced(d, qo_indptr=ptr([0, 1, 2, 2])), ValueError, ["qo_indptr", "(3,)", "(4,)"]),
    "kv_indptr_too_short": (lambda d: replaced(d, kv_indptr=ptr([0, 40])), ValueError, ["kv_indptr", "(3,)", "(2,)"]),
    "kv_indptr_int64": (lambda d: replaced(d, kv_indptr=d[3].long()), TypeError, ["kv_indptr", "torch.int32", "torch.int64"]),
    "qo_indptr_float": (lambda d: replaced(d, qo_indptr=d[2].float()), TypeError, ["qo_indptr", "torch.int32", "float32"]),
    "kv_indptr_decreasing": (lambda d: replaced(d, kv_indptr=ptr([0, 50, 40])), ValueError,
                             ["kv_indptr", "non-decreasing", "50", "40"]),
    "kv_indptr_past_cache": (lambda d: replaced(d, kv_indptr=ptr([0, 40, TOTAL_KV + 1])), ValueError,
                             ["kv_indptr", str(TOTAL_KV + 1), f"{TOTAL_KV} rows"]),
    "kv_indptr_not_from_0": (lambda d: replaced(d, kv_indptr=ptr([5, 40, 80])), ValueError, ["kv_indptr", "start at 0", "5"]),
    "qo_indptr_uneven": (lambda d: replaced(d, qo_indptr=ptr([0, 2, 2])), ValueError, ["qo_indptr", "q_seq_len = 1", "[0, 2]"]),
    "kv_data_not_a_dict": (lambda d: replaced(d, kv_data=list(d[1].values())), TypeError, ["kv_data", "dict", "list"]),
    "kv_data_empty": (lambda d: replaced(d, kv_data={}), ValueError, ["kv_data", "'bf16'", "'fp8'", "'mxfp4'"]),
    "kv_data_unknown_format": (lambda d: replaced(d, kv_data={"int8": d[1]["bf16"]}), ValueError,
                               ["kv_data", "'bf16'", "'fp8'", "'mxfp4'", "int8"]),
    "kv_bf16_float16": (lambda d: kv(d, bf16=d[1]["bf16"].half()), TypeError, ["kv_data['bf16']", "bfloat16", "float16"]),
    "kv_bf16_two_heads": (lambda d: kv(d, bf16=d[1]["bf16"].expand(-1, 2, -1)), ValueError,
                          ["kv_data['bf16']", f"({TOTAL_KV}, 1, 576)", f"({TOTAL_KV}, 2, 576)"]),
    "kv_fp8_buffer_bf16": (lambda d: kv(d, fp8=(d[1]["bf16"], d[1]["fp8"][1])), TypeError,
                           ["kv_data['fp8'][0]", "float8_e4m3fn", "bfloat16"]),
    "kv_fp8_scale_float64": (lambda d: kv(d, fp8=(d[1]["fp8"][0], d[1]["fp8"][1].double())), TypeError,
                             ["kv_data['fp8'][1]", "float32", "float64"]),
    "kv_fp8_scale_two_elements": (lambda d: kv(d, fp8=(d[1]["fp8"][0], d[1]["fp8"][1].repeat(2))), ValueError,
                                  ["kv_data['fp8'][1]", "(1,)", "(2,)"]),
    "kv_fp8_not_a_pair": (lambda d: kv(d, fp8=d[1]["fp8"][0]), TypeError, ["kv_data['fp8']", "(buffer, scale)"]),
    "kv_fp8_fewer_rows": (lambda d: kv(d, fp8=(d[1]["fp8"][0][:-1], d[1]["fp8"][1])), ValueError,
                          ["kv_data['fp8'][0]", f"({TOTAL_KV}, 1, 576)", f"({TOTAL_KV - 1}, 1, 576)"]),
    "kv_mxfp4_int8": (lambda d: kv(d, mxfp4=(d[1]["mxfp4"][0].view(torch.int8), d[1]["mxfp4"][1])), TypeError,
                      ["kv_data['mxfp4'][0]", "uint8", "int8"]),
    "kv_mxfp4_unpacked": (lambda d: kv(d, mxfp4=(d[1]["mxfp4"][0].view(torch.uint8).repeat(1, 1, 2),
                                                  d[1]["mxfp4"][1])), ValueError,
                          ["kv_data['mxfp4'][0]", "288", "576"]),
    "kv_mxfp4_scales_float32": (lambda d: kv(d, mxfp4=(d[1]["mxfp4"][0], d[1]["mxfp4"][1].view(torch.uint8).float())),
                                TypeError, ["kv_data['mxfp4'][1]", "uint8", "float32"]),
    "kv_mxfp4_scales_missing_rows": (lambda d: kv(d, mxfp4=(d[1]["mxfp4"][0], d[1]["mxfp4"][1][:-1])), ValueError,
                                     ["kv_data['mxfp4'][1]", f"({TOTAL_KV}, 18)", f"({TOTAL_KV - 1}, 18)"]),
    "kv_mxfp4_scales_17_cols": (lambda d: kv(d, mxfp4=(d[1]["mxfp4"][0], d[1]["mxfp4"][1][:, :17])), ValueError,
                                ["kv_data['mxfp4'][1]", f"({TOTAL_KV}, 18)", f"({TOTAL_KV}, 17)"]),
    "kv_bf16_last_dim_strided": (lambda d: kv(d, bf16=strided_last_dim(d[1]["bf16"])), ValueError,
                                 ["kv_data['bf16']", "stride"]),
    "kv_indptr_on_meta_device": (lambda d: replaced(d, kv_indptr=d[3].to("meta")), ValueError, ["kv_indptr", "meta", "cpu"]),
    "kv_bf16_on_meta_device": (lambda d: kv(d, bf16=d[1]["bf16"].to("meta")), ValueError,
                               ["kv_data['bf16']", "meta", "cpu"]),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_input_is_refused_naming_the_field(name):
    mutate, error, fragments = MALFORMED[name]
    with pytest.raises(error) as raised:
        submission.custom_kernel(mutate(valid()))
    message = str(raised.value)
    missing = [f for f in fragments if f not in message]
    assert not missing, f"message {message!r} lacks {missing}"
    assert not submission._PLANS, "a malformed input left a plan behind"


@pytest.mark.parametrize("key", submission.CONFIG_KEYS)
def test_every_config_key_is_required(key):
    data = valid()
    with pytest.raises(ValueError, match=f"missing key.*'{key}'"):
        submission.custom_kernel(replaced(data, config={k: v for k, v in data[4].items() if k != key}))
    assert not submission._PLANS, "a malformed input left a plan behind"


@pytest.mark.parametrize("bad_kv_indptr, fragment", [([0, 50, 40], "non-decreasing"),
                                                     ([0, 40, TOTAL_KV + 1], "points past"),
                                                     ([1, 40, 80], "start at 0")])
def test_bad_indptr_values_are_caught_on_every_cpu_call(bad_kv_indptr, fragment):
    """The plan key holds shapes only: values come from the per-call check on the CPU."""
    data = valid()
    good = submission.custom_kernel(data)
    with pytest.raises(ValueError, match=fragment):
        submission.custom_kernel(replaced(data, kv_indptr=ptr(bad_kv_indptr)))
    assert torch.equal(submission.custom_kernel(data), good)  # the plan is unharmed


def test_forced_route_without_its_format_is_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # so the Triton route could serve on the CPU
    monkeypatch.setenv("MLA_ROUTE", "triton_mxfp4")
    with pytest.raises(ValueError) as raised:
        submission.custom_kernel(kv(valid(), mxfp4=None))
    assert "MLA_ROUTE='triton_mxfp4'" in str(raised.value) and "('bf16', 'fp8')" in str(raised.value)


# ------------------------------------------------------------------------------------
# 2. Odd but valid inputs, through the automatic route, on the device under test (the
#    torch route on the CPU, mostly the Triton routes on a GPU)
# ------------------------------------------------------------------------------------
def lengths_0_to_8(batch, seed=5):
    return torch.randint(0, 9, (batch,), generator=torch.Generator().manual_seed(seed)).tolist()


ODD_VALID = {
    "ragged_zero_and_odd_lengths": lambda: ragged_input([0, 1, 31, 33, 0, 300, 64, 7], seed=1),
    "all_sequences_empty": lambda: replaced(ragged_input([1, 1, 1], seed=1), kv_indptr=ptr([0, 0, 0, 0], DEVICE)),
    "empty_cache": lambda: empty_cache(ragged_input([1, 1], seed=1)),
    "batch_1": lambda: ragged_input([77], seed=2),
    "kv_length_1": lambda: ragged_input([1, 1, 1], seed=3),
    "batch_1024_short": lambda: ragged_input(lengths_0_to_8(1024), seed=4),
    "one_sequence_32768": lambda: ragged_input([32768], seed=5),
    "q_seq_len_2": lambda: ragged_input([1, 2, 5, 64], q_seq_len=2, seed=6),
    "q_seq_len_4": lambda: ragged_input([2, 4, 9, 300], q_seq_len=4, seed=7),
    "q_strided_last_dim": lambda: (lambda d: replaced(d, q=strided_last_dim(d[0])))(ragged_input([40, 17], seed=8)),
    "q_transposed": lambda: (lambda d: replaced(d, q=d[0].transpose(0, 1).contiguous().transpose(0, 1)))(
        ragged_input([40, 17, 3], seed=9)),
    "leaderboard_like": lambda: generate_input(4, 1, 1024, 4217),
    "buffer_under_one_tile": lambda: ragged_input(SHORT_BUFFER_LENGTHS, seed=20),
    "views_in_larger_buffers": lambda: in_larger_buffers(ragged_input([40, 0, 17], seed=22)),
}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.fast) if name == "leaderboard_like" else name
                                  for name in ODD_VALID])
def test_odd_valid_input_is_right(name):
    data = ODD_VALID[name]()
    assert_correct(data, submission.custom_kernel(data))


def resident_bytes(key):
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(key + ":"))
    return int(line.split()[1]) << 10


def test_one_sequence_of_32768_tokens_in_bounded_memory():
    """Peak resident memory of the first call (plan, verification, timing runs) over what
    the process held before: a few fp32 copies of the 32768 x 576 KV (75 MB each) at most,
    nothing that grows with heads x tokens x dims. Host memory: the input on the CPU."""
    data = ragged_input([32768], seed=5, device="cpu")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets the peak (VmHWM) to the current resident size
    before = resident_bytes("VmRSS")
    submission.custom_kernel(data)
    peak_extra = resident_bytes("VmHWM") - before
    assert peak_extra < 256 << 20, f"peak grew {peak_extra >> 20} MiB"


def test_q_seq_len_4_is_causal_aligned_to_the_end():
    """Query i of 4 sees the first L - 3 + i tokens: changing the last token moves only the
    last query's output."""
    data = ragged_input([9], q_seq_len=4, seed=10)
    before = submission.custom_kernel(data)
    cache = data[1]["bf16"].clone()
    cache[-1] = -cache[-1]
    after = submission.custom_kernel(with_kv(data, kv_formats(cache)))
    assert torch.equal(before[:3], after[:3]) and not torch.equal(before[3], after[3])


# MXFP4 only in kv_data, so the route reads it; the rule is judged on the full formats.
MXFP4_LAYOUTS = {
    "trimmed_scales": lambda d: mxfp4_only(d),
    "padded_scales": lambda d: mxfp4_only(d),
    "uint8_spellings": lambda d: mxfp4_only(d, "uint8"),
    "scales_viewed_from_a_wider_tensor": lambda d: {"mxfp4": (d[1]["mxfp4"][0], widened_scales(d[1]["mxfp4"][1]))},
}


@pytest.mark.parametrize("layout", MXFP4_LAYOUTS)
def test_mxfp4_layouts_and_spellings(layout):
    padded = layout == "padded_scales"
    data = ragged_input([300, 64, 129], seed=11, ties="away" if padded else "even", padded=padded)
    if padded:  # rows to a multiple of 256, 24 columns, 0xFF (NaN) padding
        assert data[1]["mxfp4"][1].shape == (512, 24)
    mxfp4_data = with_kv(data, MXFP4_LAYOUTS[layout](data))
    out = submission.custom_kernel(mxfp4_data)
    assert format_read_by(submission.describe_route(mxfp4_data)) == "mxfp4"
    assert_correct(mxfp4_data, out, rule_data=data)


@pytest.mark.parametrize("only_fp8", [False, True])
def test_fp8_e4m3fnuz_kv(monkeypatch, only_fp8):
    """gfx942's fp8: the reference quantizes to e4m3fnuz too (its max is 240, not 448)."""
    monkeypatch.setattr(reference, "FP8_DTYPE", torch.float8_e4m3fnuz)
    data = ragged_input([40, 1, 70], seed=12)
    assert data[1]["fp8"][0].dtype == torch.float8_e4m3fnuz
    if only_fp8:
        data = with_kv(data, {"fp8": data[1]["fp8"]})
    out = submission.custom_kernel(data)
    assert format_read_by(submission.describe_route(data)) in (("fp8",) if only_fp8 else ("bf16", "fp8", "mxfp4"))
    assert_correct(data, out)


@pytest.mark.parametrize("name", MAGNITUDES)
def test_very_large_and_very_small_magnitudes(name):
    """Judged by exact attention, relative to the output's scale: the rule's atol of 0.1
    says nothing about outputs of 1e-18, and the a8w8 reference's own fp8 rounding misses
    its rule on peaked scores and large values (where it does, the verifier judges by exact
    attention alone rather than refusing every route)."""
    q_scale, kv_scale = MAGNITUDES[name]
    data = ragged_input([5, 40, 33], seed=13, q_scale=q_scale, kv_scale=kv_scale)
    assert_correct(data, submission.custom_kernel(data), rule_data=False)


@pytest.mark.parametrize("plan_first", [False, True], ids=["first_call", "after_a_plan"])
@pytest.mark.parametrize("name", NONFINITE)
def test_nan_and_inf_propagate_only_where_they_reach(name, plan_first):
    """NaN/Inf exactly where IEEE arithmetic puts them in exact attention, finite and right
    elsewhere. (The a8w8 reference turns the whole output NaN: its per-tensor scales carry
    one NaN everywhere.) A later finite call of the same shape is right again."""
    clean = ragged_input([5, 40, 33], seed=14)
    if plan_first:
        submission.custom_kernel(clean)
    where, value, dim = NONFINITE[name]
    data = with_nonfinite(clean, where, value, dim)
    out = submission.custom_kernel(data)
    assert not bool(torch.isfinite(out).all()), "the non-finite input vanished"
    assert_correct(data, out, rule_data=False, oracle=exact_attention_ieee)
    assert_correct(clean, submission.custom_kernel(clean))


# ------------------------------------------------------------------------------------
# 2b. A subset through the forced Triton routes, under the interpreter (subprocess:
#     TRITON_INTERPRET must be set before triton is imported)
# ------------------------------------------------------------------------------------
# Every Triton form forced (the Gluon forms run the same inputs in the gfx950 emulator,
# tools/gfx950_cases.py, and on a GPU bench/robustness_gpu.py --gluon-forms).
TRITON_ROUTES = tuple(f"triton_{form.kv_format}:{form.name}" for form in submission.KERNEL_FORMS
                      if form.language == "triton")
TRITON_CASES = ("ragged", "padded_scales", "uint8_spelling", "noncontiguous_q", "misaligned_after_aligned",
                "short_buffer", "single_token", "views", "empty_cache")


def test_odd_valid_inputs_through_every_triton_form_under_the_interpreter(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLA_")}
    env.update(NO_GPU_ENV, TRITON_INTERPRET="1")  # the interpreter runs on the CPU
    proc = subprocess.run(
        [sys.executable, "-m", "bench.robustness_gpu", "--smoke", "--forced-only", "--out", str(tmp_path),
         "--routes", ",".join(TRITON_ROUTES), "--cases", ",".join(TRITON_CASES)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "robustness_gpu.json").read_text())["rows"]
    status = {(r["route"], r["case"]): r["status"] for r in rows}
    if any(status.get((route, "*")) == "SKIP" for route in TRITON_ROUTES):
        pytest.skip("the Triton section of submission.py is not implemented")
    expected = {(route, case) for route in TRITON_ROUTES for case in TRITON_CASES
                if not (route.startswith("triton_fp8") and case in ("padded_scales", "uint8_spelling"))}
    # a form that reads rows as 4-byte words may refuse the misaligned views by name
    allowed = {key: {"PASS", "REFUSED"} if key[1] == "misaligned_after_aligned" else {"PASS"} for key in expected}
    bad = {key: status.get(key) for key in expected if status.get(key) not in allowed[key]}
    assert not bad, bad


# ------------------------------------------------------------------------------------
# 2c. On a GPU: bench/robustness_gpu.py's cases (memory flat over 1000 calls, 100
#     rechecks, ragged, magnitudes, NaN/Inf, MXFP4 layouts, non-contiguous Q, misaligned
#     addresses, fnuz) for the automatic route and for every route and kernel form that
#     can run here, forced and compiled, at its full sizes
# ------------------------------------------------------------------------------------
def routes_runnable_here() -> list[str]:
    routes = ["torch"] + [f"triton_{fmt}:{form}" for fmt in ("fp8", "mxfp4") for form in runnable_forms(fmt)]
    return routes + (["aiter_fp8"] if reference.HAVE_AITER else [])


@needs_gpu
def test_every_route_and_form_on_the_gpu_robustness_cases(tmp_path):
    """Every case of every route passes, or, for a forced route whose format is too lossy
    for an extreme input, is refused with an error naming the failed verification (never
    a wrong answer); nothing is skipped. The automatic route passes every case."""
    routes = routes_runnable_here()
    assert set(ROUTES) - {"aiter_fp8"} <= {route.split(":")[0] for route in routes}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLA_") and k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.robustness_gpu", "--out", str(tmp_path), "--routes", ",".join(routes)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    rows = json.loads((tmp_path / "robustness_gpu.json").read_text())["rows"]
    assert {row["route"] for row in rows} == {"auto", *routes}, proc.stdout[-3000:] + proc.stderr[-3000:]
    allowed = {route: {"PASS"} if route in ("auto", "torch") else {"PASS", "REFUSED"} for route in ["auto", *routes]}
    bad = [f"{r['route']} {r['case']}: {r['status']} {r['detail'][:200]}" for r in rows
           if r["status"] not in allowed[r["route"]]]
    assert not bad, "\n".join(bad)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# ------------------------------------------------------------------------------------
# 2d. bench/robustness_gpu.py --gluon-forms: each Gluon form forced against its route
#     unforced (host logic: the comparison, the summary, the refusal without a GPU)
# ------------------------------------------------------------------------------------
def _row(case, status, detail=""):
    return {"route": "r", "case": case, "status": status, "detail": detail, "seconds": 0.0}


@pytest.mark.fast
def test_a_forced_gluon_form_is_compared_with_its_route_unforced():
    from bench import robustness_gpu
    peaked = ("no route passed verification for batch=3: triton_fp8[form=gluon]: sequence relative RMS error "
              "0.13 > 0.1 (fp8 gluon bound; sequence 1)")
    forced = [_row("ragged", "PASS"), _row("magnitude/peaked", "REFUSED", peaked),
              _row("short_buffer", "FAIL", "max error 3"), _row("nonfinite/nan_q", "REFUSED", "no route passed"),
              _row("fnuz", "REFUSED", "reads torch.float8_e4m3fn bytes")]
    unforced = [_row("magnitude/peaked", "PASS"), _row("short_buffer", "PASS"), _row("nonfinite/nan_q", "PASS"),
                _row("fnuz", "PASS")]
    comparison = robustness_gpu.compare_forced(forced, unforced)
    assert [e["case"] for e in comparison["refused_by_bound"]] == ["magnitude/peaked"]
    assert [e["case"] for e in comparison["refused_by_design"]] == ["fnuz"]
    assert [e["case"] for e in comparison["short"]] == ["short_buffer", "nonfinite/nan_q"]
    line = robustness_gpu.summary_line("triton_fp8:gluon", forced, comparison,
                                       {"status": "NOT RUN", "why": "compute-sanitizer is not on PATH"})
    assert "magnitude/peaked: sequence relative RMS error 0.13 > 0.1" in line
    assert "refused by design (named): fnuz; short of the unforced route: short_buffer (FAIL), nonfinite/nan_q " \
           "(REFUSED)" in line
    assert line.endswith("memcheck not run: compute-sanitizer is not on PATH")
    # a case neither passes is the route's, not the form's
    both = robustness_gpu.compare_forced([_row("fnuz", "REFUSED")], [_row("fnuz", "REFUSED")])
    assert [e["case"] for e in both["also_unforced"]] == ["fnuz"] and not both["short"]


@cpu_only("the command refuses where no GPU is")
def test_the_gluon_forms_run_refuses_without_a_gpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLA_")}
    env.update(NO_GPU_ENV)
    proc = subprocess.run([sys.executable, "-m", "bench.robustness_gpu", "--out", str(tmp_path), "--gluon-forms"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no GPU here" in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "gluon_forms.json").exists()


@pytest.mark.fast
def test_the_memcheck_step_reads_the_sanitizer_summary(tmp_path):
    """What the --gluon-forms run makes of compute-sanitizer's last line and exit status,
    with a stand-in for the sanitizer (host logic: no GPU, no sanitizer needed)."""
    from bench import robustness_gpu
    stand_in = tmp_path / "compute-sanitizer"
    results = {}
    for errors, code in ((0, 0), (3, 99)):
        stand_in.write_text(f"#!/bin/sh\necho '========= ERROR SUMMARY: {errors} errors'\nexit {code}\n")
        stand_in.chmod(0o755)
        results[errors] = robustness_gpu.memcheck("triton_fp8:gluon", tmp_path / f"run{errors}", [str(stand_in)], 30)
        assert (tmp_path / f"run{errors}" / "memcheck.log").read_text().startswith("=========")
    assert results[0]["status"] == "CLEAN" and results[3]["status"] == "ERRORS" and results[3]["errors"] == 3
