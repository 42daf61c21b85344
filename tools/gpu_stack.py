"""Set-up's first step: keep the torch and triton a machine has; install the pins where missing.

A GPU machine comes with the torch its driver needs (ROCm or CUDA) and the triton that goes
with it, and on ROCm with aiter built against both; PyPI's wheels installed over them would
break that stack. So each pin of tools/torch-triton-pins.txt (`name==version`, for the module
of the same name) is installed only where that module is not found, one pin at a time in the
file's order. A module that is found is imported and kept, whatever its version and whichever
distribution provides it (ROCm's triton comes as `pytorch-triton-rocm`). aiter is only
reported, never installed: ROCm ships it, and `pip install aiter` fetches an unrelated package.

Where torch is missing and the machine shows no GPU, and pip would fetch a CUDA build of it
(PyPI's torch on Linux x86-64 is one, several GB with its nvidia-* libraries), a line says
how to get the CPU build instead, before the download.

    python3 tools/gpu_stack.py          keep or install, one line a module

Set-up runs it after installing requirements.txt: importing a torch where numpy is missing
makes torch warn "Failed to initialize NumPy".

Exits 1, installing nothing, where an installed torch or triton fails to import (set-up
never replaces an installed build), and exits 1 where pip fails.
"""
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PINS_FILE = Path(__file__).resolve().with_name("torch-triton-pins.txt")
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


class BrokenInstall(Exception):
    """A module is installed but cannot be imported, or is not what its name says."""


def read_pins(path: Path = PINS_FILE) -> dict[str, str]:
    """{module name: pin} from the `name==version` lines; comments and blank lines skipped."""
    pins = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        pin = line.split("#", 1)[0].strip()
        if not pin:
            continue
        name, separator, version = (part.strip() for part in pin.partition("=="))
        if not (name and separator and version):
            raise ValueError(f"{path}:{number}: expected name==version, got {line!r}")
        pins[name] = f"{name}=={version}"
    return pins


def providers(module_name: str) -> str:
    """The installed distributions that provide a top-level module, e.g. 'pytorch-triton-rocm'."""
    names = importlib.metadata.packages_distributions().get(module_name, [])
    return ", ".join(sorted(set(names))) or "none found"


def import_installed(module_name: str):
    """The installed module, imported; None where it is not found. Raises BrokenInstall."""
    if importlib.util.find_spec(module_name) is None:
        return None
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise BrokenInstall(f"{module_name} is installed but fails to import: "
                            f"{type(error).__name__}: {error}") from error
    if getattr(module, "__version__", None) is None:
        raise BrokenInstall(f"{module_name} at {module.__spec__.origin} has no __version__: "
                            f"not an installed {module_name}")
    return module


def location(module) -> str:
    return str(Path(module.__file__).parent)


def describe_aiter() -> str:
    """Where aiter is and which distribution provides it, without importing it (its import
    loads ROCm libraries)."""
    spec = importlib.util.find_spec("aiter")
    if spec is None:
        return ("aiter not found: not installed (ROCm ships it; `pip install aiter` is an "
                "unrelated package)")
    where = spec.submodule_search_locations[0] if spec.submodule_search_locations else spec.origin
    return f"aiter found at {where} (pip distribution: {providers('aiter')}): left as it is"


def machine_has_gpu() -> bool:
    """An NVIDIA or AMD GPU's device file or management tool is present."""
    return (any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/kfd").exists()
            or any(shutil.which(tool) for tool in ("nvidia-smi", "rocm-smi", "amd-smi")))


def cuda_packages(pip_report: dict) -> list[str]:
    """The distributions of a `pip install --report` that make a CUDA build: the nvidia-*
    libraries, and a torch whose version says +cu."""
    found = []
    for item in pip_report.get("install", []):
        name, version = item["metadata"]["name"].lower(), item["metadata"]["version"]
        if name.startswith("nvidia-") or (name == "torch" and "+cu" in version):
            found.append(f"{name}=={version}")
    return found


