"""tools/setup.sh keeps the torch and triton a machine has, installs their pins only where
they are missing, and never installs or replaces aiter.

Each case runs the real set-up step, as a user would, with a fresh venv under tmp first on
PATH (never the system Python, never --system-site-packages). The GPU stacks are
stand-ins: distributions with metadata and a module whose __version__ and STAND_IN marker
tell them from real ones, in venvs without pip (an install attempted would fail). One case
runs the whole of tools/setup.sh with pip: the README's order, torch's CPU build first (this
machine's own linked in where it is that build, seconds; else pip's install of it), then
set-up, which installs triton and requirements.txt (105 s with the venv's removal at load 4
on a 2-core machine: docs/setup.md). It is marked `fresh_venv`: it runs with PYTHONPATH removed, the same
in both of .ci/run's passes, so .ci/run runs it in its first pass only. It is skipped where
pip can get neither from the index nor from wheels it is pointed at (PIP_FIND_LINKS,
PIP_NO_INDEX). Set-up in a venv without torch (it installs both pins: minutes) is
tests/setup_without_torch_check.py, run only when named.
"""
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import gpu_stack
from tools.gpu_stack import venv_env

REPO_ROOT = Path(__file__).resolve().parent.parent
SETUP = REPO_ROOT / "tools" / "setup.sh"
SETUP_TIMEOUT_S = 600
REQUIREMENTS = REPO_ROOT / "requirements.txt"
fresh_venv = pytest.mark.fresh_venv


PINS = gpu_stack.read_pins()


@functools.cache
def pip_cannot_get(*requirements: str) -> str | None:
    """None where this machine's pip resolves every requirement (a dry run: nothing is
    downloaded or installed), else pip's reason, for a skip."""
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                           "--quiet", "--retries", "0", "--timeout", "15", *requirements],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode == 0:
        return None
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    return f"pip cannot get {' '.join(requirements)} here: {(errors or ['?'])[-1]}"


def needs_packages(*installs: tuple[str, ...]):
    """Skips unless pip can get each install's requirements (set-up runs one pip install
    per pin, then requirements.txt)."""
    for requirements in installs:
        why = pip_cannot_get(*requirements)
        if why:
            pytest.skip(f"needs the package index or local wheels ({why})")

# What one venv's Python imports: each module's version, file and stand-in marker.
MODULES_SCRIPT = """
import importlib, importlib.util, json
modules = {}
for name in ("torch", "triton", "aiter"):
    if importlib.util.find_spec(name) is None:
        modules[name] = None
        continue
    module = importlib.import_module(name)
    modules[name] = {"version": module.__version__, "file": module.__file__,
                     "stand_in": getattr(module, "STAND_IN", None)}
print(json.dumps(modules))
"""
DISTRIBUTIONS_SCRIPT = """
import importlib.metadata, json
print(json.dumps({dist.metadata["Name"].lower(): dist.version
                  for dist in importlib.metadata.distributions()}))
"""
# Distributions that are (part of) a GPU stack: set-up must leave them as they are.
GPU_STACK_DISTRIBUTIONS = ("torch", "triton", "pytorch-triton-rocm", "amd-aiter", "aiter")


@pytest.fixture
def venv_dir(tmp_path):
    """Where a test's venv goes; removed afterwards (a venv with torch holds ~1.7 GB)."""
    path = tmp_path / "venv"
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_venv(path: Path, with_pip: bool = True) -> Path:
    command = [sys.executable, "-m", "venv", str(path)] + ([] if with_pip else ["--without-pip"])
    subprocess.run(command, check=True, timeout=300)
    return path


def site_packages(venv: Path) -> Path:
    return Path(subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        env=venv_env(), check=True, capture_output=True, text=True).stdout.strip())


def add_stand_in(venv: Path, distribution: str, version: str, module: str,
                 init_text: str | None = None):
    """A distribution `distribution==version` providing the package `module`, as pip sees one
    (METADATA, RECORD, top_level.txt) and as Python imports one (__version__, STAND_IN)."""
    site = site_packages(venv)
    package = site / module
    package.mkdir()
    (package / "__init__.py").write_text(
        init_text or f"__version__ = {version!r}\nSTAND_IN = {distribution!r}\n")
    dist_info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (dist_info / "INSTALLER").write_text("stand-in\n")
    (dist_info / "top_level.txt").write_text(f"{module}\n")
    (dist_info / "RECORD").write_text("".join(
        f"{path.relative_to(site)},,\n"
        for path in (package / "__init__.py", *(dist_info / name for name in
                     ("METADATA", "INSTALLER", "top_level.txt", "RECORD")))))


