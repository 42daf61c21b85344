"""Issue 22, item 1: under the Triton interpreter, no Triton kernel of submission.py loads,
stores or updates memory outside the view of the tensor argument each address came from.
tests/address_recorder.py says how every address is mapped back to its argument and
checked against that argument's view (data pointer plus strides over its shape, not its
storage); tools/mutants.py holds the deliberately wrong kernels it must catch.

Kernels and launches:
  - the decode kernel and the split combine: every launch candidate the autopick offers
    for the input's shape on an H200 (sm_90, 132 SMs) and on an MI355X (gfx950, 256 CUs;
    its hw_convert launches decode by bit operations here, as everywhere under the
    interpreter) and every forced form (MLA_ROUTE=triton_<format>:<form>) on both,
    through the route's own runner (KernelRunner). Launches that differ only in
    num_stages or waves_per_eu, compile options the interpreter ignores, run once;
  - the Q quantizer's two kernels (the a8w8 route's), default and small blocks;
  - the aiter route's guards, for both metadata variants: the length checks (per_call) and
    the kv_indptr comparisons with the plan's (cached), each fused into the quantizer's
    first launch for a8w8 and a launch of its own for a16w8, through the route's runners
    with the recording fake aiter (tools/fake_aiter.py). aiter's own kernels are not Triton and are not checked here.
Inputs:
  - odd lengths 1, 33 (a 32-row tile plus one), 129 (a 128-row tile plus one), 257 (on
    gfx950 two 128-row splits, the second of one row: a split boundary), with the fp8 and MXFP4
    buffers row-strided views inside larger tensors and the MXFP4 scales a view of a
    wider tensor;
  - on the same runners (a plan's, built from that valid input), the indptr values a GPU
    call does not recheck (custom_kernel rechecks them on the CPU only, so the runners
    are called directly, as a plan calls them on a GPU): kv_indptr with a sequence past
    the buffer's end, decreasing entries, a negative entry, with qo_indptr past total_q,
    negative and equal in the same call; kv_indptr all equal, past the end;
  - the robustness inputs (tests/test_robustness.py, bench/robustness_gpu.py --smoke)
    whose addresses differ: ragged lengths with empty sequences, every length 1, an
    empty cache, padded MXFP4 scales, every tensor one element off its alignment (the
    MXFP4 waves form refuses those rows by name, and that refusal is counted). Those
    that differ only in values (magnitudes, NaN / Inf) or dtype spelling (uint8 views,
    e4m3fnuz) are left out: no kernel here computes an address from a loaded value
    other than an indptr's.
Each test prints what it checked (launches per kernel, cases, addresses): run with -s.
"""
import collections
import dataclasses
import itertools
import os

import pytest
import torch

import submission as sub
from address_recorder import AddressCheck, AddressViolation
from conftest import interpreted_forms
from interpreter_worker import InterpreterWorker

# (architecture, SMs or CUs) whose autopick candidates are checked: the H200, the MI355X.
ARCHITECTURES = (("sm_90", 132), ("gfx950", 256))

_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


# ------------------------------------------------------------------ inputs (built in the worker)
def in_wider_rows(t, extra_columns: int, column_offset: int, rows_before: int = 2, rows_after: int = 3):
    """t's values (a 1-byte dtype, last dim contiguous) in a view inside a larger tensor:
    rows before and after it, columns on both sides, so its row stride is wider."""
    shape = (t.shape[0] + rows_before + rows_after, *t.shape[1:-1], t.shape[-1] + extra_columns)
    wide = torch.full(shape, 0x77, dtype=torch.uint8)
    view = wide[rows_before:rows_before + t.shape[0], ..., column_offset:column_offset + t.shape[-1]]
    view.copy_(t.view(torch.uint8))
    return view.view(t.dtype)


def odd_lengths_in_views(lengths, seed: int):
    """(q, kv_data, qo_indptr, kv_indptr, config) on the CPU, the fp8 buffer (row stride
    640 bytes) and the MXFP4 buffer (320) row-strided views inside larger tensors, the
    MXFP4 scales a view of a 40-column tensor (as test_robustness's widened)."""
    from tools.robustness import ragged_input
    q, kv_data, qo, kv_indptr, config = ragged_input(lengths, seed=seed, device="cpu")
    (fp8, fp8_scale), (fp4, scales) = kv_data["fp8"], kv_data["mxfp4"]
    kv_data = {"bf16": kv_data["bf16"], "fp8": (in_wider_rows(fp8, 64, 32), fp8_scale),
               "mxfp4": (in_wider_rows(fp4, 32, 16), in_wider_rows(scales, 40 - scales.shape[1], 3))}
    return q, kv_data, qo, kv_indptr, config


