"""A worker process that runs Triton kernels under the interpreter, and a recorder of the
device work a call asks for.

Triton decides interpret-or-compile when a kernel is decorated, i.e. when submission is
imported, and other test modules import it without the interpreter. So kernels run in one
worker process spawned with TRITON_INTERPRET=1 in its environment; it imports the test
module (and with it submission) itself. Functions given to `run` must be module-level
functions of a test module; their arguments and results are pickled.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os

from torch.utils._python_dispatch import TorchDispatchMode


class InterpreterWorker:
    def __init__(self):
        self._pool = None

    def run(self, function, *args):
        if self._pool is None:
            previous = os.environ.get("TRITON_INTERPRET")
            os.environ["TRITON_INTERPRET"] = "1"  # inherited by the worker when it is spawned
            try:
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"))
                self._pool.submit(int).result()  # spawn it now, while the variable is set
            finally:
                if previous is None:
                    del os.environ["TRITON_INTERPRET"]
                else:
                    os.environ["TRITON_INTERPRET"] = previous
        return self._pool.submit(function, *args).result()

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class DeviceWorkRecorder(TorchDispatchMode):
    """In order: every torch operation dispatched while it is active, as ("torch", name),
    and every span marked with `launch(kind, name)` as one (kind, name) entry, the torch
    operations inside the span left out (the Triton interpreter's copies, a fake's
    arithmetic: on a GPU that span is one launch)."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self._inside_launch = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._inside_launch:
            self.events.append(("torch", str(func)))
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def launch(self, kind: str, name: str):
        self.events.append((kind, name))
        self._inside_launch += 1
        try:
            yield
        finally:
            self._inside_launch -= 1


@contextlib.contextmanager
def recording_triton_launches(recorder: DeviceWorkRecorder):
    """Every launch of any Triton kernel under the interpreter (they all go through
    GridExecutor.__call__) recorded as ("triton", kernel name)."""
    from triton.runtime import interpreter

    original = interpreter.GridExecutor.__call__

    def recorded(self, *args, **kwargs):
        with recorder.launch("triton", self.fn.__name__):
            return original(self, *args, **kwargs)

    interpreter.GridExecutor.__call__ = recorded
    try:
        yield
    finally:
        interpreter.GridExecutor.__call__ = original
