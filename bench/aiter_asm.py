"""aiter's assembly MLA decode, the a8w8 kernel the leaderboard's reference calls, read from
its code object the way bench/gfx950_report.py reads our kernels: the main loop's
instructions by class, MFMA cycles and loads in flight, per KV token. STATIC BOUNDS, not
times (no MI355X ran anything here).

    python3 -m bench.aiter_asm [--wheel DIR]   # prints the figures as JSON

The code object is the one in the amd-aiter wheel the tests fetch (.ci/aiter_wheel, filled
by tools/setup.sh; $AITER_WHEEL_DIR elsewhere), disassembled for gfx950 by llvm-objdump
and its kernel metadata read by llvm-readelf, each the first on PATH that can
(tools/external_programs.py: LLVM 22 for gfx950 code, Debian's llvm-22). It is read as
data: no code of aiter enters the project.

How its loops are read (checked on the listing, an error where a code object differs):
the kernel has two tile loops (tile_loops), one a half of the workgroup's waves: the branch
before them, `s_cmp_lt_i32 sW, N` then `s_cbranch_scc0 <second loop>`, sends waves
0..N-1 to the first and the rest to the second (sW the wave index). The KV tokens one trip
of them covers follow from the MFMA work: each token takes 16 heads x (576 + 512)
multiply-adds (Q.K^T and P.V), so tokens = the MFMAs' multiply-adds of every wave's trip /
(16 x 1088); the figures are then each loop's counts x its waves / those tokens, as
gfx950_report does for ours (where every wave runs the one loop).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from pathlib import Path

from tools import amdgcn, external_programs

ROOT = Path(__file__).resolve().parent.parent
CODE_OBJECT = Path("aiter_meta") / "hsa" / "gfx950" / "mla" / "mla_a8w8_qh16_qseqlen1_gqaratio16_ps.co"
TOOLS = {"objdump": "llvm-objdump", "readelf": "llvm-readelf"}   # kind -> tools/external_programs.py's name
HEADS, QK_DIM, V_DIM = 16, 576, 512

_LINE = re.compile(r"^\s+([a-z][a-z0-9_]*)\b\s*([^/]*?)\s*(//.*)?$")
_LABEL = re.compile(r"^[0-9a-f]+ <([.\w$]+)>:$")
_MFMA_SHAPE = re.compile(r"_(\d+)x(\d+)x(\d+)")


def wheel_dir() -> Path:
    return Path(os.environ.get("AITER_WHEEL_DIR", ROOT / ".ci" / "aiter_wheel"))


def tool(kind: str) -> str:
    """The path of TOOLS[kind] that can read the code object here (Unusable where none can)."""
    return external_programs.command(TOOLS[kind])[0]


def unavailable_reason(wheel: Path) -> str | None:
    """Why the figures cannot be read here (None where they can): a program that cannot
    serve, named with the version it needs, or no code object."""
    for name in TOOLS.values():
        if (problem := external_programs.problem(name)) is not None:
            return problem
    if not (wheel / CODE_OBJECT).is_file():
        return f"no {CODE_OBJECT} in {wheel} (tools/setup.sh fetches the amd-aiter wheel there)"
    return None


def parse_objdump(text: str) -> tuple[list, dict]:
    """llvm-objdump's disassembly -> (instructions as (mnemonic, operands), label -> index of
    the instruction after it), as amdgcn.parse gives for the AMDGCN printer's text. Lines:
    `<address> <label>:` and a tab, the mnemonic, its operands, `// address: encoding`."""
    instructions, labels = [], {}
    for line in text.splitlines():
        if (label := _LABEL.match(line)):
            labels[label.group(1)] = len(instructions)
        elif line.startswith("\t") and (match := _LINE.match(line)):
            instructions.append((match.group(1), match.group(2).strip()))
    return instructions, labels


def disassemble(path: Path) -> str:
    return subprocess.run([tool("objdump"), "-d", "--mcpu=gfx950", str(path)], check=True, capture_output=True,
                          text=True).stdout


def kernel_metadata(path: Path) -> dict:
    """The code object's workgroup size, LDS, VGPRs and SGPRs (its AMDGPU metadata note)."""
    notes = subprocess.run([tool("readelf"), "--notes", str(path)], check=True, capture_output=True,
                           text=True).stdout

    def field(name: str) -> int:
        found = re.findall(rf"^\s+\.{name}:\s+(\d+)$", notes, flags=re.MULTILINE)
        if len(found) != 1:
            raise ValueError(f"{path.name}: expected one .{name} in its metadata, found {len(found)}")
        return int(found[0])

    workgroup = re.search(r"\.reqd_workgroup_size:\s+- (\d+)\s+- (\d+)\s+- (\d+)", notes)
    if workgroup is None:
        raise ValueError(f"{path.name}: no .reqd_workgroup_size in its metadata")
    threads = int(workgroup.group(1)) * int(workgroup.group(2)) * int(workgroup.group(3))
    return {"threads": threads, "waves": threads // field("wavefront_size"),
            "lds_bytes": field("group_segment_fixed_size"), "vgpr": field("vgpr_count"), "sgpr": field("sgpr_count")}


