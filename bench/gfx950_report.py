"""gfx950 (MI355X) static report: every Triton specialization the autopick can offer on an
MI355X, compiled for gfx950 on this machine (no GPU), and what its code alone implies.

    python3 bench/gfx950_report.py [--json FILE] [--asm-dir DIR] [--readme README.md]
    python3 bench/gfx950_report.py render FILE [--readme README.md]

The first form compiles (bench/compile_target.py: Triton's own JIT specialization, for
each benchmark shape's stand-in arguments) every launch that triton_launch_candidates
offers for the 8 benchmark shapes and both Triton formats on 256 CUs of arch "gfx950",
decode kernel and split-combine kernel alike, and reads each distinct specialization's
AMDGCN (bench/amdgcn.py): VGPRs (arch, AGPR), SGPRs, spills, scratch, LDS, occupancy,
MFMA instructions by kind, and the main loop's instructions by class per KV token. With
--asm-dir it writes each specialization's AMDGCN to DIR/<name>.amdgcn; with --json the
report; with --readme the table between the README's gfx950 markers. `render` makes the
table from a saved report without compiling.

Per benchmark shape and format, for the launch offered first, it sets what the main loop
alone costs against the HBM time of the format's bytes (bench/report.py route_bytes) at
8 TB/s. These are STATIC BOUNDS, not times: latency, memory behaviour, dependencies and
the prologue and epilogue are not modelled. With N = 256 CUs x 4 SIMDs at 2.4 GHz:
  issue_us       loop instructions a token (all waves of a program) x tokens / N
                 (one instruction a cycle a SIMD);
  issue_grid_us  the same over the SIMDs the grid can occupy, min(N, programs x
                 min(warps, 4)): above issue_us where the grid leaves CUs idle;
  valu_us        VALU instructions x 4 cycles (a wave64 instruction on a 16-lane SIMD;
                 quarter-rate ones take longer, so a lower bound) x tokens / N;
  mfma_us        MFMA cycles (bench/amdgcn.py: gfx950 pass counts x 4) x tokens / N;
  hbm_us         the format's bytes (KV, q and out once) / 8 TB/s.
Occupancy is the lower of the compiler's (registers and static LDS) and the LDS limit of
the launch's dynamic shared memory (160 KiB a CU, a program's waves spread over 4 SIMDs).

Loads in flight (also STATIC, from the code alone): per wave, the fewest global-load
bytes issued and not yet waited for at any MFMA of the main loop's body
(bench/amdgcn.py loads_in_flight_at_mfmas). Every VMEM instruction, load, store or
atomic, takes a vmcnt slot; "s_waitcnt vmcnt(N)" retires the oldest until at most N are
outstanding; a load counts its width x 64 lanes (global_/buffer_load_dwordx4 and their
LDS forms 1 KiB a wave, dwordx2 512 B, dword 256 B ...: all lanes taken as active),
stores, atomics and scratch loads count 0 bytes. The body is run straight through (both
sides of a branch inside it) until its state repeats, so loads issued late in one
iteration count at the start of the next. A CU's figure is that times the waves it holds:
  waves a CU   num_warps x the programs a CU holds at once, the lower of the programs
               that occupancy allows ((occupancy x 4 SIMDs) // num_warps; the "at
               occupancy" column) and the programs the launch gives its busiest CU
               (ceil(programs / 256); the per-shape column).
Little's law asks a CU for HBM bandwidth x loaded latency / CUs in flight to keep HBM busy:
at 8 TB/s and an assumed 1.5 us that is 46,875 B = 45.8 KiB (the issue's "about 48 KB"),
shown beside the column. With no loads in flight while a wave computes, its memory waits
are not hidden by its own work, only by other waves'.

Small shapes (per benchmark shape, the launch offered first): the CUs its grid occupies
(min(programs, 256)), the waves on its busiest CU (above), the tiles (BLOCK_N iterations of
the main loop) a program runs (ceil(ceil(kv_len / splits) / BLOCK_N): the decode kernel's
split rule), and the instructions outside the main loop: the decode kernel's prologue and
epilogue (merge included) and, with a separate combine launch, the combine kernel's, each
counted once along the straight-line listing. Where the code outside the main loop has no
loop of its own, branches make this an upper bound of what one wave executes (a wave runs
one side of each branch; the in-kernel merge only in the last program of a sequence).
Other loops (the in-kernel merge's over the splits, the combine kernel's at 64 splits) are
counted once, one pass, and the table says how many there are: there the figure is no bound.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
import amdgcn  # noqa: E402
import triton  # noqa: E402
import compile_target  # noqa: E402
import report  # noqa: E402
import submission as sub  # noqa: E402

FORMATS = ("fp8", "mxfp4")
CUS, SIMDS_PER_CU, CLOCK_HZ = 256, 4, 2.4e9  # MI355X (../shared/PROBLEM.md)
SIMDS = CUS * SIMDS_PER_CU
HBM_BYTES_PER_S = 8e12
LDS_BYTES_PER_CU = 160 * 1024
MAX_WAVES_PER_SIMD = 8
VALU_CYCLES = 4
LOADED_LATENCY_S = 1.5e-6  # assumed HBM latency under load, for the in-flight target
IN_FLIGHT_TARGET_BYTES_PER_CU = HBM_BYTES_PER_S * LOADED_LATENCY_S / CUS  # Little's law
README_BEGIN = "<!-- gfx950:begin -->"
README_END = "<!-- gfx950:end -->"


# ------------------------------------------------------------------------------------
# one compiled specialization
# ------------------------------------------------------------------------------------
def kernel_name(kv_format: str, spec: compile_target.Specialization) -> str:
    """e.g. fp8.mla_decode_kernel.SPLIT.BLOCK_N=32.MXFP4_DOT_DTYPE=bf16.num_warps=4.num_stages=3:
    the format, the kernel, its constexprs (True flags by name, False ones left out) and
    the options that differ from the backend's defaults."""
    parts = [kv_format, spec.kernel.__name__.strip("_")]
    for name, value in spec.constexpr_values().items():
        if value is True:
            parts.append(name)
        elif value is not False:
            parts.append(f"{name}={value}")
    parts += [f"{name}={value}" for name, value in spec.non_default_options().items()]
    return ".".join(parts)


