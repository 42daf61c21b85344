"""A few instructions run on one wave with registers set by hand: for tests that tie one
instruction's emulated semantics to another statement of it (AMD's pseudocode, LLVM's
encoding of an intrinsic), without compiling a kernel."""
from __future__ import annotations

import numpy as np

from .listing import EXEC, Kernel, parse_instruction
from .machine import Machine
from .memory import GlobalMemory
from .state import KernelLaunch, Workgroup


def run_instructions(lines, *, sgprs: dict | None = None, vgprs: dict | None = None, exec_mask: int = (1 << 64) - 1,
                     scc: int = 0, mode: int = 0x3F0, lds_bytes: int = 0, machine: Machine | None = None):
    """Runs `lines` (instruction text, `label:` lines allowed) then s_endpgm on one wave whose
    SGPRs (hardware number -> int), vector rows (row -> 64 uint32; AGPR n is row 256 + n),
    EXEC, SCC and MODE are given; returns (wave, machine) after every memory operation has
    completed."""
    instructions, labels = [], {}
    for line in list(lines) + ["s_endpgm"]:
        text = line.strip()
        if text.endswith(":"):
            labels[text[:-1]] = len(instructions)
        elif text:
            instructions.append(parse_instruction(text, len(instructions) + 1, ""))
    kernel = Kernel("single", instructions, labels, {".amdhsa_user_sgpr_count": 0}, {".args": []}, "")
    machine = machine or Machine(GlobalMemory())
    launch = KernelLaunch(kernel, (1, 1, 1), 1, lds_bytes, 0, np.zeros(0, dtype=np.uint8), "single")
    workgroup = Workgroup(machine, launch, (0, 0, 0), 0)
    wave = workgroup.waves[0]
    for index, value in (sgprs or {}).items():
        wave.s[index] = value & 0xFFFFFFFF
        if index == 124:
            wave.m0_written = True
    for row, values in (vgprs or {}).items():
        wave.v[row] = np.asarray(values, dtype=np.uint32)
    wave.s[EXEC] = exec_mask & 0xFFFFFFFF
    wave.s[EXEC + 1] = exec_mask >> 32
    wave.exec_changed()
    wave.scc = scc
    wave.mode = mode
    code = machine.compile(kernel)
    with np.errstate(all="ignore"):
        while not wave.done:
            machine._run_wave(wave, code)
            wave.barrier_line = None
        wave.wait(0, 0)
    return wave, machine
