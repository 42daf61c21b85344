"""An emulator of gfx950 (AMD MI355X, CDNA4) wave64 machine code, run on a CPU: kernels as
Triton compiled them (their AMDGCN listing and code object metadata), over a launch grid,
with torch CPU tensors as global memory, and with memory, ordering and barrier checks.
See docs/gfx950.md ("The emulator") and tools/gfx950_emulate.py.

    listing.py        the AMDGCN text and its metadata, read
    memory.py         global memory and LDS, with the access and ordering checks
    reports.py        what a run reports: violations, and what the emulator does not implement
    state.py          the machine state: waves, workgroups, a launch, memory operations in flight
    initial_state.py  the state a wave starts in, from the kernel descriptor
    registry.py       mnemonic -> the function an instruction compiles to
    semantics/        the instructions, vectorized over 64 lanes (they fill the registry)
    machine.py        the run loop: workgroups, waves, barriers, violations
    launch.py         a compiled kernel's launch: kernarg segment and memory mapping
    single.py         a few instructions on one wave, for tests of one instruction
    pcode/            AMD's pseudocode run per lane: the oracle the semantics are checked against
"""
from .launch import CompiledKernel, build_launch
from .listing import ListingError, read_listing
from .machine import Machine
from .memory import GlobalMemory
from .reports import EmulationStopped, NotImplementedInstruction, Violation
from .state import KernelLaunch

__all__ = ["CompiledKernel", "build_launch", "read_listing", "ListingError", "KernelLaunch", "Machine",
           "GlobalMemory", "EmulationStopped", "NotImplementedInstruction", "Violation"]
