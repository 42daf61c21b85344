"""gfx950 (MI355X) static report: every Triton and Gluon specialization the autopick can
offer on an MI355X, compiled for gfx950 on this machine (no GPU), and what its code alone
implies. All of it is a STATIC BOUND read from the compiled code, never a time.

    python3 -m bench.gfx950_report [--json FILE] [--asm-dir DIR] [--markdown PATH] [--before FILE]
                                   [--submission PATH]
    python3 -m bench.gfx950_report render FILE [--markdown PATH]

The first form compiles (tools/compile_target.py: Triton's own JIT specialization, for
each benchmark shape's stand-in arguments; a Gluon kernel through Gluon's own source
class) every launch the autopick offers for the 8 benchmark shapes on 256 CUs of arch
"gfx950": each Triton format's candidates (decode kernel and split-combine kernel), and
the aiter route's Triton launches (the Q quantizer and the length check). It compiles
them into an empty Triton cache, as a cold run on an MI355X does, and times each compile.
It reads each distinct specialization's AMDGCN (tools/amdgcn.py): its language ("gluon"
or "triton"), VGPRs (arch, AGPR), SGPRs, spills, scratch, LDS, occupancy, MFMA
instructions by kind, the main loop's instructions by class per KV token and its loads
by kind. It prints a short summary (per format: the launch offered first and which
targets it meets; the cold run's count of specializations and their compile time). It
writes files only where asked: with --markdown PATH the full tables into PATH, between its
gfx950 markers (docs/gfx950.md holds them: `--markdown docs/gfx950.md` updates that page);
with --json the whole report; with --asm-dir each specialization's AMDGCN to
DIR/<name>.amdgcn. `render` prints the summary, and with --markdown writes the tables,
from a saved report without compiling. An output it cannot write (a path under a file, a
--markdown file without the markers) ends the run in one line, exit 2, before any compile
(tools/output_paths.py); so does a write that fails after it (a full disk).

Per benchmark shape and format, for the launch offered first, it sets what the main loop
alone costs against the HBM time of the format's bytes (tools/leaderboard.py route_bytes) at
8 TB/s. These are STATIC BOUNDS, not times: latency, memory behaviour, dependencies and
the prologue and epilogue are not modelled. With N = 256 CUs x 4 SIMDs at 2.4 GHz:
  issue_us       loop instructions a token (all waves of a program) x tokens / N
                 (one instruction a cycle a SIMD);
  issue_grid_us  the same over the SIMDs the grid can occupy, min(N, programs x
                 min(warps, 4)): above issue_us where the grid leaves CUs idle;
  valu_us        VALU instructions x 4 cycles (a wave64 instruction on a 16-lane SIMD;
                 quarter-rate ones take longer, so a lower bound) x tokens / N;
  mfma_us        MFMA cycles (tools/amdgcn.py: gfx950 pass counts x 4) x tokens / N;
  hbm_us         the format's bytes (KV, q and out once) / 8 TB/s.
Programs a CU holds: the fewer of what registers allow (the compiler's occupancy, waves a
SIMD, x 4 SIMDs // num_warps) and what LDS allows (160 KiB // the program's LDS);
occupancy is that in waves a SIMD. LDS a CU: a program's LDS x the programs registers
allow; it fits when that is within gfx950's 160 KiB (otherwise LDS, not registers, sets
the occupancy).

Loads in flight (also STATIC, from the code alone): per wave, the fewest global-load
bytes issued and not yet waited for at any MFMA of the main loop's body
(tools/amdgcn.py loads_in_flight_at_mfmas). Every VMEM instruction, load, store or
atomic, takes a vmcnt slot; "s_waitcnt vmcnt(N)" retires the oldest until at most N are
outstanding; a load counts its width x 64 lanes (global_/buffer_load_dwordx4 and their
LDS-destination forms, buffer_load_* ... lds, 1 KiB a wave, dwordx2 512 B, dword 256 B
...: all lanes taken as active), stores, atomics and scratch loads count 0 bytes. The body
is run straight through (both sides of a branch inside it) until its state repeats, so
loads issued late in one iteration (a ring's next tile) count at the start of the next.
A CU's figure is that times the waves it holds:
  waves a CU   num_warps x the programs a CU holds at once, the lower of the programs
               it can hold (above; the "at occupancy" column) and the programs the
               launch gives its busiest CU (ceil(programs / 256); the per-shape column).
Little's law asks a CU for HBM bandwidth x loaded latency / CUs in flight to keep HBM busy:
at 8 TB/s and an assumed 1.5 us that is 46,875 B = 45.8 KiB; the target is 48 KiB a CU
(1.57 us). With no loads in flight while a wave computes, its memory waits are not
hidden by its own work, only by other waves'.

Loads by kind (tools/amdgcn.py load_kind): buffer (through a buffer resource: the hardware
drops out-of-range lanes), buffer to LDS, global, global to LDS, flat. In a decode
kernel's main loop every load reads KV or its scales.

Targets, for each format's first-offered launch at 32x8192, 64x8192,
256x1024 and 256x8192: issue, VALU x4 and MFMA within a fraction of the HBM time (fp8
0.10 / 0.15 / 0.15, MXFP4 0.25 / 0.45 / 0.30), loads in flight >= 48 KiB a CU, LDS a CU
within 160 KiB, 0 spills in the launch's kernels. At the small shapes (4x1024, 4x8192,
32x1024, 64x1024): CUs occupied and instructions outside the loop no worse than the
baseline, the launch the Triton wave forms (fp8 e4m3_waves, MXFP4 waves: the forms offered
first on gfx950 where Gluon does not import) lead with.

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

aiter's assembly decode: the same per-token figures for the a8w8 kernel
the reference calls, read from the code object in the amd-aiter wheel the tests fetch
(bench/aiter_asm.py: disassembled by llvm-objdump for gfx950; its two tile loops, one a
half of the waves each; the tokens a trip from their MFMA work), against the fp8 and the
MXFP4 HBM time, beside our fp8 and MXFP4 first-offered launches. Where no llvm-objdump on
PATH can read gfx950 code (tools/external_programs.py: LLVM 22, Debian's llvm-22) or the
wheel is missing, the report says why and carries no aiter figures; --no-aiter leaves them
out without running LLVM.

In-kernel combine: for each decode kernel the listing holds after its first vector atomic
(the in-kernel combine's arrival at its sequence's counter: what the last program of a
sequence runs to merge the splits, tools/amdgcn.py merge_figures): its instructions, its
global and buffer loads, and the round trips to memory it waits through one after another
(load_round_trips: an s_waitcnt vmcnt(N) retiring a load issued after the last wait that
retired one), read once along the listing (both sides of a branch; a loop's body once,
marked: there the figure is one pass, no bound). The table lists them per format, form and
split count of the launches offered with the in-kernel combine. --before FILE puts beside
them those of a saved report of another tree made by this report (--submission runs this
report on another copy of submission.py, e.g. an older commit's).

Cold run: the distinct specializations the launches above compile (the
JIT compiles one per kernel and cache key on first sight, every candidate being compiled
when the autopick verifies and times it), by language, and their total compile time for
gfx950 on this machine's CPU, named in the report with its load at the time.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

import triton
from triton import knobs

from tools.mutants import import_submission


def _submission_option(argv: list) -> str | None:
    """The path after --submission in argv (None without it): that copy of submission.py is
    imported as `submission` before anything else imports it."""
    if "--submission" not in argv or argv.index("--submission") + 1 >= len(argv):
        return None
    return argv[argv.index("--submission") + 1]


if __name__ == "__main__" and _submission_option(sys.argv):
    if not Path(_submission_option(sys.argv)).is_file():
        print(f"bench.gfx950_report: --submission {_submission_option(sys.argv)}: no such file", file=sys.stderr)
        raise SystemExit(2)
    import_submission(Path(_submission_option(sys.argv)).resolve())

import submission as sub  # noqa: E402  (after the --submission copy, where one is given)
from bench import aiter_asm  # noqa: E402
from tools import amdgcn, compile_target, leaderboard, output_paths  # noqa: E402

FORMATS = ("fp8", "mxfp4")
CUS, SIMDS_PER_CU, CLOCK_HZ = 256, 4, 2.4e9  # MI355X, AMD's published figures (peak clock)
SIMDS = CUS * SIMDS_PER_CU
HBM_BYTES_PER_S = 8e12
LDS_BYTES_PER_CU = 160 * 1024
MAX_WAVES_PER_SIMD = 8
VALU_CYCLES = 4
LOADED_LATENCY_S = 1.5e-6  # assumed HBM latency under load, for Little's law
IN_FLIGHT_LITTLE_BYTES_PER_CU = HBM_BYTES_PER_S * LOADED_LATENCY_S / CUS
# Issue 21 item 3: the first-offered launch's targets at the large shapes (loop costs as
# fractions of the HBM time; loads in flight a CU), and the small shapes compared with the
# baseline, the launch the Triton wave forms lead with.
TARGET_SHAPES = ((32, 8192), (64, 8192), (256, 1024), (256, 8192))
SMALL_SHAPES = ((4, 1024), (4, 8192), (32, 1024), (64, 1024))
LOOP_TARGETS = {"fp8": {"issue": 0.10, "valu": 0.15, "mfma": 0.15},
                "mxfp4": {"issue": 0.25, "valu": 0.45, "mfma": 0.30}}
IN_FLIGHT_TARGET_BYTES_PER_CU = 48 * 1024
# Per format, the Triton form gfx950 offers (after the Gluon one), from submission's records.
BASELINE_FORMS = {kv_format: next(form.name for form in sub.forms_of(kv_format)
                                  if form.language == "triton" and form.places.get("gfx950") is not None)
                  for kv_format in FORMATS}
MARKDOWN_BEGIN = "<!-- gfx950:begin -->"
MARKDOWN_END = "<!-- gfx950:end -->"


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


def divisible_integers(spec: compile_target.Specialization) -> list:
    """The integer arguments the JIT specialized as divisible by 16 (tt.divisibility on a
    non-pointer argument)."""
    names = spec.kernel.arg_names
    return [names[path[0]] for path, attrs in spec.attrs.items()
            if ["tt.divisibility", 16] in attrs and not spec.signature[names[path[0]]].startswith("*")]


def programs_per_cu(occupancy_registers: int, lds_bytes: int, num_warps: int) -> dict:
    """Programs a CU holds: as registers allow (the compiler's waves a SIMD x 4 SIMDs, whole
    programs of num_warps waves), as LDS allows (160 KiB // a program's LDS), and at once
    (the fewer); the occupancy (waves a SIMD) at that; a program's LDS x the programs
    registers allow, and whether that fits the CU's LDS."""
    by_registers = occupancy_registers * SIMDS_PER_CU // num_warps
    if by_registers < 1:
        raise ValueError(f"{num_warps} waves a program do not fit {occupancy_registers} waves a SIMD on a CU")
    by_lds = LDS_BYTES_PER_CU // lds_bytes if lds_bytes else None
    resident = by_registers if by_lds is None else min(by_registers, by_lds)
    if resident < 1:
        raise ValueError(f"a program's {lds_bytes} B of LDS exceed a CU's {LDS_BYTES_PER_CU} B")
    return {"programs_registers": by_registers, "programs_lds": by_lds, "resident_programs": resident,
            "occupancy": math.ceil(resident * num_warps / SIMDS_PER_CU),
            "lds_bytes_per_cu": lds_bytes * by_registers,
            "lds_fits": lds_bytes * by_registers <= LDS_BYTES_PER_CU}


def loop_record(loop: list, spec: compile_target.Specialization) -> dict:
    """The main loop per KV token, all waves of a program together (a wave's count x
    num_warps / BLOCK_N tokens an iteration), a wave's global loads in flight at its
    MFMAs (bytes, fewest and at each MFMA in order) and its loads by kind."""
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
                  in_flight_bytes_per_wave=min(in_flight), in_flight_bytes_at_mfma=in_flight,
                  loads=amdgcn.load_kinds(loop), unchecked_loads=amdgcn.unchecked_loads(loop))
    return record


