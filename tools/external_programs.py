"""The programs outside this project's Python that its tests and tools run where a machine
has them, each probed for what the caller needs of it (its version, its target), never
only for its presence: Debian 12's `llvm` package puts LLVM 14 on PATH as `llvm-objdump`,
which cannot read gfx950 code, and an `llvm-objdump-22` whose libraries are missing exits
127. One probe a program, here; a caller asks `problem(name)` (None where the program can
serve, else one sentence naming the program, the version it needs, what this machine has
and how to get it: a test skips with it) and runs `command(name)`.

    python3 -m tools.external_programs      # each program: what it enables, usable here or why not

A probe runs the program once (`--version`) the first time it is asked for, per PATH; a
test that does not need a program never asks for it.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE_TIMEOUT_S = 30
LLVM_VERSION = re.compile(r"LLVM version (\d+)\.(\d+)\.(\d+)")


class Unusable(RuntimeError):
    """command(name) where the program cannot serve here; the message is problem(name)."""


@dataclasses.dataclass(frozen=True)
class LLVMTool:
    """An LLVM program tried on PATH by each of `candidates` in turn: the first whose
    `--version` names LLVM `min_major` or newer (with `target` among its registered
    targets, where one is needed) serves."""
    name: str
    candidates: tuple[str, ...]
    min_major: int
    target: str | None
    needs: str
    enables: str
    get: str

    def find(self) -> tuple[list[str] | None, str]:
        """(the command, "") or (None, what each candidate is here)."""
        found = []
        for candidate in self.candidates:
            path = shutil.which(candidate)
            if path is None:
                found.append(f"{candidate} is not on PATH")
                continue
            output, problem = version_output([path])
            if output is not None:
                problem = self.version_problem(output)
            if problem is None:
                return [path], ""
            found.append(f"{candidate} ({path}) {problem}")
        return None, "; ".join(found)

    def version_problem(self, output: str) -> str | None:
        version = LLVM_VERSION.search(output)
        if version is None:
            return "prints no LLVM version"
        if int(version.group(1)) < self.min_major:
            return f"is LLVM {'.'.join(version.groups())}"
        if self.target and not re.search(rf"^\s+{self.target}\s+-", output, flags=re.MULTILINE):
            return f"is LLVM {'.'.join(version.groups())} without the {self.target} target"
        return None


@dataclasses.dataclass(frozen=True)
class PythonTool:
    """A program that a pinned Python distribution provides, run as `python3 -m module` by
    the interpreter that runs the caller (a venv that is not activated keeps its own)."""
    name: str
    module: str
    needs: str
    enables: str
    get: str

    def pinned_version(self) -> str:
        pins = (ROOT / "requirements.txt").read_text().splitlines()
        return next(line.split("==", 1)[1].strip() for line in pins if line.startswith(f"{self.name}=="))

    def find(self) -> tuple[list[str] | None, str]:
        try:
            installed = importlib.metadata.version(self.name)
        except importlib.metadata.PackageNotFoundError:
            return None, f"{self.name} is not installed for {sys.executable}"
        if installed != self.pinned_version():
            return None, f"{self.name} {installed} is installed for {sys.executable}"
        return [sys.executable, "-m", self.module], ""


@dataclasses.dataclass(frozen=True)
class TritonBundledTool:
    """A CUDA program that Triton's NVIDIA backend carries in its wheel (backends/nvidia/bin),
    run from there."""
    name: str
    needs: str
    enables: str
    get: str

    def find(self) -> tuple[list[str] | None, str]:
        import triton
        path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / self.name
        if not path.is_file():
            return None, f"triton {triton.__version__} has no {path}"
        output, problem = version_output([str(path)])
        if output is None:
            return None, f"{path} {problem}"
        return [str(path)], ""


@dataclasses.dataclass(frozen=True)
class CudaToolkitTool:
    """A program of NVIDIA's CUDA toolkit: on PATH, else in the bin/ of $CUDA_HOME, of an
    installed toolkit (/usr/local/cuda*/bin) or of NVIDIA's pip wheels for this Python, the
    first whose `--version` names `banner`."""
    name: str
    banner: str
    needs: str
    enables: str
    get: str

    def find(self) -> tuple[list[str] | None, str]:
        places = [shutil.which(self.name)]
        places += [str(Path(home) / "bin" / self.name) for home in (os.environ.get("CUDA_HOME"),) if home]
        places += sorted(str(path) for path in Path("/usr/local").glob(f"cuda*/bin/{self.name}"))
        # NVIDIA's pip wheels (nvidia-cuda-sanitizer-api) put it in site-packages/nvidia/cu*/bin
        places += sorted(str(path) for folder in sys.path if folder and Path(folder).is_dir()
                         for path in Path(folder).glob(f"nvidia/*/bin/{self.name}"))
        found = []
        for path in dict.fromkeys(place for place in places if place):
            output, problem = version_output([path])
            if output is not None and self.banner not in output:
                problem = f"does not say {self.banner!r}"
            if problem is None:
                return [path], ""
            found.append(f"{path} {problem}")
        return None, "; ".join(found) or (f"no {self.name} on PATH, in $CUDA_HOME/bin, /usr/local/cuda*/bin or "
                                          "site-packages/nvidia/*/bin")


LLVM_DEBIAN = ("Debian 12: `apt-get install llvm-22` (bookworm-security; it installs llvm-objdump-22, "
               "llvm-readelf-22 and llvm-mc-22)")
PROGRAMS = {tool.name: tool for tool in (
    LLVMTool("llvm-objdump", ("llvm-objdump-22", "llvm-objdump"), 22, "amdgcn",
             needs="LLVM 22 or newer with the AMDGPU (amdgcn) target, to disassemble gfx950 code "
                   "(the version aiter's code object was read with; LLVM 14 cannot read gfx950)",
             enables="aiter's assembly a8w8 decode in the gfx950 report (bench/aiter_asm.py, "
                     "bench/gfx950_report.py) and its test",
             get=LLVM_DEBIAN),
    LLVMTool("llvm-readelf", ("llvm-readelf-22", "llvm-readelf"), 14, None,
             needs="LLVM 14 or newer, to read a code object's AMDGPU metadata note (checked with 14 and 22)",
             enables="the kernel resources (waves, VGPRs, LDS) of aiter's code object, beside llvm-objdump",
             get=LLVM_DEBIAN),
    PythonTool("kernelguard", "kernelguard",
               needs="the version requirements.txt pins, for the Python that runs the tests",
               enables="tests/test_upload.py's check that gpu-mode's hack detector matches no pattern "
                       "in submission.py",
               get="`bash tools/setup.sh` (it installs requirements.txt)"),
    TritonBundledTool("nvdisasm",
                      needs="Triton's NVIDIA backend with its bundled CUDA tools (PyPI's triton wheel "
                            "for Linux x86-64 carries them)",
                      enables="the sm_90 SASS main-loop mix (bench/sass_loop.py, tests/test_sass_loop.py)",
                      get="PyPI's triton (`bash tools/setup.sh` installs the pin where no triton is)"),
    CudaToolkitTool("compute-sanitizer", "Compute Sanitizer",
                    needs="NVIDIA's Compute Sanitizer (CUDA toolkit 12 or newer), on a machine with an NVIDIA GPU",
                    enables="memcheck over the Hopper forms' robustness cases (bench/hopper_safety.py)",
                    get="NVIDIA's CUDA toolkit, or its pip wheel for the driver's CUDA version "
                        "(`python3 -m pip install nvidia-cuda-sanitizer-api==13.0.*` for CUDA 13.0)"),
)}


def version_output(command: list[str]) -> tuple[str | None, str | None]:
    """(what `command --version` prints, None) or (None, why it printed nothing usable)."""
    try:
        proc = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except OSError as error:
        return None, f"does not start ({error.strerror})"
    except subprocess.TimeoutExpired:
        return None, f"did not answer `--version` within {PROBE_TIMEOUT_S} s"
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return None, f"exits {proc.returncode} on `--version`" + (f": {said[0][:200]}" if said else "")
    return proc.stdout + proc.stderr, None


@functools.lru_cache(maxsize=None)
def _probe(name: str, path_variable: str | None) -> tuple[tuple[str, ...] | None, str]:
    command, found = PROGRAMS[name].find()
    return (tuple(command) if command else None), found


def problem(name: str) -> str | None:
    """None where `name` can serve here; else one sentence: the program, what it needs,
    what this machine has, how to get it."""
    command, found = _probe(name, os.environ.get("PATH"))
    if command is not None:
        return None
    program = PROGRAMS[name]
    return f"{name}: needs {program.needs}; here {found}. To get it: {program.get}"


def command(name: str) -> list[str]:
    """The command that runs `name` here; Unusable (with problem(name)) where none can."""
    found, _ = _probe(name, os.environ.get("PATH"))
    if found is None:
        raise Unusable(problem(name))
    return list(found)


def sanitizer_summary(output: str) -> tuple[str, int | None]:
    """compute-sanitizer's last "ERROR SUMMARY: N errors" line and N; ("", None) where the
    output has none (the run stopped before its summary)."""
    lines = [line for line in output.splitlines() if re.search(r"ERROR SUMMARY: \d+ error", line)]
    if not lines:
        return "", None
    return lines[-1], int(re.search(r"ERROR SUMMARY: (\d+)", lines[-1]).group(1))


def main() -> int:
    for name, program in PROGRAMS.items():
        why = problem(name)
        state = f"usable: {' '.join(command(name))}" if why is None else f"NOT usable: {why}"
        print(f"{name}: {program.enables}\n    {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
