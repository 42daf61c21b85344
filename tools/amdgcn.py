"""Static facts read from the AMDGCN text that Triton's HIP backend prints for gfx950
(CompiledKernel.asm["amdgcn"]): registers, spills, occupancy, MFMA instructions, the
instruction mix of the main loop, the global-load bytes a wave has in flight at the
loop's MFMAs (loads_in_flight_at_mfmas), and the loads by kind (load_kind: through a buffer
resource, whose range the hardware checks, or by global / flat address; into registers or
straight into LDS).

Instruction classes (one per instruction, by mnemonic):
  mfma    v_mfma*, v_smfmac*                     (the matrix cores)
  valu    every other v_*                        (v_accvgpr_*, v_cmp*, v_readfirstlane ...)
  vmem    buffer_*, tbuffer_*, global_*, flat_*, scratch_*   (vector memory)
  lds     ds_*                                   (LDS)
  smem    s_load*, s_buffer_load*, s_store*, s_buffer_store*, s_dcache*, s_memtime,
          s_memrealtime, s_atc_probe*            (scalar memory)
  branch  s_branch, s_cbranch_*, s_setpc*, s_swappc*, s_call*
  wait    s_waitcnt*, s_barrier, s_nop, s_sleep, s_setprio, s_sethalt, s_trap,
          s_icache_inv, s_endpgm                 (handled by the sequencer, no ALU work)
  salu    every other s_*
An unknown mnemonic is an error, not a guess. "total" counts every instruction once.

Instructions are the printer's tab-indented lines, and every line of an inline-asm block
(between ";;#ASMSTART" and ";;#ASMEND"): the printer indents only the first line of a
multi-line block, so each of its lines is read as one instruction, label or directive,
and a line that is none of these is an error.

The main loop is the one backward branch (a branch to a label above it) whose span, from
the label to the branch, holds MFMA instructions; several backward branches to the same
label are one loop, spanning to the last of them. Everything in the span is counted,
both sides of any branch inside it included (an upper bound where the loop body
branches). Two such loops, or one inside another, are an error: per-token counts would
not be defined.
"""
from __future__ import annotations

import collections
import re

CLASSES = ("valu", "mfma", "salu", "smem", "vmem", "lds", "branch", "wait")

_LABEL = re.compile(r"^([.\w$]+):")
_INSTRUCTION = re.compile(r"^\t([a-z][a-z0-9_]*)\b\s*(.*)$")  # the printer indents instructions with a tab
_ASM_LINE = re.compile(r"^([a-z][a-z0-9_]*)\b\s*(.*)$")  # an inline-asm line, stripped, comment removed
_ASM_START, _ASM_END = ";;#ASMSTART", ";;#ASMEND"
_BRANCH_TARGET = re.compile(r"^([.\w$]+)")
_WAIT = ("s_waitcnt", "s_barrier", "s_nop", "s_sleep", "s_setprio", "s_sethalt", "s_trap", "s_icache_inv",
         "s_endpgm")
_SMEM = ("s_load", "s_buffer_load", "s_store", "s_buffer_store", "s_dcache", "s_memtime", "s_memrealtime",
         "s_atc_probe")
_BRANCH = ("s_branch", "s_cbranch_", "s_setpc", "s_swappc", "s_call")


def instruction_class(mnemonic: str) -> str:
    if mnemonic.startswith(("v_mfma", "v_smfmac")):
        return "mfma"
    if mnemonic.startswith("v_"):
        return "valu"
    if mnemonic.startswith(("buffer_", "tbuffer_", "global_", "flat_", "scratch_")):
        return "vmem"
    if mnemonic.startswith("ds_"):
        return "lds"
    if mnemonic.startswith(_SMEM):
        return "smem"
    if mnemonic.startswith(_BRANCH):
        return "branch"
    if mnemonic.startswith(_WAIT):
        return "wait"
    if mnemonic.startswith("s_"):
        return "salu"
    raise ValueError(f"unclassified AMDGCN instruction {mnemonic!r}")


