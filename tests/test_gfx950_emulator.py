"""The MI355X machine code, run on a CPU: every gfx950 specialization the autopick offers for
the 8 benchmark shapes (decode forms of both formats, the split combines, the aiter route's Q
quantizer and guards) runs in the emulator on a small case of the same specialization and
must pass its oracle with no memory, ordering or barrier report (tools/gfx950_emu/cases.py;
the CI subset of `python3 tools/gfx950_emulate.py --quick`). Then deliberate slips in
submission.py that every other CPU test lets through, each caught here.

No AMD GPU runs any of this: compile for gfx950 on the CPU, emulate."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EMULATED_PINNED_CODE, pinned_triton_codegen

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.gfx950_emulator,
              pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                                 reason="compiles kernels for gfx950: needs TRITON_INTERPRET unset"),
              pinned_triton_codegen(EMULATED_PINNED_CODE)]


def _targets():
    if os.environ.get("TRITON_INTERPRET") == "1":
        return []
    from conftest import gfx950_emulator
    gfx950_emulator()
    from gfx950_emu import cases
    return cases.offered_targets()


TARGETS = _targets()


@pytest.mark.parametrize("target", TARGETS, ids=[f"{i:02d}-{t.label}" for i, t in enumerate(TARGETS)])
def test_offered_specialization_passes_in_the_emulator(target):
    from gfx950_emu import cases
    result = cases.run_target(target, cases.quick_case(target))
    assert result.passed, f"{target.label}, {result.case}: {result.detail}"


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


# ---- mutants: (name, [(original, mutated, count)], --only filter, text the run must report) ----
MUTANTS = {
    # (also caught by tests/test_gfx950_inline_asm.py, which reads the template against LLVM;
    # the interpreter's tests run the bit-operation decode instead and miss it)
    "the convert's text (the Triton wave form's, run here) with op_sel of bytes 1 and 2 swapped": (
        [('"v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[1,0,0]\\n"\n'
          '                                 "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]\\n"',
          '"v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[0,1,0]\\n"\n'
          '                                 "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[1,0,0]\\n"', 1)],
        "'FORM': 'waves', 'HW_CONVERT': True, 'SPLIT': False", "sequence rms"),
    "the Gluon ring's read takes the stage still being filled": (
        [("        k_nope = nope_ring.index(tile % STAGES)\n",
          "        k_nope = nope_ring.index(ahead)\n", 1),
         ("        s = _gluon_scores(q_nope, q_rope, k_nope, rope_ring.index(tile % STAGES), ARCH",
          "        s = _gluon_scores(q_nope, q_rope, k_nope, rope_ring.index(ahead), ARCH", 1)],
        "'KV_FORMAT': 'fp8', 'FORM': 'gluon', 'SPLIT': False", "lds race"),
    "Q's e8m0 block scale for mfma_scaled one step off": (
        [("inverse = gl.expand_dims(_gluon_e8m0_of(q_inverse), 1)",
          "inverse = gl.expand_dims(_gluon_e8m0_of(q_inverse) + 1, 1)", 1)],
        "'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': False", "sequence rms"),
    "the in-kernel combine's release by one thread for its program (the scheme before the fix)": (
        [("each_thread_releases=not arch.startswith(\"sm_\"))", "each_thread_releases=False)", 1)],
        "'KV_FORMAT': 'mxfp4', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True", "stale global read"),
    "the in-kernel merge's output row shifted by one": (
        [("                _gluon_store_rows(out_ptr, q_row, stride_o_tok, stride_o_head, merged)",
          "                _gluon_store_rows(out_ptr, q_row + 1, stride_o_tok, stride_o_head, merged)", 1)],
        "'KV_FORMAT': 'fp8', 'FORM': 'gluon', 'SPLIT': True, 'COMBINE_IN_KERNEL': True", "out of bounds"),
}


def mutant_submission(tmp_path, mutations) -> Path:
    text = (ROOT / "submission.py").read_text()
    for original, mutated, count in mutations:
        assert text.count(original) == count, f"mutation target found {text.count(original)} times: {original!r}"
        text = text.replace(original, mutated)
    folder = tmp_path / "mutant"
    folder.mkdir()
    (folder / "submission.py").write_text(text)
    return folder / "submission.py"


@pytest.mark.parametrize("name", list(MUTANTS))
def test_a_slip_every_other_cpu_test_misses_fails_in_the_emulator(tmp_path, name):
    mutations, only, expected = MUTANTS[name]
    path = mutant_submission(tmp_path, mutations)
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "gfx950_emulate.py"), "--quick", "--submission",
                          str(path), "--only", only], capture_output=True, text=True, timeout=900,
                         env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "FAIL" in run.stdout and expected in run.stdout, run.stdout[-3000:]


def test_every_form_forced_on_an_mi355x_reads_in_the_emulator():
    # The forms the autopick does not offer on gfx950 (fp8 f16, MXFP4 bf16) are still
    # compiled there when forced (MLA_ROUTE=triton_fp8:f16): every instruction and modifier
    # of every form's gfx950 code must be one the emulator implements (reading a listing
    # compiles every instruction; an unknown one raises with its name).
    from conftest import gfx950_emulator
    emu = gfx950_emulator()
    from gfx950_emu import cases
    import submission as sub
    machine = emu.Machine(emu.GlobalMemory())
    read = set()
    for kv_format, form, call in cases.forced_form_calls():
        machine.compile(emu.compile_for_gfx950(call).listing)
        read.add((kv_format, form))
    assert read == {(form.kv_format, form.name) for form in sub.KERNEL_FORMS}


def test_a_listing_the_emulator_cannot_read_fails_by_name(monkeypatch):
    """Another Triton's code can hold a modifier the reader does not know (Triton 3.8's DPP
    row_half_mirror): the run fails naming it, as a FAIL row of the table, not a traceback."""
    from gfx950_emu import cases, listing
    unknown = "line 498: unknown modifier 'row_half_mirror' in 'v_mov_b32_dpp v33, v3 row_half_mirror'"

    def unreadable(calls, memory, machine):
        raise listing.ListingError(unknown)
    monkeypatch.setattr(cases, "_check_specialization", lambda target, calls: None)
    monkeypatch.setattr(cases, "run_calls", unreadable)
    target = cases.Target(["k"], ("m", "k", ()), None, 0, "k")
    result = cases._run(target, cases.MIXED, [], lambda: (True, "unreached"))
    assert not result.passed and result.detail == f"stopped: {unknown}"