def kernel_record(kv_format: str, spec: compile_target.Specialization, compiled, compile_seconds: float) -> dict:
    asm = compiled.asm["amdgcn"]
    instructions, labels = amdgcn.parse(asm)
    found = amdgcn.resources(asm)
    lds_bytes = compiled.metadata.shared
    num_warps = spec.options.num_warps
    span = amdgcn.main_loop_span(instructions, labels)
    loop = None if span is None else instructions[span[0]:span[1] + 1]
    loop_fields = loop_record(loop, spec) if loop is not None else None
    # instructions before the loop's first and after its backward branch (all, without a loop)
    prologue, epilogue = (span[0], len(instructions) - span[1] - 1) if span else (len(instructions), 0)
    outside = instructions[:span[0]] + instructions[span[1] + 1:] if span else instructions
    other_loops = [other for other in amdgcn.loop_spans(instructions, labels) if other != span]
    programs = programs_per_cu(found["occupancy_registers"], lds_bytes, num_warps)
    return {
        "name": kernel_name(kv_format, spec),
        "format": kv_format,
        "kernel": spec.kernel.__name__,
        "language": spec.language,
        "launch": {"constexprs": {k: _plain(v) for k, v in spec.constexpr_values().items()},
                   "options": {k: _plain(v) for k, v in spec.non_default_options().items()},
                   "divisible_by_16": divisible_integers(spec)},
        "vgpr": found["vgpr"], "agpr": found["agpr"], "total_vgpr": found["total_vgpr"], "sgpr": found["sgpr"],
        "vgpr_spill": found["vgpr_spill"], "sgpr_spill": found["sgpr_spill"],
        "scratch_bytes": found["scratch_bytes"], "lds_bytes": lds_bytes,
        "occupancy_registers": found["occupancy_registers"],
        **programs,
        "mfma": amdgcn.mfma_counts(instructions),
        "instructions": len(instructions),
        "outside_loop": {"prologue": prologue, "epilogue": epilogue, "total": prologue + epilogue,
                         "loops": len(other_loops), "loads": amdgcn.load_kinds(outside)},
        "merge": amdgcn.merge_figures(instructions, labels),
        "loop": loop_fields,
        "in_flight_bytes_per_cu": (loop_fields["in_flight_bytes_per_wave"] * programs["resident_programs"]
                                   * num_warps if loop_fields else None),
        "compile_seconds": compile_seconds,
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


def launch_figures(batch: int, kv_len: int, launch, decode_call, kernels: list) -> dict:
    """A launch's grid and what lies outside its main loop at one shape: the decode kernel's
    record first in `kernels`, then the combine's if any."""
    kernel, *second = kernels
    programs = math.prod(decode_call.grid)
    num_warps = kernel["launch"]["options"]["num_warps"]
    return {
        "kernel": kernel["name"], "language": kernel["language"], "launch": dataclasses.asdict(launch),
        "programs": programs, "cus_used": min(CUS, programs),
        "waves_per_cu": min(kernel["resident_programs"], math.ceil(programs / CUS)) * num_warps,
        "tiles_per_program": tiles_per_program(kv_len, launch),
        "outside_loop_instructions": kernel["outside_loop"]["total"],
        "combine_instructions": sum(k["instructions"] for k in second),
        "loops_outside": kernel["outside_loop"]["loops"] + sum(k["outside_loop"]["loops"] for k in second),
        "spills": sum(k["vgpr_spill"] + k["sgpr_spill"] for k in kernels),
    }


def shape_row(batch: int, kv_len: int, kv_format: str, launch, decode_call, kernels: list,
              baseline: dict | None) -> dict:
    """One benchmark shape's first-offered launch, its static bounds and its targets, at the
    small shapes against the baseline's figures (launch_figures of the Triton wave form's
    launch; None: no comparison)."""
    kernel = kernels[0]
    loop = kernel["loop"]
    if loop is None:
        raise ValueError(f"{kernel['name']}: no main loop with MFMAs to bound")
    tokens = batch * kv_len
    row = {"batch": batch, "kv_len": kv_len, "format": kv_format, "offered_first": True,
           **launch_figures(batch, kv_len, launch, decode_call, kernels)}
    num_warps = kernel["launch"]["options"]["num_warps"]
    simds_used = min(SIMDS, row["programs"] * min(num_warps, SIMDS_PER_CU))
    nbytes = leaderboard.route_bytes(f"triton_{kv_format}", batch, kv_len)
    hbm_us = nbytes / HBM_BYTES_PER_S * 1e6
    per_simd_us = tokens / (SIMDS * CLOCK_HZ) * 1e6  # one cycle a token on every SIMD
    row.update({
        "simds_used": simds_used, "bytes": nbytes,
        "issue_us": loop["total"] * per_simd_us,
        "issue_grid_us": loop["total"] * per_simd_us * SIMDS / simds_used,
        "valu_us": loop["valu"] * VALU_CYCLES * per_simd_us,
        "mfma_us": loop["mfma_cycles"] * per_simd_us,
        "hbm_us": hbm_us,
        "in_flight_bytes_per_cu": loop["in_flight_bytes_per_wave"] * row["waves_per_cu"],
        "lds_bytes_per_cu": kernel["lds_bytes_per_cu"],
        "baseline": baseline,
    })
    for name in ("issue", "issue_grid", "valu", "mfma"):
        row[f"{name}_x_hbm"] = row[f"{name}_us"] / hbm_us
    row["targets"] = shape_targets(row)
    return row


def _target(value, limit, relation: str) -> dict:
    met = value <= limit if relation == "<=" else value >= limit
    return {"value": value, "limit": limit, "relation": relation, "met": met}


def shape_targets(row: dict) -> dict:
    """Issue 21 item 3's targets that apply at the row's shape: name -> value, limit,
    relation, met. None at the shapes it names no target for."""
    shape = (row["batch"], row["kv_len"])
    if shape in TARGET_SHAPES:
        limits = LOOP_TARGETS[row["format"]]
        return {"issue_x_hbm": _target(row["issue_x_hbm"], limits["issue"], "<="),
                "valu_x_hbm": _target(row["valu_x_hbm"], limits["valu"], "<="),
                "mfma_x_hbm": _target(row["mfma_x_hbm"], limits["mfma"], "<="),
                "in_flight_bytes_per_cu": _target(row["in_flight_bytes_per_cu"], IN_FLIGHT_TARGET_BYTES_PER_CU, ">="),
                "lds_bytes_per_cu": _target(row["lds_bytes_per_cu"], LDS_BYTES_PER_CU, "<="),
                "spills": _target(row["spills"], 0, "<=")}
    if shape in SMALL_SHAPES and row["baseline"] is not None:
        base = row["baseline"]
        outside = row["outside_loop_instructions"] + row["combine_instructions"]
        return {"cus_used": _target(row["cus_used"], base["cus_used"], ">="),
                "outside_loop_instructions": _target(
                    outside, base["outside_loop_instructions"] + base["combine_instructions"], "<=")}
    return {}


def baseline_launch(kv_format: str, batch: int, kv_len: int):
    """The launch the Triton wave form of kv_format leads with on gfx950 (the form forced:
    the splits and tile it had when it was offered first)."""
    return sub.launch_candidates(kv_format, batch, kv_len, CUS, "gfx950", BASELINE_FORMS[kv_format])[0]


def merge_rows(rep: dict) -> dict:
    """The decode kernels of the launches offered with the in-kernel combine, by (format, form,
    splits): the kernel's name, its instructions outside the main loop and its merge figures
    (kernel_record's "merge": what follows the arrival), and the shapes offering it so."""
    rows = {}
    for kernel in rep["kernels"]:
        if kernel.get("merge") is None:
            continue
        for offer in kernel["offered"]:
            launch = offer["launch"]
            if not (launch.get("combine_in_kernel") and launch.get("num_splits", 1) > 1):
                continue
            key = (kernel["format"], launch["form"], launch["num_splits"])
            row = rows.setdefault(key, {"kernel": kernel["name"], "outside_loop": kernel["outside_loop"]["total"],
                                        "merge": kernel["merge"], "shapes": []})
            shape = f"{offer['batch']}x{offer['kv_len']}"
            if shape not in row["shapes"]:
                row["shapes"].append(shape)
    return rows


def before_record(path: Path) -> dict:
    """What the report keeps of a saved report of another tree (--before): its command and
    its in-kernel combine rows (merge_rows), as a list."""
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        fail(f"--before {path} cannot be read as a report: {error}")
    if not any("merge" in kernel for kernel in before.get("kernels", ())):
        fail(f"--before {path} has no merge figures: make it with this report "
             "(python3 -m bench.gfx950_report --submission OTHER/submission.py --json FILE)")
    return {"source": str(path), "command": before.get("command", ""), "submission": before.get("submission", ""),
            "rows": [{"format": f, "form": form, "splits": n, **row}
                     for (f, form, n), row in sorted(merge_rows(before).items())]}


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the compiler's tools)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def cpu_description() -> dict:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), model)
    except OSError:
        pass
    return {"model": model, "logical_cpus": os.cpu_count(), "load_average_1min_at_end": os.getloadavg()[0]}


def name_apart_by_divisibility(records: list) -> None:
    """Two specializations that differ only in which integer arguments are divisible by 16
    share a name: those names get them appended (e.g. ".batch%16")."""
    names = [k["name"] for k in records]
    for record in records:
        if names.count(record["name"]) > 1:
            record["name"] += "".join(f".{arg}%16" for arg in record["launch"]["divisible_by_16"])
    names = [k["name"] for k in records]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"two specializations share a name: {duplicates}")


