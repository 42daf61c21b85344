"""The in-kernel combine's release on gfx950, read from the compiled code (CPU, compile
only): every wave's partial stores are retired before a release that counts them, and
every wave that reads the partials does so after its own acquire
(bench/combine_release.py defines the rules and why). On a GPU, every form runs the
in-kernel combine with an arrival a thread (gfx950's count) and with one a program
(NVIDIA's), against the separate combine kernel.

One subprocess (Triton decides interpret-or-compile when a kernel is decorated, so
TRITON_INTERPRET is unset there) compiles every in-kernel-combine specialization offered
on gfx950 into an empty Triton cache and checks its AMDGCN; two more check deliberately
wrong copies of submission.py (tools/mutants.py): the count taken by one thread
after a barrier (NVIDIA's count, on gfx950), and the merging program's acquire dropped.
The checker's own rules are tested first on small hand-written listings.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import submission
from bench import combine_release
from conftest import DEVICE, needs_gpu, pinned_triton_codegen, runnable_forms
from tools.mutants import write_mutant

ROOT = Path(__file__).resolve().parent.parent

PINNED_TRITON = re.search(r"^triton==(\S+)$", (ROOT / "tools" / "torch-triton-pins.txt").read_text(), re.M).group(1)


# --- the rules, on small listings ---------------------------------------------------------
# One thread releases for the program after a barrier (NVIDIA's count: on gfx950 it misses other waves' stores).
ONE_THREAD_RELEASES = """kernel:
\tglobal_store_dwordx4 v1, v[2:5], s[4:5]
{between}\ts_barrier
\tv_cmp_eq_u32_e32 vcc, 0, v0
\ts_and_saveexec_b64 s[2:3], vcc
\ts_cbranch_execz .LBB0_2
\tbuffer_wbl2 sc1
\ts_waitcnt vmcnt(0)
\tglobal_atomic_add v1, v1, v2, s[4:5] sc0
\ts_waitcnt vmcnt(0)
\tbuffer_inv sc1
.LBB0_2:
\ts_or_b64 exec, exec, s[2:3]
\tds_write_b32 v1, v1
\ts_barrier
\tds_read_b32 v1, v1
\tglobal_load_dword v3, v1, s[4:5]
\ts_endpgm
"""
# The first active lane of exec, as the AMDGPU atomic optimizer selects it.
FIRST_LANE = """\ts_mov_b64 s[6:7], exec
\tv_mbcnt_lo_u32_b32 v0, s6, 0
\tv_mbcnt_hi_u32_b32 v0, s7, v0
\tv_cmp_eq_u32_e32 vcc, 0, v0
"""
# Every wave releases its own stores, the merging program's waves each acquire.
EACH_WAVE_RELEASES = """kernel:
\tglobal_store_dwordx4 v1, v[2:5], s[4:5]
{lane}\ts_and_saveexec_b64 s[2:3], vcc
\ts_cbranch_execz .LBB0_2
\tbuffer_wbl2 sc1
\ts_waitcnt vmcnt(0)
\tglobal_atomic_add v1, v1, v2, s[4:5] sc0
.LBB0_2:
\ts_or_b64 exec, exec, s[2:3]
\ts_waitcnt vmcnt(0)
\tds_write_b32 v1, v1
\ts_barrier
\tds_read_b32 v1, v1
{lane}\ts_and_saveexec_b64 s[2:3], vcc
\ts_cbranch_execz .LBB0_4
\tglobal_atomic_add v1, v1, v2, s[4:5] sc0
\ts_waitcnt vmcnt(0)
\tbuffer_inv sc1
.LBB0_4:
\ts_or_b64 exec, exec, s[2:3]
\tglobal_load_dword v3, v1, s[4:5]
\ts_endpgm
"""


def kinds(asm: str) -> dict:
    return {kind: len(places) for kind, places in combine_release.check(asm)["findings"].items()}


def test_one_thread_releasing_after_a_barrier_is_found():
    # the other waves pass the barrier with their store in flight and skip the release;
    # they read after the broadcast with no acquire of their own
    assert kinds(ONE_THREAD_RELEASES.format(between="")) == {"outstanding-at-barrier": 1, "read-before-acquire": 1}


def test_vmcnt_counts_in_issue_order():
    # one load after the store: vmcnt(1) retires the store, vmcnt(2) does not
    load = "\tglobal_load_dword v9, v1, s[4:5]\n"
    assert kinds(ONE_THREAD_RELEASES.format(between=load + "\ts_waitcnt vmcnt(1)\n")) == {"read-before-acquire": 1}
    assert kinds(ONE_THREAD_RELEASES.format(between=load + "\ts_waitcnt vmcnt(2)\n")) == {
        "outstanding-at-barrier": 1, "read-before-acquire": 1}


def test_each_wave_releasing_and_acquiring_passes():
    assert kinds(EACH_WAVE_RELEASES.format(lane=FIRST_LANE)) == {}


def test_a_branch_a_wave_may_skip_releases_nothing():
    # without the first-lane selection the mask may be empty: the wave may skip its
    # release (stores never released) and its acquire
    assert kinds(EACH_WAVE_RELEASES.format(lane="\tv_cmp_eq_u32_e32 vcc, 0, v0\n")) == {
        "never-released": 1, "read-before-acquire": 1}


def test_each_thread_arrives_on_amd_one_thread_on_nvidia():
    # what the counter counts: every thread on gfx950 (and where the GPU is not known), one
    # a program on NVIDIA; nothing without the in-kernel combine
    for arch, each in (("gfx950", True), ("", True), ("sm_90", False)):
        for kv_format in ("fp8", "mxfp4"):
            launches = [launch for launch in submission.triton_launch_candidates(kv_format, 4, 8192, 256, arch)
                        if launch.combine_in_kernel]
            assert launches, (arch, kv_format)
            for launch in launches:
                assert launch.each_thread_releases == each
                assert submission._combine_arrivals(launch) == (launch.num_warps * 64 if each else 1)
                plain = submission.dataclasses.replace(launch, combine_in_kernel=False)
                assert submission._combine_arrivals(plain) == 0


# --- the compiled kernels -----------------------------------------------------------------
def _check_compiled(tmp_path: Path, submission_file: Path | None = None, forms: str = "") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    command = [sys.executable, "-m", "bench.combine_release", "--json"]
    command += ["--submission", str(submission_file)] if submission_file else []
    command += ["--forms", forms] if forms else []
    proc = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def _gluon_or_skip(report: dict) -> list:
    """The Gluon specializations, or a skip naming the Triton version where they do not exist
    or (on a Triton other than the pinned one) do not compile."""
    entries = [e for e in report["specializations"] if e["language"] == "gluon"]
    if not report["gluon_available"] or not entries:
        pytest.skip(f"Triton {report['triton']}: no Gluon form is offered on gfx950 (Gluon does not import "
                    "or offers no form)")
    failed = [e for e in entries if "compile_error" in e]
    if failed and report["triton"] != PINNED_TRITON:
        pytest.skip(f"Triton {report['triton']}: the Gluon kernels do not compile for gfx950 "
                    f"({failed[0]['compile_error']}); pinned {PINNED_TRITON}")
    return entries


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return _check_compiled(tmp_path_factory.mktemp("combine_release"))


def _assert_released_and_acquired(entries: list) -> None:
    for entry in entries:
        assert "compile_error" not in entry, entry
        assert entry["partial_stores"] and entry["releases"] and entry["merge_reads"], entry
        assert entry["findings"] == {}, (entry["name"], entry["findings"])
        # one arrival a thread: no lane of a release is masked off, so each wave's own
        # release is one the merge waits for (the checker takes it so)
        assert entry["constexprs"]["ARRIVALS"] == 64 * entry["num_warps"], entry


def test_every_triton_combine_specialization_releases_each_wave(compiled):
    entries = [e for e in compiled["specializations"] if e["language"] == "triton"]
    # every Triton form of both formats is offered (forced, or leading where Gluon does not import)
    assert {(e["constexprs"]["KV_FORMAT"], e["constexprs"]["FORM"], e["constexprs"]["HW_CONVERT"])
            for e in entries} == {("fp8", "f16", False), ("fp8", "e4m3_waves", False), ("mxfp4", "bf16", False),
                                  ("mxfp4", "waves", True)}
    _assert_released_and_acquired(entries)


def test_every_gluon_combine_specialization_releases_each_wave(compiled):
    entries = _gluon_or_skip(compiled)
    assert {(e["constexprs"]["KV_FORMAT"], e["constexprs"]["FORM"]) for e in entries} == {("fp8", "gluon"),
                                                                                         ("mxfp4", "gluon")}
    _assert_released_and_acquired(entries)


@pinned_triton_codegen("the one-thread-count mutant caught in the Triton form's gfx950 code (under 3.8 and 3.9 "
                       "the check finds no unacquired read in it: not settled whether that code is ordered)")
def test_the_count_by_one_thread_is_caught(tmp_path):
    report = _check_compiled(tmp_path, write_mutant("combine_counted_by_one_thread", tmp_path / "one_thread"),
                             "fp8:gluon,fp8:e4m3_waves")
    by_language = {e["language"]: e for e in report["specializations"]}
    triton_entry = by_language["triton"]
    # the Triton form's buffer atomic runs in every wave, its lanes masked by offset: the
    # arrivals tell it apart; its merge then runs in lane 0 of wave 0 alone, unacquired
    assert triton_entry["constexprs"]["ARRIVALS"] == 1 and "read-before-acquire" in triton_entry["findings"]
    # the Gluon form's atomic is one thread's, in a branch the other waves skip
    gluon_entry = by_language.get("gluon")
    if report["triton"] == PINNED_TRITON:
        assert gluon_entry and "compile_error" not in gluon_entry, report
    if gluon_entry and "compile_error" not in gluon_entry:
        assert {"outstanding-at-barrier", "read-before-acquire"} <= set(gluon_entry["findings"]), gluon_entry


def test_a_dropped_acquire_is_caught(tmp_path):
    report = _check_compiled(tmp_path, write_mutant("combine_acquire_dropped", tmp_path / "no_acquire"),
                             "fp8:gluon,fp8:e4m3_waves")
    entries = [e for e in report["specializations"] if "compile_error" not in e]
    assert any(e["language"] == "triton" for e in entries)
    for entry in entries:
        assert set(entry["findings"]) == {"read-before-acquire"}, entry


# --- on the GPU under test ----------------------------------------------------------------
@needs_gpu
@pytest.mark.parametrize("kv_format", ["fp8", "mxfp4"])
def test_every_form_merges_in_kernel_with_either_count(kv_format):
    """Ragged lengths with an empty sequence, 4 splits: each form's in-kernel combine, its
    counter counting every thread (gfx950's) and one a program (NVIDIA's), gives the
    separate combine kernel's output, every row written, and leaves the counters at zero."""
    from test_triton_kernels import make_fp8, make_indptr, make_mxfp4
    arch = submission._device_sms_and_arch(DEVICE)[1]
    gen = torch.Generator().manual_seed(28)
    lengths = [700, 3, 0, 129]
    qo, kv_indptr = make_indptr(lengths)
    rows = int(kv_indptr[-1])
    if kv_format == "fp8":
        buf, scale, _ = make_fp8(rows, gen)
        decode = submission.triton_fp8_decode
    else:
        buf, scale = make_mxfp4(rows, 122, 130, gen=gen)
        decode = submission.triton_mxfp4_decode
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    operands = [t.to(DEVICE) for t in (q, buf, scale, qo, kv_indptr)]

    def run(launch):
        out = torch.full((len(lengths), 16, 512), float("nan"), dtype=torch.bfloat16, device=DEVICE)
        scratch = submission.make_triton_scratch(len(lengths), launch, DEVICE)
        decode(*operands, 576 ** -0.5, out, scratch, launch)
        assert (scratch.counters == 0).all(), (launch, "the counters must be reset for the next call")
        return out.float().cpu()

    for form in runnable_forms(kv_format):
        record = submission.kernel_form(kv_format, form)
        base = submission._launch(4, record.tiles[0], record, arch)
        separate = run(base)
        assert torch.isfinite(separate).all()
        for each_thread in (True, False):
            launch = submission.dataclasses.replace(base, combine_in_kernel=True, each_thread_releases=each_thread)
            torch.testing.assert_close(run(launch), separate, atol=1e-3, rtol=1e-2, msg=lambda m: f"{launch}: {m}")
