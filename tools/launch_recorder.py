"""A stand-in for Triton's GPU driver on a machine without a GPU: Triton's JIT runs as on a
GPU of a named target (binding and specializing the arguments, compiling for that target
into the Triton cache, returning the compiled kernel), and every launch lands in a recorder
instead of a GPU. For bench/host_time.py (the host's own work per call) and for tests of
how the runners launch (tests/test_host_launches.py).

    with recording_driver("sm_90") as recorder:
        ...  # kernel[grid](...) and compiled[grid](*args) now record into recorder.launches

What stands in (Triton 3.5 to 3.9: runtime/driver.py's DriverConfig.set_active,
compiler.CompiledKernel._init_handles): the current device (0) and its queue handle (0),
the target, the device properties a kernel load checks, the kernel load itself, and the
launcher, which records (kernel name, grid, every argument after the launch metadata) or,
with record=False, only counts. What runs as on a GPU: the JIT's Python, the compile, the
compiled kernel's own launch path (CompiledKernel.__getitem__'s runner) up to the launcher.
The arguments are the caller's tensors, on whatever device they live (CPU stand-ins):
Triton reads their addresses, alignments and dtypes, never their memory.

Triton's JIT keeps its per-device caches on each kernel: after a recording driver a kernel
has one for device 0 of the stand-in's target, so use it in a process of its own (the bench
and the tests start one) and not where the same kernels then run on a GPU.
"""
from __future__ import annotations

import contextlib
import dataclasses
from types import SimpleNamespace

import torch
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver as triton_driver

TARGETS = {
    "gfx950": GPUTarget("hip", "gfx950", 64),  # MI355X (CDNA4)
    "sm_90": GPUTarget("cuda", 90, 32),        # H200
}


@dataclasses.dataclass
class Launch:
    kernel: str      # the compiled kernel's name
    grid: tuple
    args: tuple      # the kernel's arguments as the launcher received them (after the launch metadata)


@dataclasses.dataclass
class Recorder:
    record: bool = True
    launches: list = dataclasses.field(default_factory=list)
    count: int = 0


class _Launcher:
    """Stands in for the backend's launcher (CudaLauncher, HIPLauncher): called with the grid,
    the queue, the function, the packed metadata, the launch metadata, the two hooks and the
    kernel's arguments, as CompiledKernel's runner calls it."""

    def __init__(self, recorder: Recorder, name: str):
        self.recorder = recorder
        self.name = name

    def __call__(self, grid_x, grid_y, grid_z, _queue, _function, _packed, _metadata, _enter, _exit, *args):
        self.recorder.count += 1
        if self.recorder.record:
            self.recorder.launches.append(Launch(self.name, (grid_x, grid_y, grid_z), args))


class RecordingDriver:
    """Triton's active driver while recording_driver is entered."""

    def __init__(self, target: GPUTarget, recorder: Recorder):
        self.target = target
        self.recorder = recorder
        # Generous limits: what a kernel load checks against the device (the compile has its own).
        properties = {"max_shared_mem": 1 << 20, "multiprocessor_count": 132, "max_num_regs": 65536,
                      "warpSize": target.warp_size, "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}
        self.utils = SimpleNamespace(
            get_device_properties=lambda device: properties,
            load_binary=lambda name, binary, shared, device: (name, name, 0, 0, 1024))  # (module, function, ...)

    def launcher_cls(self, src, metadata):
        return _Launcher(self.recorder, metadata.name)

    @staticmethod
    def is_active():
        return True

    def get_current_target(self):
        return self.target

    @staticmethod
    def get_current_device():
        return 0

    @staticmethod
    def set_current_device(device):
        pass

    def get_current_stream(self, device=None):  # noqa: the name is Triton's
        return 0

    @staticmethod
    def get_active_torch_device():
        return torch.device("cpu")

    @staticmethod
    def map_python_to_cpp_type(ty: str) -> str:
        return ty

    def get_benchmarker(self):
        raise NotImplementedError("nothing runs under the recording driver")


@contextlib.contextmanager
def recording_driver(target: str, record: bool = True):
    """Makes a RecordingDriver for `target` ("gfx950", "sm_90") Triton's active driver; yields
    its Recorder."""
    recorder = Recorder(record=record)
    previous = triton_driver._active  # None until a driver was first asked for
    triton_driver.set_active(RecordingDriver(TARGETS[target], recorder))
    try:
        yield recorder
    finally:
        triton_driver._active = previous