def cold_run_record(languages: list, seconds: float, cpu_seconds: float) -> dict:
    """Issue 21 item 6: the specializations a cold run compiles (one language each), by
    language, and their compile time on this machine."""
    return {"specializations": len(languages),
            "by_language": {language: languages.count(language) for language in sorted(set(languages))},
            "compile_seconds": seconds, "cpu_seconds": cpu_seconds, "cpu": cpu_description(),
            "what": "every distinct specialization the autopick's candidates for the 8 benchmark shapes compile "
                    "on gfx950 (Triton routes and the aiter route's Triton launches), each compiled once into an "
                    "empty Triton cache on this CPU"}


def build(asm_dir: Path | None, with_aiter: bool = True) -> dict:
    target = compile_target.TARGETS["gfx950"]
    compiled, kernels = {}, {}  # identity -> (compiled, seconds); (format, identity) -> record
    compile_cpu = {}  # identity -> CPU seconds of its compile
    first, shapes = {}, []

    def records_of(kv_format, calls):
        out = []
        for call in calls:
            spec = compile_target.specialize(call, target)
            if spec.identity not in compiled:
                started, cpu_started = time.perf_counter(), _cpu_seconds()
                kernel = spec.compile()
                compiled[spec.identity] = (kernel, time.perf_counter() - started)
                compile_cpu[spec.identity] = _cpu_seconds() - cpu_started
            if (kv_format, spec.identity) not in kernels:
                kernels[(kv_format, spec.identity)] = kernel_record(kv_format, spec, *compiled[spec.identity])
            out.append(kernels[(kv_format, spec.identity)])
        return out

    with tempfile.TemporaryDirectory() as cache, knobs.cache.scope():
        knobs.cache.dir = cache  # an empty cache: every compile is a cold one, as on a fresh MI355X
        for offered in compile_target.offered_launches("gfx950"):
            records = records_of(offered.kv_format, offered.calls)
            launch = offered.launch if isinstance(offered.launch, dict) else dataclasses.asdict(offered.launch)
            for record in records:
                record["offered"].append({"route": offered.route, "batch": offered.batch, "kv_len": offered.kv_len,
                                          "rank": offered.rank, "launch": launch})
            if offered.route.startswith("triton") and offered.rank == 0:
                first[(offered.kv_format, offered.batch, offered.kv_len)] = (offered, records)
        offered_identities = set(compiled)
        cold_seconds = sum(seconds for _, seconds in compiled.values())
        cold_cpu_seconds = sum(compile_cpu.values())
        for (kv_format, batch, kv_len), (offered, records) in first.items():
            launch = baseline_launch(kv_format, batch, kv_len)
            calls = compile_target.decode_kernel_calls(compile_target.contract_inputs(batch, kv_len), kv_format,
                                                       launch)
            baseline = launch_figures(batch, kv_len, launch, calls[0], records_of(kv_format, calls))
            shapes.append(shape_row(batch, kv_len, kv_format, offered.launch, offered.calls[0], records, baseline))
    name_apart_by_divisibility(list(kernels.values()))
    if asm_dir is not None:
        asm_dir.mkdir(parents=True, exist_ok=True)
        for (_, identity), record in kernels.items():
            write_output("--asm-dir", asm_dir / f"{record['name']}.amdgcn", compiled[identity][0].asm["amdgcn"])
    languages = {identity: record["language"] for (_, identity), record in kernels.items()}
    return {"target": "gfx950", "triton": triton.__version__, "kernels": list(kernels.values()), "shapes": shapes,
            "cold_run": cold_run_record([languages[i] for i in offered_identities], cold_seconds, cold_cpu_seconds),
            "machine": {"cus": CUS, "simds_per_cu": SIMDS_PER_CU, "clock_hz": CLOCK_HZ,
                        "hbm_bytes_per_s": HBM_BYTES_PER_S, "lds_bytes_per_cu": LDS_BYTES_PER_CU,
                        "loaded_latency_s": LOADED_LATENCY_S,
                        "in_flight_little_bytes_per_cu": IN_FLIGHT_LITTLE_BYTES_PER_CU,
                        "in_flight_target_bytes_per_cu": IN_FLIGHT_TARGET_BYTES_PER_CU},
            "targets": {"loop_x_hbm": LOOP_TARGETS, "target_shapes": TARGET_SHAPES, "small_shapes": SMALL_SHAPES,
                        "baseline_forms": BASELINE_FORMS},
            **({"aiter_asm": aiter_record()} if with_aiter else {})}