def parse(asm: str) -> tuple[list, dict]:
    """(instructions as (mnemonic, operands) in order, label -> index of the instruction
    that follows it). Directives (.xxx), comments (;) and blank lines are skipped."""
    instructions, labels = [], {}
    in_inline_asm = False
    for number, line in enumerate(asm.splitlines(), 1):
        if line.strip() in (_ASM_START, _ASM_END):
            in_inline_asm = line.strip() == _ASM_START
            continue
        if in_inline_asm:
            statement = line.split(";")[0].strip()
            label, match = _LABEL.match(statement), _ASM_LINE.match(statement)
            if label and statement == label.group(0):
                labels[label.group(1)] = len(instructions)
            elif match:
                instructions.append((match.group(1), match.group(2).strip()))
            elif statement and not statement.startswith("."):
                raise ValueError(f"line {number} of an inline-asm block is no instruction: {line!r}")
            continue
        if (label := _LABEL.match(line)) and not line.startswith((" ", "\t")):
            labels[label.group(1)] = len(instructions)
            continue
        match = _INSTRUCTION.match(line)
        if match:
            instructions.append((match.group(1), match.group(2).split(";")[0].strip()))
    if in_inline_asm:
        raise ValueError(f"an inline-asm block ({_ASM_START}) without its {_ASM_END}")
    return instructions, labels


def main_loop(asm: str) -> list | None:
    """The instructions of the loop whose body holds the MFMAs, or None if no loop does."""
    instructions, labels = parse(asm)
    span = main_loop_span(instructions, labels)
    return None if span is None else instructions[span[0]:span[1] + 1]


def loop_spans(instructions: list, labels: dict) -> list[tuple[int, int]]:
    """(index of the first instruction, index of the backward branch) of every loop: each
    branch to a label at or above it, in parse's list."""
    spans = []
    for index, (mnemonic, operands) in enumerate(instructions):
        if instruction_class(mnemonic) != "branch" or not (target := _BRANCH_TARGET.match(operands)):
            continue
        start = labels.get(target.group(1))
        if start is not None and start <= index:
            spans.append((start, index))
    return spans


def main_loop_span(instructions: list, labels: dict) -> tuple[int, int] | None:
    """(index of the loop's first instruction, index of its backward branch) in parse's
    list, or None if no loop holds MFMAs."""
    spans = [(start, end) for start, end in loop_spans(instructions, labels)
             if any(instruction_class(m) == "mfma" for m, _ in instructions[start:end + 1])]
    if not spans:
        return None
    # Several backward branches to one label are one loop with several latches (e.g. a
    # conditional skip of the body's last instructions that lands on the loop's label):
    # its span runs to the last of them.
    latest = {}
    for start, end in spans:
        latest[start] = max(end, latest.get(start, end))
    spans = sorted(latest.items())
    if len(spans) > 1:
        raise ValueError(f"{len(spans)} loops hold MFMA instructions (instruction spans {spans}); "
                         "the main loop is not defined")
    return spans[0]


def class_counts(instructions: list) -> dict:
    counts = collections.Counter(instruction_class(m) for m, _ in instructions)
    return {name: counts.get(name, 0) for name in CLASSES} | {"total": len(instructions)}


# --- vector-memory loads in flight ------------------------------------------------------
# On gfx9 (gfx950 included) every VMEM instruction, load, store or atomic, adds one to the
# wave's vmcnt when issued and retires in issue order; "s_waitcnt vmcnt(N)" stalls until at
# most N are outstanding. The counter holds at most 63 (6 bits): a 64th waits for the oldest.
LANES = 64
MAX_VMCNT = 63
_LOAD_BYTES_PER_LANE = {"dwordx4": 16, "dwordx3": 12, "dwordx2": 8, "dword": 4,
                        "ushort": 2, "sshort": 2, "short_d16": 2, "short_d16_hi": 2,
                        "ubyte": 1, "sbyte": 1, "ubyte_d16": 1, "ubyte_d16_hi": 1, "sbyte_d16": 1, "sbyte_d16_hi": 1}
_STORE_WIDTHS = ("dwordx4", "dwordx3", "dwordx2", "dword", "short", "short_d16_hi", "byte", "byte_d16_hi")
_VMEM_ACCESS = re.compile(r"(buffer|global|flat|scratch)_(load|store)_(lds_)?(\w+)")
_WAIT_COUNTER = re.compile(r"(vmcnt|expcnt|lgkmcnt)(_sat)?\((\d+)\)")