def unchecked_indptr_calls(data) -> dict:
    """The plan's valid call and calls with indptr values a GPU call does not recheck."""
    q, kv_data, qo, kv_indptr, _ = data
    total_kv, total_q, batch = kv_data["fp8"][0].shape[0], q.shape[0], qo.shape[0] - 1

    def ptr(values):
        return torch.tensor(values, dtype=torch.int32)
    assert batch == 4, "the indptr cases below are written for 4 sequences"
    return {
        "valid": (q, kv_data, qo, kv_indptr),
        # kv: a sequence past the end, decreasing, decreasing to a negative, from a negative;
        # qo: past the end, negative, equal
        "indptrs_unchecked": (q, kv_data, ptr([0, total_q + 4, -3, 2, 2]),
                              ptr([total_kv - 30, total_kv + 100, 12, -40, 7])),
        "kv_indptr_all_equal_past_the_end": (q, kv_data, qo, ptr([total_kv + 7] * 5)),
    }


def robustness_inputs() -> dict:
    """name -> data: the robustness inputs whose addresses differ (module docstring)."""
    from tools.robustness import ragged_input, shifted
    empty = ragged_input([1, 1], seed=1, device="cpu")
    (fp8, fp8_scale), (fp4, scales) = empty[1]["fp8"], empty[1]["mxfp4"]
    empty_cache = {"bf16": empty[1]["bf16"][:0], "fp8": (fp8[:0], fp8_scale), "mxfp4": (fp4[:0], scales[:0])}
    fresh = ragged_input([5, 40, 33], seed=19, device="cpu")
    moved = {name: shifted(value) if torch.is_tensor(value) else tuple(shifted(p) for p in value)
             for name, value in fresh[1].items()}
    return {
        "ragged": ragged_input([0, 1, 31, 65, 0, 40], seed=11, device="cpu"),
        "kv_length_1": ragged_input([1, 1, 1], seed=3, device="cpu"),
        "empty_cache": (empty[0], empty_cache, empty[2], torch.zeros(3, dtype=torch.int32), empty[4]),
        "padded_scales": ragged_input([5, 40, 33], seed=14, device="cpu", ties="away", padded=True),
        "misaligned": (shifted(fresh[0]), moved, shifted(fresh[2]), shifted(fresh[3]), fresh[4]),
    }


def offered_launches(kv_format: str, shape) -> list:
    """Every launch the autopick offers on each of ARCHITECTURES, unforced and forced to
    each form, once each (num_stages and waves_per_eu set aside: compile options)."""
    launches = {}
    for arch, units in ARCHITECTURES:
        for form in ("",) + interpreted_forms(kv_format):
            for launch in sub.launch_candidates(kv_format, shape.batch, shape.max_kv_len, units, arch, form):
                launches.setdefault(dataclasses.replace(launch, num_stages=1, waves_per_eu=0), launch)
    return list(launches.values())


# ------------------------------------------------------------------ what the worker runs
@dataclasses.dataclass
class Checked:
    launches: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    accesses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    cases: int = 0
    refused: list = dataclasses.field(default_factory=list)
    violations: list = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        return (f"{sum(self.launches.values())} launches checked ({dict(self.launches)}), {self.cases} cases "
                f"(input x launch), {sum(self.accesses.values())} addresses, {len(self.refused)} refused by name")

    def counted_by(self, check: AddressCheck) -> "Checked":
        """This record with the launches and addresses `check` saw (the worker's return)."""
        self.launches, self.accesses = check.launches, check.accesses
        return self


def _checked_without_violations(title: str, run_in_worker, *args) -> Checked:
    """Runs `run_in_worker` in the interpreter worker, prints its summary under `title` and
    fails on its first ten violations."""
    checked = _worker.run(run_in_worker, *args)
    print(f"\n[{title}] {checked.summary()}")
    assert not checked.violations, "\n\n".join(checked.violations[:10])
    return checked


def _run_decode_cases_in_worker(kv_format: str) -> Checked:
    from tools.robustness import ALIGNMENT_REFUSAL
    assert os.environ.get("TRITON_INTERPRET") == "1"
    checked, check = Checked(), AddressCheck()
    plans = {"odd_lengths_in_views": odd_lengths_in_views([1, 33, 129, 257], seed=7)}
    plans.update(robustness_inputs())
    with check.installed():
        for input_name, data in plans.items():
            calls = unchecked_indptr_calls(data) if input_name == "odd_lengths_in_views" else {"valid": data[:4]}
            shape = sub.CallShape.of(data)
            for launch in offered_launches(kv_format, shape):
                runner = sub.KernelRunner(shape, kv_format, launch)
                for call_name, args in calls.items():
                    checked.cases += 1
                    try:
                        runner(*args)
                    except AddressViolation as error:
                        checked.violations.append(f"{runner.label} on {input_name}/{call_name}: {error}")
                    except ValueError as error:
                        if not ALIGNMENT_REFUSAL.search(str(error)):
                            raise
                        checked.refused.append(f"{runner.label} on {input_name}/{call_name}")
    return checked.counted_by(check)