def mfma_multiply_adds(mnemonic: str) -> int:
    m, n, k = (int(x) for x in _MFMA_SHAPE.search(mnemonic).groups())
    return m * n * k


def tile_loops(instructions: list, labels: dict) -> list[tuple[int, int]]:
    """The kernel's tile loops: (first instruction, closing branch) of every loop closed by an
    unconditional `s_branch` to a label above it whose span holds MFMAs and no other such
    loop. (Its other backward branches: conditional exits to a block placed before the
    second loop, which leaves at once, and the persistent kernel's loop over work items
    around everything.)"""
    spans = [(start, end) for start, end in amdgcn.loop_spans(instructions, labels)
             if instructions[end][0] == "s_branch"
             and any(amdgcn.instruction_class(m) == "mfma" for m, _ in instructions[start:end + 1])]
    return sorted(span for span in spans
                  if not any(other != span and span[0] <= other[0] and other[1] <= span[1] for other in spans))


def wave_halves(instructions: list, labels: dict, spans: list, waves: int) -> list[int]:
    """Waves running each of the two MFMA loops (module docstring), from the branch before them."""
    if len(spans) != 2:
        raise ValueError(f"{len(spans)} loops hold MFMAs: this reader knows aiter's two wave-half loops")
    second = next(name for name, index in labels.items() if index == spans[1][0])
    for index in range(spans[0][0] - 1, max(spans[0][0] - 8, 0), -1):
        mnemonic, operands = instructions[index]
        if mnemonic == "s_cbranch_scc0" and operands == second:
            compare, limit = instructions[index - 1]
            found = re.fullmatch(r"s\d+, (\d+)", limit)
            if compare == "s_cmp_lt_i32" and found and 0 < int(found.group(1)) < waves:
                return [int(found.group(1)), waves - int(found.group(1))]
    raise ValueError("no `s_cmp_lt_i32 sW, N` / `s_cbranch_scc0 <second loop>` before the first loop: "
                     "the split of the waves between the loops is not read")


def figures(wheel: Path | None = None) -> dict:
    """aiter's a8w8 decode loops per KV token (module docstring): instructions by class, MFMA
    cycles and multiply-adds, a CU's load bytes in flight at the loops' worst MFMAs, the
    kernel's resources; raises where the listing is not the one described."""
    path = (wheel or wheel_dir()) / CODE_OBJECT
    meta = kernel_metadata(path)
    instructions, labels = parse_objdump(disassemble(path))
    spans = tile_loops(instructions, labels)
    waves = wave_halves(instructions, labels, spans, meta["waves"])
    loops = [instructions[start:end + 1] for start, end in spans]
    macs = sum(w * sum(mfma_multiply_adds(m) for m, _ in loop if amdgcn.instruction_class(m) == "mfma")
               for w, loop in zip(waves, loops))
    per_token_macs = HEADS * (QK_DIM + V_DIM)
    if macs % per_token_macs:
        raise ValueError(f"the loops' {macs} multiply-adds a trip are no whole number of tokens "
                         f"({per_token_macs} each): the loops repeat or split work this reader does not know")
    tokens = macs // per_token_macs
    counts = [amdgcn.class_counts(loop) for loop in loops]
    cycles = [sum(amdgcn.mfma_cycles(kind) * n for kind, n in amdgcn.mfma_counts(loop).items()) for loop in loops]
    programs = max(1, 160 * 1024 // meta["lds_bytes"]) if meta["lds_bytes"] else None
    in_flight = [min(amdgcn.loads_in_flight_at_mfmas(loop)) for loop in loops]
    per_token = {name: sum(w * c[name] for w, c in zip(waves, counts)) / tokens for name in amdgcn.CLASSES + ("total",)}
    return {
        "code_object": str(CODE_OBJECT), "kernel": meta, "programs_per_cu": programs,
        "loops": [{"label": next(n for n, i in labels.items() if i == start), "instructions": end - start + 1,
                   "waves": w, "per_wave_trip": c, "mfma": amdgcn.mfma_counts(loop), "mfma_cycles": cy,
                   "in_flight_bytes_per_wave": f}
                  for (start, end), w, c, cy, f, loop in zip(spans, waves, counts, cycles, in_flight, loops)],
        "tokens_per_trip": tokens,
        "per_token": per_token,
        "mfma_cycles_per_token": sum(w * cy for w, cy in zip(waves, cycles)) / tokens,
        "in_flight_bytes_per_cu": sum(w * f for w, f in zip(waves, in_flight)) * (programs or 1),
        "tools": {kind: os.path.basename(tool(kind)) for kind in TOOLS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", type=Path, default=None, help="the unpacked amd-aiter wheel (default .ci/aiter_wheel)")
    args = parser.parse_args()
    reason = unavailable_reason(args.wheel or wheel_dir())
    if reason:
        raise SystemExit(reason)
    print(json.dumps(figures(args.wheel), indent=1))


if __name__ == "__main__":
    main()
