"""The in-kernel combine's release on gfx950, read from the compiled code (CPU, compile
only): every wave's partial stores are retired before a release that counts them, and
every wave that reads the partials does so after its own acquire
(bench/combine_release.py defines the rules and why). On a GPU, every form runs the
in-kernel combine with its device's arrival protocol (submission._arrive), against the
separate combine kernel.

One subprocess (Triton decides interpret-or-compile when a kernel is decorated, so
TRITON_INTERPRET is unset there) compiles every in-kernel-combine specialization offered
on gfx950 into an empty Triton cache and checks its AMDGCN; two more check deliberately
wrong copies of submission.py (tools/mutants.py): the per-wave fences dropped (NVIDIA's
protocol, on gfx950), and the merging program's per-wave acquire dropped. The checker's
own rules are tested first on small hand-written listings.
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
# One thread releases for the program after a barrier (NVIDIA's count: on gfx950 it misses
# other waves' stores); {acquire}: what each wave runs before it reads the other partials.
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
{acquire}\tglobal_load_dword v3, v1, s[4:5]
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


# gfx950's protocol (submission._arrive): every wave fences its own stores (the agent-scope
# release as LLVM emits it, written as inline assembly: its 2nd line unindented as the
# printer leaves it) before the barrier; thread 0 alone arrives; after the count is shared,
# every wave acquires for itself. An earlier barrier passed with a store in flight is no
# finding when the store is retired before the barrier the arrival follows. The listing is
# the one-thread one with a barrier and the waves' {fence} before the arrival's barrier.
WAVE_FENCES = ONE_THREAD_RELEASES.replace("{between}", "\ts_barrier\n{fence}")
RELEASE_FENCE = "\t;;#ASMSTART\n\tbuffer_wbl2 sc1\ns_waitcnt vmcnt(0) lgkmcnt(0)\n\t;;#ASMEND\n"
ACQUIRE_FENCE = "\t;;#ASMSTART\n\tbuffer_inv sc1\n\t;;#ASMEND\n"


def kinds(asm: str) -> dict:
    return {kind: len(places) for kind, places in combine_release.check(asm)["findings"].items()}


def test_one_thread_releasing_after_a_barrier_is_found():
    # the other waves pass the barrier with their store in flight and skip the release;
    # they read after the broadcast with no acquire of their own
    assert kinds(ONE_THREAD_RELEASES.format(between="", acquire="")) == {
        "outstanding-at-barrier": 1, "read-before-acquire": 1}


def test_vmcnt_counts_in_issue_order():
    # one load after the store: vmcnt(1) retires the store, vmcnt(2) does not
    load = "\tglobal_load_dword v9, v1, s[4:5]\n"
    assert kinds(ONE_THREAD_RELEASES.format(between=load + "\ts_waitcnt vmcnt(1)\n", acquire="")) == {
        "read-before-acquire": 1}
    assert kinds(ONE_THREAD_RELEASES.format(between=load + "\ts_waitcnt vmcnt(2)\n", acquire="")) == {
        "outstanding-at-barrier": 1, "read-before-acquire": 1}


def test_each_wave_releasing_and_acquiring_passes():
    assert kinds(EACH_WAVE_RELEASES.format(lane=FIRST_LANE)) == {}


def test_a_branch_a_wave_may_skip_releases_nothing():
    # without the first-lane selection the mask may be empty: the wave may skip its
    # release (stores never released) and its acquire
    assert kinds(EACH_WAVE_RELEASES.format(lane="\tv_cmp_eq_u32_e32 vcc, 0, v0\n")) == {
        "never-released": 1, "read-before-acquire": 1}


def test_per_wave_fences_and_one_arrival_pass():
    assert kinds(WAVE_FENCES.format(fence=RELEASE_FENCE, acquire=ACQUIRE_FENCE)) == {}


def test_one_arrival_without_the_wave_fences_is_found():
    assert kinds(WAVE_FENCES.format(fence="", acquire=ACQUIRE_FENCE)) == {"outstanding-at-barrier": 1}
    assert kinds(WAVE_FENCES.format(fence=RELEASE_FENCE, acquire="")) == {"read-before-acquire": 1}


def test_each_wave_fences_on_gfx950_none_on_nvidia():
    # gfx942 / gfx950: every wave fences around one arrival a program; NVIDIA and the
    # interpreter (no architecture): the arrival after a barrier alone; another AMD GPU:
    # no in-kernel combine (the fences are written for the GFX942 memory model)
    for arch, fences in (("gfx950", True), ("gfx942", True), ("", False), ("sm_90", False), ("gfx90a", None)):
        for kv_format in ("fp8", "mxfp4"):
            launches = [launch for launch in submission.launch_candidates(kv_format, 4, 8192, 256, arch)
                        if launch.combine_in_kernel]
            assert bool(launches) == (fences is not None), (arch, kv_format)
            for launch in launches:
                assert launch.each_wave_fences == fences
                # (under the interpreter no fence: it runs no assembly)
                expected = launch.num_warps * 64 if fences and not submission._INTERPRETED else 0
                assert submission._wave_fence_threads(launch) == expected
                plain = submission.dataclasses.replace(launch, combine_in_kernel=False)
                assert submission._wave_fence_threads(plain) == 0


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
        # every wave of the program fences (the checker sees one arrival, thread 0's)
        assert entry["constexprs"]["WAVE_FENCE_THREADS"] == 64 * entry["num_warps"], entry


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


@pinned_triton_codegen("the fence-less mutant caught in the forms' gfx950 code (other Triton lines compile the "
                       "combine differently: results/2026-12-02-cpu-triton-versions)")
def test_the_arrival_without_the_wave_fences_is_caught(tmp_path):
    """NVIDIA's protocol on gfx950 (tools/mutants.py): thread 0 arrives after the barrier
    with the other waves' partial stores possibly in flight, and only its wave acquires."""
    report = _check_compiled(tmp_path, write_mutant("combine_released_by_one_thread_a_program", tmp_path / "no_fences"),
                             "fp8:gluon,fp8:e4m3_waves")
    by_language = {e["language"]: e for e in report["specializations"]}
    if report["triton"] == PINNED_TRITON:
        assert set(by_language) == {"triton", "gluon"} and "compile_error" not in by_language["gluon"], report
    for entry in by_language.values():
        if "compile_error" not in entry:
            assert entry["constexprs"]["WAVE_FENCE_THREADS"] == 0, entry
            assert {"outstanding-at-barrier", "read-before-acquire"} <= set(entry["findings"]), entry