def machine_cpu_torch_at_pin() -> bool:
    """Whether this interpreter's torch is a CPU build (no CUDA, no ROCm) at the pin: the
    build the README's first step installs, which a test can then link into a venv."""
    try:
        import torch
    except ImportError:
        return False
    return (torch.version.cuda is None and torch.version.hip is None
            and torch.__version__.split("+")[0] == PINS["torch"].split("==")[1])


def requirement_closure(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distribution `name` and, recursively, those its requirements name
    (markers evaluated here, extras left out): what `pip install name` would have brought."""
    from packaging.requirements import Requirement
    found, pending = {}, [name]
    while pending:
        distribution = importlib.metadata.distribution(pending.pop())
        key = re.sub(r"[-_.]+", "-", distribution.metadata["Name"]).lower()
        if key in found:
            continue
        found[key] = distribution
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return list(found.values())


def link_installed_distribution(venv: Path, name: str) -> list[str]:
    """Installs this interpreter's distribution `name` and its requirements into the venv as
    pip leaves them (each file of their RECORD, metadata included), hard-linked where the two
    folders share a file system (seconds, where pip takes minutes over torch), else copied.
    pip never writes into an installed file (it removes and recreates), so the machine's
    own files stay as they are. Returns the distributions, `name==version` each."""
    site = site_packages(venv)
    installed = []
    for distribution in requirement_closure(name):
        for file in distribution.files or []:
            source = Path(distribution.locate_file(file))
            if file.parts[0] == ".." or not source.is_file():   # scripts in bin/; stale RECORD lines
                continue
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:   # another file system
                shutil.copy2(source, target)
        installed.append(f"{distribution.metadata['Name'].lower()}=={distribution.version}")
    return installed


def run_setup(venv: Path) -> subprocess.CompletedProcess:
    """tools/setup.sh with the venv first on PATH, so that its `python3` is the venv's."""
    env = venv_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", VIRTUAL_ENV=str(venv))
    return subprocess.run(["bash", str(SETUP)], env=env, capture_output=True, text=True,
                          timeout=SETUP_TIMEOUT_S)


def in_venv(venv: Path, script: str):
    result = subprocess.run([venv / "bin" / "python", "-c", script], env=venv_env(),
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def gpu_stack_distributions(distributions: dict) -> dict:
    return {name: version for name, version in distributions.items()
            if name in GPU_STACK_DISTRIBUTIONS or name.startswith("nvidia-")}


def setup_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith("setup: ")]


# pip's line for a configured index or find-links location that has no entry for a package
# (this project's machines configure file:///opt/pypi/simple and file:///opt/pypi-more/simple,
# which have no folder for some packages): pip's configuration speaking, not set-up.
PIP_IGNORED_LOCATION = re.compile(
    r"WARNING: Location '(?P<url>[^']+)' is ignored: it is neither a file nor a directory\.")


def pip_configured_locations(venv: Path) -> list[str]:
    """The index and find-links locations of the venv's pip configuration (its files and
    PIP_* variables, as `pip config list` shows them)."""
    listing = subprocess.run([venv / "bin" / "python", "-m", "pip", "config", "list"],
                             env=venv_env(), capture_output=True, text=True, check=True).stdout
    locations = []
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        if key.rsplit(".", 1)[-1] in ("index-url", "extra-index-url", "find-links"):
            locations += value.strip("'\"").split()
    return locations


def lines_not_of_pips_configuration(stderr: str, locations: list[str]) -> list[str]:
    """stderr's lines less pip's ignored-location lines for a place under one of its
    configured locations: what is left came from set-up or from what it ran."""
    def from_configuration(line: str) -> bool:
        match = PIP_IGNORED_LOCATION.fullmatch(line)
        return bool(match) and any(match["url"].startswith(location.rstrip("/") + "/")
                                   for location in locations)
    return [line for line in stderr.splitlines() if not from_configuration(line)]


def assert_only_setups_own_lines(result: subprocess.CompletedProcess, venv: Path):
    """stdout holds set-up's `setup:` lines alone, and stderr nothing but pip's lines about
    its configured locations: any other line (torch's "Failed to initialize NumPy", a pip
    warning about a package) fails."""
    assert result.stdout.splitlines() == setup_lines(result), result.stdout
    assert lines_not_of_pips_configuration(result.stderr, pip_configured_locations(venv)) == [], \
        result.stderr


def test_pip_configuration_lines_are_told_apart_by_location():
    locations = ["file:///opt/pypi/simple", "/opt/wheels"]
    ignored = "' is ignored: it is neither a file nor a directory."
    stderr = "\n".join([
        "WARNING: Location 'file:///opt/pypi/simple/pytest/" + ignored,
        "WARNING: Location 'file:///elsewhere/numpy/" + ignored,
        "WARNING: Location 'file:///opt/pypi/simplex/numpy/" + ignored,
        "WARNING: Location 'file:///opt/pypi/simple/numpy/' is ignored: something else.",
        "/venv/torch/_subclasses/functional_tensor.py:368: UserWarning: Failed to initialize "
        "NumPy: No module named 'numpy'"])
    assert lines_not_of_pips_configuration(stderr, locations) == stderr.splitlines()[1:]


# (distribution, version, module): the leaderboard's MI355X runner as participants report it
# (ROCm 7.1, torch 2.10, Triton 3.6), whose triton module comes from pytorch-triton-rocm.
ROCM_STACK = [("torch", "2.10.0+rocm7.1", "torch"),
              ("pytorch-triton-rocm", "3.6.0+rocm7.1", "triton"),
              ("amd-aiter", "0.1.10", "aiter")]


def test_setup_keeps_an_installed_rocm_stack(venv_dir):
    # Set-up's step for torch, triton and aiter (tools/gpu_stack.py), in a venv without pip:
    # it keeps all three, and any install it tried would fail. What requirements.txt brings
    # beside a GPU stack is the README-order test's (it installs no part of one).
    venv = make_venv(venv_dir, with_pip=False)
    for distribution, version, module in ROCM_STACK:
        add_stand_in(venv, distribution, version, module)

    result = subprocess.run([venv / "bin" / "python", REPO_ROOT / "tools" / "gpu_stack.py"],
                            env=venv_env(), capture_output=True, text=True, timeout=300)

    assert result.returncode == 0, result.stderr
    modules, distributions = in_venv(venv, MODULES_SCRIPT), in_venv(venv, DISTRIBUTIONS_SCRIPT)
    for distribution, version, module in ROCM_STACK:
        assert modules[module]["stand_in"] == distribution
        assert modules[module]["version"] == version
    # Nothing was added beside them (no `triton` over pytorch-triton-rocm's module, no CUDA
    # libraries, no `aiter`) and nothing replaced.
    assert distributions == {distribution: version for distribution, version, _ in ROCM_STACK}
    site = site_packages(venv)
    assert setup_lines(result) == [
        f"setup: kept torch 2.10.0+rocm7.1 from {site / 'torch'} (pip distribution: torch)",
        f"setup: kept triton 3.6.0+rocm7.1 from {site / 'triton'} "
        f"(pip distribution: pytorch-triton-rocm)",
        f"setup: aiter found at {site / 'aiter'} (pip distribution: amd-aiter): left as it is"]
    assert result.stdout.splitlines() == setup_lines(result) and result.stderr == ""


def test_setup_refuses_to_replace_a_torch_that_fails_to_import(venv_dir):
    # Set-up's step for torch and triton, in a venv without pip: it must stop before it
    # would install anything.
    venv = make_venv(venv_dir, with_pip=False)
    add_stand_in(venv, "torch", "2.10.0+rocm7.1", "torch",
                 init_text="raise ImportError('libamdhip64.so: cannot open shared object file')\n")

    result = subprocess.run([venv / "bin" / "python", REPO_ROOT / "tools" / "gpu_stack.py"],
                            env=venv_env(), capture_output=True, text=True, timeout=300)

    assert result.returncode == 1
    assert "setup: torch is installed but fails to import: ImportError: libamdhip64.so" in result.stderr
    assert "Set-up does not replace an installed build" in result.stderr
    assert in_venv(venv, DISTRIBUTIONS_SCRIPT) == {"torch": "2.10.0+rocm7.1"}


# pip's line where neither the index nor its find-links hold a requirement
PIP_CANNOT_FIND = re.compile(r"ERROR: (Could not find a version that satisfies the requirement|"
                             r"No matching distribution found for) \S+")


def install_cpu_torch(venv: Path) -> str:
    """The README's first step, torch's CPU build at its pin, into the venv: this machine's
    own torch linked in where it is that build (link_installed_distribution), else pip's
    install of it (pip_install_arguments_for_cpu_torch; a download of ~200 MB). Returns how,
    for a failure's message; skips where neither can be had."""
    if machine_cpu_torch_at_pin():
        return "linked: " + " ".join(link_installed_distribution(venv, "torch"))
    needs_packages((PINS["triton"], "-r", str(REQUIREMENTS)))
    arguments = gpu_stack.cpu_torch_install_arguments(PINS["torch"])
    if arguments is None:
        pytest.skip(f"needs torch's CPU build ({PINS['torch']}) from the package index, "
                    f"PyTorch's CPU index or local wheels")
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", *arguments],
                   env=venv_env(), check=True, capture_output=True, timeout=SETUP_TIMEOUT_S)
    return "pip install " + " ".join(arguments)