@pytest.mark.parametrize("kv_format", ["fp8", "mxfp4"])
def test_decode_and_combine_stay_inside_their_tensors(kv_format):
    checked = _checked_without_violations(kv_format, _run_decode_cases_in_worker, kv_format)
    assert checked.launches["_mla_decode_kernel"] > 0 and checked.launches["_combine_splits_kernel"] > 0
    # Only the MXFP4 waves form refuses rows that are not 4-byte aligned, and only there.
    assert all("form=waves" in r and r.endswith("misaligned/valid") for r in checked.refused), checked.refused


def _run_q_quantizer_in_worker() -> Checked:
    checked, check = Checked(), AddressCheck()
    gen = torch.Generator().manual_seed(3)
    # (rows, fp8 dtype, block, max_partials): one row and five at the default blocks (a
    # partial last block); small blocks, so that programs take several blocks and the
    # last runs past the end (masked); gfx942's e4m3fnuz.
    cases = [(1, torch.float8_e4m3fn, sub.Q_FP8_BLOCK, sub.Q_FP8_MAX_PARTIALS),
             (5, torch.float8_e4m3fn, sub.Q_FP8_BLOCK, sub.Q_FP8_MAX_PARTIALS),
             (5, torch.float8_e4m3fn, 1024, 8), (3, torch.float8_e4m3fnuz, 2048, 4)]
    with check.installed():
        for rows, fp8_dtype, block, max_partials in cases:
            q = torch.randn(rows, 16, 576, generator=gen).bfloat16()
            scratch = sub.make_q_fp8_scratch(q.shape, fp8_dtype, "cpu", block, max_partials)
            checked.cases += 1
            try:
                sub.quantize_q_fp8_into(q, scratch)
            except AddressViolation as error:
                checked.violations.append(f"{rows} rows, {fp8_dtype}, block {block}: {error}")
    return checked.counted_by(check)


def test_q_quantizer_stays_inside_its_tensors():
    checked = _checked_without_violations("q quantizer", _run_q_quantizer_in_worker)
    assert set(checked.launches) == {"_q_abs_max_partials_kernel", "_q_fp8_quantize_kernel"}


def _run_aiter_guards_in_worker() -> Checked:
    from tools.robustness import ragged_input
    from tools.fake_aiter import FakeAiter
    checked, check = Checked(), AddressCheck()
    data = ragged_input([256, 300, 260], seed=5, device="cpu")
    total_kv = data[1]["fp8"][0].shape[0]
    strided = torch.full((8,), 0x7F7F7F7F, dtype=torch.int32)
    strided[::2] = data[3]  # the valid kv_indptr as a view with stride 2 in a larger tensor
    kv_indptrs = {
        "valid": data[3], "strided_view": strided[::2],
        "a_short_sequence": torch.tensor([0, 256, 300, total_kv], dtype=torch.int32),
        "past_the_end": torch.tensor([0, 300, 556, total_kv + 50], dtype=torch.int32),
        "decreasing": torch.tensor([0, 600, 300, total_kv], dtype=torch.int32),
        "negative": torch.tensor([-5, 300, 556, total_kv], dtype=torch.int32),
        "all_equal": torch.tensor([total_kv] * 4, dtype=torch.int32),
    }
    saved = sub.aiter_ops, sub.KV_LENGTH_CHECK_BLOCK
    sub.aiter_ops = FakeAiter()
    try:
        with check.installed():
            # The check's block (sequences a step) as shipped, and 2: with 3 sequences its
            # loops then take two steps, the second masked past the last sequence.
            for check_block in (saved[1], 2):
                sub.KV_LENGTH_CHECK_BLOCK = check_block
                for variant, q_in_fp8 in itertools.product(sub.AITER_RUNNERS.values(), (True, False)):
                    runner = variant(sub.CallShape.of(data), data, q_in_fp8, 8)
                    for name, kv_indptr in kv_indptrs.items():
                        checked.cases += 1
                        try:
                            runner(data[0], data[1], data[2], kv_indptr)
                        except AddressViolation as error:
                            checked.violations.append(f"{runner.label} on {name}, block {check_block}: {error}")
    finally:
        sub.aiter_ops, sub.KV_LENGTH_CHECK_BLOCK = saved
    return checked.counted_by(check)


