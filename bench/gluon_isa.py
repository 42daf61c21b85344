"""Read the gfx950 AMDGCN of the Gluon launch offered first, per benchmark shape.

    python3 bench/gluon_isa.py [--format fp8|mxfp4] [--json FILE] [--asm-dir DIR] [batch,kv_len ...]

Compiles (on any machine, no GPU) the Gluon decode kernel's launch that
triton_launch_candidates offers first for the format (default fp8) on 256 CUs of gfx950, through
gluon's GluonASTSource with the JIT's own specialization (bench/compile_target.py), and
prints what bench/gfx950_report.py reads for a Triton kernel: registers, spills, LDS,
occupancy, the main loop's instructions by class a wave-iteration, the global-load bytes
in flight at its MFMAs (a CU: at the occupancy), and the loop's issue / VALU x4 / MFMA
cycles against the HBM time of the format's bytes at 8 TB/s (STATIC BOUNDS, not times).
The default shapes are issue 21's: 32x8192, 64x8192, 256x1024, 256x8192.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
import amdgcn  # noqa: E402
import compile_target  # noqa: E402
import gfx950_report  # noqa: E402
import submission as sub  # noqa: E402
import triton  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

SHAPES = [(32, 8192), (64, 8192), (256, 1024), (256, 8192)]


def compile_gluon(spec):
    source = GluonASTSource(spec.kernel, spec.signature, spec.constexprs, spec.attrs)
    return triton.compile(source, target=spec.target, options=spec.options.__dict__)


def shape_report(batch: int, kv_len: int, asm_dir: Path | None, kv_format: str = "fp8") -> dict:
    launch = sub.triton_launch_candidates(kv_format, batch, kv_len, gfx950_report.CUS, "gfx950")[0]
    if launch.form != "gluon":
        raise SystemExit(f"the {kv_format} launch offered first on gfx950 is {launch.form!r}: "
                         "Gluon does not import here")
    calls = compile_target.decode_kernel_calls(compile_target.contract_inputs(batch, kv_len), kv_format, launch)
    spec = compile_target.specialize(calls[0], compile_target.TARGETS["gfx950"])
    compiled = compile_gluon(spec)
    if asm_dir:
        asm_dir.mkdir(parents=True, exist_ok=True)
        (asm_dir / f"{kv_format}_gluon_{batch}x{kv_len}.amdgcn").write_text(compiled.asm["amdgcn"])
    kernel = gfx950_report.kernel_record(kv_format, spec, compiled)
    combine = [gfx950_report.kernel_record(kv_format, compile_target.specialize(c, compile_target.TARGETS["gfx950"]),
                                           compile_target.specialize(c, compile_target.TARGETS["gfx950"]).compile())
               for c in calls[1:]]
    row = gfx950_report.shape_row(batch, kv_len, kv_format, launch, calls[0], [kernel, *combine])
    loop = kernel["loop"]
    return {"batch": batch, "kv_len": kv_len, "launch": sub.dataclasses.asdict(launch),
            "vgpr": kernel["vgpr"], "agpr": kernel["agpr"], "total_vgpr": kernel["total_vgpr"],
            "vgpr_spill": kernel["vgpr_spill"], "sgpr_spill": kernel["sgpr_spill"], "lds_bytes": kernel["lds_bytes"],
            "occupancy": kernel["occupancy"], "resident_programs": kernel["resident_programs"],
            "loop_per_wave_iteration": loop["per_wave_iteration"], "mfma_kinds": loop["mfma_per_wave_iteration"],
            "in_flight_bytes_per_wave_min": loop["in_flight_bytes_per_wave"],
            "in_flight_bytes_per_cu_at_occupancy": kernel["in_flight_bytes_per_cu"],
            "in_flight_bytes_per_cu_this_shape": row["in_flight_bytes_per_cu"],
            "lds_bytes_per_cu_at_occupancy": kernel["lds_bytes"] * kernel["resident_programs"],
            "outside_loop_instructions": row["outside_loop_instructions"],
            "combine_instructions": row["combine_instructions"],
            **{f"{name}_x_hbm": round(row[f"{name}_x_hbm"], 4) for name in ("issue", "issue_grid", "valu", "mfma")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shapes", nargs="*", help="batch,kv_len (default: issue 21's four)")
    parser.add_argument("--format", default="fp8", choices=("fp8", "mxfp4"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--asm-dir", type=Path)
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] or SHAPES
    rows = [shape_report(batch, kv_len, args.asm_dir, args.format) for batch, kv_len in shapes]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps({"target": "gfx950", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