def occupancy_lds(lds_bytes: int, num_warps: int) -> int:
    """Waves a SIMD that the LDS allows: whole programs a CU, their waves over 4 SIMDs."""
    if lds_bytes == 0:
        return MAX_WAVES_PER_SIMD
    programs = LDS_BYTES_PER_CU // lds_bytes
    return min(MAX_WAVES_PER_SIMD, programs * math.ceil(num_warps / SIMDS_PER_CU))


def resident_programs(occupancy: int, num_warps: int) -> int:
    """Programs a CU holds at once: its 4 SIMDs x occupancy waves, num_warps a program."""
    programs = occupancy * SIMDS_PER_CU // num_warps
    if programs < 1:
        raise ValueError(f"{num_warps} waves a program do not fit {occupancy} waves a SIMD on a CU")
    return programs


def loop_record(loop: list, spec: compile_target.Specialization) -> dict:
    """The main loop per KV token, all waves of a program together (a wave's count x
    num_warps / BLOCK_N tokens an iteration), and a wave's global loads in flight at its
    MFMAs (bytes, fewest and at each MFMA in order)."""
    block_n = spec.constexpr_values().get("BLOCK_N")
    if block_n is None:
        raise ValueError(f"{spec.kernel.__name__}: a loop with MFMAs but no BLOCK_N constexpr")
    waves = spec.options.num_warps
    per_wave = amdgcn.class_counts(loop)
    kinds = amdgcn.mfma_counts(loop)
    mfma_cycles = sum(amdgcn.mfma_cycles(kind) * count for kind, count in kinds.items())
    record = {name: count * waves / block_n for name, count in per_wave.items()}
    in_flight = amdgcn.loads_in_flight_at_mfmas(loop)
    record.update(tokens=block_n, mfma_cycles=mfma_cycles * waves / block_n,
                  per_wave_iteration=per_wave, mfma_per_wave_iteration=kinds,
                  in_flight_bytes_per_wave=min(in_flight), in_flight_bytes_at_mfma=in_flight)
    return record