def test_aiter_guards_stay_inside_their_tensors():
    checked = _checked_without_violations("aiter guards: length checks and kv_indptr comparisons",
                                          _run_aiter_guards_in_worker)
    assert {"_q_abs_max_partials_checked_kernel", "_kv_lengths_check_kernel",  # metadata=per_call
            "_q_abs_max_partials_compared_kernel", "_kv_indptr_compare_kernel"} <= set(checked.launches)  # cached


# ------------------------------------------------------------------ the check can fail
def _copy_in_worker(extra_lanes: int, strided: bool):
    """A toy kernel that copies n elements and reads n + extra_lanes: (violation or None,
    what it copied)."""
    import triton
    import triton.language as tl

    @triton.jit
    def copy(src, dst, n, stride, EXTRA: tl.constexpr):
        offs = tl.arange(0, 16)
        values = tl.load(src + offs * stride, mask=offs < n + EXTRA)
        tl.store(dst + offs, values, mask=offs < n)

    source = torch.arange(48, dtype=torch.float32)
    # 10 elements: the start of a larger tensor, or every 4th element of its first 40
    src = source[:40:4] if strided else source[:10]
    dst = torch.zeros(10)
    with AddressCheck().installed():
        try:
            copy[(1,)](src, dst, 10, src.stride(0), extra_lanes)
        except AddressViolation as error:
            return str(error), dst
    return None, dst


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided_view"])
def test_the_check_fails_a_read_one_element_past_a_tensor_and_passes_it_masked(strided):
    """One lane past the end: the element it reads exists in the storage (the view is
    cut from a larger tensor) but is outside the view. Masked, the same kernel passes."""
    violation, _ = _worker.run(_copy_in_worker, 1, strided)
    assert violation is not None, "a read one element past the tensor went unseen"
    assert "load of 1 lane(s) of 4 bytes outside src" in violation, violation
    assert f"byte offsets {160 if strided else 40}" in violation, violation
    violation, copied = _worker.run(_copy_in_worker, 0, strided)
    assert violation is None, violation
    assert torch.equal(copied, torch.arange(0, 40, 4 if strided else 1, dtype=torch.float32)[:10])


def _mutant_in_worker(directory: str, mutation: str):
    """Each form's first launch of the submission with the mutant `mutation` (tools/mutants.py)
    applied, on two sequences, the second ending at the KV buffer's last row and writing
    the output's last row: form -> violation (or None)."""
    from tools.mutants import import_mutant
    mutant = import_mutant(mutation, directory, f"submission_{mutation}")
    data = odd_lengths_in_views([33, 40], seed=9)
    shape = mutant.CallShape.of(data)
    caught = {}
    with AddressCheck().installed():
        for kv_format in ("fp8", "mxfp4"):
            for form in interpreted_forms(kv_format):
                launch = mutant.launch_candidates(kv_format, shape.batch, shape.max_kv_len, 132, "sm_90",
                                                         form)[0]
                try:
                    mutant.KernelRunner(shape, kv_format, launch)(*data[:4])
                    caught[f"{kv_format}:{form}"] = None
                except AddressViolation as error:
                    caught[f"{kv_format}:{form}"] = str(error)
    return caught


# mutation -> what the violation must name: a load outside the KV buffer, a store outside the output
EXPECTED_VIOLATION = {"row_clamp_cut_by_one_row": "load of", "output_row_shifted_by_one": "store of"}
EXPECTED_TENSOR = {"row_clamp_cut_by_one_row": "outside kv_ptr", "output_row_shifted_by_one": "outside out_ptr"}


@pytest.mark.parametrize("mutation", EXPECTED_VIOLATION)
def test_the_check_fails_every_form_of_a_deliberately_wrong_kernel(tmp_path, mutation):
    """row_clamp_cut_by_one_row: tile rows past a split's end read one row past it;
    output_row_shifted_by_one: every output row is stored one row further on."""
    caught = _worker.run(_mutant_in_worker, str(tmp_path), mutation)
    assert set(caught) == {f"{fmt}:{form}" for fmt in ("fp8", "mxfp4") for form in interpreted_forms(fmt)}
    missed = [form for form, violation in caught.items() if violation is None]
    assert not missed, f"{mutation} went unseen in {missed}"
    for form, violation in caught.items():
        assert EXPECTED_VIOLATION[mutation] in violation and EXPECTED_TENSOR[mutation] in violation, (form, violation)
    print("\n" + "\n".join(f"[{mutation} {form}] {violation.splitlines()[1][:200]}"
                            for form, violation in caught.items()))
