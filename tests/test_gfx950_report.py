"""bench/gfx950_report.py: every Triton and Gluon specialization the autopick can offer on
an MI355X compiles for gfx950 without spilling, the report's numbers are read from the
compiled code, and in every decode kernel's main loop KV and its scales are read by buffer
loads (the hardware drops an out-of-range lane of those).

The compiles run in subprocesses without TRITON_INTERPRET (Triton decides interpret-or-
compile when a kernel is decorated); the report compiles into an empty Triton cache of its
own, so every run compiles everything (about 30 s for the report on an idle 2-core
machine). One report serves every test of this module; it runs no LLVM program
(--no-aiter): aiter's code object, which needs an llvm-objdump that reads gfx950 code, is
read by the one fixture of the tests that need it (aiter_figures), which skips naming the
program and the version it needs where this machine has none (tools/external_programs.py).
"""
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import submission
from bench import aiter_asm
from conftest import pinned_triton_codegen
from tools import amdgcn

ROOT = Path(__file__).resolve().parent.parent
REPORT = ["-m", "bench.gfx950_report"]
MARKDOWN_BEGIN, MARKDOWN_END = "<!-- gfx950:begin -->", "<!-- gfx950:end -->"
SHAPES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024), (256, 8192)]


def _run(args: list, cache: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(cache)
    proc = subprocess.run([sys.executable, *map(str, args)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gfx950")
    (folder / "gfx950.md").write_text(f"{MARKDOWN_BEGIN}\n{MARKDOWN_END}\n")
    summary = _run([*REPORT, "--json", folder / "report.json", "--asm-dir", folder / "asm",
                    "--markdown", folder / "gfx950.md", "--no-aiter"], folder / "cache")
    (folder / "summary.txt").write_text(summary)
    return json.loads((folder / "report.json").read_text()), folder


@pytest.fixture(scope="module")
def small_cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gfx950_small")
    return json.loads(_run(["-m", "bench.gfx950_small_cases"], folder / "cache"))


STANDINS_VS_HARNESS = """
import reference, submission
from tools import compile_target
real = reference.generate_input(2, 1, 64, 1)  # the harness's tensors, on the CPU
standin = compile_target.contract_inputs(2, 64)  # meta stand-ins of the same shapes
for kv_format in ("fp8", "mxfp4"):
    launch = submission.KernelLaunch(2, 32, 4, 1)
    pairs = zip(compile_target.decode_kernel_calls(real, kv_format, launch),
                compile_target.decode_kernel_calls(standin, kv_format, launch), strict=True)
    for a, b in pairs:
        a, b = (compile_target.specialize(c, compile_target.TARGETS["gfx950"]) for c in (a, b))
        assert (a.signature, a.constexprs, a.attrs, a.key) == (b.signature, b.constexprs, b.attrs, b.key), kv_format
print("same")
"""


def test_standins_specialize_as_the_harness_tensors(tmp_path):
    # The report compiles for meta-device stand-ins; at equal shapes they must give the
    # JIT exactly the specialization that the harness's own inputs give.
    assert _run(["-c", STANDINS_VS_HARNESS], tmp_path / "cache").strip() == "same"


@pinned_triton_codegen("no spill")
@pytest.mark.fast
def test_no_offered_specialization_spills(report):
    rep, _ = report
    spilling = {k["name"]: (k["vgpr_spill"], k["sgpr_spill"]) for k in rep["kernels"]
                if k["vgpr_spill"] or k["sgpr_spill"]}
    assert not spilling, f"specializations offered on gfx950 that spill (VGPRs, SGPRs): {spilling}"


def test_report_shape(report):
    rep, _ = report
    assert rep["target"] == "gfx950" and rep["triton"]
    kernel_keys = {"name", "format", "launch", "vgpr", "agpr", "sgpr", "vgpr_spill", "sgpr_spill",
                   "scratch_bytes", "lds_bytes", "occupancy", "mfma", "loop"}
    kernel_keys |= {"instructions", "outside_loop", "resident_programs", "in_flight_bytes_per_cu", "language",
                    "lds_bytes_per_cu", "lds_fits", "programs_registers", "programs_lds", "compile_seconds", "merge"}
    loop_keys = {"valu", "salu", "vmem", "lds", "mfma", "total", "tokens", "in_flight_bytes_per_wave",
                 "in_flight_bytes_at_mfma", "loads", "unchecked_loads"}
    for kernel in rep["kernels"]:
        assert kernel_keys <= kernel.keys(), kernel["name"]
        assert 1 <= kernel["occupancy"] <= 8
        assert kernel["language"] in ("gluon", "triton")
        # LDS: a program's bytes x the programs registers allow; the programs held are the
        # fewer of those and what 160 KiB of LDS allow
        assert kernel["lds_bytes_per_cu"] == kernel["lds_bytes"] * kernel["programs_registers"]
        assert kernel["lds_fits"] == (kernel["lds_bytes_per_cu"] <= 160 * 1024)
        by_lds = 160 * 1024 // kernel["lds_bytes"] if kernel["lds_bytes"] else kernel["programs_registers"]
        assert kernel["resident_programs"] == min(kernel["programs_registers"], by_lds)
        if kernel["kernel"] == "_mla_decode_kernel" or kernel["loop"] is not None:
            assert loop_keys <= kernel["loop"].keys(), kernel["name"]
    names = {k["name"] for k in rep["kernels"]}
    assert len(names) == len(rep["kernels"])
    rows = {(r["batch"], r["kv_len"], r["format"]) for r in rep["shapes"]}
    assert rows == {(b, n, f) for b, n in SHAPES for f in ("fp8", "mxfp4")}
    for row in rep["shapes"]:
        assert row["kernel"] in names and row["offered_first"]
        assert {"issue_us", "hbm_us", "mfma_us", "language"} <= row.keys()
        assert row["issue_us"] > 0 and row["hbm_us"] > 0 and row["mfma_us"] > 0
    assert rep["machine"]["in_flight_little_bytes_per_cu"] == pytest.approx(8e12 * 1.5e-6 / 256)
    assert rep["machine"]["in_flight_target_bytes_per_cu"] == 48 * 1024


def test_small_shape_columns(report):
    # Per shape: the grid's CUs, the waves on its busiest CU, tiles a program and the
    # instructions outside the loop, from the launch the autopick offers first.
    rep, _ = report
    kernels = {k["name"]: k for k in rep["kernels"]}
    for row in rep["shapes"]:
        launch = submission.launch_candidates(row["format"], row["batch"], row["kv_len"], 256, "gfx950")[0]
        kernel = kernels[row["kernel"]]
        programs = launch.num_splits * row["batch"]
        assert row["programs"] == programs and row["cus_used"] == min(256, programs)
        assert row["waves_per_cu"] <= kernel["occupancy"] * 4 and row["waves_per_cu"] % launch.num_warps == 0
        assert row["waves_per_cu"] == launch.num_warps * min(-(-programs // 256), kernel["resident_programs"])
        tokens = row["tiles_per_program"] * launch.block_n  # a split's tokens, whole tiles
        assert tokens * launch.num_splits >= row["kv_len"] > (tokens - launch.block_n) * launch.num_splits
        assert row["outside_loop_instructions"] == kernel["outside_loop"]["total"]
        combine = [k for k in rep["kernels"] if k["kernel"] == "_combine_splits_kernel" and k["format"] == row["format"]
                   and any(o["rank"] == 0 and (o["batch"], o["kv_len"]) == (row["batch"], row["kv_len"])
                           and o["route"] == f"triton_{row['format']}" for o in k["offered"])]
        assert row["combine_instructions"] == sum(k["instructions"] for k in combine)
        assert bool(combine) == (launch.num_splits > 1 and not launch.combine_in_kernel)
        loops = kernel["outside_loop"]["loops"] + sum(k["outside_loop"]["loops"] for k in combine)
        assert row["loops_outside"] == loops
        assert row["in_flight_bytes_per_cu"] == kernel["loop"]["in_flight_bytes_per_wave"] * row["waves_per_cu"]


@pytest.mark.fast
def test_every_offered_launch_is_compiled(report):
    rep, _ = report
    offered = {}
    for kernel in rep["kernels"]:
        for o in kernel["offered"]:
            offered.setdefault((o["route"], o["batch"], o["kv_len"], o["rank"]), set()).add(kernel["kernel"])
    for kv_format in ("fp8", "mxfp4"):
        for batch, kv_len in SHAPES:
            launches = submission.launch_candidates(kv_format, batch, kv_len, 256, "gfx950")
            for rank, launch in enumerate(launches):
                kernels = offered.get((f"triton_{kv_format}", batch, kv_len, rank), set())
                decode = {k for k in kernels if k != "_combine_splits_kernel"}
                assert len(decode) == 1, (kv_format, batch, kv_len, launch, kernels)
                needs_combine = launch.num_splits > 1 and not launch.combine_in_kernel
                assert ("_combine_splits_kernel" in kernels) == needs_combine, (kv_format, batch, kv_len, launch)
    # the aiter route's Triton launches, for each metadata variant at every split count:
    # a8w8 the Q quantizer's two (the first with the variant's guard), a16w8 the guard alone
    ranks = len(submission.AITER_KV_SPLIT_CANDIDATES)
    rank = 0
    for variant in submission.AITER_RUNNERS.values():
        for q_in_fp8 in (True, False):
            if q_in_fp8:
                expected = {variant.Q_GUARD_KERNEL.fn.__name__, "_q_fp8_quantize_kernel"}
            else:
                expected = {variant.KV_SCALE_GUARD_KERNEL.fn.__name__}
            for _ in range(ranks):
                for batch, kv_len in SHAPES:
                    assert offered.get(("aiter_fp8", batch, kv_len, rank)) == expected, (batch, kv_len, rank)
                rank += 1
    assert {k for k in offered if k[0] == "aiter_fp8"} == {("aiter_fp8", b, n, r) for b, n in SHAPES
                                                          for r in range(rank)}


def test_gluon_launches_are_compiled_as_gluon(report):
    # Issue 21 item 5 (gfx950 half): every Gluon launch offered is compiled, through Gluon's
    # own source class; a launch is Gluon exactly when it names a Gluon architecture.
    rep, _ = report
    languages = {}
    for kernel in rep["kernels"]:
        for o in kernel["offered"]:
            if o["route"].startswith("triton") and kernel["loop"] is not None:
                languages[(o["route"], o["batch"], o["kv_len"], o["rank"])] = (kernel["language"], o["launch"])
    assert languages
    for language, launch in languages.values():
        assert language == ("gluon" if launch.get("gluon_arch") else "triton"), launch
    gluon = {k["name"] for k in rep["kernels"] if k["language"] == "gluon" and k["offered"]}
    assert bool(gluon) == (not submission.gluon_problem("cdna4")), submission.gluon_problem("cdna4")
    assert rep["cold_run"]["by_language"].get("gluon", 0) == len(gluon)


COUNT_WITHOUT_COMPILING = """
import collections, json
from tools import compile_target
specs = compile_target.distinct_specializations(compile_target.offered_launches("gfx950"),
                                                compile_target.TARGETS["gfx950"])
print(json.dumps(collections.Counter(s.language for s in specs.values())))
"""


def test_cold_run_count_and_compile_time(report, tmp_path):
    # Issue 21 item 6: the specializations a cold run of the 8 shapes compiles on gfx950,
    # counted again here by specializing alone (no compile), and their compile time.
    rep, folder = report
    by_language = json.loads(_run(["-c", COUNT_WITHOUT_COMPILING], tmp_path / "cache"))
    cold = rep["cold_run"]
    assert cold["by_language"] == by_language and cold["specializations"] == sum(by_language.values())
    offered = [k for k in rep["kernels"] if k["offered"]]
    assert len(offered) >= cold["specializations"]  # a kernel offered for both formats has a record each
    assert 0 < cold["cpu_seconds"] and 0 < cold["compile_seconds"] and cold["cpu"]["logical_cpus"] >= 1
    assert all(k["compile_seconds"] > 0 for k in rep["kernels"])
    summary = (folder / "summary.txt").read_text()
    assert f"compile {cold['specializations']} distinct specializations for gfx950" in summary
    assert f"{cold['compile_seconds']:.1f} s of compiling" in summary


def test_numbers_match_the_written_code(report):
    rep, folder = report
    for kernel in rep["kernels"]:
        asm = (folder / "asm" / f"{kernel['name']}.amdgcn").read_text()
        found = amdgcn.resources(asm)
        assert {k: kernel[k] for k in ("vgpr", "agpr", "sgpr", "vgpr_spill", "sgpr_spill", "scratch_bytes")} == \
            {k: found[k] for k in ("vgpr", "agpr", "sgpr", "vgpr_spill", "sgpr_spill", "scratch_bytes")}
        loop = amdgcn.main_loop(asm)
        instructions, _ = amdgcn.parse(asm)
        assert kernel["instructions"] == len(instructions)
        if loop is None:
            assert kernel["loop"] is None and kernel["outside_loop"]["total"] == len(instructions)
            continue
        assert kernel["outside_loop"]["total"] == len(instructions) - len(loop)
        assert kernel["outside_loop"]["prologue"] + len(loop) + kernel["outside_loop"]["epilogue"] == len(instructions)
        in_flight = amdgcn.loads_in_flight_at_mfmas(loop)
        assert kernel["loop"]["in_flight_bytes_at_mfma"] == in_flight
        assert len(in_flight) == kernel["loop"]["per_wave_iteration"]["mfma"]
        assert kernel["in_flight_bytes_per_cu"] == \
            min(in_flight) * kernel["resident_programs"] * kernel["launch"]["options"]["num_warps"]
        per_wave = amdgcn.class_counts(loop)
        assert kernel["loop"]["per_wave_iteration"] == per_wave
        assert kernel["loop"]["loads"] == amdgcn.load_kinds(loop)
        assert kernel["loop"]["unchecked_loads"] == amdgcn.unchecked_loads(loop)
        warps = kernel["launch"]["options"]["num_warps"]
        block_n = kernel["launch"]["constexprs"]["BLOCK_N"]
        assert kernel["loop"]["tokens"] == block_n
        assert kernel["loop"]["total"] == pytest.approx(per_wave["total"] * warps / block_n)


def test_decode_loop_mfma_work_covers_the_products(report):
    # Independent of the parser's choice of loop: the MFMAs found in it, over all waves,
    # must at least do the tile's two products, S = Q.K^T (16 x BLOCK_N x 576) and
    # P.V (16 x 512 x BLOCK_N).
    rep, _ = report
    decode_kernels = [k for k in rep["kernels"] if k["loop"] is not None]
    assert {k["name"] for k in decode_kernels} == {k["name"] for k in rep["kernels"] if "decode" in k["kernel"]}
    for kernel in decode_kernels:
        block_n = kernel["launch"]["constexprs"]["BLOCK_N"]
        warps = kernel["launch"]["options"]["num_warps"]
        macs = 0
        for kind, count in kernel["loop"]["mfma_per_wave_iteration"].items():
            m, n, k = map(int, re.search(r"_(\d+)x(\d+)x(\d+)", kind).groups())
            macs += m * n * k * count * warps
        assert macs >= 16 * block_n * 576 + 16 * 512 * block_n, kernel["name"]


@pinned_triton_codegen("a listing read by hand")
def test_hand_checked_small_loops(small_cases):
    # Counts read off each loop's listing by hand (Triton 3.6, gfx950); per wave, one iteration.
    f16 = small_cases["f16"]["loop"]
    # 4 buffer_load_dwordx4 (A and B, 2 KB each), 2 ds_write_b128 + 8 ds_bpermute_b32 +
    # 4 ds_read_b64_tr_b16, 16 v_cndmask_b32 + 1 v_add_u32, s_add_i32 + s_cmp_lg_u32,
    # 10 s_waitcnt + 1 s_nop, the backward s_cbranch_scc1: 51
    assert f16["per_wave_iteration"] == {"valu": 17, "mfma": 2, "salu": 2, "smem": 0, "vmem": 4, "lds": 14,
                                         "branch": 1, "wait": 11, "total": 51}
    assert f16["mfma_per_wave_iteration"] == {"v_mfma_f32_16x16x32_f16": 2}
    assert f16["tokens"] == 16 and f16["total"] == pytest.approx(51 / 16)
    assert f16["mfma_cycles"] == pytest.approx(2 * 16 / 16)  # 4 passes of 4 cycles each

    fp8 = small_cases["fp8"]["loop"]
    assert fp8["mfma_per_wave_iteration"] == {"v_mfma_f32_16x16x128_f8f6f4.fp8.fp8": 1}
    assert fp8["per_wave_iteration"]["total"] == 49 and fp8["per_wave_iteration"]["wait"] == 10
    assert fp8["mfma_cycles"] == pytest.approx(32 / 16)  # fp8 operands: 8 passes

    scaled = small_cases["e4m3_x_e2m1"]["loop"]
    # v_or/v_add/v_add/v_and; s_ashr/s_add/s_addk/s_cmp; 2 buffer loads + buffer_load_sbyte;
    # 2 ds_write, 2 ds_read_b128, 2 ds_read_b64_tr_b8, 1 ds_bpermute; 8 s_waitcnt,
    # 4 s_barrier, 1 s_nop; the branch: 33. 4 waves, 64 columns an iteration.
    assert scaled["per_wave_iteration"] == {"valu": 4, "mfma": 1, "salu": 4, "smem": 0, "vmem": 3, "lds": 7,
                                            "branch": 1, "wait": 13, "total": 33}
    assert scaled["mfma_per_wave_iteration"] == {"v_mfma_scale_f32_16x16x128_f8f6f4.fp4.fp8": 1}
    assert scaled["total"] == pytest.approx(33 * 4 / 64) and scaled["mfma_cycles"] == pytest.approx(32 * 4 / 64)
    inline = small_cases["inline_asm"]["loop"]
    # 8 inline-asm blocks of 4 v_add_f32 (the printer indents only the first line of each)
    # + v_ashrrev, v_lshl_add_u64, 2 v_add_u32, 16 v_cndmask_b32, 4 v_cvt_pk_f16_f32: 56 VALU;
    # buffer_load_dwordx4 + 2 global_load_dwordx4; ds_write_b128, 8 ds_bpermute_b32,
    # 2 ds_read_b64_tr_b16; s_add_i32, s_cmp_lg_u32; 5 s_waitcnt + 2 s_nop; the branch: 81
    assert inline["per_wave_iteration"] == {"valu": 56, "mfma": 1, "salu": 2, "smem": 0, "vmem": 3, "lds": 11,
                                            "branch": 1, "wait": 7, "total": 81}
    assert inline["mfma_per_wave_iteration"] == {"v_mfma_f32_16x16x32_f16": 1}
    for name, case in small_cases.items():
        gluon = name.startswith("gluon_ring")
        assert case["vgpr_spill"] == 0 and case["language"] == ("gluon" if gluon else "triton")
        assert case["occupancy"] == (5 if gluon else 8)


@pinned_triton_codegen("a listing read by hand")
def test_hand_checked_gluon_ring(small_cases):
    # Gluon, one wave, two stages in LDS (read off the listing by hand, Triton 3.6, gfx950).
    ring = small_cases["gluon_ring"]
    loop = ring["loop"]
    # s_add/s_add/s_min/s_and/s_lshl/s_lshl/s_add (stage and tile offsets), 4 s_mov/s_add of
    # m0 (each copy's LDS address), s_lshl/s_and, s_cmp_lg/s_mov: 15 SALU; 2 v_or, 2 v_lshlrev,
    # 2 v_add_u32: 6 VALU; the next tile's 4 buffer_load_dwordx4 ... lds; 4 ds_read_b64_tr_b16
    # (B) + 2 ds_read_b128 (A); s_waitcnt lgkmcnt(0), vmcnt(4) lgkmcnt(0), lgkmcnt(3),
    # lgkmcnt(0); 2 MFMAs; the branch: 38
    assert loop["per_wave_iteration"] == {"valu": 6, "mfma": 2, "salu": 15, "smem": 0, "vmem": 4, "lds": 6,
                                          "branch": 1, "wait": 4, "total": 38}
    assert loop["mfma_per_wave_iteration"] == {"v_mfma_f32_16x16x32_f16": 2}
    assert loop["loads"] == {"buffer": 0, "buffer_to_lds": 4, "global": 0, "global_to_lds": 0, "flat": 0}
    # The next tile's four copies (1 KiB a wave each) issue before vmcnt(4), which retires
    # this tile's four (issued one iteration earlier) and leaves them in flight at both MFMAs.
    assert loop["in_flight_bytes_at_mfma"] == [4096, 4096]
    # Two stages of A (2 KiB) and B (2 KiB): 8 KiB a program. Registers allow 8 waves a SIMD,
    # 32 one-wave programs a CU, whose 256 KiB exceed the CU's 160 KiB: LDS holds 20.
    assert ring["lds_bytes"] == 8192 and ring["programs_registers"] == 32
    assert ring["lds_bytes_per_cu"] == 32 * 8192 and not ring["lds_fits"]
    assert ring["programs_lds"] == 20 and ring["resident_programs"] == 20 and ring["occupancy"] == 5
    assert ring["in_flight_bytes_per_cu"] == 20 * 4096
    # The same ring read by plain shared-memory loads: the one listing differs in one wait,
    # vmcnt(0) where it was vmcnt(4) (LLVM orders an LDS read after every LDS-destination
    # load in flight), so nothing is in flight at the MFMAs.
    plain = small_cases["gluon_ring_plain_reads"]["loop"]
    assert plain["per_wave_iteration"] == loop["per_wave_iteration"]
    assert plain["in_flight_bytes_at_mfma"] == [0, 0]


@pinned_triton_codegen("a listing read by hand")
def test_hand_checked_loads_in_flight(small_cases):
    # One stage: every case waits for all its loads (s_waitcnt vmcnt(0)) before its first
    # MFMA, so nothing is in flight while it multiplies.
    for name in ("f16", "fp8", "e4m3_x_e2m1", "inline_asm"):
        loop = small_cases[name]["loop"]
        assert set(loop["in_flight_bytes_at_mfma"]) == {0} and loop["in_flight_bytes_per_wave"] == 0, name
        assert small_cases[name]["in_flight_bytes_per_cu"] == 0
    # Two stages: the next tile's 4 buffer_load_dwordx4 (1 KiB a wave each) issue before
    # both MFMAs, and the vmcnt(3) ... vmcnt(0) that retire them come after the second.
    two = small_cases["f16_two_stages"]
    assert two["loop"]["in_flight_bytes_at_mfma"] == [4096, 4096]
    assert two["loop"]["per_wave_iteration"]["vmem"] == 4
    # 8 waves a SIMD x 4 SIMDs of 1-wave programs hold 32 waves a CU
    assert two["resident_programs"] == 32 and two["in_flight_bytes_per_cu"] == 32 * 4096


def test_render_writes_the_tables_between_the_markers(report, tmp_path):
    rep, folder = report
    doc = folder / "docs" / "gfx950.md"
    doc.parent.mkdir(exist_ok=True)
    doc.write_text("before\n<!-- gfx950:begin -->\nOLD TABLE\n<!-- gfx950:end -->\nafter\n")
    out = _run([*REPORT, "render", folder / "report.json", "--markdown", doc], tmp_path / "cache")
    text = doc.read_text()
    inside = text[text.index("<!-- gfx950:begin -->"):text.index("<!-- gfx950:end -->")]
    assert text.startswith("before\n") and text.endswith("<!-- gfx950:end -->\nafter\n") and "OLD TABLE" not in inside
    assert "From `../report.json`:" in inside and "STATIC BOUND" in inside
    for row in rep["shapes"]:
        assert f"| {row['batch']} | {row['kv_len']} | {row['format']} | {row['language']} | `{row['kernel']}` |" \
            in inside
        assert f"{row['issue_us']:.1f} | {row['issue_x_hbm']:.2f} |" in inside
    for kernel in rep["kernels"]:
        assert f"| `{kernel['name']}` | {kernel['language']} |" in inside
    # the terminal gets the short summary, the same as the report's own run printed
    assert out.splitlines()[:-1] == (folder / "summary.txt").read_text().splitlines()[:-1]
    assert "STATIC BOUND" in out and len(out.splitlines()) <= 16 and "| batch |" not in out
    # the report's own run wrote the same tables into its markdown file
    written = (folder / "gfx950.md").read_text()
    assert inside.split("\n", 3)[3] in written


def test_the_merge_of_every_in_kernel_combine_is_counted(report):
    """Every decode kernel with the in-kernel combine has merge figures (and no other kernel):
    the instructions after its first vector atomic, counted here on its AMDGCN's lines; the
    table names each (format, form, splits) offered with the in-kernel combine; a Gluon
    form's parallel merge issues more loads than one split's (every split's at once)."""
    rep, folder = report
    rows = {}
    for kernel in rep["kernels"]:
        in_kernel = kernel["launch"]["constexprs"].get("COMBINE_IN_KERNEL") is True
        assert (kernel["merge"] is not None) == in_kernel, kernel["name"]
        if not in_kernel:
            continue
        text = (folder / "asm" / f"{kernel['name']}.amdgcn").read_text()
        code = text[:text.rindex("\ts_endpgm") + len("\ts_endpgm")].splitlines()  # the code, not the metadata
        # instructions: tab-indented lines, and an inline-asm block's unindented lines
        lines = [line for line in code if re.match(r"\t[a-z]", line) or re.match(r"[a-z]", line)]
        atomic = next(i for i, line in enumerate(lines) if re.match(r"\s*(global|buffer)_atomic_", line))
        assert kernel["merge"]["instructions"] == len(lines) - atomic, kernel["name"]
        assert kernel["merge"]["loads"] == sum(bool(re.match(r"\s*(global|buffer)_load_", line))
                                               for line in lines[atomic:])
        splits = kernel["launch"]["constexprs"]["MERGE_SPLITS"]
        if splits:  # the parallel merge: at least every split's lse and one chunk of every split's partials
            assert kernel["merge"]["loads"] >= min(splits, 16) * 2, kernel["name"]
        for offer in kernel["offered"]:
            if offer["launch"]["combine_in_kernel"] and offer["launch"]["num_splits"] > 1:
                rows[(kernel["format"], offer["launch"]["form"], offer["launch"]["num_splits"])] = kernel["name"]
    offered = {(l["kv_format"], l["form"], l["num_splits"]) for l in _offered_in_kernel_launches()}
    assert set(rows) == offered and offered
    table = (folder / "gfx950.md").read_text()
    for kv_format, form, splits in offered:
        assert re.search(rf"\| {kv_format} \| {form} \| {splits} \| [0-9x, ]+ \| \d+ \|", table), (kv_format, splits)


def _offered_in_kernel_launches() -> list:
    launches = []
    for kv_format in ("fp8", "mxfp4"):
        for batch, kv_len in SHAPES:
            for launch in submission.launch_candidates(kv_format, batch, kv_len, 256, "gfx950"):
                if launch.combine_in_kernel and launch.num_splits > 1:
                    launches.append(dict(dataclasses.asdict(launch), kv_format=kv_format))
    return launches


def test_before_figures_stand_beside_the_merge(report, tmp_path):
    """--before: a saved report of another tree (here the same one, its merge figures
    changed) is read, and the table shows its figures beside this one's; a report without
    merge figures is refused in one line."""
    rep, folder = report
    other = json.loads((folder / "report.json").read_text())
    for kernel in other["kernels"]:
        if kernel.get("merge"):
            kernel["merge"] = dict(kernel["merge"], instructions=kernel["merge"]["instructions"] + 100000)
    before = tmp_path / "before.json"
    before.write_text(json.dumps(other))
    from bench import gfx950_report
    record = gfx950_report.before_record(before)
    table = gfx950_report.merge_table(dict(rep, before=record))
    rows = gfx950_report.merge_rows(rep)
    for (kv_format, form, splits), row in rows.items():
        after = row["merge"]["instructions"]
        assert any(line.startswith(f"| {kv_format} | {form} | {splits} |") and f"| {after + 100000}" in line
                   and f"| {after}" in line for line in table), (kv_format, splits)
    for kernel in other["kernels"]:
        kernel.pop("merge", None)
    before.write_text(json.dumps(other))
    with pytest.raises(SystemExit):
        gfx950_report.before_record(before)


def test_markdown_needs_its_markers(report, tmp_path):
    _, folder = report
    doc = tmp_path / "gfx950.md"
    doc.write_text("no markers here\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, *REPORT, "render", str(folder / "report.json"), "--markdown", str(doc)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "lacks the markers" in proc.stderr
    assert doc.read_text() == "no markers here\n"


def test_the_report_writes_no_markdown_unless_asked(report, tmp_path):
    """Without --markdown the tracked docs/gfx950.md stays as it is (a checkout stays clean);
    the summary still prints, naming no written file."""
    _, folder = report
    doc = ROOT / "docs" / "gfx950.md"
    before = (doc.read_bytes(), doc.stat().st_mtime_ns)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, *REPORT, "render", str(folder / "report.json")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "STATIC BOUND" in proc.stdout and "full tables:" not in proc.stdout
    assert (doc.read_bytes(), doc.stat().st_mtime_ns) == before



@pytest.mark.fast
@pytest.mark.parametrize("option", ["--json", "--asm-dir", "--markdown"])
def test_an_unwritable_output_ends_the_run_before_any_compile(tmp_path, monkeypatch, capsys, option):
    """An output path under a file (not a folder) is refused in one line, exit 2, and nothing
    is compiled."""
    from bench import gfx950_report
    (tmp_path / "plain").write_text("a file, not a folder\n")
    path = tmp_path / "plain" / "out"
    monkeypatch.setattr(gfx950_report, "build", lambda *args, **kwargs: pytest.fail("compiled"))
    monkeypatch.setattr(sys, "argv", ["gfx950_report", option, str(path)])
    with pytest.raises(SystemExit) as exited:
        gfx950_report.main()
    problem = "does not exist: give --markdown a file" if option == "--markdown" else \
        f"cannot be written: {tmp_path / 'plain'} is not a folder"
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(f"bench.gfx950_report: {option} {path} {problem}") and err.count("\n") == 1, err


@pytest.mark.fast
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_write_that_fails_after_the_work_ends_in_one_line(monkeypatch, capsys):
    """/dev/full opens (the check before the work passes) and refuses the write."""
    import errno
    from bench import gfx950_report
    monkeypatch.setattr(gfx950_report, "build", lambda *args, **kwargs: {"kernels": []})
    monkeypatch.setattr(sys, "argv", ["gfx950_report", "--json", "/dev/full"])
    with pytest.raises(SystemExit) as exited:
        gfx950_report.main()
    assert exited.value.code == 2
    assert capsys.readouterr().err == \
        f"bench.gfx950_report: --json /dev/full cannot be written: {os.strerror(errno.ENOSPC)}\n"


@pytest.mark.fast
def test_the_users_command_with_an_unwritable_json_is_one_line(tmp_path):
    """As a user runs it (`--json /etc/passwd/report.json`): one line on stderr, exit 2, no
    traceback, nothing on stdout."""
    (tmp_path / "plain").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, *REPORT, "--json", str(tmp_path / "plain" / "report.json")], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"bench.gfx950_report: --json {tmp_path / 'plain' / 'report.json'} cannot be written: "
                           f"{tmp_path / 'plain'} is not a folder\n")


# llvm-objdump's listing of two tile loops, one a half of 4 waves, as aiter's code object
# has them (bench/aiter_asm.py), with a conditional exit that lands before the second loop.
OBJDUMP_LISTING = """
0000000000002300 <_ZN5aiter4mla_kernelE>:
\ts_cmp_lt_i32 s7, 2                                         // 000000002300: BF048207
\ts_cbranch_scc0 label_0010                                  // 000000002304: BF840010

0000000000002308 <label_0002>:
\ts_waitcnt vmcnt(2) lgkmcnt(0)                             // 000000002308: BF8C4070
\tv_mfma_f32_16x16x32_fp8_fp8 v[88:91], a[72:73], a[0:1], 0  // 00000000230C: D3F30058 1A02
\tbuffer_load_dword v124, v40, s[20:23], 0 offen             // 000000002314: E0501000 8005
\tv_mfma_f32_16x16x32_fp8_fp8 v[88:91], a[74:75], a[2:3], v[88:91]// 00000000231C: D3F30058
\ts_cbranch_scc0 label_000E                                  // 000000002324: BF840001
\ts_branch label_0002                                        // 000000002328: BF82FB1B

0000000000002330 <label_000E>:
\ts_nop 0                                                    // 000000002330: BF800000
\ts_branch label_0020                                        // 000000002334: BF8204E5

0000000000002340 <label_0010>:
\tv_mfma_f32_16x16x32_fp8_fp8 v[88:91], a[72:73], a[0:1], 0  // 000000002340: D3F30058 1A02
\ts_cbranch_scc0 label_000E                                  // 000000002348: BF840001
\ts_branch label_0010                                        // 00000000234C: BF82FB1B

0000000000002350 <label_0020>:
\ts_endpgm                                                   // 000000002350: BF810000
"""


def test_objdump_listings_are_read_as_the_printer_s():
    """bench/aiter_asm.py reads llvm-objdump's text into amdgcn.parse's form: labels, one
    instruction a line without its address and encoding; its tile loops are the ones closed
    by an unconditional branch (not the exits to a block above the second loop), and the
    branch on the wave index before them gives each a half of the waves."""
    instructions, labels = aiter_asm.parse_objdump(OBJDUMP_LISTING)
    assert instructions[0] == ("s_cmp_lt_i32", "s7, 2") and instructions[3][0] == "v_mfma_f32_16x16x32_fp8_fp8"
    assert instructions[3][1] == "v[88:91], a[72:73], a[0:1], 0"
    assert labels == {"_ZN5aiter4mla_kernelE": 0, "label_0002": 2, "label_000E": 8, "label_0010": 10, "label_0020": 13}
    spans = aiter_asm.tile_loops(instructions, labels)
    assert spans == [(2, 7), (10, 12)]
    assert aiter_asm.wave_halves(instructions, labels, spans, 4) == [2, 2]
    assert aiter_asm.mfma_multiply_adds("v_mfma_f32_16x16x32_fp8_fp8") == 8192
    with pytest.raises(ValueError, match="loops hold MFMAs"):
        aiter_asm.wave_halves(instructions, labels, spans[:1], 4)


@pytest.fixture(scope="module")
def aiter_figures():
    """The report's aiter record (bench/gfx950_report.py's aiter_record): aiter's code object
    disassembled by LLVM. Skips, naming the program and the version it needs, where no
    LLVM on PATH can read gfx950 code, or where the wheel is missing."""
    reason = aiter_asm.unavailable_reason(aiter_asm.wheel_dir())
    if reason:
        pytest.skip(f"aiter's code object is not read here: {reason}")
    from bench import gfx950_report
    return gfx950_report.aiter_record()


def test_aiter_assembly_decode_is_read_from_the_wheel(aiter_figures, report):
    """The report carries aiter's a8w8 decode (the reference's kernel) read from the amd-aiter
    wheel's code object by the same counts as ours, beside our first-offered launches: two
    wave-half tile loops whose MFMA work is a whole number of KV tokens, each figure their
    counts per token, its ratios against the HBM time of fp8 and of MXFP4."""
    from bench import gfx950_report
    rep, _ = report
    aiter = aiter_figures
    loops = aiter["loops"]
    assert len(loops) == 2 and sum(loop["waves"] for loop in loops) == aiter["kernel"]["waves"]
    macs = sum(loop["waves"] * count * aiter_asm.mfma_multiply_adds(kind) for loop in loops
               for kind, count in loop["mfma"].items())
    assert macs == aiter["tokens_per_trip"] * 16 * (576 + 512) and aiter["tokens_per_trip"] > 0
    total = sum(loop["waves"] * loop["per_wave_trip"]["total"] for loop in loops) / aiter["tokens_per_trip"]
    assert aiter["per_token"]["total"] == pytest.approx(total)
    assert aiter["per_token"]["total"] == pytest.approx(sum(aiter["per_token"][c] for c in amdgcn.CLASSES))
    big = next(r for r in aiter["shapes"] if (r["batch"], r["kv_len"]) == (256, 8192))
    for name in ("issue", "valu", "mfma"):
        assert 0 < big[f"{name}_x_fp8_hbm"] < big[f"{name}_x_mxfp4_hbm"] < 2
    assert aiter["in_flight_bytes_per_cu"] > 0
    written = gfx950_report.table({**rep, "aiter_asm": aiter})
    assert "aiter's assembly a8w8 decode" in written and "| 256 | 8192 | aiter a8w8 assembly | fp8 |" in written
    assert "| 256 | 8192 | ours, mxfp4 " in written and "| 256 | 8192 | ours, fp8 " in written


def test_an_llvm_that_cannot_read_gfx950_leaves_aiter_out_by_name(monkeypatch):
    """With an LLVM 14 llvm-objdump and a broken llvm-objdump-22 first on PATH
    (tests/unusable_llvm), the report's aiter record says which program and which LLVM it
    needs instead of failing, and the table says it was not read."""
    from bench import gfx950_report
    monkeypatch.setenv("PATH", f"{ROOT / 'tests' / 'unusable_llvm'}{os.pathsep}{os.environ['PATH']}")
    record = gfx950_report.aiter_record()
    assert set(record) == {"skipped"}, record
    assert record["skipped"].startswith("llvm-objdump: needs LLVM 22 or newer"), record
    assert "llvm-objdump-22 (" in record["skipped"] and "exits 127" in record["skipped"], record
    assert "is LLVM 14.0.6" in record["skipped"], record
    assert f"not read here ({record['skipped']})" in "".join(gfx950_report.aiter_table({"aiter_asm": record}))


ISSUE_21_TARGETS = {"fp8": {"issue_x_hbm": 0.10, "valu_x_hbm": 0.15, "mfma_x_hbm": 0.15},
                    "mxfp4": {"issue_x_hbm": 0.25, "valu_x_hbm": 0.45, "mfma_x_hbm": 0.30}}


def test_targets_of_the_first_offered_launch(report):
    # Issue 21 item 3, at each format's first-offered launch: the loop's costs against the
    # HBM time, loads in flight >= 48 KiB a CU, LDS within 160 KiB a CU, no spill at the
    # large shapes; at the small ones CUs occupied and instructions outside the loop no
    # worse than the Triton wave form's launch.
    rep, _ = report
    kernels = {k["name"]: k for k in rep["kernels"]}
    for row in rep["shapes"]:
        shape, targets = (row["batch"], row["kv_len"]), row["targets"]
        if shape in {(32, 8192), (64, 8192), (256, 1024), (256, 8192)}:
            expected = {name: (row[name], limit, "<=") for name, limit in ISSUE_21_TARGETS[row["format"]].items()}
            expected["in_flight_bytes_per_cu"] = (row["in_flight_bytes_per_cu"], 48 * 1024, ">=")
            expected["lds_bytes_per_cu"] = (kernels[row["kernel"]]["lds_bytes_per_cu"], 160 * 1024, "<=")
            spills = [k for k in rep["kernels"] if any(
                o["rank"] == 0 and o["route"] == f"triton_{row['format']}" and (o["batch"], o["kv_len"]) == shape
                for o in k["offered"])]
            expected["spills"] = (sum(k["vgpr_spill"] + k["sgpr_spill"] for k in spills), 0, "<=")
        else:
            base = row["baseline"]
            launch = submission.launch_candidates(row["format"], *shape, 256, "gfx950",
                                                         {"fp8": "e4m3_waves", "mxfp4": "waves"}[row["format"]])[0]
            assert base["launch"] == dataclasses.asdict(launch)
            assert base["cus_used"] == min(256, launch.num_splits * row["batch"])
            outside = row["outside_loop_instructions"] + row["combine_instructions"]
            expected = {"cus_used": (row["cus_used"], base["cus_used"], ">="),
                        "outside_loop_instructions": (outside, base["outside_loop_instructions"]
                                                      + base["combine_instructions"], "<=")}
        assert set(targets) == set(expected), shape
        for name, (value, limit, relation) in expected.items():
            met = value <= limit if relation == "<=" else value >= limit
            assert targets[name] == {"value": value, "limit": limit, "relation": relation, "met": met}, (shape, name)


# --- KV and its scales are read by buffer loads in every main loop ---------------------------
# A decode kernel's main loop reads nothing but KV and its scales. Where a form reads them
# otherwise, it is named here with the loads it has and why: the test then checks exactly
# those, so a change either way shows.
UNCHECKED_LOOP_LOADS = {
    # _attend_mxfp4_waves reads V's and the rope dims' codes as 4-byte words through a
    # pointer cast (row_codes.to(tl.pointer_type(tl.uint32))), which hides the KV base from
    # Triton's buffer-load conversion: 1 (rope) + 8 (V chunks) global_load_dwordx4 a
    # wave-iteration. Its codes for Q.K^T and every scale are buffer loads.
    "mxfp4:waves": ["global_load_dwordx4"] * 9,
}


def _kv_form(kernel: dict) -> str:
    """A decode kernel's form as MLA_ROUTE spells it (<format>:<form>), else the kernel's name."""
    constexprs = kernel["launch"]["constexprs"]
    return f"{constexprs['KV_FORMAT']}:{constexprs['FORM']}" if "FORM" in constexprs else kernel["kernel"]


def assert_kv_read_by_buffer_loads(form: str, unchecked_loads: list, loads: dict) -> None:
    """A main loop's loads not made through a buffer resource (amdgcn.unchecked_loads, as
    listing lines) are exactly the ones named for its form (none for most), and it reads
    through buffers at all."""
    unchecked = [line.split()[0] for line in unchecked_loads]
    assert unchecked == UNCHECKED_LOOP_LOADS.get(form, []), f"{form}: unchecked loads {unchecked_loads}"
    assert loads["buffer"] + loads["buffer_to_lds"] > 0, f"{form}: no buffer load in the loop"


@pinned_triton_codegen("KV read by buffer loads")
def test_kv_is_read_by_buffer_loads_in_every_main_loop(report):
    rep, folder = report
    decode_kernels = [k for k in rep["kernels"] if k["loop"] is not None]
    assert decode_kernels
    seen_forms = set()
    for kernel in decode_kernels:
        loop = amdgcn.main_loop((folder / "asm" / f"{kernel['name']}.amdgcn").read_text())
        seen_forms.add(_kv_form(kernel))
        assert_kv_read_by_buffer_loads(_kv_form(kernel), amdgcn.unchecked_loads(loop), amdgcn.load_kinds(loop))
    assert set(UNCHECKED_LOOP_LOADS) <= seen_forms, "an expectation names a form no longer compiled"


@pinned_triton_codegen("small kernels' loads read by hand")
def test_the_buffer_load_check_fails_on_unchecked_reads(small_cases):
    # The same check on kernels that read a tile through global_load: a pointer cast (as
    # the MXFP4 waves form does), and a tensor of 2 GiB or more (no tt.pointer_range 32).
    # Their plain twins ("f16", and the Gluon ring's copies to LDS) pass it.
    for wrong in ("pointer_cast", "b_over_2_gib"):
        loop = small_cases[wrong]["loop"]
        with pytest.raises(AssertionError, match="unchecked loads .*global_load"):
            assert_kv_read_by_buffer_loads(wrong, loop["unchecked_loads"], loop["loads"])
    for right in ("f16", "f16_two_stages", "gluon_ring", "gluon_ring_plain_reads"):
        loop = small_cases[right]["loop"]
        assert_kv_read_by_buffer_loads(right, loop["unchecked_loads"], loop["loads"])


@pinned_triton_codegen("small kernels' loads read by hand")
def test_a_gathered_read_under_2_gib_is_a_buffer_load(small_cases):
    # What the buffer-load conversion of Triton 3.6 needs on gfx950: with tt.pointer_range
    # 32 (a tensor under 2 GiB) and the base and offsets in plain sight, even rows gathered
    # through unbounded row numbers read from memory become buffer loads, whose range the
    # hardware checks (what a pointer cast or a 2 GiB tensor loses, above).
    loop = small_cases["gathered_rows"]["loop"]
    assert loop["unchecked_loads"] == [] and loop["loads"]["buffer"] == 5


# --- the rules of tools/amdgcn.py on text --------------------------------------------------
def test_instruction_classes():
    assert [amdgcn.instruction_class(m) for m in (
        "v_mfma_f32_16x16x32_f16", "v_smfmac_f32_16x16x64_f16", "v_accvgpr_read_b32", "v_cmp_gt_i32_e32",
        "buffer_load_dwordx4", "global_store_dword", "scratch_load_dword", "ds_read_b64_tr_b8", "s_load_dwordx2",
        "s_cbranch_scc1", "s_waitcnt", "s_barrier", "s_nop", "s_add_i32", "s_cselect_b32")] == [
        "mfma", "mfma", "valu", "valu", "vmem", "vmem", "vmem", "lds", "smem", "branch", "wait", "wait", "wait",
        "salu", "salu"]
    with pytest.raises(ValueError):
        amdgcn.instruction_class("exp")


LOOPED = """\
kernel:
\ts_mov_b32 s0, 0
.LBB0_1:                                ; =>This Inner Loop Header: Depth=1
\tbuffer_load_dwordx4 v[0:3], v4, s[4:7], 0 offen
\ts_waitcnt vmcnt(0)
\tv_mfma_f32_16x16x128_f8f6f4 a[0:3], v[0:7], v[8:15], a[0:3] cbsz:4
\tv_add_u32_e32 v4, 16, v4              ; a comment
\ts_add_i32 s0, s0, 1
\ts_cmp_lg_u32 s0, 8
\ts_cbranch_scc1 .LBB0_1
; %bb.2:
.LBB0_3:
\tv_mov_b32 v0, 0
\ts_cbranch_vccnz .LBB0_3
\ts_endpgm
    .vgpr_count: 16
"""


INLINE_ASM = """\
kernel:
\tv_mov_b32 v0, 0
\t;;#ASMSTART
\tv_cvt_scalef32_pk_bf16_fp4 v90, v144, v98
v_cvt_scalef32_pk_bf16_fp4 v92, v144, v98 op_sel:[1,0,0]
v_cvt_scalef32_pk_bf16_fp4 v91, v144, v98 op_sel:[0,1,0]   ; a comment
  v_cvt_scalef32_pk_bf16_fp4 v93, v144, v98 op_sel:[1,1,0]

\t;;#ASMEND
.Ltmp100:
\ts_endpgm
"""


def test_every_line_of_an_inline_asm_block_is_an_instruction():
    # The printer indents only the first line of a multi-line inline-asm block.
    instructions, labels = amdgcn.parse(INLINE_ASM)
    assert [m for m, _ in instructions] == ["v_mov_b32"] + ["v_cvt_scalef32_pk_bf16_fp4"] * 4 + ["s_endpgm"]
    assert instructions[3] == ("v_cvt_scalef32_pk_bf16_fp4", "v91, v144, v98 op_sel:[0,1,0]")
    assert labels == {"kernel": 0, ".Ltmp100": 5}
    assert amdgcn.class_counts(instructions)["valu"] == 5
    with pytest.raises(ValueError, match="no instruction"):
        amdgcn.parse(INLINE_ASM.replace("v_cvt_scalef32_pk_bf16_fp4 v92", "V92 = cvt"))
    with pytest.raises(ValueError, match="unclassified"):
        amdgcn.class_counts(amdgcn.parse(INLINE_ASM.replace("v_cvt_scalef32_pk_bf16_fp4 v92", "cvt v92"))[0])
    with pytest.raises(ValueError, match="without"):
        amdgcn.parse(INLINE_ASM.replace("\t;;#ASMEND\n", ""))


def test_main_loop_is_the_backward_branch_around_the_mfmas():
    loop = amdgcn.main_loop(LOOPED)
    assert [m for m, _ in loop] == ["buffer_load_dwordx4", "s_waitcnt", "v_mfma_f32_16x16x128_f8f6f4", "v_add_u32_e32",
                                    "s_add_i32", "s_cmp_lg_u32", "s_cbranch_scc1"]
    assert amdgcn.class_counts(loop) == {"valu": 1, "mfma": 1, "salu": 2, "smem": 0, "vmem": 1, "lds": 0,
                                         "branch": 1, "wait": 1, "total": 7}
    assert amdgcn.mfma_counts(loop) == {"v_mfma_f32_16x16x128_f8f6f4.fp4.fp8": 1}
    instructions, labels = amdgcn.parse(LOOPED)
    assert amdgcn.loop_spans(instructions, labels) == [(1, 7), (8, 9)]
    assert amdgcn.main_loop_span(instructions, labels) == (1, 7)
    assert amdgcn.main_loop(LOOPED.replace("v_mfma_f32_16x16x128_f8f6f4", "v_fma_f32")) is None
    two_loops = LOOPED.replace("\tv_mov_b32 v0, 0", "\tv_mfma_f32_16x16x32_f16 a[0:3], v[0:3], v[0:3], a[0:3]")
    with pytest.raises(ValueError, match="2 loops"):
        amdgcn.main_loop(two_loops)


def _loop(*body: str) -> list:
    """A hand-written loop body, parsed as tools/amdgcn.py parses compiled code."""
    text = ".LBB0_1:\n" + "".join(f"\t{line}\n" for line in body) + "\ts_cbranch_scc1 .LBB0_1\n"
    return amdgcn.main_loop(text)


MFMA = "v_mfma_f32_16x16x32_f16 a[0:3], v[0:3], v[4:7], a[0:3]"


def test_a_load_waited_for_before_the_mfma_is_not_in_flight():
    loop = _loop("buffer_load_dwordx4 v[0:3], v8, s[4:7], 0 offen", "s_waitcnt vmcnt(0)", MFMA)
    assert amdgcn.loads_in_flight_at_mfmas(loop) == [0]


def test_a_load_issued_after_the_mfma_counts_in_the_next_iteration():
    # Steady state: the load issued at the end of one iteration is outstanding at the
    # next one's MFMA, and waited for only after it.
    loop = _loop(MFMA, "s_waitcnt vmcnt(0)", "ds_write_b128 v9, v[0:3]",
                 "global_load_dwordx4 v[0:3], v[10:11], off", "s_add_i32 s0, s0, -1")
    assert amdgcn.loads_in_flight_at_mfmas(loop) == [1024]


def test_vmcnt_retires_the_oldest_first():
    loads = ["buffer_load_dwordx4 v[0:3], v8, s[4:7], 0 offen",  # 1024 B a wave
             "global_load_dwordx2 v[4:5], v[10:11], off",         # 512
             "buffer_load_dword v6, v8, s[4:7], 0 offen",          # 256
             "global_load_ushort v7, v[10:11], off"]               # 128
    assert amdgcn.loads_in_flight_at_mfmas(_loop(*loads, "s_waitcnt vmcnt(2)", MFMA)) == [256 + 128]
    assert amdgcn.loads_in_flight_at_mfmas(_loop(*loads, "s_waitcnt vmcnt(1) lgkmcnt(0)", MFMA)) == [128]
    assert amdgcn.loads_in_flight_at_mfmas(_loop(*loads, "s_waitcnt lgkmcnt(0)", MFMA, "s_waitcnt vmcnt(0)")) == \
        [1024 + 512 + 256 + 128]
    # a store holds a vmcnt slot (gfx9) but brings no data: vmcnt(1) leaves only it
    store = "buffer_store_dword v1, v8, s[4:7], 0 offen"
    assert amdgcn.loads_in_flight_at_mfmas(_loop(loads[0], store, "s_waitcnt vmcnt(1)", MFMA)) == [0]
    assert amdgcn.loads_in_flight_at_mfmas(_loop(store, loads[0], "s_waitcnt vmcnt(1)", MFMA)) == [1024]


def test_load_widths_and_unknown_vmem():
    widths = {"global_load_dwordx4": 1024, "buffer_load_dwordx3": 768, "buffer_load_dwordx2": 512,
              "global_load_dword": 256, "buffer_load_ushort": 128, "global_load_sshort": 128,
              "buffer_load_ubyte": 64, "global_load_sbyte": 64, "global_load_lds_dwordx4": 1024,
              "global_load_lds_dword": 256, "buffer_store_dwordx4": 0, "global_atomic_add": 0,
              "scratch_load_dword": 0}
    assert {m: amdgcn.vmem_load_bytes(m) for m in widths} == widths
    # buffer_load_* ... lds (LDS as destination) is a load of its width
    assert amdgcn.loads_in_flight_at_mfmas(_loop("buffer_load_dword v1, s[4:7], 0 offen lds", MFMA,
                                                 "s_waitcnt vmcnt(0)")) == [256]
    for unknown in ("buffer_load_format_xyzw", "buffer_wbl2", "buffer_inv", "global_load_dwordx8"):
        with pytest.raises(ValueError, match="no vmcnt rule"):
            amdgcn.vmem_load_bytes(unknown)
    with pytest.raises(ValueError, match="no vmcnt rule"):
        amdgcn.loads_in_flight_at_mfmas(_loop("buffer_wbl2 sc1", "s_waitcnt vmcnt(0)", MFMA))
    with pytest.raises(ValueError, match="gfx10"):
        amdgcn.loads_in_flight_at_mfmas(_loop("s_waitcnt_vscnt null, 0", MFMA))
    with pytest.raises(ValueError, match="named counters"):
        amdgcn.loads_in_flight_at_mfmas(_loop("s_waitcnt 0", MFMA))


def test_loads_never_waited_for_fill_the_counter():
    # vmcnt holds 63 on gfx9: a 64th VMEM instruction waits for the oldest
    assert amdgcn.loads_in_flight_at_mfmas(_loop("global_load_dword v1, v[10:11], off", MFMA)) == [63 * 256]


def _listing(*lines: str) -> tuple[list, dict]:
    """Hand-written code (labels at column 0, instructions indented), as tools/amdgcn.py parses it."""
    return amdgcn.parse("".join(line + "\n" if line.endswith(":") else f"\t{line}\n" for line in lines))


LOAD_X4 = "global_load_dwordx4 v[0:3], v[10:11], off nt"
BUFFER_LOAD = "buffer_load_dword v4, v8, s[4:7], 0 offen"
STORE = "global_store_dwordx2 v[10:11], v[0:1], off"


def test_round_trips_are_the_chain_of_waits_on_loads():
    def trips(*lines):
        return amdgcn.load_round_trips(_listing(*lines)[0])
    # loads issued together, then waited for one by one: one trip
    assert trips(LOAD_X4, BUFFER_LOAD, LOAD_X4, "s_waitcnt vmcnt(2)", "s_waitcnt vmcnt(1)", "s_waitcnt vmcnt(0)") == 1
    # a split at a time, each waited for before the next is issued: a trip each
    assert trips(*[line for _ in range(3) for line in (LOAD_X4, "s_waitcnt vmcnt(0)")]) == 3
    # a load issued after a wait that stalled starts the next trip, even when an older load
    # is waited for after it
    assert trips(LOAD_X4, LOAD_X4, "s_waitcnt vmcnt(1)", BUFFER_LOAD, "s_waitcnt vmcnt(1)", "s_waitcnt vmcnt(0)") == 2
    # the next chunk issued before this chunk's wait, every chunk's wait after it: one trip a chunk
    assert trips(LOAD_X4, "s_waitcnt vmcnt(0)", LOAD_X4, "v_add_f32_e32 v1, v2, v3", "s_waitcnt vmcnt(0)",
                 LOAD_X4, "s_waitcnt vmcnt(0)") == 3
    # stores, atomics and cache control hold a slot; a wait that retires only them is no trip
    assert trips(STORE, "s_waitcnt vmcnt(0)", "global_atomic_add v2, v2, v3, s[4:5] sc0", "s_waitcnt vmcnt(0)",
                 "buffer_inv sc1") == 0
    assert trips(LOAD_X4, STORE, "s_waitcnt vmcnt(1)") == 1 and trips(STORE, LOAD_X4, "s_waitcnt vmcnt(1)") == 0
    assert trips(LOAD_X4, "s_waitcnt lgkmcnt(0)") == 0  # a load never waited for: no trip
    with pytest.raises(ValueError, match="gfx10"):
        trips(LOAD_X4, "s_waitcnt_vmcnt null, 0")


def test_the_merge_is_what_follows_the_arrival():
    """The figures of the code after a kernel's first vector atomic (the in-kernel combine's
    arrival): instructions, loads, round trips, loops; none for a kernel without an atomic."""
    prologue = [LOAD_X4, "s_waitcnt vmcnt(0)", LOAD_X4, "s_waitcnt vmcnt(0)", STORE]
    merge = ["global_atomic_add v2, v2, v3, s[4:5] sc0", "s_waitcnt vmcnt(0)", "v_readfirstlane_b32 s6, v2",
             "s_cbranch_scc1 .LBB0_9", "s_waitcnt vmcnt(0) lgkmcnt(0)", "buffer_inv sc1", BUFFER_LOAD, BUFFER_LOAD,
             "s_waitcnt vmcnt(1)", "s_waitcnt vmcnt(0)", ".LBB0_8:", LOAD_X4, "s_waitcnt vmcnt(0)",
             "s_cbranch_scc1 .LBB0_8", ".LBB0_9:", "s_endpgm"]
    instructions, labels = _listing(*prologue, *merge)
    assert amdgcn.arrival_index(instructions) == len(prologue)
    assert amdgcn.merge_figures(instructions, labels) == {"instructions": len(merge) - 2, "loads": 3,
                                                          "round_trips": 2, "loops": 1}
    assert amdgcn.merge_figures(*_listing(*prologue, "s_endpgm")) is None
    # a loop before the arrival (the main loop) is none of the merge's
    instructions, labels = _listing(".LBB0_1:", LOAD_X4, "s_waitcnt vmcnt(0)", "s_cbranch_scc1 .LBB0_1", *merge)
    assert amdgcn.merge_figures(instructions, labels)["loops"] == 1


def test_mfma_cycles_follow_amds_table():
    # AMD's CDNA4 cycle counts (ROCm Blogs, "Matrix Core Programming on AMD CDNA3 and CDNA4
    # architecture"): the f8f6f4 kinds take twice as long when either operand is fp8.
    table = {"v_mfma_f32_16x16x32_f16": 16, "v_mfma_f32_16x16x32_bf16": 16, "v_mfma_f32_16x16x16_f16": 16,
             "v_mfma_f32_32x32x16_bf16": 32, "v_mfma_f32_32x32x8_f16": 32, "v_mfma_f32_16x16x32_fp8_fp8": 16,
             "v_mfma_f32_16x16x128_f8f6f4.fp8.fp8": 32, "v_mfma_scale_f32_16x16x128_f8f6f4.fp4.fp8": 32,
             "v_mfma_scale_f32_16x16x128_f8f6f4.fp4.fp4": 16, "v_mfma_f32_32x32x64_f8f6f4.fp6.fp4": 32,
             "v_mfma_f32_32x32x64_f8f6f4.bf8.fp4": 64, "v_mfma_f32_16x16x4_f32": 32, "v_mfma_f32_32x32x2_f32": 64,
             "v_mfma_f64_16x16x4_f64": 64}
    assert {kind: amdgcn.mfma_cycles(kind) for kind in table} == table
    assert amdgcn.mfma_kind("v_mfma_scale_f32_16x16x128_f8f6f4", "a[0:3], v[0:7], v[8:15], a[0:3], v1, v2 blgp:2") \
        == "v_mfma_scale_f32_16x16x128_f8f6f4.fp8.fp6"
    with pytest.raises(KeyError):
        amdgcn.mfma_cycles("v_mfma_f32_64x64x1_f99")


# ---- The Gluon forms' rings, in the order their header diagrams in submission.py draw ----
# (_gluon_attend_fp8, _gluon_attend_mxfp4): each main loop read as a list of the events the
# diagrams name, checked in the diagram's order and counts, per offered specialization.

def ring_events(loop: list) -> list[tuple[str, str]]:
    """(event, detail) of a main loop in order: "copy" (a buffer load into LDS), "load" (a
    buffer load into registers; detail: its bytes a lane), "wait" (s_waitcnt with a vmcnt;
    detail: the count), "barrier", "read" / "write" (LDS), "mfma" (detail: the mnemonic)."""
    events = []
    for mnemonic, operands in loop:
        kind = amdgcn.load_kind(mnemonic, operands) if amdgcn.instruction_class(mnemonic) == "vmem" else None
        if kind == "buffer_to_lds":
            events.append(("copy", mnemonic))
        elif kind is not None:
            events.append(("load", str(amdgcn.vmem_load_bytes(mnemonic) // amdgcn.LANES)))
        elif mnemonic == "s_waitcnt" and (count := re.search(r"vmcnt\((\d+)\)", operands)):
            events.append(("wait", count.group(1)))
        elif mnemonic == "s_barrier":
            events.append(("barrier", ""))
        elif mnemonic.startswith("ds_read"):
            events.append(("read", mnemonic))
        elif mnemonic.startswith("ds_write"):
            events.append(("write", mnemonic))
        elif amdgcn.instruction_class(mnemonic) == "mfma":
            events.append(("mfma", mnemonic))
    return events


def _where(events: list, name: str) -> list[int]:
    return [i for i, (event, _) in enumerate(events) if event == name]


def assert_fp8_ring_order(events: list, copies: int, stages: int) -> None:
    """_gluon_attend_fp8's diagram: barrier; the next tile's `copies` copies into LDS; one
    wait leaving (stages - 1) tiles' copies in flight; barrier; then the LDS reads and the
    MFMAs (the nope scores' 16x16x128 before any 16x16x32), no other wait, no other copy."""
    names = [event for event, _ in events if event not in ("read", "mfma")]
    assert names == ["barrier"] + ["copy"] * copies + ["wait", "barrier"], f"loop order {names}"
    waits = [int(detail) for event, detail in events if event == "wait"]
    assert waits == [(stages - 1) * copies], f"wait_group({stages - 1}) compiled to vmcnt{waits}"
    reads, mfmas = _where(events, "read"), _where(events, "mfma")
    assert reads and mfmas and min(reads) > _where(events, "wait")[0] and min(reads) < min(mfmas)
    kinds = [detail for event, detail in events if event == "mfma"]
    k128 = [i for i, kind in enumerate(kinds) if "16x16x128" in kind]
    assert k128 and max(k128) < min(i for i, kind in enumerate(kinds) if "16x16x32" in kind), kinds


def assert_mxfp4_pipeline_order(events: list, rest_bytes: list, code_bytes: list) -> None:
    """_gluon_attend_mxfp4's diagram: no copy into LDS; tile i's LDS reads and MFMAs (scaled
    scores before the bf16 P.V) all before the rest's loads of tile i+2; every wait before
    those loads keeps the codes of tile i+1 in flight (vmcnt >= their count; the compiler may
    start them among tile i's last V reads); the rest's loads of tile i+2, a barrier, one
    wait that keeps those in flight (vmcnt = their count), the codes' LDS writes, their
    loads."""
    assert not _where(events, "copy"), "the MXFP4 form copies into LDS"
    loads = _where(events, "load")
    rests, codes = loads[:len(rest_bytes)], loads[len(rest_bytes):]
    assert sorted(events[i][1] for i in rests) == sorted(rest_bytes), [events[i][1] for i in loads]
    assert [events[i][1] for i in codes] == code_bytes, [events[i][1] for i in loads]
    mfmas, reads, waits = _where(events, "mfma"), _where(events, "read"), _where(events, "wait")
    kinds = [events[i][1] for i in mfmas]
    scaled = [i for i, kind in enumerate(kinds) if kind.startswith("v_mfma_scale")]
    assert scaled and max(scaled) < min(i for i, kind in enumerate(kinds) if "bf16" in kind), kinds
    assert max(mfmas) < rests[0] and max(reads) < rests[0], "a product or a read after the next loads began"
    before = [int(events[i][1]) for i in waits if i < rests[0]]
    assert before and min(before) >= len(code_bytes), f"waits {before} drain the codes of tile i+1"
    between = [i for i in range(rests[-1], codes[0]) if events[i][0] in ("wait", "barrier", "write")]
    assert [events[i][0] for i in between][:2] == ["barrier", "wait"], [events[i] for i in between]
    assert [int(events[i][1]) for i in between if events[i][0] == "wait"] == [len(rest_bytes)]
    assert all(events[i][0] == "write" for i in between[2:]) and len(between) > 2
    assert not [i for i in waits if i > codes[0]], "a wait after the codes' loads"


@pinned_triton_codegen("the Gluon rings' order")
def test_gluon_rings_compile_in_the_order_their_diagrams_draw(report):
    rep, folder = report
    seen = set()
    for kernel in rep["kernels"]:
        form, constexprs = _kv_form(kernel), kernel["launch"]["constexprs"]
        if form not in ("fp8:gluon", "mxfp4:gluon"):
            continue
        lanes = 64 * kernel["launch"]["options"]["num_warps"]
        events = ring_events(amdgcn.main_loop((folder / "asm" / f"{kernel['name']}.amdgcn").read_text()))
        rows = constexprs["BLOCK_N"]
        if form == "fp8:gluon":  # a row's 576 bytes in 16-byte copies, shared by the lanes
            assert_fp8_ring_order(events, rows * 576 // 16 // lanes, constexprs["STAGES"])
        else:  # rest: the rope codes (32 bytes a row) in 16-byte loads, the 18 scale bytes one a load
            assert constexprs["STAGES"] == 2
            assert_mxfp4_pipeline_order(events, ["16"] * (rows * 32 // 16 // lanes) + ["1"] * (rows * 18 // lanes),
                                        ["16"] * (rows * 256 // 16 // lanes))
        seen.add(form)
    assert seen == {"fp8:gluon", "mxfp4:gluon"}
