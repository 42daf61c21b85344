"""The online softmax and the log-sum-exp merges (submission.py section 2.1): each rule is one
Triton JIT function that the Triton, Gluon and Hopper kernels all call; it is stated here in
Python, and every language's version is held to that statement, and the source holds no
second copy of it. (Q's e4m3 scale has its own file: tests/test_q_e4m3_scale.py.)

The rules, stated (log2 domain; a maximum is IEEE maxNum: a NaN operand is not the maximum):
- _subtracted_max(m) = 0 where m is -inf, else m: what a softmax step or a merge subtracts.
- _softmax_step(s, m_i, tile_max, AXIS): m_new = maxNum(m_i, tile_max), M = _subtracted_max(m_new),
  alpha = 2^(m_i - M), p = 2^(s - M) (M broadcast along AXIS); returns (p, alpha, m_new).
  So a head with nothing seen yet and an all-masked tile gets alpha = 0 and p = 0, never NaN;
  a NaN score's own p is NaN.
- _merge_weight(x, x_max) = 2^(x - _subtracted_max(x_max)).
- _normalized(acc, l) = acc / l per head, zeros where l = 0; _log2_sum_exp(m, l) = m + log2(l),
  -inf where l = 0.

Where each version runs:
- the Triton JIT function under the interpreter, in a worker process (CPU);
- the same function called from a Gluon kernel, compiled for gfx950 and run by the
  project's gfx950 emulator (Gluon does not run on a CPU; the Hopper kernels call it the same
  way and compile for sm_90 in tests/test_sm90_compile.py);
- both on a GPU where there is one.
The interpreter's tl.maximum propagates a NaN where compiled code takes maxNum: the cases
below whose answer depends on that (a tile of NaN scores only) are held to the rule on
compiled code alone; the output is NaN either way.
"""
import ast
import math
import os

import pytest
import torch
import triton
import triton.language as tl

import submission as sub
from conftest import DEVICE, EMULATES_COMPILED_GFX950, REPO_ROOT, needs_gpu
from interpreter_worker import InterpreterWorker

pytestmark = pytest.mark.fast

NEG = float("-inf")
NAN = float("nan")

# ------------------------------------------------------------------ the rules in Python


def subtracted_max(m: float) -> float:
    return 0.0 if m == NEG else m


def max_num(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)


def softmax_step(row: list, m_i: float, tile_max: float) -> tuple[list, float, float]:
    m_new = max_num(m_i, tile_max)
    m = subtracted_max(m_new)
    return [2.0 ** (x - m) for x in row], 2.0 ** (m_i - m), m_new


def merge_weight(x: float, x_max: float) -> float:
    return 2.0 ** (x - subtracted_max(x_max))


def normalized(acc: float, l: float) -> float:
    return acc / l if l > 0 else 0.0


def log2_sum_exp(m: float, l: float) -> float:
    return m + math.log2(l) if l > 0 else NEG


# ------------------------------------------------------------------ the cases
# Rows of scores (tokens), each with a running maximum before the tile. The tile's maximum
# is maxNum over the row, as the kernels reduce it.
T = 8
STEP_CASES = {
    "first tile": ([0.5, -1.0, 3.0, 2.5, NEG, NEG, 1.0, 0.0], NEG),
    "a later tile, smaller": ([0.5, -1.0, 0.25, 1.0, 0.0, -3.0, NEG, -0.5], 4.0),
    "a later tile, larger": ([7.0, 6.5, 5.0, 0.0, NEG, 6.0, 6.9, 1.0], 4.0),
    "nothing seen yet, all masked": ([NEG] * T, NEG),
    "seen before, all masked": ([NEG] * T, 2.0),
    "one NaN score": ([0.5, NAN, 3.0, 2.5, NEG, NEG, 1.0, 0.0], 1.0),
    "large values": ([120.0, 119.0, 100.0, 127.0, NEG, 126.5, 110.0, 125.0], 60.0),
}
COMPILED_ONLY = {"NaN scores only": ([NAN] * T, 1.0)}
MERGE_CASES = [(0.5, 2.0), (-3.0, 2.0), (NEG, 2.0), (NEG, NEG), (7.0, 7.0), (-100.0, 20.0)]
NORM_CASES = [(2.0, 4.0, 1.5), (-6.0, 3.0, 0.0), (0.0, 0.0, NEG), (5.0, 0.25, 12.0)]