@fresh_venv
def test_setup_in_the_readmes_order_prints_only_its_own_lines(venv_dir):
    # The README's first screen: torch's CPU build first, into a venv without numpy, then
    # set-up (a first step that imported torch before numpy was there would warn here).
    venv = make_venv(venv_dir)
    how = install_cpu_torch(venv)
    before = in_venv(venv, DISTRIBUTIONS_SCRIPT)
    assert "torch" in before and "numpy" not in before, how

    result = run_setup(venv)

    unobtainable = PIP_CANNOT_FIND.search(result.stderr)
    if result.returncode and unobtainable:   # no index and no wheels for triton's pin or a requirement
        pytest.skip(f"needs the package index or local wheels (pip: {unobtainable[0]})")
    assert result.returncode == 0, result.stderr
    modules, site = in_venv(venv, MODULES_SCRIPT), site_packages(venv)
    distributions = in_venv(venv, DISTRIBUTIONS_SCRIPT)
    assert modules["torch"]["version"].split("+")[0] == PINS["torch"].split("==")[1]
    assert setup_lines(result) == [
        f"setup: kept torch {modules['torch']['version']} from {site / 'torch'} "
        f"(pip distribution: torch)",
        f"setup: installed triton {modules['triton']['version']} ({PINS['triton']}: "
        f"no triton was installed)",
        "setup: aiter not found: not installed (ROCm ships it; `pip install aiter` is an "
        "unrelated package)"]
    # requirements.txt brought no part of a GPU stack (no CUDA libraries, no other torch)
    assert gpu_stack_distributions(distributions) == {
        "torch": before["torch"], "triton": PINS["triton"].split("==")[1]}
    assert distributions["torch"] == before["torch"]
    assert_only_setups_own_lines(result, venv)