def aiter_record(wheel: Path | None = None) -> dict:
    """aiter's assembly a8w8 decode read from the amd-aiter wheel's code object
    (bench/aiter_asm.py), per KV token, and its static bounds at each benchmark shape
    against the HBM time of fp8 (the bytes it reads) and of MXFP4 (what our MXFP4 form
    reads); {"skipped": why} where no LLVM here can read it or the wheel is missing."""
    wheel = wheel or aiter_asm.wheel_dir()
    reason = aiter_asm.unavailable_reason(wheel)
    if reason:
        return {"skipped": reason}
    record = aiter_asm.figures(wheel)
    per_token = record["per_token"]
    record["shapes"] = []
    for batch, kv_len in leaderboard.BENCHMARK_SHAPES:
        per_simd_us = batch * kv_len / (SIMDS * CLOCK_HZ) * 1e6
        row = {"batch": batch, "kv_len": kv_len, "issue_us": per_token["total"] * per_simd_us,
               "valu_us": per_token["valu"] * VALU_CYCLES * per_simd_us,
               "mfma_us": record["mfma_cycles_per_token"] * per_simd_us}
        for fmt in FORMATS:
            hbm_us = leaderboard.route_bytes(f"triton_{fmt}", batch, kv_len) / HBM_BYTES_PER_S * 1e6
            row[f"hbm_{fmt}_us"] = hbm_us
            for name in ("issue", "valu", "mfma"):
                row[f"{name}_x_{fmt}_hbm"] = row[f"{name}_us"] / hbm_us
        record["shapes"].append(row)
    return record