# Deliberately wrong arrivals (tools/mutants.py), each with the one finding it must give:
# the per-wave release fence without its s_waitcnt vmcnt(0) (a wave's partial stores may
# still be in flight at the barrier thread 0's arrival follows; the gfx950 emulator runs
# workgroups one after another, so a write-back that completes after the arrival still
# precedes the merging program there: this check is the one that sees it), and the
# merging waves' acquire dropped.
WRONG_ARRIVALS = {"wave_fence_without_its_store_wait": "outstanding-at-barrier",
                  "combine_acquire_dropped": "read-before-acquire"}


@pytest.mark.parametrize("mutant", list(WRONG_ARRIVALS))
def test_a_wrong_arrival_is_caught(tmp_path, mutant):
    report = _check_compiled(tmp_path, write_mutant(mutant, tmp_path / mutant), "fp8:gluon,fp8:e4m3_waves")
    entries = [e for e in report["specializations"] if "compile_error" not in e]
    assert any(e["language"] == "triton" for e in entries)
    for entry in entries:
        assert set(entry["findings"]) == {WRONG_ARRIVALS[mutant]}, entry


# --- on the GPU under test ----------------------------------------------------------------
@needs_gpu
@pytest.mark.parametrize("kv_format", ["fp8", "mxfp4"])
def test_every_form_merges_in_kernel_with_either_count(kv_format):
    """Ragged lengths with an empty sequence, 4 splits: each form's in-kernel combine, with
    the device's arrival protocol (per-wave fences on gfx942 / gfx950, none on NVIDIA),
    gives the separate combine kernel's output, every row written, and leaves the counters
    at zero."""
    from test_triton_kernels import make_fp8, make_indptr, make_mxfp4
    arch = submission.device_arch(DEVICE)[1]
    gen = torch.Generator().manual_seed(28)
    lengths = [700, 3, 0, 129]
    qo, kv_indptr = make_indptr(lengths)
    rows = int(kv_indptr[-1])
    if kv_format == "fp8":
        buf, scale, _ = make_fp8(rows, gen)
        decode = submission.fp8_decode
    else:
        buf, scale = make_mxfp4(rows, 122, 130, gen=gen)
        decode = submission.mxfp4_decode
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    operands = [t.to(DEVICE) for t in (q, buf, scale, qo, kv_indptr)]

    def run(launch):
        out = torch.full((len(lengths), 16, 512), float("nan"), dtype=torch.bfloat16, device=DEVICE)
        scratch = submission.make_split_scratch(len(lengths), launch, DEVICE)
        decode(*operands, 576 ** -0.5, out, scratch, launch)
        assert (scratch.counters == 0).all(), (launch, "the counters must be reset for the next call")
        return out.float().cpu()

    for form in runnable_forms(kv_format):
        record = submission.kernel_form(kv_format, form)
        base = submission._launch(4, record.tiles[0], record, arch)
        separate = run(base)
        assert torch.isfinite(separate).all()
        launch = submission.dataclasses.replace(base, combine_in_kernel=True)
        assert launch.each_wave_fences == arch.wave_fences
        torch.testing.assert_close(run(launch), separate, atol=1e-3, rtol=1e-2, msg=lambda m: f"{launch}: {m}")