def test_read_pins_rejects_a_line_that_is_not_an_exact_pin(tmp_path):
    pins_file = tmp_path / "pins.txt"
    pins_file.write_text("# comment\ntorch==2.13.0  # trailing\n\ntriton==3.6.0\n")
    assert gpu_stack.read_pins(pins_file) == {"torch": "torch==2.13.0",
                                                     "triton": "triton==3.6.0"}
    pins_file.write_text("torch==2.13.0\ntriton>=3.6\n")
    with pytest.raises(ValueError, match=r"pins.txt:2: expected name==version"):
        gpu_stack.read_pins(pins_file)


# keep_or_install's order of decisions, in this process: stand-in modules under names of
# their own (never torch or triton) in a folder put first on sys.path.
TORCH_NAME, TRITON_NAME = "stand_in_torch_for_setup", "stand_in_triton_for_setup"
UNIT_PINS = {TORCH_NAME: f"{TORCH_NAME}==2.13.0", TRITON_NAME: f"{TRITON_NAME}==3.6.0"}


@pytest.fixture
def module_folder(tmp_path, monkeypatch):
    """write(name, version) makes a package importable from a folder first on sys.path."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, version: str, init_text: str | None = None):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(init_text or f"__version__ = {version!r}\n")
    yield write
    for name in UNIT_PINS:
        sys.modules.pop(name, None)


def test_keep_or_install_keeps_what_is_found(module_folder):
    module_folder(TORCH_NAME, "2.10.0+rocm7.1")
    module_folder(TRITON_NAME, "3.6.0+rocm7.1")
    installs, lines = [], []
    gpu_stack.keep_or_install(UNIT_PINS, install=installs.append, report=lines.append)
    assert installs == []
    assert [line.split(" from ")[0] for line in lines] == [
        f"setup: kept {TORCH_NAME} 2.10.0+rocm7.1", f"setup: kept {TRITON_NAME} 3.6.0+rocm7.1"]


def test_keep_or_install_keeps_a_module_an_earlier_install_brought(module_folder):
    # PyPI's CUDA torch depends on its own triton: that triton is kept, the pin not applied.
    installs, lines = [], []

    def install(pin):
        installs.append(pin)
        module_folder(TORCH_NAME, "2.13.0")
        module_folder(TRITON_NAME, "3.7.1")

    gpu_stack.keep_or_install(UNIT_PINS, install=install, report=lines.append)
    assert installs == [UNIT_PINS[TORCH_NAME]]
    assert lines[0] == (f"setup: installed {TORCH_NAME} 2.13.0 ({UNIT_PINS[TORCH_NAME]}: "
                        f"no {TORCH_NAME} was installed)")
    assert lines[1].startswith(f"setup: installed {TRITON_NAME} 3.7.1 as a dependency of "
                               f"{UNIT_PINS[TORCH_NAME]} ")
    assert lines[1].endswith(f"; {UNIT_PINS[TRITON_NAME]} not applied over it")


def test_keep_or_install_installs_only_the_missing_one(module_folder):
    module_folder(TORCH_NAME, "2.12.0+cpu")
    installs, lines = [], []

    def install(pin):
        installs.append(pin)
        module_folder(TRITON_NAME, "3.6.0")

    gpu_stack.keep_or_install(UNIT_PINS, install=install, report=lines.append)
    assert installs == [UNIT_PINS[TRITON_NAME]]
    assert lines[0].startswith(f"setup: kept {TORCH_NAME} 2.12.0+cpu from ")
    assert lines[1] == (f"setup: installed {TRITON_NAME} 3.6.0 ({UNIT_PINS[TRITON_NAME]}: "
                        f"no {TRITON_NAME} was installed)")


def test_keep_or_install_installs_nothing_when_an_installed_module_is_broken(module_folder):
    module_folder(TRITON_NAME, "3.6.0", init_text="raise OSError('libamdhip64.so missing')\n")
    installs = []
    with pytest.raises(gpu_stack.BrokenInstall, match="fails to import: OSError: libamdhip64"):
        gpu_stack.keep_or_install(UNIT_PINS, install=installs.append, report=print)
    assert installs == []


def test_a_cuda_torch_is_recognised_in_pips_report():

    def install(*dists):
        return {"install": [{"metadata": {"name": name, "version": version}} for name, version in dists]}
    pypi = install(("torch", "2.13.0"), ("nvidia-cublas-cu12", "12.8.4.1"), ("triton", "3.6.0"))
    assert gpu_stack.cuda_packages(pypi) == ["nvidia-cublas-cu12==12.8.4.1"]
    assert gpu_stack.cuda_packages(install(("torch", "2.13.0+cu130"))) == ["torch==2.13.0+cu130"]
    assert gpu_stack.cuda_packages(install(("torch", "2.13.0+cpu"), ("sympy", "1.14.0"))) == []
    hint = gpu_stack.cpu_torch_hint("torch==2.13.0", ["nvidia-cublas-cu12==12.8.4.1"])
    assert hint.startswith("setup: no GPU here, and `pip install torch==2.13.0` would fetch a CUDA build")
    assert "python3 -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in hint