# ------------------------------------------------------------------------------------
# render: the markdown tables and the terminal summary
# ------------------------------------------------------------------------------------
_TARGET_LABELS = {"issue_x_hbm": "issue x HBM", "valu_x_hbm": "VALU x4 x HBM", "mfma_x_hbm": "MFMA x HBM",
                  "in_flight_bytes_per_cu": "in flight a CU", "lds_bytes_per_cu": "LDS a CU at the register occupancy",
                  "spills": "spills", "cus_used": "CUs occupied", "outside_loop_instructions": "instr outside loop"}


def _target_value(name: str, value) -> str:
    if name in ("in_flight_bytes_per_cu", "lds_bytes_per_cu"):
        return f"{value / 1024:.1f} KiB"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _check_version(rep: dict) -> None:
    if "cold_run" not in rep or "targets" not in rep:
        raise ValueError("this report predates the Gluon columns, targets and cold-run count: make it again "
                         "with python3 -m bench.gfx950_report --json FILE")


def table(rep: dict) -> str:
    _check_version(rep)
    machine = rep["machine"]
    cold = rep["cold_run"]
    lines = [
        f"**STATIC BOUND, not a time.** Compiled for gfx950 by Triton {rep['triton']} on a CPU; no MI355X "
        "ran any of it. Counts are read from the compiled code; latency, memory behaviour and dependencies "
        "are not modelled, and the times count the main loop alone (the instructions outside it are a "
        "column). MI355X: 256 CUs x 4 SIMDs at 2.4 GHz, HBM 8 TB/s, 160 KiB of LDS a CU; the loads-in-flight "
        f"target is {machine['in_flight_target_bytes_per_cu'] / 1024:.0f} KiB a CU (Little's law at 8 TB/s "
        f"and an assumed 1.5 us loaded latency over 256 CUs: {machine['in_flight_little_bytes_per_cu'] / 1024:.1f}"
        " KiB). Per benchmark shape and format, the launch offered first:",
        "",
        "| batch | kv_len | format | language | kernel | loop instr / token | issue (us) | x HBM "
        "| issue, this grid (us) | VALU x4 cycles (us) | x HBM | MFMA pipe (us) | x HBM | HBM (us) | CUs used "
        "| waves / CU | tiles / program | instr outside loop (decode + combine) "
        "| LDS / CU at the register occupancy (KiB) | loads in flight / CU (KiB) |",
        "|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    kernels = {k["name"]: k for k in rep["kernels"]}
    for r in rep["shapes"]:
        loop = kernels[r["kernel"]]["loop"]
        lines.append(f"| {r['batch']} | {r['kv_len']} | {r['format']} | {r['language']} | `{r['kernel']}` | "
                     f"{loop['total']:.0f} | {r['issue_us']:.1f} | {r['issue_x_hbm']:.2f} | {r['issue_grid_us']:.1f} | "
                     f"{r['valu_us']:.1f} | {r['valu_x_hbm']:.2f} | {r['mfma_us']:.1f} | {r['mfma_x_hbm']:.2f} | "
                     f"{r['hbm_us']:.1f} | {r['cus_used']} | {r['waves_per_cu']} | {r['tiles_per_program']} | "
                     f"{r['outside_loop_instructions']} + {r['combine_instructions']}"
                     f"{_loops_note(r['loops_outside'])} | {r['lds_bytes_per_cu'] / 1024:.1f} | "
                     f"{r['in_flight_bytes_per_cu'] / 1024:.1f} |")
    lines += merge_table(rep)
    lines += ["", "Targets of the launch offered first (met or missed, the value against the "
                  "limit; small shapes against the baseline, the launch the Triton wave form leads with):", "",
              "| batch | kv_len | format | target | value | limit | met |", "|---:|---:|---|---|---:|---:|---|"]
    for r in rep["shapes"]:
        for name, t in r["targets"].items():
            lines.append(f"| {r['batch']} | {r['kv_len']} | {r['format']} | {_TARGET_LABELS[name]} | "
                         f"{_target_value(name, t['value'])} | {t['relation']} {_target_value(name, t['limit'])} | "
                         f"{'met' if t['met'] else '**missed**'} |")
    lines += ["", "Every specialization compiled (loop columns: per KV token, all waves of a program; in flight: a "
                  "wave's fewest global-load bytes outstanding at an MFMA of the loop, and that times the waves a CU "
                  "holds at its occupancy; loop loads: buffer / buffer to LDS / global or flat):", "",
              "| kernel | language | offered | VGPR | AGPR | SGPR | spills (V/S) | scratch | LDS (B) "
              "| LDS / CU at the register occupancy (KiB; over: LDS holds fewer programs) "
              "| occupancy | MFMA (kernel) | VALU | SALU | VMEM | LDS | MFMA | total | MFMA cycles "
              "| instr outside loop | loop loads | in flight / wave (B) | in flight / CU (KiB) | compile (s) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
              "---:|---:|---:|"]
    for k in rep["kernels"]:
        mfma = ", ".join(f"{kind} x{count}" for kind, count in k["mfma"].items()) or "none"
        loop = k["loop"]
        counts = (" | ".join(f"{loop[c]:.1f}" for c in ("valu", "salu", "vmem", "lds", "mfma", "total", "mfma_cycles"))
                  if loop else " | ".join(["no MFMA loop"] + [""] * 6))
        loads = (f"{loop['loads']['buffer']} / {loop['loads']['buffer_to_lds']} / "
                 f"{sum(loop['loads'][kind] for kind in ('global', 'global_to_lds', 'flat'))}" if loop else "")
        in_flight = (f"{loop['in_flight_bytes_per_wave']} | {k['in_flight_bytes_per_cu'] / 1024:.1f}"
                     if loop else " | ")
        lds_fit = "" if k["lds_fits"] else " (over)"
        lines.append(f"| `{k['name']}` | {k['language']} | {len(k['offered'])} | {k['vgpr']} | {k['agpr']} "
                     f"| {k['sgpr']} | {k['vgpr_spill']}/{k['sgpr_spill']} | {k['scratch_bytes']} | {k['lds_bytes']} "
                     f"| {k['lds_bytes_per_cu'] / 1024:.1f}{lds_fit} | {k['occupancy']} | {mfma} | {counts} "
                     f"| {k['outside_loop']['total']}{_loops_note(k['outside_loop']['loops'])} | {loads} | {in_flight} "
                     f"| {k['compile_seconds']:.2f} |")
    lines += aiter_table(rep)
    lines += ["", f"Cold run: {cold_run_line(rep)}. \"offered\": the candidates (shape, rank) that launch it; 0 for "
                  "a baseline compiled only for comparison, not counted. "
                  f"Produced by `{rep['command']}`; the columns are defined in bench/gfx950_report.py's docstring."]
    return "\n".join(lines)


def _merge_cells(row: dict | None) -> tuple:
    # * marks a figure that counts a loop's body once
    if row is None:
        return ("-",) * 4
    merge = row["merge"]
    loops = "*" * bool(merge["loops"])
    return (f"{row['outside_loop']}", f"{merge['instructions']}{loops}", f"{merge['loads']}{loops}",
            f"{merge['round_trips']}{loops}")


def merge_table(rep: dict) -> list[str]:
    """The in-kernel combine's merge: per format, form and split count offered with it, the
    decode kernel's instructions outside the main loop and, of them, what follows the
    arrival; with a saved report of another tree (rep["before"]) its figures beside."""
    rows = merge_rows(rep)
    if not rows:
        return []
    before = {(r["format"], r["form"], r["splits"]): r for r in rep.get("before", {}).get("rows", ())}
    lines = ["", "In-kernel combine (the decode kernel of each launch offered with it; STATIC, read from the listing "
                 "once: straight-line code counted once along the listing, both sides of a branch, so at most what "
                 "one wave runs; * marks a figure with a loop's body counted once, which runs once a trip: there the "
                 "figure bounds nothing). Outside the loop: the kernel's instructions before and after its main loop. "
                 "The merge: what follows the arrival (the kernel's first counter atomic), which the last program of "
                 "a sequence runs: its instructions, its global and buffer loads, and the round trips to memory it "
                 "waits through one after another (tools/amdgcn.py load_round_trips: loads issued together are one "
                 "trip, a load issued after a wait that stalled starts the next)."]
    if before:
        where = rep["before"]
        lines[-1] += (f" Before: `{where['command'] or where['source']}`, the same columns of that tree's code "
                      "(one kernel for every split count, its merge a loop over the splits).")
        lines += ["", "| format | form | splits | shapes offering it | outside loop, before | after | merge "
                      "instructions, before | after | merge loads, before | after | round trips, before | after |",
                  "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    else:
        lines += ["", "| format | form | splits | shapes offering it | outside loop | merge instructions | merge loads "
                      "| round trips |", "|---|---|---:|---|---:|---:|---:|---:|"]
    for key, row in sorted(rows.items()):
        kv_format, form, splits = key
        after = _merge_cells(row)
        if before:
            old = _merge_cells(before.get(key))
            cells = " | ".join(f"{b} | {a}" for b, a in zip(old, after))
        else:
            cells = " | ".join(after)
        lines.append(f"| {kv_format} | {form} | {splits} | {', '.join(row['shapes'])} | {cells} |")
    return lines


def aiter_table(rep: dict) -> list[str]:
    """Our fp8 and MXFP4 first-offered launches beside aiter's assembly a8w8 decode (the
    reference's own kernel), the same per-token figures, each against the HBM time of the
    bytes it reads, and aiter's also against the MXFP4 bytes."""
    aiter = rep.get("aiter_asm")
    if aiter is None:
        return []
    head = ["", "aiter's assembly a8w8 decode, the kernel the reference calls, read by the same counts from the "
                "code object of the amd-aiter wheel the tests fetch (bench/aiter_asm.py)"]
    if "skipped" in aiter:
        return head + [f": not read here ({aiter['skipped']})."]
    loops = "; ".join(f"`{loop['label']}` {loop['instructions']} instructions, {loop['waves']} waves, "
                      f"{loop['in_flight_bytes_per_wave'] / 1024:.1f} KiB in flight a wave at its worst MFMA"
                      for loop in aiter["loops"])
    kernel = aiter["kernel"]
    head[-1] += (f" `{aiter['code_object']}` ({aiter['tools']['objdump']} --mcpu=gfx950): {kernel['waves']} waves, "
                 f"{kernel['vgpr']} VGPRs, {kernel['lds_bytes'] // 1024} KiB LDS ({aiter['programs_per_cu']} program a "
                 f"CU); two tile loops, one a half of the waves ({loops}), {aiter['tokens_per_trip']} tokens a trip "
                 "(their MFMAs' work). Same static bounds as above, per benchmark shape; each against the HBM time "
                 "of the format it reads, aiter's also against the MXFP4 bytes:")
    lines = head + ["", "| batch | kv_len | kernel | HBM time of | loop instr / token | issue x HBM | VALU x4 x HBM "
                        "| MFMA x HBM | loads in flight / CU (KiB) |", "|---:|---:|---|---|---:|---:|---:|---:|---:|"]
    kernels = {k["name"]: k for k in rep["kernels"]}
    ours = {(r["batch"], r["kv_len"], r["format"]): r for r in rep["shapes"]}
    for row in aiter["shapes"]:
        b, n = row["batch"], row["kv_len"]
        for fmt in FORMATS:
            r = ours.get((b, n, fmt))
            if r is not None:
                lines.append(f"| {b} | {n} | ours, {fmt} {r['language']} (offered first) | {fmt} | "
                             f"{kernels[r['kernel']]['loop']['total']:.1f} | {r['issue_x_hbm']:.3f} | "
                             f"{r['valu_x_hbm']:.3f} | {r['mfma_x_hbm']:.3f} | {r['in_flight_bytes_per_cu'] / 1024:.1f} |")
        for fmt in FORMATS:
            lines.append(f"| {b} | {n} | aiter a8w8 assembly | {fmt} | {aiter['per_token']['total']:.1f} | "
                         f"{row[f'issue_x_{fmt}_hbm']:.3f} | {row[f'valu_x_{fmt}_hbm']:.3f} | "
                         f"{row[f'mfma_x_{fmt}_hbm']:.3f} | {aiter['in_flight_bytes_per_cu'] / 1024:.1f} |")
    return lines


def _loops_note(loops: int) -> str:
    return f" ({loops} loop{'s' * (loops > 1)} counted once)" if loops else ""


def cold_run_line(rep: dict) -> str:
    cold = rep["cold_run"]
    languages = ", ".join(f"{count} {language}" for language, count in cold["by_language"].items())
    cpu = cold["cpu"]
    return (f"the 8 benchmark shapes compile {cold['specializations']} distinct specializations for gfx950 "
            f"({languages}), {cold['compile_seconds']:.1f} s of compiling ({cold['cpu_seconds']:.1f} s of CPU "
            f"time) on this CPU ({cpu['model']}, "
            f"{cpu['logical_cpus']} logical CPUs, load {cpu['load_average_1min_at_end']:.1f} at the end)")


def summary(rep: dict, written: list) -> str:
    """A few lines per format: the launch offered first, its targets met and missed."""
    _check_version(rep)
    lines = ["gfx950 static report: STATIC BOUNDS read from code compiled on a CPU, not times; no MI355X ran it."]
    for kv_format in FORMATS:
        rows = [r for r in rep["shapes"] if r["format"] == kv_format]
        first_kernels = sorted({(r["language"], r["kernel"]) for r in rows})
        lines.append(f"{kv_format}: offered first: "
                     + "; ".join(f"{language} {name}" for language, name in first_kernels))
        for label, shapes in (("targets at", TARGET_SHAPES), ("small shapes vs the Triton wave form at", SMALL_SHAPES)):
            chosen = [r for r in rows if (r["batch"], r["kv_len"]) in map(tuple, shapes)]
            met, missed = [], []
            for name in chosen[0]["targets"] if chosen else ():
                values = [r["targets"][name] for r in chosen]
                text = f"{_TARGET_LABELS[name]} " + "/".join(_target_value(name, t["value"]) for t in values)
                if all(t["met"] for t in values):
                    met.append(text)
                else:
                    limit = values[0]["limit"] if name not in ("cus_used", "outside_loop_instructions") else None
                    bound = f" (limit {values[0]['relation']} {_target_value(name, limit)})" if limit is not None else \
                        " (baseline " + "/".join(_target_value(name, t["limit"]) for t in values) + ")"
                    missed.append(text + bound)
            where = ", ".join(f"{r['batch']}x{r['kv_len']}" for r in chosen)
            lines.append(f"  {label} {where}: met: {'; '.join(met) or 'none'}")
            lines.append(f"    missed: {'; '.join(missed) or 'none'}")
    before = {(r["format"], r["form"], r["splits"]): r for r in rep.get("before", {}).get("rows", ())}
    forms = {}
    for (kv_format, form, splits), row in sorted(merge_rows(rep).items()):
        forms.setdefault((kv_format, form), []).append((splits, row, before.get((kv_format, form, splits))))
    for (kv_format, form), rows in forms.items():
        def figures(name, pick):
            return "/".join(str(pick(row)[name]) + "*" * bool(pick(row)["loops"]) for row in rows if pick(row))
        line = (f"in-kernel combine, {kv_format} {form} at {'/'.join(str(n) for n, _, _ in rows)} splits: the merge "
                f"{figures('instructions', lambda r: r[1]['merge'])} instructions, "
                f"{figures('round_trips', lambda r: r[1]['merge'])} round trips to memory")
        if any(old for _, _, old in rows):
            line += (f" (before: {figures('instructions', lambda r: r[2] and r[2]['merge'])}, "
                     f"{figures('round_trips', lambda r: r[2] and r[2]['merge'])})")
        lines.append(line + " (static; * a loop counted once)")
    aiter = rep.get("aiter_asm")
    if aiter is not None and "skipped" in aiter:
        lines.append(f"aiter's a8w8 assembly decode: not read ({aiter['skipped']})")
    elif aiter is not None:
        rows = [r for r in aiter["shapes"] if (r["batch"], r["kv_len"]) in map(tuple, TARGET_SHAPES)]
        lines.append("aiter's a8w8 assembly decode (the reference's kernel), at " + ", ".join(
            f"{r['batch']}x{r['kv_len']}" for r in rows) + ": issue / VALU x4 / MFMA x fp8 HBM " + "; ".join(
            f"{r['issue_x_fp8_hbm']:.3f}/{r['valu_x_fp8_hbm']:.3f}/{r['mfma_x_fp8_hbm']:.3f}" for r in rows)
            + f", x MXFP4 HBM " + "; ".join(
            f"{r['issue_x_mxfp4_hbm']:.3f}/{r['valu_x_mxfp4_hbm']:.3f}/{r['mfma_x_mxfp4_hbm']:.3f}" for r in rows)
            + f"; {aiter['in_flight_bytes_per_cu'] / 1024:.1f} KiB in flight a CU")
    lines.append(f"cold run: {cold_run_line(rep)}")
    if written:
        lines.append("full tables: " + ", ".join(str(path) for path in written))
    return "\n".join(lines)


def fail(message: str):
    """A run that cannot go on: one line on stderr, exit 2."""
    print(f"bench.gfx950_report: {message}", file=sys.stderr)
    raise SystemExit(2)


def write_output(option: str, path: Path, text: str) -> None:
    """path's new text; a write that fails (a full disk, /dev/full) ends the run in one line."""
    try:
        path.write_text(text)
    except OSError as error:
        fail(f"{option} {path} cannot be written: {error.strerror or error}")


def markdown_problem(path: Path) -> str | None:
    """Why `--markdown path` cannot take the tables: no such file, or no markers in it."""
    if not path.is_file():
        return (f"does not exist: give --markdown a file holding {MARKDOWN_BEGIN} and {MARKDOWN_END} "
                f"(docs/gfx950.md), or no --markdown")
    content = path.read_text()
    if MARKDOWN_BEGIN not in content or MARKDOWN_END not in content:
        return f"lacks the markers {MARKDOWN_BEGIN} ... {MARKDOWN_END} that the tables go between"
    return None


def check_outputs(json_path: Path | None, asm_dir: Path | None, markdown: Path | None) -> None:
    """Every output asked for can be written, asked before the compiles (tens of seconds)."""
    for option, path, folder in (("--json", json_path, False), ("--asm-dir", asm_dir, True),
                                 ("--markdown", markdown, False)):
        if path is None:
            continue
        problem = markdown_problem(path) if option == "--markdown" else None
        if problem:
            fail(f"{option} {path} {problem}")
        problem = output_paths.unwritable(path, folder)
        if problem:
            fail(f"{option} {path} cannot be written: {problem}")


def write_markdown(path: Path, text: str, source: Path | None) -> None:
    """The tables between path's gfx950 markers; `source`, the saved report, cited above them."""
    problem = markdown_problem(path)
    if problem:
        fail(f"--markdown {path} {problem}")
    content = path.read_text()
    begin, end = content.index(MARKDOWN_BEGIN) + len(MARKDOWN_BEGIN), content.index(MARKDOWN_END)
    cited = f"\n\nFrom `{os.path.relpath(source.resolve(), path.parent.resolve())}`:" if source is not None else ""
    write_output("--markdown", path, content[:begin] + cited + "\n\n" + text + "\n\n" + content[end:])


def _markdown_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", type=Path,
                        help="write the tables between this file's gfx950 markers (docs/gfx950.md "
                             "has them); without it no markdown is written")


def main() -> None:
    if sys.argv[1:2] == ["render"]:
        parser = argparse.ArgumentParser(prog="python3 -m bench.gfx950_report render")
        parser.add_argument("json", type=Path)
        _markdown_options(parser)
        args = parser.parse_args(sys.argv[2:])
        check_outputs(None, None, args.markdown)
        rep = json.loads(args.json.read_text())
        _check_version(rep)
        written = []
    else:
        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--json", type=Path, help="write the report here")
        parser.add_argument("--asm-dir", type=Path, help="write each specialization's AMDGCN here")
        parser.add_argument("--no-aiter", action="store_true",
                            help="leave aiter's assembly decode out (runs no LLVM program)")
        parser.add_argument("--submission", type=Path,
                            help="report this copy of submission.py instead of the checkout's (another tree's, "
                                 "for --before)")
        parser.add_argument("--before", type=Path,
                            help="a saved report (--json) of another tree, made by this report: its in-kernel "
                                 "combine figures beside this tree's")
        _markdown_options(parser)
        args = parser.parse_args()
        check_outputs(args.json, args.asm_dir, args.markdown)
        before = before_record(args.before) if args.before is not None else None
        rep = build(args.asm_dir, with_aiter=not args.no_aiter)
        rep["command"] = shlex.join(["python3", "-m", "bench.gfx950_report", *sys.argv[1:]])
        rep["submission"] = str(Path(sub.__file__).resolve())
        if before is not None:
            rep["before"] = before
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_output("--json", args.json, json.dumps(rep, indent=1))
        written = [args.json] if args.json is not None else []
    if args.markdown is not None:
        write_markdown(args.markdown, table(rep), args.json)
        written.append(args.markdown)
    print(summary(rep, written))


if __name__ == "__main__":
    main()
