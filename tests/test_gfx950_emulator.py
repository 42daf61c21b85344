"""The MI355X machine code, run on a CPU: every gfx950 specialization the autopick offers for
the 8 benchmark shapes (decode forms of both formats, the split combines, the aiter route's Q
quantizer and guards) runs in the emulator on a small case of the same specialization and
must pass its oracle with no memory, ordering or barrier report (tools/gfx950_cases.py;
the CI subset of `python3 -m tools.gfx950_emulate --quick`). Then deliberate slips in
submission.py (tools/mutants.py) that every other CPU test lets through, each caught here.

No AMD GPU runs any of this: compile for gfx950 on the CPU, emulate."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EMULATES_COMPILED_GFX950
from tools import gfx950_emu
from tools.mutants import write_mutant

ROOT = Path(__file__).resolve().parent.parent
pytestmark = EMULATES_COMPILED_GFX950


def _targets():
    if os.environ.get("TRITON_INTERPRET") == "1":
        return []
    from tools import gfx950_cases
    return gfx950_cases.offered_targets()


TARGETS = _targets()


# The fast tier runs the specialization offered first.
@pytest.mark.parametrize("target", [pytest.param(t, marks=pytest.mark.fast) if i == 0 else t for i, t in enumerate(TARGETS)],
                         ids=[f"{i:02d}-{t.label}" for i, t in enumerate(TARGETS)])
def test_offered_specialization_passes_in_the_emulator(target):
    from tools import gfx950_cases
    result = gfx950_cases.run_target(target, gfx950_cases.quick_case(target))
    assert result.passed, f"{target.label}, {result.case}: {result.detail}"


@pytest.mark.fast
def test_every_benchmark_shape_offers_both_formats_decodes_and_the_aiter_guards():
    # The list the emulator runs is the autopick's: all four decode kernel families and the
    # combine and guard kernels appear (a change that emptied it would pass the test above).
    names = {name for t in TARGETS for name in [t.kernels[t.call_index]]}
    assert {"_mla_decode_gluon_kernel", "_mla_decode_kernel", "_combine_splits_kernel", "_q_fp8_quantize_kernel",
            "_kv_lengths_check_kernel", "_kv_indptr_compare_kernel"} <= names, names
    forms = {match.groups() for t in TARGETS
             if (match := re.search(r"'KV_FORMAT': '(\w+)', 'FORM': '(\w+)', 'HW_CONVERT': (\w+)", t.label))}
    forms |= {(*match.groups(), "-") for t in TARGETS
              if (match := re.search(r"'KV_FORMAT': '(\w+)', 'FORM': '(gluon)'", t.label))}
    assert {("fp8", "gluon", "-"), ("fp8", "e4m3_waves", "False"), ("mxfp4", "gluon", "-"),
            ("mxfp4", "waves", "True")} <= forms, forms


# Slips of submission.py (tools/mutants.py) the other CPU tests miss: mutant -> (the
# specializations run, by label, and what the run must report).
MUTANTS = {
    # (also caught by tests/test_gfx950_inline_asm.py, which reads the template against LLVM)
    "convert_op_sel_1_2_swapped": ("'FORM': 'waves', 'HW_CONVERT': True, 'SPLIT': False", "sequence rms"),
    "gluon_ring_reads_the_stage_being_filled": ("'KV_FORMAT': 'fp8', 'FORM': 'gluon', 'SPLIT': False", "lds race"),
    "q_e8m0_scale_one_step_off": ("'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': False", "sequence rms"),
    "combine_released_by_one_thread_a_program": (
        "'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True, 'MERGE_SPLITS': 8",
        "stale global read"),
    "output_row_shifted_by_one": (
        "'KV_FORMAT': 'fp8', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True, 'MERGE_SPLITS': 2",
        "out of bounds"),
    # the Gluon forms' parallel merge (submission._gluon_merge_splits)
    # (at 2 splits the quick case's longest sequence fills both; at more, the last is empty)
    "parallel_merge_drops_the_last_split": (
        "'KV_FORMAT': 'fp8', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True, 'MERGE_SPLITS': 2",
        "sequence rms"),
    "parallel_merge_weight_written_again": (
        "'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True, 'MERGE_SPLITS': 4",
        "non-finite"),
    # (the loop merge is right, and only the round trips it waits through tell it apart)
    "gfx950_forms_merge_in_a_loop": ("'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True",
                                     "not merged in parallel"),
    "row_clamp_cut_by_one_row": ("'KV_FORMAT': 'fp8', 'FORM': 'gluon', 'SPLIT': False", "out of bounds"),
    # (the GPU's poison fences cannot see it: the row read past the buffer's end is an invalid
    # row's, whose scale bytes are not read and whose score is -inf; tests/test_memory_safety_gpu.py)
    "mxfp4_tile_bound_one_row_too_far": ("'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': False", "out of bounds"),
    "mxfp4_valid_rows_one_sided": ("'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': False", "sequence rms"),
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_a_slip_every_other_cpu_test_misses_fails_in_the_emulator(tmp_path, name):
    only, expected = MUTANTS[name]
    path = write_mutant(name, tmp_path / "mutant")
    run = subprocess.run([sys.executable, "-m", "tools.gfx950_emulate", "--quick", "--submission", str(path),
                          "--only", only], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "FAIL" in run.stdout and expected in run.stdout, run.stdout[-3000:]


def test_every_forms_in_kernel_combine_runs_right_in_the_emulator():
    """The arrival protocol of every form (submission._arrive, per-wave fences on gfx950),
    forced with its in-kernel combine, on the quick case: right, no stale read, one counter
    atomic a program (one lane), two in the program that merges; the merge recorded, and a
    form that merges in parallel (KernelForm.merge) within its round trips to memory."""
    from tools import gfx950_cases
    import submission as sub
    for target in gfx950_cases.forced_combine_targets():
        result = gfx950_cases.run_target(target, gfx950_cases.quick_case(target))
        assert result.passed, f"{target.label}: {result.detail}"
        kinds = {(kind["instructions"], tuple(kind["performed"])) for kind in result.atomics["kinds"]}
        assert kinds == {(1, (1,)), (2, (1, 1))}, (target.label, result.atomics)
        merge = result.measures["merge"]
        assert merge["programs"] == len(gfx950_cases.quick_case(target).lengths) and merge["instructions"] > 0, merge
        parallel = sub.kernel_form(target.offered.kv_format, target.offered.launch.form).merge == "parallel"
        assert (gfx950_cases.parallel_merge_round_trips(target) is not None) == parallel, target.label


def test_every_form_forced_on_an_mi355x_reads_in_the_emulator():
    # The forms the autopick does not offer on gfx950 (fp8 f16, MXFP4 bf16) are still
    # compiled there when forced (MLA_ROUTE=triton_fp8:f16): every instruction and modifier
    # of every form's gfx950 code must be one the emulator implements (reading a listing
    # compiles every instruction; an unknown one raises with its name).
    from tools import gfx950_cases
    import submission as sub
    machine = gfx950_emu.Machine(gfx950_emu.GlobalMemory())
    read = set()
    for kv_format, form, call in gfx950_cases.forced_form_calls():
        machine.compile(gfx950_cases.compile_for_gfx950(call).listing)
        read.add((kv_format, form))
    assert read == {(form.kv_format, form.name) for form in sub.KERNEL_FORMS if sub.form_runs_on(form, "gfx950")}


def test_a_listing_the_emulator_cannot_read_fails_by_name(monkeypatch):
    """Another Triton's code can hold a modifier the reader does not know (Triton 3.8's DPP
    row_half_mirror): the run fails naming it, as a FAIL row of the table, not a traceback."""
    from tools import gfx950_cases as cases
    unknown = "line 498: unknown modifier 'row_half_mirror' in 'v_mov_b32_dpp v33, v3 row_half_mirror'"

    def unreadable(calls, memory, machine):
        raise gfx950_emu.ListingError(unknown)
    monkeypatch.setattr(cases, "_check_specialization", lambda target, calls: None)
    monkeypatch.setattr(cases, "run_calls", unreadable)
    target = cases.Target(["k"], ("m", "k", ()), None, 0, "k")
    result = cases._run(target, cases.MIXED, [], lambda: (True, "unreached", {}))
    assert not result.passed and result.detail == f"stopped: {unknown}"