def vmem_load_bytes(mnemonic: str) -> int:
    """Bytes a wave's VMEM instruction loads from global memory (64 lanes, all active):
    buffer_/global_/flat_load_* and their LDS-destination forms (global_load_lds_*,
    buffer_load_* ... lds) by width; 0 for stores, atomics and scratch (spill) loads, which
    hold a vmcnt slot but bring no global data. Any other VMEM mnemonic is an error."""
    if instruction_class(mnemonic) != "vmem":
        raise ValueError(f"{mnemonic!r} is no vector-memory instruction")
    if re.fullmatch(r"(buffer|global|flat)_atomic_\w+", mnemonic):
        return 0
    access = _VMEM_ACCESS.fullmatch(mnemonic)
    if access:
        space, kind, _, width = access.groups()
        if kind == "load" and width in _LOAD_BYTES_PER_LANE:
            return 0 if space == "scratch" else _LOAD_BYTES_PER_LANE[width] * LANES
        if kind == "store" and width in _STORE_WIDTHS:
            return 0
    raise ValueError(f"no vmcnt rule for {mnemonic!r}: add its width and whether it counts in vmcnt")


def load_kind(mnemonic: str, operands: str) -> str | None:
    """How a VMEM instruction reads global memory: "buffer" (through a buffer resource,
    whose range the hardware checks: out-of-range lanes read 0), "buffer_to_lds" (the same,
    into LDS: buffer_load_* ... lds), "global", "global_to_lds" (global_load_lds_*) or
    "flat" (an address the hardware does not check); None for stores, atomics, scratch
    (spill) traffic and cache control, which read no tensor."""
    if instruction_class(mnemonic) != "vmem":
        raise ValueError(f"{mnemonic!r} is no vector-memory instruction")
    access = _VMEM_ACCESS.fullmatch(mnemonic)
    if access is None or access.group(2) != "load" or access.group(1) == "scratch":
        return None
    space, _, lds_form, _ = access.groups()
    if space == "buffer":
        return "buffer_to_lds" if re.search(r"\blds$", operands) else "buffer"
    if space == "global":
        return "global_to_lds" if lds_form else "global"
    return "flat"


LOAD_KINDS = ("buffer", "buffer_to_lds", "global", "global_to_lds", "flat")
BUFFER_LOAD_KINDS = ("buffer", "buffer_to_lds")


def load_kinds(instructions: list) -> dict:
    """Global-memory loads by kind (load_kind), every kind listed."""
    counts = collections.Counter(kind for m, ops in instructions if instruction_class(m) == "vmem"
                                 and (kind := load_kind(m, ops)) is not None)
    return {kind: counts.get(kind, 0) for kind in LOAD_KINDS}


def unchecked_loads(instructions: list) -> list[str]:
    """The loads that do not go through a buffer resource (global_*, flat_*): their
    addresses are not range-checked by the hardware. Each as its listing line."""
    return [f"{m} {ops}" for m, ops in instructions if instruction_class(m) == "vmem"
            and load_kind(m, ops) not in (None, *BUFFER_LOAD_KINDS)]


def _vmcnt_limit(operands: str) -> int | None:
    """N of "s_waitcnt ... vmcnt(N) ...", None when it names no vmcnt."""
    operands = operands.replace("&", " ")
    counters = {name: int(value) for name, _, value in _WAIT_COUNTER.findall(operands)}
    if _WAIT_COUNTER.sub("", operands).strip(" ,"):
        raise ValueError(f"s_waitcnt operands {operands!r}: only named counters (vmcnt(N) lgkmcnt(M) ...) are read")
    return counters.get("vmcnt")


def _issue_body(body: list, outstanding: tuple) -> tuple[tuple, list]:
    """One pass over the body, straight through: (the load bytes of the VMEM operations
    outstanding after it, oldest first; the load bytes outstanding at each MFMA)."""
    queue = list(outstanding)
    at_mfma = []
    for mnemonic, operands in body:
        kind = instruction_class(mnemonic)
        if kind == "vmem":
            if len(queue) == MAX_VMCNT:
                queue.pop(0)
            queue.append(vmem_load_bytes(mnemonic))
        elif mnemonic == "s_waitcnt":
            limit = _vmcnt_limit(operands)
            if limit is not None and len(queue) > limit:
                del queue[:len(queue) - limit]
        elif mnemonic.startswith("s_waitcnt_"):
            raise ValueError(f"{mnemonic}: a gfx10+ split counter; the vmcnt model is gfx9's "
                             "(stores count in vmcnt)")
        elif kind == "mfma":
            at_mfma.append(sum(queue))
    return tuple(queue), at_mfma