def tile_max(row: list) -> float:
    found = [x for x in row if not math.isnan(x)]
    return max(found) if found else NAN


def step_inputs(cases: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows = torch.tensor([row for row, _ in cases.values()], dtype=torch.float32)
    m_i = torch.tensor([m for _, m in cases.values()], dtype=torch.float32)
    maxima = torch.tensor([tile_max(row) for row, _ in cases.values()], dtype=torch.float32)
    return rows, m_i, maxima


def assert_close(got: float, want: float, where) -> None:
    if math.isnan(want):
        assert math.isnan(got), (where, got, want)
    elif math.isinf(want):
        assert got == want, (where, got, want)
    else:
        assert got == pytest.approx(want, rel=2e-6, abs=1e-30), (where, got, want)


def assert_steps_follow_the_rule(cases: dict, p, alpha, m_new) -> None:
    for index, (name, (row, m_i)) in enumerate(cases.items()):
        want_p, want_alpha, want_m = softmax_step(row, m_i, tile_max(row))
        for token in range(T):
            assert_close(float(p[index, token]), want_p[token], (name, "p", token))
        assert_close(float(alpha[index]), want_alpha, (name, "alpha"))
        assert_close(float(m_new[index]), want_m, (name, "m_new"))


def test_the_statements_say_what_the_kernels_need():
    """An empty history and an all-masked tile give factors and probabilities of 0, not NaN;
    weights of empty parts are 0; a split with no row contributes zeros and weighs 0."""
    p, alpha, m_new = softmax_step([NEG] * T, NEG, NEG)
    assert p == [0.0] * T and alpha == 0.0 and m_new == NEG
    p, alpha, _ = softmax_step([NEG] * T, 2.0, NEG)
    assert p == [0.0] * T and alpha == 1.0
    assert merge_weight(NEG, NEG) == 0.0 and merge_weight(NEG, 3.0) == 0.0 and merge_weight(3.0, 3.0) == 1.0
    assert normalized(5.0, 0.0) == 0.0 and log2_sum_exp(1.0, 0.0) == NEG
    p, _, m_new = softmax_step([1.0, NAN], 0.0, 1.0)
    assert math.isnan(p[1]) and m_new == 1.0


# ------------------------------------------------------------------ the Triton version
@triton.jit
def rules_kernel(s_ptr, m_ptr, max_ptr, p_ptr, alpha_ptr, m_new_ptr, x_ptr, x_max_ptr, w_ptr,
                 acc_ptr, l_ptr, lm_ptr, o_ptr, lse_ptr, ROWS: tl.constexpr, T: tl.constexpr,
                 MERGES: tl.constexpr, NORMS: tl.constexpr, AXIS: tl.constexpr):
    # The softmax step with the tokens along AXIS (a tile laid [ROWS, T] or [T, ROWS]),
    # the merge weight, the normalization and the log2-sum-exp, each on its cases.
    rows = tl.arange(0, ROWS)
    tokens = tl.arange(0, T)
    if AXIS == 1:
        offsets = rows[:, None] * T + tokens[None, :]
    else:
        offsets = rows[None, :] * T + tokens[:, None]
    p, alpha, m_new = sub._softmax_step(tl.load(s_ptr + offsets), tl.load(m_ptr + rows), tl.load(max_ptr + rows), AXIS)
    tl.store(p_ptr + offsets, p)
    tl.store(alpha_ptr + rows, alpha)
    tl.store(m_new_ptr + rows, m_new)
    merges = tl.arange(0, MERGES)
    tl.store(w_ptr + merges, sub._merge_weight(tl.load(x_ptr + merges), tl.load(x_max_ptr + merges)))
    norms = tl.arange(0, NORMS)
    acc = tl.load(acc_ptr + norms[:, None] + tl.zeros([NORMS, 2], tl.int32))  # [heads, 2 columns]
    l_i = tl.load(l_ptr + norms)
    tl.store(o_ptr + norms[:, None] * 2 + tl.arange(0, 2)[None, :], sub._normalized(acc, l_i))
    tl.store(lse_ptr + norms, sub._log2_sum_exp(tl.load(lm_ptr + norms), l_i))


def _padded(values: list, n: int, fill: float = 0.0) -> torch.Tensor:
    return torch.tensor(values + [fill] * (n - len(values)), dtype=torch.float32)


def run_rules(kernel, device, cases: dict, axis: int, **constexprs) -> dict:
    """Every rule on its cases by `kernel`; the step's outputs in [case, token] order."""
    rows = triton.next_power_of_2(len(cases))
    s, m_i, maxima = step_inputs(cases)
    s = torch.cat([s, torch.zeros(rows - len(cases), T)])
    m_i, maxima = _padded(m_i.tolist(), rows), _padded(maxima.tolist(), rows)
    merges, norms = triton.next_power_of_2(len(MERGE_CASES)), triton.next_power_of_2(len(NORM_CASES))
    x, x_max = _padded([a for a, _ in MERGE_CASES], merges), _padded([b for _, b in MERGE_CASES], merges)
    acc, l_i, lm = (_padded([case[i] for case in NORM_CASES], norms, 1.0) for i in range(3))
    out = dict(p=torch.empty(rows, T), alpha=torch.empty(rows), m_new=torch.empty(rows), w=torch.empty(merges),
               o=torch.empty(norms, 2), lse=torch.empty(norms))
    args = [t.to(device) for t in (s, m_i, maxima)]
    outs = {name: t.to(device) for name, t in out.items()}
    kernel[(1,)](*args, outs["p"], outs["alpha"], outs["m_new"], x.to(device), x_max.to(device), outs["w"],
                 acc.to(device), l_i.to(device), lm.to(device), outs["o"], outs["lse"], ROWS=rows, T=T, MERGES=merges,
                 NORMS=norms, AXIS=axis, **constexprs)
    return {name: t.cpu() for name, t in outs.items()}


def assert_rules_followed(cases: dict, out: dict) -> None:
    assert_steps_follow_the_rule(cases, out["p"], out["alpha"], out["m_new"])
    for index, (x, x_max) in enumerate(MERGE_CASES):
        assert_close(float(out["w"][index]), merge_weight(x, x_max), ("merge", x, x_max))
    for index, (acc, l_i, m_i) in enumerate(NORM_CASES):
        assert_close(float(out["o"][index, 0]), normalized(acc, l_i), ("normalized", acc, l_i))
        assert_close(float(out["lse"][index]), log2_sum_exp(m_i, l_i), ("lse", m_i, l_i))


def _triton_rules_in_worker(axis: int) -> dict:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    return run_rules(rules_kernel, "cpu", STEP_CASES, axis)


_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


@pytest.mark.parametrize("axis", [1, 0])
def test_the_triton_version_follows_the_rules_under_the_interpreter(axis):
    assert_rules_followed(STEP_CASES, _worker.run(_triton_rules_in_worker, axis))


# ------------------------------------------------------------------ the Gluon calls
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except Exception:  # noqa: BLE001 - a Triton without Gluon: the Gluon tests skip, naming it
    gluon = None

if gluon is not None and sub.GLUON_AVAILABLE:
    @gluon.jit
    def gluon_rules_kernel(s_ptr, m_ptr, max_ptr, p_ptr, alpha_ptr, m_new_ptr, x_ptr, x_max_ptr, w_ptr,
                           acc_ptr, l_ptr, lm_ptr, o_ptr, lse_ptr, ROWS: gl.constexpr, T: gl.constexpr,
                           MERGES: gl.constexpr, NORMS: gl.constexpr, AXIS: gl.constexpr, LANES: gl.constexpr):
        # rules_kernel's calls from a Gluon kernel, the tile in a blocked layout.
        TILE: gl.constexpr = gl.BlockedLayout([1, 1], [LANES // 8, 8], [4, 1], [1, 0])
        rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, TILE) if AXIS == 1 else gl.SliceLayout(0, TILE))
        tokens = gl.arange(0, T, layout=gl.SliceLayout(0, TILE) if AXIS == 1 else gl.SliceLayout(1, TILE))
        if AXIS == 1:
            offsets = gl.expand_dims(rows, 1) * T + gl.expand_dims(tokens, 0)
        else:
            offsets = gl.expand_dims(rows, 0) * T + gl.expand_dims(tokens, 1)
        p, alpha, m_new = sub._softmax_step(gl.load(s_ptr + offsets), gl.load(m_ptr + rows), gl.load(max_ptr + rows),
                                            AXIS)
        gl.store(p_ptr + offsets, p)
        gl.store(alpha_ptr + rows, alpha)
        gl.store(m_new_ptr + rows, m_new)
        FLAT: gl.constexpr = gl.BlockedLayout([1], [LANES], [4], [0])
        merges = gl.arange(0, MERGES, layout=FLAT)
        gl.store(w_ptr + merges, sub._merge_weight(gl.load(x_ptr + merges), gl.load(x_max_ptr + merges)))
        PAIRS: gl.constexpr = gl.BlockedLayout([1, 2], [LANES, 1], [4, 1], [1, 0])
        norms = gl.arange(0, NORMS, layout=gl.SliceLayout(1, PAIRS))
        columns = gl.arange(0, 2, layout=gl.SliceLayout(0, PAIRS))
        acc = gl.load(acc_ptr + gl.expand_dims(norms, 1) + gl.expand_dims(columns, 0) * 0)
        l_i = gl.load(l_ptr + norms)
        gl.store(o_ptr + gl.expand_dims(norms, 1) * 2 + gl.expand_dims(columns, 0), sub._normalized(acc, l_i))
        gl.store(lse_ptr + norms, sub._log2_sum_exp(gl.load(lm_ptr + norms), l_i))
else:
    gluon_rules_kernel = None

needs_gluon = pytest.mark.skipif(gluon_rules_kernel is None, reason="needs a Triton whose Gluon builds the kernels "
                                 f"(here: {sub._GLUON_PROBLEMS['']})")
ALL_CASES = {**STEP_CASES, **COMPILED_ONLY}


@needs_gluon
@pytest.mark.parametrize("axis", [1, 0])
def test_the_rules_called_from_gluon_follow_them_compiled_for_gfx950_in_the_emulator(axis):
    """The Gluon kernel above, compiled for gfx950, in the emulator with its per-access checks."""
    from tools import gfx950_cases
    rows = triton.next_power_of_2(len(ALL_CASES))
    merges, norms = triton.next_power_of_2(len(MERGE_CASES)), triton.next_power_of_2(len(NORM_CASES))
    s, m_i, maxima = step_inputs(ALL_CASES)
    s = torch.cat([s, torch.zeros(rows - len(ALL_CASES), T)])
    m_i, maxima = _padded(m_i.tolist(), rows), _padded(maxima.tolist(), rows)
    x, x_max = _padded([a for a, _ in MERGE_CASES], merges), _padded([b for _, b in MERGE_CASES], merges)
    acc, l_i, lm = (_padded([case[i] for case in NORM_CASES], norms, 1.0) for i in range(3))
    out = dict(p=torch.empty(rows, T), alpha=torch.empty(rows), m_new=torch.empty(rows), w=torch.empty(merges),
               o=torch.empty(norms, 2), lse=torch.empty(norms))
    arguments = dict(s_ptr=s, m_ptr=m_i, max_ptr=maxima, p_ptr=out["p"], alpha_ptr=out["alpha"],
                     m_new_ptr=out["m_new"], x_ptr=x, x_max_ptr=x_max, w_ptr=out["w"], acc_ptr=acc, l_ptr=l_i,
                     lm_ptr=lm, o_ptr=out["o"], lse_ptr=out["lse"], ROWS=rows, T=T, MERGES=merges, NORMS=norms,
                     AXIS=axis, LANES=64)
    machine, _ = gfx950_cases.run_calls([sub.KernelCall(gluon_rules_kernel, (1,), arguments, dict(num_warps=4))])
    assert not machine.violations, machine.violations[:3]
    assert_rules_followed(ALL_CASES, out)


for _mark in EMULATES_COMPILED_GFX950:
    test_the_rules_called_from_gluon_follow_them_compiled_for_gfx950_in_the_emulator = _mark(
        test_the_rules_called_from_gluon_follow_them_compiled_for_gfx950_in_the_emulator)


@needs_gpu
@pytest.mark.parametrize("axis", [1, 0])
def test_both_versions_follow_the_rules_on_the_gpu(axis):
    assert_rules_followed(ALL_CASES, run_rules(rules_kernel, DEVICE, ALL_CASES, axis))
    arch = sub.device_arch(DEVICE)[1]
    if not sub.gluon_forms_here(arch):
        pytest.skip(f"the Gluon calls need a GPU with a Gluon ARCH (gfx950, NVIDIA sm_80+), not {arch.name}")
    assert_rules_followed(ALL_CASES, run_rules(gluon_rules_kernel, DEVICE, ALL_CASES, axis, LANES=arch.warp_size))


# ------------------------------------------------------------------ no second copy
def _submission_functions() -> dict:
    """submission.py's kernel functions (Triton or Gluon JIT) by name."""
    tree = ast.parse((REPO_ROOT / "submission.py").read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)
            and any(ast.unparse(d).startswith(("triton.jit", "gluon_jit")) for d in node.decorator_list)}