def kernel_record(kv_format: str, spec: compile_target.Specialization, compiled) -> dict:
    asm = compiled.asm["amdgcn"]
    instructions, labels = amdgcn.parse(asm)
    found = amdgcn.resources(asm)
    lds_bytes = compiled.metadata.shared
    num_warps = spec.options.num_warps
    span = amdgcn.main_loop_span(instructions, labels)
    loop = None if span is None else instructions[span[0]:span[1] + 1]
    occupancy = min(found["occupancy_registers"], occupancy_lds(lds_bytes, num_warps))
    loop_fields = loop_record(loop, spec) if loop is not None else None
    # instructions before the loop's first and after its backward branch (all, without a loop)
    prologue, epilogue = (span[0], len(instructions) - span[1] - 1) if span else (len(instructions), 0)
    other_loops = [other for other in amdgcn.loop_spans(instructions, labels) if other != span]
    programs = resident_programs(occupancy, num_warps)
    return {
        "name": kernel_name(kv_format, spec),
        "format": kv_format,
        "kernel": spec.kernel.__name__,
        "launch": {"constexprs": {k: _plain(v) for k, v in spec.constexpr_values().items()},
                   "options": {k: _plain(v) for k, v in spec.non_default_options().items()}},
        "vgpr": found["vgpr"], "agpr": found["agpr"], "total_vgpr": found["total_vgpr"], "sgpr": found["sgpr"],
        "vgpr_spill": found["vgpr_spill"], "sgpr_spill": found["sgpr_spill"],
        "scratch_bytes": found["scratch_bytes"], "lds_bytes": lds_bytes,
        "occupancy": occupancy,
        "occupancy_registers": found["occupancy_registers"],
        "occupancy_lds": occupancy_lds(lds_bytes, num_warps),
        "resident_programs": programs,
        "mfma": amdgcn.mfma_counts(instructions),
        "instructions": len(instructions),
        "outside_loop": {"prologue": prologue, "epilogue": epilogue, "total": prologue + epilogue,
                         "loops": len(other_loops)},
        "loop": loop_fields,
        "in_flight_bytes_per_cu": (loop_fields["in_flight_bytes_per_wave"] * programs * num_warps
                                   if loop_fields else None),
        "offered": [],
    }


def _plain(value):
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


# ------------------------------------------------------------------------------------
# the whole report
# ------------------------------------------------------------------------------------
def tiles_per_program(kv_len: int, launch) -> int:
    """BLOCK_N iterations a program runs on a sequence of kv_len tokens: the decode kernel
    gives each of the splits ceil(kv_len / splits) tokens rounded up to whole tiles."""
    return math.ceil(math.ceil(kv_len / launch.num_splits) / launch.block_n)


def shape_row(batch: int, kv_len: int, kv_format: str, launch, decode_call, kernels: list) -> dict:
    """One benchmark shape's launch: the decode kernel's record first, then the combine's if any."""
    kernel, *second = kernels
    loop = kernel["loop"]
    if loop is None:
        raise ValueError(f"{kernel['name']}: no main loop with MFMAs to bound")
    tokens = batch * kv_len
    programs = math.prod(decode_call.grid)
    num_warps = kernel["launch"]["options"]["num_warps"]
    simds_used = min(SIMDS, programs * min(num_warps, SIMDS_PER_CU))
    waves_per_cu = min(kernel["resident_programs"], math.ceil(programs / CUS)) * num_warps
    nbytes = report.route_bytes(f"triton_{kv_format}", batch, kv_len)
    hbm_us = nbytes / HBM_BYTES_PER_S * 1e6
    per_simd_us = tokens / (SIMDS * CLOCK_HZ) * 1e6  # one cycle a token on every SIMD
    row = {
        "batch": batch, "kv_len": kv_len, "format": kv_format, "kernel": kernel["name"], "offered_first": True,
        "launch": dataclasses.asdict(launch), "programs": programs, "simds_used": simds_used, "bytes": nbytes,
        "issue_us": loop["total"] * per_simd_us,
        "issue_grid_us": loop["total"] * per_simd_us * SIMDS / simds_used,
        "valu_us": loop["valu"] * VALU_CYCLES * per_simd_us,
        "mfma_us": loop["mfma_cycles"] * per_simd_us,
        "hbm_us": hbm_us,
        "cus_used": min(CUS, programs), "waves_per_cu": waves_per_cu,
        "tiles_per_program": tiles_per_program(kv_len, launch),
        "outside_loop_instructions": kernel["outside_loop"]["total"],
        "combine_instructions": sum(k["instructions"] for k in second),
        "loops_outside": kernel["outside_loop"]["loops"] + sum(k["outside_loop"]["loops"] for k in second),
        "in_flight_bytes_per_cu": loop["in_flight_bytes_per_wave"] * waves_per_cu,
    }
    for name in ("issue", "issue_grid", "valu", "mfma"):
        row[f"{name}_x_hbm"] = row[f"{name}_us"] / hbm_us
    return row


