"""Running a submission's kernel launches (its KernelCalls: JIT function, grid, arguments,
options) in the emulator: each is specialized exactly as Triton's JIT would on gfx950
(bench/compile_target.specialize), compiled for gfx950, and its kernarg segment built from
the code object metadata, with every tensor argument mapped into the emulated memory.

The tensors are CPU tensors and are the emulated memory: what the kernels store lands in
them."""
from __future__ import annotations

import dataclasses
import struct
import sys
from pathlib import Path

import numpy as np
import torch

from .listing import read_listing
from .machine import KernelLaunch, Machine
from .memory import GlobalMemory

_BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(_BENCH) not in sys.path:
    sys.path.insert(0, str(_BENCH))

_COMPILED: dict = {}


@dataclasses.dataclass
class CompiledSpecialization:
    identity: tuple      # (module, kernel name, JIT cache key)
    kernel_name: str
    constexprs: dict
    signature: dict
    listing: object      # the read listing (Kernel)
    shared: int          # LDS bytes
    num_warps: int
    compile_seconds: float


def compile_for_gfx950(call) -> CompiledSpecialization:
    """The gfx950 compile of a KernelCall's specialization (cached per JIT key)."""
    import time

    import compile_target as ct
    spec = ct.specialize(call, ct.TARGETS["gfx950"])
    if spec.identity in _COMPILED:
        return _COMPILED[spec.identity]
    started = time.perf_counter()
    compiled = spec.compile()
    seconds = time.perf_counter() - started
    result = CompiledSpecialization(spec.identity, spec.kernel.fn.__name__, spec.constexpr_values(),
                                    dict(spec.signature), read_listing(compiled.asm["amdgcn"]),
                                    int(compiled.metadata.shared), int(compiled.metadata.num_warps), seconds)
    _COMPILED[spec.identity] = result
    return result


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


def build_launch(call, compiled: CompiledSpecialization, memory: GlobalMemory) -> KernelLaunch:
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


def run_calls(calls, memory: GlobalMemory | None = None, machine: Machine | None = None):
    """Runs KernelCalls in order in one emulated memory; returns (machine, [LaunchResult])."""
    memory = memory or GlobalMemory()
    machine = machine or Machine(memory)
    results = []
    for call in calls:
        compiled = compile_for_gfx950(call)
        launch = build_launch(call, compiled, memory)
        with np.errstate(all="ignore"):
            results.append(machine.run(launch))
    return machine, results