def _calls(node) -> set:
    return {call.func.id if isinstance(call.func, ast.Name) else call.func.attr
            for call in ast.walk(node) if isinstance(call, ast.Call)
            and isinstance(call.func, (ast.Name, ast.Attribute))}


def _compares_with_minus_inf(node) -> bool:
    for compare in (n for n in ast.walk(node) if isinstance(n, ast.Compare)):
        for side in [compare.left, *compare.comparators]:
            if ast.unparse(side) in ("float('-inf')", 'float("-inf")'):
                return True
    return False


# The functions that may call exp2: the rules themselves, and the loop merges (KernelForm.merge
# "loop": the Triton forms', and the Hopper forms' as measured on the H200), which subtract
# the rule's _subtracted_max once, before their loop over the splits: their sm_90 code is the
# one the H200 ran (bench/code_unchanged.py), and calling _merge_weight in the loop compiles to
# other sm_90 code (one more instruction in each Hopper kernel).
EXP2_WHERE = {"_softmax_step", "_merge_weight", "_combine_splits_in_program", "_gluon_combine_splits_in_program"}
# The other merges of the splits' partials weigh them by the rule, and the parallel merge
# (KernelForm.merge "parallel") also normalizes by it.
SPLIT_MERGES = {"_combine_splits_kernel", "_combine_splits_in_program", "_gluon_merge_splits",
                "_gluon_combine_splits_in_program"}