def loads_in_flight_at_mfmas(loop: list, max_passes: int = MAX_VMCNT + 2) -> list[int]:
    """Global-load bytes a wave has issued and not yet waited for (vmcnt) when each MFMA of
    the loop body issues, in the loop's steady state: the body is run straight through
    (both sides of any branch inside it), from no loads outstanding, again and again until
    the loads outstanding at its end repeat, so that loads issued late in one iteration
    count at the start of the next. Starting from none, the outstanding operations are
    always the newest of the body's own, so their number only grows from pass to pass, to at
    most MAX_VMCNT: the state settles within MAX_VMCNT + 1 passes. The list follows the
    body's MFMAs in order."""
    outstanding = ()
    for _ in range(max_passes):
        after, at_mfma = _issue_body(loop, outstanding)
        if after == outstanding:
            return at_mfma
        outstanding = after
    raise ValueError(f"no steady state of the loads in flight after {max_passes} passes over the loop")


# --- the in-kernel combine's merge ------------------------------------------------------
# In the decode kernels the only vector atomics are the in-kernel combine's counter: the
# first is a program's arrival, and what follows it in the listing is what the last
# program of a sequence runs to merge the splits (the take-back, the acquire, the loads of
# the partials, the weighted sums, the output's store), besides the others' exit.
_ATOMIC = re.compile(r"(buffer|global|flat)_atomic_\w+")
_LOAD = re.compile(r"(buffer|global|flat)_load_\w+")


def arrival_index(instructions: list) -> int | None:
    """Index in parse's list of the kernel's first vector atomic (the in-kernel combine's
    arrival); None where it issues none."""
    return next((index for index, (mnemonic, _) in enumerate(instructions) if _ATOMIC.fullmatch(mnemonic)), None)


def load_round_trips(region: list) -> int:
    """The round trips to memory `region` waits through one after another: a global or
    buffer load issued at step t of the chain arrives at step t + 1, and an s_waitcnt
    vmcnt(N) that retires it moves the wave to that step (loads issued together before a
    wait come back together: one step; a load issued after a wait that stalled starts the
    next). Compute time is not counted: a load issued before other work and waited for after
    it costs no more steps than one waited for at once. The region is read straight through,
    once (both sides of a branch; a loop's body once), from no operation outstanding; every
    VMEM instruction holds a vmcnt slot (stores, atomics and cache control too: gfx9), and a
    wait that retires only those moves nothing."""
    queue, step = [], 0
    for mnemonic, operands in region:
        if instruction_class(mnemonic) == "vmem":
            if len(queue) == MAX_VMCNT:
                queue.pop(0)
            queue.append(step + 1 if _LOAD.fullmatch(mnemonic) else 0)  # a load: the step it arrives at
        elif mnemonic == "s_waitcnt":
            limit = _vmcnt_limit(operands)
            if limit is not None and len(queue) > limit:
                retired, queue = queue[:len(queue) - limit], queue[len(queue) - limit:]
                step = max(step, *retired)
        elif mnemonic.startswith("s_waitcnt_"):
            raise ValueError(f"{mnemonic}: a gfx10+ split counter; the vmcnt model is gfx9's")
    return step


def merge_figures(instructions: list, labels: dict) -> dict | None:
    """What the listing holds after the arrival (arrival_index), read statically: its
    instructions, its global / buffer loads, the round trips to memory it waits through
    (load_round_trips) and the loops among them (each counted once); None for a kernel with
    no vector atomic."""
    start = arrival_index(instructions)
    if start is None:
        return None
    region = instructions[start:]
    loops = [span for span in loop_spans(instructions, labels) if span[0] >= start]
    return {"instructions": len(region), "loads": sum(bool(_LOAD.fullmatch(m)) for m, _ in region),
            "round_trips": load_round_trips(region), "loops": len(loops)}


# --- registers and occupancy -----------------------------------------------------------
_RESOURCES = {  # field -> pattern in the "; Kernel info" comments or the metadata YAML
    "vgpr": r"^; NumVgprs: (\d+)$",
    "agpr": r"^; NumAgprs: (\d+)$",
    "total_vgpr": r"^; TotalNumVgprs: (\d+)$",
    "sgpr": r"^; TotalNumSgprs: (\d+)$",
    "scratch_bytes": r"^; ScratchSize: (\d+)$",
    "occupancy_registers": r"^; Occupancy: (\d+)$",
    "vgpr_spill": r"^\s+\.vgpr_spill_count:\s+(\d+)$",
    "sgpr_spill": r"^\s+\.sgpr_spill_count:\s+(\d+)$",
}


