"""An emulator of gfx950 (AMD MI355X, CDNA4) wave64 machine code, run on a CPU: kernels as
Triton compiled them (their AMDGCN listing and code object metadata), over a launch grid,
with torch CPU tensors as global memory, and with memory, ordering and barrier checks.
See docs/gfx950.md ("The emulator") and tools/gfx950_emulate.py."""
from .launch import build_launch, compile_for_gfx950, run_calls
from .listing import ListingError, read_listing
from .machine import KernelLaunch, Machine
from .memory import GlobalMemory
from .reports import EmulationStopped, NotImplementedInstruction, Violation

__all__ = ["build_launch", "compile_for_gfx950", "run_calls", "read_listing", "ListingError", "KernelLaunch",
           "Machine", "GlobalMemory", "EmulationStopped", "NotImplementedInstruction", "Violation"]