PARALLEL_MERGES = {"_gluon_merge_splits"}


def test_no_kernel_writes_a_rule_again():
    functions = _submission_functions()
    guards = sorted(name for name, node in functions.items() if _compares_with_minus_inf(node))
    assert guards == ["_subtracted_max"], f"a -inf guard outside the rule: {guards}"
    exp2_users = {name for name, node in functions.items() if "exp2" in _calls(node)}
    assert exp2_users == EXP2_WHERE, exp2_users ^ EXP2_WHERE
    for name in EXP2_WHERE - {"_softmax_step", "_merge_weight"}:
        assert "_subtracted_max" in _calls(functions[name]), name
    assert _calls(functions["_softmax_step"]) >= {"_subtracted_max"}
    for name in SPLIT_MERGES - EXP2_WHERE:
        assert "_merge_weight" in _calls(functions[name]), f"{name} weighs the splits without the rule"
    for name in PARALLEL_MERGES:
        assert "_normalized" in _calls(functions[name]), f"{name} normalizes without the rule"
        assert "where" not in _calls(functions[name]), f"{name} writes a guard of its own"
    q_scale_constants = sorted(name for name, node in functions.items()
                               if "261 - amax_exponent" in ast.unparse(node))
    assert q_scale_constants == ["_q_e4m3_scale"], q_scale_constants


def _reaches(functions: dict, start: str, target: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name == target:
            return True
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += _calls(functions[name])
    return False


def test_every_form_reaches_the_rules_it_uses():
    """Each form's online softmax is the rule's (every kernel reaches _softmax_step) and
    every form that multiplies Q in e4m3 scales it by _q_e4m3_scale."""
    functions = _submission_functions()
    attends = {"f16": "_attend_fp8_f16", "e4m3_waves": "_attend_fp8_e4m3_waves", "bf16": "_attend_mxfp4_bf16",
               "waves": "_attend_mxfp4_waves"}
    e4m3_q = {("fp8", "e4m3_waves"), ("fp8", "gluon"), ("mxfp4", "waves"), ("mxfp4", "gluon"),
              ("fp8", "hopper_two_term"), ("fp8", "hopper_one_term")}
    for form in sub.KERNEL_FORMS:
        start = attends.get(form.name, form.kernel.fn.__name__)
        if form.language == "gluon" and not form.gluon_arch:
            start = f"_gluon_attend_{form.kv_format}"
        assert _reaches(functions, start, "_softmax_step"), (form.kv_format, form.name)
        assert _reaches(functions, start, "_q_e4m3_scale") == ((form.kv_format, form.name) in e4m3_q), form.name
