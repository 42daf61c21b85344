"""Read the gfx950 AMDGCN of the Gluon launch offered first, per benchmark shape.

    python3 -m bench.gluon_isa [--format fp8|mxfp4] [--json FILE] [--table FILE] [--asm-dir DIR] [batch,kv_len ...]
    python3 -m bench.gluon_isa compile-times [fp8|mxfp4]


Compiles (on any machine, no GPU) the Gluon decode kernel's launch that
launch_candidates offers first for the format (default fp8) on 256 CUs of gfx950, through
gluon's GluonASTSource with the JIT's own specialization (tools/compile_target.py), and
prints what bench/gfx950_report.py reads for a kernel (its definitions, computed here from
tools/amdgcn.py alone): registers, spills, LDS,
occupancy, the main loop's instructions by class a wave-iteration, the global-load bytes
in flight at its MFMAs (a CU: at the occupancy), and the loop's issue / VALU x4 / MFMA
cycles against the HBM time of the format's bytes at 8 TB/s (STATIC BOUNDS, not times).
The default shapes are the report's target shapes: 32x8192, 64x8192, 256x1024, 256x8192.
`compile-times` compiles, with an empty Triton cache, each distinct gfx950 specialization
of the Gluon kernel among every candidate of the format (default fp8) the 8 benchmark shapes are offered, and
prints the seconds each took.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import triton
from triton.experimental.gluon._runtime import GluonASTSource

import submission as sub
from tools import amdgcn, compile_target, leaderboard

SHAPES = [(32, 8192), (64, 8192), (256, 1024), (256, 8192)]
# The MI355X as bench/gfx950_report.py models it (AMD's published figures).
CUS, SIMDS_PER_CU, CLOCK_HZ, HBM_BYTES_PER_S = 256, 4, 2.4e9, 8e12
LDS_BYTES_PER_CU, VALU_CYCLES = 160 * 1024, 4


def compile_gluon(spec):
    source = GluonASTSource(spec.kernel, spec.signature, spec.constexprs, spec.attrs)
    return triton.compile(source, target=spec.target, options=spec.options.__dict__)


def first_gluon_launch(batch: int, kv_len: int, kv_format: str = "fp8"):
    launch = sub.launch_candidates(kv_format, batch, kv_len, CUS, "gfx950")[0]
    if launch.form != "gluon":
        raise SystemExit(f"the {kv_format} launch offered first on gfx950 is {launch.form!r}: no Gluon form "
                         f"with triton {triton.__version__} ({sub.gluon_problem('cdna4')})")
    return launch


def shape_report(batch: int, kv_len: int, asm_dir: Path | None, kv_format: str = "fp8") -> dict:
    launch = first_gluon_launch(batch, kv_len, kv_format)
    calls = compile_target.decode_kernel_calls(compile_target.contract_inputs(batch, kv_len), kv_format, launch)
    spec = compile_target.specialize(calls[0], compile_target.TARGETS["gfx950"])
    compiled = compile_gluon(spec)
    asm = compiled.asm["amdgcn"]
    if asm_dir:
        asm_dir.mkdir(parents=True, exist_ok=True)
        (asm_dir / f"{kv_format}_gluon_{batch}x{kv_len}.amdgcn").write_text(asm)
    found = amdgcn.resources(asm)
    instructions, labels = amdgcn.parse(asm)
    first, last = amdgcn.main_loop_span(instructions, labels)
    loop = instructions[first:last + 1]
    per_wave = amdgcn.class_counts(loop)
    kinds = amdgcn.mfma_counts(loop)
    waves = launch.num_warps
    lds_bytes = compiled.metadata.shared
    # Programs a CU holds: the fewer that registers and LDS allow; their waves over 4 SIMDs.
    programs = min(found["occupancy_registers"] * SIMDS_PER_CU // waves, LDS_BYTES_PER_CU // lds_bytes)
    in_flight = min(amdgcn.loads_in_flight_at_mfmas(loop))  # a wave's fewest load bytes in flight at an MFMA
    combine = [len(amdgcn.parse(compile_target.specialize(c, compile_target.TARGETS["gfx950"]).compile()
                                .asm["amdgcn"])[0]) for c in calls[1:]]
    # Static bounds per token of the shape (all waves of a program), against the HBM time.
    tokens_per_simd_cycle = batch * kv_len / (CUS * SIMDS_PER_CU * CLOCK_HZ)
    hbm_s = leaderboard.route_bytes(f"triton_{kv_format}", batch, kv_len) / HBM_BYTES_PER_S
    per_token = {name: count * waves / launch.block_n for name, count in per_wave.items()}
    mfma_cycles = sum(amdgcn.mfma_cycles(kind) * count for kind, count in kinds.items()) * waves / launch.block_n
    return {"batch": batch, "kv_len": kv_len, "launch": sub.dataclasses.asdict(launch),
            "vgpr": found["vgpr"], "agpr": found["agpr"], "total_vgpr": found["total_vgpr"],
            "vgpr_spill": found["vgpr_spill"], "sgpr_spill": found["sgpr_spill"], "lds_bytes": lds_bytes,
            "occupancy": -(-programs * waves // SIMDS_PER_CU), "resident_programs": programs,
            "loop_per_wave_iteration": per_wave, "mfma_kinds": kinds,
            "in_flight_bytes_per_wave_min": in_flight,
            "in_flight_bytes_per_cu_at_occupancy": in_flight * waves * programs,
            "lds_bytes_per_cu_at_occupancy": lds_bytes * programs,
            "outside_loop_instructions": len(instructions) - len(loop),
            "combine_instructions": sum(combine),
            "issue_x_hbm": round(per_token["total"] * tokens_per_simd_cycle / hbm_s, 4),
            "valu_x_hbm": round(per_token["valu"] * VALU_CYCLES * tokens_per_simd_cycle / hbm_s, 4),
            "mfma_x_hbm": round(mfma_cycles * tokens_per_simd_cycle / hbm_s, 4)}


def table(rows: list) -> str:
    lines = ["| shape | splits | VGPR (arch+AGPR) | spills | LDS a program | occupancy (waves a SIMD) | in flight a CU "
             "| loop a wave-iteration (VALU / MFMA / VMEM / LDS / total) | issue | VALU x4 | MFMA | outside loop "
             "| combine kernel |", "|" + " --- |" * 13]
    for r in rows:
        loop = r["loop_per_wave_iteration"]
        lines.append(f"| {r['batch']}x{r['kv_len']} | {r['launch']['num_splits']} | {r['vgpr']}+{r['agpr']} "
                     f"| {r['vgpr_spill']} | {r['lds_bytes']} B | {r['occupancy']} "
                     f"| {r['in_flight_bytes_per_cu_at_occupancy']} B "
                     f"| {loop['valu']} / {loop['mfma']} / {loop['vmem']} / {loop['lds']} / {loop['total']} "
                     f"| {r['issue_x_hbm']:.3f} | {r['valu_x_hbm']:.3f} | {r['mfma_x_hbm']:.3f} "
                     f"| {r['outside_loop_instructions']} | {r['combine_instructions']} |")
    return "\n".join(lines) + "\n"


BENCHMARK_SHAPES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024), (256, 8192)]


def compile_times(kv_format: str = "fp8") -> None:
    seconds = {}
    for batch, kv_len in BENCHMARK_SHAPES:
        for launch in sub.launch_candidates(kv_format, batch, kv_len, CUS, "gfx950"):
            if launch.form != "gluon":
                continue
            calls = compile_target.decode_kernel_calls(compile_target.contract_inputs(batch, kv_len), kv_format,
                                                       launch)
            spec = compile_target.specialize(calls[0], compile_target.TARGETS["gfx950"])
            if spec.key not in seconds:
                started = time.time()
                compile_gluon(spec)
                seconds[spec.key] = time.time() - started
                print(f"{batch}x{kv_len} splits={launch.num_splits} combine_in_kernel={launch.combine_in_kernel}: "
                      f"{seconds[spec.key]:.2f} s", flush=True)
    print(f"{len(seconds)} Gluon specializations for gfx950, {sum(seconds.values()):.1f} s")


def main() -> None:
    if sys.argv[1:2] == ["compile-times"]:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()  # read when the first compile starts
        compile_times(*sys.argv[2:3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shapes", nargs="*", help="batch,kv_len (default: the report's four target shapes)")
    parser.add_argument("--format", default="fp8", choices=("fp8", "mxfp4"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--table", type=Path, help="a markdown table of the rows")
    parser.add_argument("--asm-dir", type=Path)
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] or SHAPES
    rows = [shape_report(batch, kv_len, args.asm_dir, args.format) for batch, kv_len in shapes]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps({"target": "gfx950", "rows": rows}, indent=1))
    if args.table:
        args.table.write_text(table(rows))


if __name__ == "__main__":
    main()
