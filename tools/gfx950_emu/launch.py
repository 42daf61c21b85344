"""A compiled kernel's launch in the emulator: each tensor argument mapped into the emulated
memory (the CPU tensors are that memory: what the kernel stores lands in them), the kernarg
segment laid out as the code object's metadata says, the grid and the workgroup's waves.
A call is a Triton launch (its JIT function, grid and arguments); compiling it for gfx950 is
the caller's (tools/gfx950_cases.py compiles submission.py's launches)."""
from __future__ import annotations

import dataclasses
import struct

import numpy as np
import torch

from .listing import Kernel
from .memory import GlobalMemory
from .state import KernelLaunch


@dataclasses.dataclass
class CompiledKernel:
    """A kernel as compiled for gfx950: what the emulator needs to launch it."""
    kernel_name: str
    signature: dict      # argument name -> Triton's type ("*bf16", "i32", "constexpr", ...)
    listing: Kernel      # the read listing and its code object metadata
    shared: int          # LDS bytes
    num_warps: int


def _pack(kind: str, value) -> bytes:
    if kind.startswith("*"):
        return struct.pack("<Q", value)
    if kind in ("i32", "i1", "u1"):
        return struct.pack("<i", int(value))
    if kind == "u32":
        return struct.pack("<I", int(value))
    if kind in ("i64",):
        return struct.pack("<q", int(value))
    if kind == "u64":
        return struct.pack("<Q", int(value))
    if kind == "fp32":
        return struct.pack("<f", float(value))
    raise NotImplementedError(f"kernel argument of type {kind}")


def build_launch(call, compiled: CompiledKernel, memory: GlobalMemory) -> KernelLaunch:
    """The emulated launch of `call`: its tensors mapped into `memory`, its kernarg segment
    laid out as the code object's metadata says (each argument at its offset and size, then
    Triton's two scratch pointers, null: these kernels use no global scratch)."""
    names = call.kernel.arg_names
    args = list(call.args)
    values = []
    for name, arg in zip(names, args):
        kind = compiled.signature[name]
        if kind == "constexpr":
            continue
        if isinstance(arg, torch.Tensor):
            values.append((name, kind, memory.map_tensor(arg, name)))
        else:
            values.append((name, kind, arg))
    entries = compiled.listing.arguments
    if len(entries) != len(values) + 2:
        raise ValueError(f"{compiled.kernel_name}: {len(entries)} kernel arguments in the code object, "
                         f"{len(values)} + 2 scratch pointers from the call")
    size = compiled.listing.metadata[".kernarg_segment_size"]
    kernarg = np.zeros(size, dtype=np.uint8)
    for entry, (name, kind, value) in zip(entries, values + [("global_scratch", "*i8", 0),
                                                             ("profile_scratch", "*i8", 0)]):
        raw = _pack(kind, value)
        if len(raw) != entry[".size"]:
            raise ValueError(f"{compiled.kernel_name}: argument {name} is {len(raw)} bytes, the code object "
                             f"says {entry['.size']}")
        kernarg[entry[".offset"]:entry[".offset"] + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    address = memory.map_bytes(kernarg, f"{compiled.kernel_name} kernargs")
    grid = tuple(call.grid) + (1,) * (3 - len(call.grid))
    return KernelLaunch(compiled.listing, grid, compiled.num_warps, compiled.shared, address, kernarg,
                        compiled.kernel_name)