def offered_calls():
    """(format, batch, kv_len, rank, launch, its KernelCalls) for every launch the autopick
    can offer on an MI355X for the benchmark shapes; rank 0 is the one offered first."""
    for kv_format in FORMATS:
        for batch, kv_len in report.BENCHMARK_SHAPES:
            data = compile_target.contract_inputs(batch, kv_len)
            launches = sub.triton_launch_candidates(kv_format, batch, kv_len, CUS, "gfx950")
            for rank, launch in enumerate(launches):
                calls = compile_target.decode_kernel_calls(data, kv_format, launch)
                yield kv_format, batch, kv_len, rank, launch, calls


def build(asm_dir: Path | None) -> dict:
    target = compile_target.TARGETS["gfx950"]
    started = time.perf_counter()
    compiled, kernels, shapes = {}, {}, []  # JIT key -> compiled; (format, key) -> record

    def record_of(kv_format, call):
        spec = compile_target.specialize(call, target)
        if spec.key not in compiled:
            compiled[spec.key] = spec.compile()
        if (kv_format, spec.key) not in kernels:
            kernels[(kv_format, spec.key)] = kernel_record(kv_format, spec, compiled[spec.key])
        return kernels[(kv_format, spec.key)]

    for kv_format, batch, kv_len, rank, launch, calls in offered_calls():
        records = [record_of(kv_format, call) for call in calls]
        for record in records:
            record["offered"].append({"batch": batch, "kv_len": kv_len, "rank": rank,
                                      "launch": dataclasses.asdict(launch)})
        if rank == 0:
            shapes.append(shape_row(batch, kv_len, kv_format, launch, calls[0], records))
    names = [k["name"] for k in kernels.values()]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"two specializations share a name (they differ only in attributes): {duplicates}")
    if asm_dir is not None:
        asm_dir.mkdir(parents=True, exist_ok=True)
        for (_, key), record in kernels.items():
            (asm_dir / f"{record['name']}.amdgcn").write_text(compiled[key].asm["amdgcn"])
    return {"target": "gfx950", "triton": triton.__version__, "kernels": list(kernels.values()), "shapes": shapes,
            "compiled_specializations": len(compiled), "compile_seconds": time.perf_counter() - started,
            "machine": {"cus": CUS, "simds_per_cu": SIMDS_PER_CU, "clock_hz": CLOCK_HZ,
                        "hbm_bytes_per_s": HBM_BYTES_PER_S, "lds_bytes_per_cu": LDS_BYTES_PER_CU,
                        "loaded_latency_s": LOADED_LATENCY_S,
                        "in_flight_target_bytes_per_cu": IN_FLIGHT_TARGET_BYTES_PER_CU}}