def resources(asm: str) -> dict:
    """Registers (arch VGPRs, AGPRs, their allocated total, SGPRs), spills, scratch bytes
    a lane and the compiler's occupancy (waves a SIMD, from registers and static LDS only)."""
    out = {}
    for name, pattern in _RESOURCES.items():
        found = re.findall(pattern, asm, flags=re.MULTILINE)
        if len(found) != 1:
            raise ValueError(f"expected one {name} ({pattern}) in the AMDGCN text, found {len(found)}")
        out[name] = int(found[0])
    return out


# --- MFMA kinds and their cycles ---------------------------------------------------------
# cbsz / blgp of an *_f8f6f4 MFMA select the format of A / B (LLVM SIDefines.h,
# AMDGPU::MFMAScaleFormats; absent means 0).
_F8F6F4_FORMATS = {0: "fp8", 1: "bf8", 2: "fp6", 3: "bf6", 4: "fp4"}

# Passes per MFMA on gfx950: LLVM's scheduling model for it, SIDPGFX950FullSpeedModel in
# llvm/lib/Target/AMDGPU/SISchedule.td (ROCm/llvm-project 37d9a345), WriteNPassMAI with
# ReleaseAtCycles = N on the HWXDL resource; a pass is 4 clock cycles of the SIMD's matrix
# core: AMD's table of CDNA3/CDNA4 MFMA cycles ("Matrix Core Programming on AMD CDNA3 and
# CDNA4 architecture", ROCm Blogs, 2025-10,
# https://rocm.blogs.amd.com/software-tools-optimization/matrix-cores-cdna/README.html:
# 16x16x32 f16 16 cycles, 32x32x16 f16 32,
# 16x16x128 f8f6f4 32 with an fp8 operand else 16, 32x32x64 f8f6f4 64 / 32, 16x16x4 f32 32,
# 32x32x2 f32 64, 16x16x4 f64 64) is exactly 4 x these passes.
# (pattern on the mnemonic, passes; or for f8f6f4 (passes with an fp8/bf8 operand, without))
_MFMA_PASSES = (
    (r"v_mfma(_scale)?_f32_16x16x128_f8f6f4", (8, 4)),
    (r"v_mfma(_scale)?_f32_32x32x64_f8f6f4", (16, 8)),
    (r"v_mfma_f32_16x16x(16|32)_(f16|bf16)", 4),
    (r"v_mfma_f32_16x16x32_(fp8|bf8)_(fp8|bf8)", 4),
    (r"v_mfma_i32_16x16x64_i8", 4),
    (r"v_mfma_f32_32x32x(8|16)_(f16|bf16)", 8),
    (r"v_mfma_f32_32x32x16_(fp8|bf8)_(fp8|bf8)", 8),
    (r"v_mfma_i32_32x32x32_i8", 8),
    (r"v_mfma_f32_16x16x4_f32", 8),
    (r"v_mfma_f32_32x32x2_f32", 16),
    (r"v_mfma_f64_16x16x4_f64", 16),
    (r"v_mfma_f32_4x4x\w+", 2),
    (r"v_smfmac_\w+_16x16x\w+", 4),
    (r"v_smfmac_\w+_32x32x\w+", 8),
)
CYCLES_PER_PASS = 4


def mfma_kind(mnemonic: str, operands: str) -> str:
    """The mnemonic; for f8f6f4 instructions with the operand formats, e.g.
    "v_mfma_scale_f32_16x16x128_f8f6f4.fp8.fp4"."""
    if not mnemonic.endswith("_f8f6f4"):
        return mnemonic
    formats = []
    for modifier in ("cbsz", "blgp"):
        found = re.search(rf"\b{modifier}:(\d+)", operands)
        formats.append(_F8F6F4_FORMATS[int(found.group(1)) if found else 0])
    return ".".join([mnemonic, *formats])


def mfma_cycles(kind: str) -> int:
    mnemonic, *formats = kind.split(".")
    for pattern, passes in _MFMA_PASSES:
        if re.fullmatch(pattern, mnemonic):
            if isinstance(passes, tuple):
                passes = passes[0] if {"fp8", "bf8"} & set(formats) else passes[1]
            return passes * CYCLES_PER_PASS
    raise KeyError(f"no gfx950 pass count for {kind!r}: add it from SISchedule.td "
                   "(SIDPGFX950FullSpeedModel)")


def mfma_counts(instructions: list) -> dict:
    counts = collections.Counter(mfma_kind(m, ops) for m, ops in instructions if instruction_class(m) == "mfma")
    return dict(sorted(counts.items()))
