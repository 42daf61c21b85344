"""Every address a Triton kernel loads, stores or updates atomically under the interpreter
(TRITON_INTERPRET=1), checked against the view of the tensor argument it came from.

How it maps an address to its tensor: each tensor argument of a launch is handed to the
kernel at an address in a window of its own (2^41 bytes a window, the tensor's low 12
address bits kept, so a kernel sees the alignment of the real tensor). The interpreter's
pointer arithmetic is plain uint64 arithmetic, so every pointer a program derives from an
argument stays in that argument's window (offsets up to +-2^40 bytes). The interpreter's
four memory calls (load, store, atomic_rmw, atomic_cas) go through a proxy that, for each
masked-in lane (masked-out lanes are never dereferenced, so they are not checked), finds
the argument from the window and checks that every byte of the access lies on an element
of the argument's view: its data pointer plus strides over its shape. Bytes of the same
storage outside the view (the gap between the rows of a strided view, the columns of a
wider tensor it was cut from, anything past its last element) do not count. A lane that
fails is recorded and not performed, so the check can neither fault nor write memory it
must not; when a launch has recorded any, it raises AddressViolation naming the kernel,
the program, the argument and the offsets.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import inspect

import numpy as np

WINDOW_BITS = 41  # each tensor argument's address window: 2 TiB, its base in the middle


class AddressViolation(AssertionError):
    pass


@dataclasses.dataclass
class ArgumentView:
    """The bytes a kernel may touch through one tensor argument."""
    name: str
    description: str
    real_base: int
    window_base: int
    valid: np.ndarray  # bool per byte from the data pointer: whether it belongs to an element

    @classmethod
    def of(cls, name: str, tensor, index: int) -> "ArgumentView":
        size = tensor.element_size()
        offsets = np.zeros(1, dtype=np.int64)
        for extent, stride in zip(tensor.shape, tensor.stride()):
            offsets = (offsets[:, None] + np.arange(extent, dtype=np.int64)[None, :] * stride).reshape(-1)
        offsets = offsets * size if tensor.numel() else np.zeros(0, dtype=np.int64)
        valid = np.zeros(int(offsets.max()) + size if offsets.size else 0, dtype=bool)
        for byte in range(size):
            valid[offsets + byte] = True
        real = tensor.data_ptr()
        window = ((index + 1) << WINDOW_BITS) + (1 << (WINDOW_BITS - 1)) + (real & 0xFFF)
        description = (f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')} "
                       f"strides {tuple(tensor.stride())}, {valid.size} bytes spanned")
        return cls(name, description, real, window, valid)


class AddressCheck:
    """Installed (as a context manager) in a process running under the interpreter:
    every Triton launch in it is checked. Counts what it checked: launches per kernel,
    and masked-in lanes (accesses) per kernel."""

    def __init__(self):
        self.launches = collections.Counter()
        self.accesses = collections.Counter()
        self._views: list[ArgumentView] | None = None
        self._pending_names: list[str] = []
        self._kernel = ""
        self._violations: list[str] = []

    # ---- what a launch may touch
    def _register(self, tensor) -> int:
        name = self._pending_names.pop(0) if self._pending_names else f"argument {len(self._views)}"
        view = ArgumentView.of(name, tensor, len(self._views))
        self._views.append(view)
        return view.window_base

    def _translate(self, op: str, ptrs: np.ndarray, mask, size: int):
        """(real addresses, lanes to perform): the masked-in lanes inside their views."""
        ptrs = np.asarray(ptrs, dtype=np.uint64)
        lanes = np.broadcast_to(np.asarray(mask, dtype=bool), ptrs.shape).reshape(-1)
        flat = ptrs.reshape(-1)
        real = np.zeros_like(flat)
        perform = lanes.copy()
        checked = np.flatnonzero(lanes)
        self.accesses[self._kernel] += checked.size
        addresses = flat[checked]
        windows = (addresses >> np.uint64(WINDOW_BITS)).astype(np.int64) - 1
        for window in np.unique(windows):
            lanes_here = checked[windows == window]
            if not 0 <= window < len(self._views):
                self._record(op, None, lanes_here, flat[lanes_here].astype(np.int64), size)
                perform[lanes_here] = False
                continue
            view = self._views[window]
            offsets = flat[lanes_here].astype(np.int64) - view.window_base
            inside = (offsets >= 0) & (offsets + size <= view.valid.size)
            for byte in range(size):  # every byte of the access on an element of the view
                inside[inside] = view.valid[offsets[inside] + byte]
            if not inside.all():
                self._record(op, view, lanes_here[~inside], offsets[~inside], size)
                perform[lanes_here[~inside]] = False
            real[lanes_here[inside]] = (np.int64(view.real_base) + offsets[inside]).astype(np.uint64)
        return real.reshape(ptrs.shape), perform.reshape(ptrs.shape)

    def _record(self, op, view, lanes, offsets, size) -> None:
        from triton.runtime.interpreter import interpreter_builder
        program = tuple(int(i) for i in interpreter_builder.grid_idx)
        shown = ", ".join(str(int(o)) for o in np.unique(offsets)[:6])
        where = (f"outside {view.name} ({view.description})" if view is not None
                 else "at an address derived from no tensor argument")
        self._violations.append(f"{self._kernel} program {program}: {op} of {lanes.size} lane(s) of {size} bytes "
                                f"{where}; byte offsets {shown}{' ...' if np.unique(offsets).size > 6 else ''}")

    # ---- the interpreter's memory calls
    def _memory_proxy(self, real_module):
        check = self

        class Memory:
            def __getattr__(self, name):
                return getattr(real_module, name)

            @staticmethod
            def load(ptrs, mask, other, dtype):
                addresses, perform = check._translate("load", ptrs, mask, np.dtype(dtype).itemsize)
                return real_module.load(addresses, perform, other, dtype)

            @staticmethod
            def store(ptrs, value, mask):
                addresses, perform = check._translate("store", ptrs, mask, value.dtype.itemsize)
                return real_module.store(addresses, value, perform)

            @staticmethod
            def atomic_rmw(op, ptrs, value, mask, sem):
                addresses, perform = check._translate("atomic_rmw", ptrs, mask, value.dtype.itemsize)
                return real_module.atomic_rmw(op, addresses, value, perform, sem)

            @staticmethod
            def atomic_cas(ptrs, compare, value, sem):
                addresses, perform = check._translate("atomic_cas", ptrs, True, value.dtype.itemsize)
                result = np.array(compare, copy=True)
                if perform.all():
                    return real_module.atomic_cas(addresses, compare, value, sem)
                if perform.any():
                    result[perform] = real_module.atomic_cas(addresses[perform], compare[perform], value[perform], sem)
                return result

        return Memory()

    @contextlib.contextmanager
    def installed(self):
        from triton.runtime import interpreter

        original_cvt = interpreter._implicit_cvt
        original_memory = interpreter._interpreter
        original_call = interpreter.GridExecutor.__call__
        check = self

        def tagged_cvt(arg):
            converted = original_cvt(arg)
            if hasattr(arg, "data_ptr") and check._views is not None:
                tensor = arg.base if hasattr(arg, "base") and hasattr(arg.base, "data_ptr") else arg
                converted.handle.data[0] = check._register(tensor)
            return converted

        def checked_call(executor, *args, **kwargs):
            names = inspect.getfullargspec(executor.fn).args
            bound = inspect.getcallargs(executor.fn, *args, **{k: v for k, v in kwargs.items() if k in names})
            check._pending_names = [name for name, value in bound.items()
                                    if name not in executor.constexprs and hasattr(value, "data_ptr")]
            check._views, check._violations = [], []
            check._kernel = executor.fn.__name__
            check.launches[check._kernel] += 1
            try:
                original_call(executor, *args, **kwargs)
            finally:
                violations, check._views = check._violations, None
            if violations:
                raise AddressViolation(f"{len(violations)} out-of-view access(es):\n" + "\n".join(violations[:20]))

        interpreter._implicit_cvt = tagged_cvt
        interpreter._interpreter = self._memory_proxy(original_memory)
        interpreter.GridExecutor.__call__ = checked_call
        try:
            yield self
        finally:
            interpreter._implicit_cvt = original_cvt
            interpreter._interpreter = original_memory
            interpreter.GridExecutor.__call__ = original_call