def cuda_packages_pip_would_fetch(pin: str) -> list[str]:
    """cuda_packages of what `pip install pin` would install here (a dry run: nothing is
    downloaded beyond the index pages); [] where the dry run fails (the install then says why)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "-q",
                               "--disable-pip-version-check",
                               "--report", str(report), pin], capture_output=True, text=True)
        if proc.returncode or not report.exists():
            return []
        return cuda_packages(json.loads(report.read_text()))


def cpu_torch_install_arguments(pin: str) -> list[str] | None:
    """`pip install` arguments that get torch's CPU build at `pin`, as the README's first step
    does: the pin alone where pip resolves it to a CPU build here (on this project's machines,
    a file on disk), else the README's command (PyTorch's CPU index). None where neither does
    (dry runs: nothing is downloaded or installed)."""
    for arguments in ([pin], [pin, "--index-url", CPU_TORCH_INDEX]):
        with tempfile.TemporaryDirectory() as folder:
            report = Path(folder) / "report.json"
            proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                                   "--ignore-installed", "--retries", "0", "--timeout", "15",
                                   "--report", str(report), *arguments],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode == 0 and not cuda_packages(json.loads(report.read_text())):
                return arguments
    return None


def venv_env(**variables) -> dict:
    """This process's environment without PYTHONPATH and PYTHONHOME (a venv's Python sees only
    its own packages, not e.g. tests/simulated_rocm's aiter), plus `variables`."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    return dict(env, **variables)


def cpu_torch_hint(pin: str, packages: list[str]) -> str:
    return (f"setup: no GPU here, and `pip install {pin}` would fetch a CUDA build "
            f"({len(packages)} CUDA package{'s' if len(packages) > 1 else ''} such as "
            f"{packages[0]}: several GB). "
            f"For the CPU build, stop now (Ctrl-C), run `python3 -m pip install {pin} "
            f"--index-url {CPU_TORCH_INDEX}`, then set-up again.")


def warn_before_a_cuda_torch_without_gpu(pins: dict[str, str], report=print):
    """Where torch is missing and the machine shows no GPU, the CPU-build hint, if pip
    would fetch a CUDA build."""
    if "torch" not in pins or importlib.util.find_spec("torch") is not None or machine_has_gpu():
        return
    packages = cuda_packages_pip_would_fetch(pins["torch"])
    if packages:
        report(cpu_torch_hint(pins["torch"], packages))


def pip_install(pin: str):
    if subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                       pin]).returncode:
        raise RuntimeError(f"pip could not install {pin}")
    importlib.invalidate_caches()


def keep_or_install(pins: dict[str, str], install=pip_install, report=print):
    """Keeps each pinned module that is found; installs the others, one pin at a time in the
    file's order, so that a module an earlier install brought (PyPI's CUDA torch brings its
    own triton) is kept too rather than fought over. Reports one line a module. Raises
    BrokenInstall, before installing anything, where an installed module fails to import;
    RuntimeError where an install fails."""
    found = {name: import_installed(name) for name in pins}
    installed = []
    for name, pin in pins.items():
        module = found[name]
        if module is not None:
            report(f"setup: kept {name} {module.__version__} from {location(module)} "
                   f"(pip distribution: {providers(name)})")
            continue
        module = import_installed(name)
        if module is not None:
            report(f"setup: installed {name} {module.__version__} as a dependency of "
                   f"{', '.join(installed)} (pip distribution: {providers(name)}); "
                   f"{pin} not applied over it")
            continue
        install(pin)
        installed.append(pin)
        module = import_installed(name)
        if module is None:
            raise RuntimeError(f"{name} is still not found after installing {pin}")
        report(f"setup: installed {name} {module.__version__} ({pin}: no {name} was installed)")


def main(argv: list[str]) -> int:
    report = lambda line: print(line, flush=True)
    try:
        if argv[1:]:
            print(f"usage: python3 {argv[0]} (no arguments; tools/setup.sh runs it)",
                  file=sys.stderr)
            return 2
        warn_before_a_cuda_torch_without_gpu(read_pins(), report)
        keep_or_install(read_pins(), report=report)
    except BrokenInstall as error:
        print(f"setup: {error}. Set-up does not replace an installed build: repair or "
              f"uninstall it, then run set-up again.", file=sys.stderr)
        return 1
    except RuntimeError as error:
        print(f"setup: {error}", file=sys.stderr)
        return 1
    print(f"setup: {describe_aiter()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