# ------------------------------------------------------------------------------------
# render
# ------------------------------------------------------------------------------------
def table(rep: dict) -> str:
    if "in_flight_target_bytes_per_cu" not in rep["machine"]:
        raise ValueError("this report predates the loads-in-flight and small-shape columns: "
                         "make it again with python3 bench/gfx950_report.py --json FILE")
    lines = [
        f"**STATIC BOUND, not a time.** Compiled for gfx950 by Triton {rep['triton']} on a CPU; no MI355X "
        "ran any of it. Counts are read from the compiled code; latency, memory behaviour and dependencies "
        "are not modelled, and the times count the main loop alone (the instructions outside it are a "
        "column). MI355X: 256 CUs x 4 SIMDs at 2.4 GHz, HBM 8 TB/s; the loads-in-flight target is Little's "
        "law at 8 TB/s and an assumed 1.5 us loaded latency over 256 CUs. Per benchmark shape and format, "
        "the launch offered first:",
        "",
        "| batch | kv_len | format | kernel | loop instr / token | issue (us) | x HBM | issue, this grid (us) "
        "| VALU x4 cycles (us) | x HBM | MFMA pipe (us) | x HBM | HBM (us) | CUs used | waves / CU "
        "| tiles / program | instr outside loop (decode + combine) "
        f"| loads in flight / CU (KiB; target {rep['machine']['in_flight_target_bytes_per_cu'] / 1024:.1f}) |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    kernels = {k["name"]: k for k in rep["kernels"]}
    for r in rep["shapes"]:
        loop = kernels[r["kernel"]]["loop"]
        lines.append(f"| {r['batch']} | {r['kv_len']} | {r['format']} | `{r['kernel']}` | {loop['total']:.0f} | "
                     f"{r['issue_us']:.1f} | {r['issue_x_hbm']:.2f} | {r['issue_grid_us']:.1f} | "
                     f"{r['valu_us']:.1f} | {r['valu_x_hbm']:.2f} | {r['mfma_us']:.1f} | {r['mfma_x_hbm']:.2f} | "
                     f"{r['hbm_us']:.1f} | {r['cus_used']} | {r['waves_per_cu']} | {r['tiles_per_program']} | "
                     f"{r['outside_loop_instructions']} + {r['combine_instructions']}"
                     f"{_loops_note(r['loops_outside'])} | "
                     f"{r['in_flight_bytes_per_cu'] / 1024:.1f} |")
    lines += ["", "Every specialization offered (loop columns: per KV token, all waves of a program; "
                  "in flight: a wave's fewest global-load bytes outstanding at an MFMA of the loop, and that "
                  "times the waves a CU holds at its occupancy):", "",
              "| kernel | VGPR | AGPR | SGPR | spills (V/S) | scratch | LDS (B) | occupancy | MFMA (kernel) "
              "| VALU | SALU | VMEM | LDS | MFMA | total | MFMA cycles | instr outside loop "
              "| in flight / wave (B) | in flight / CU (KiB) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in rep["kernels"]:
        mfma = ", ".join(f"{kind} x{count}" for kind, count in k["mfma"].items()) or "none"
        loop = k["loop"]
        counts = (" | ".join(f"{loop[c]:.1f}" for c in ("valu", "salu", "vmem", "lds", "mfma", "total", "mfma_cycles"))
                  if loop else " | ".join(["no MFMA loop"] + [""] * 6))
        in_flight = (f"{loop['in_flight_bytes_per_wave']} | {k['in_flight_bytes_per_cu'] / 1024:.1f}"
                     if loop else " | ")
        lines.append(f"| `{k['name']}` | {k['vgpr']} | {k['agpr']} | {k['sgpr']} | {k['vgpr_spill']}/{k['sgpr_spill']} "
                     f"| {k['scratch_bytes']} | {k['lds_bytes']} | {k['occupancy']} | {mfma} | {counts} "
                     f"| {k['outside_loop']['total']}{_loops_note(k['outside_loop']['loops'])} | {in_flight} |")
    lines += ["", f"{rep['compiled_specializations']} specializations compiled in {rep['compile_seconds']:.0f} s. "
                  f"Produced by `{rep['command']}`; the columns are defined in bench/gfx950_report.py's docstring."]
    return "\n".join(lines)


def _loops_note(loops: int) -> str:
    return f" ({loops} loop{'s' * (loops > 1)} counted once)" if loops else ""


def write_readme(readme: Path, text: str, source: str) -> None:
    content = readme.read_text()
    begin, end = content.index(README_BEGIN) + len(README_BEGIN), content.index(README_END)
    readme.write_text(content[:begin] + f"\n\nFrom `{source}`:\n\n" + text + "\n\n" + content[end:])


def main() -> None:
    if sys.argv[1:2] == ["render"]:
        parser = argparse.ArgumentParser(prog="gfx950_report.py render")
        parser.add_argument("json", type=Path)
        parser.add_argument("--readme", type=Path)
        args = parser.parse_args(sys.argv[2:])
        rep = json.loads(args.json.read_text())
        source = args.json
    else:
        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--json", type=Path, help="write the report here")
        parser.add_argument("--asm-dir", type=Path, help="write each specialization's AMDGCN here")
        parser.add_argument("--readme", type=Path, help="write the table between this file's gfx950 markers")
        args = parser.parse_args()
        rep = build(args.asm_dir)
        rep["command"] = shlex.join(["python3", "bench/gfx950_report.py", *sys.argv[1:]])
        source = args.json
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rep, indent=1))
    text = table(rep)
    print(text)
    if args.readme is not None:
        if source is None:
            raise SystemExit("--readme needs the report saved with --json (the README cites it)")
        write_readme(args.readme, text, source.resolve().relative_to(args.readme.parent.resolve()).as_posix())


if __name__ == "__main__":
    main()
