"""Shared helpers: the versions in pytest's header, where tests run (the device under test,
marks for one kind of machine), and running eval.py as the leaderboard does. The repository's
root is on the import path through pytest.ini (`pythonpath = .`): tests import the root's
modules, bench.NAME and tools.NAME as packages."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

PLAN_ENV = ("MLA_ROUTE", "MLA_DEBUG", "MLA_CHECK_INDPTR")

# Where tests run. A test of the kernels or routes builds its inputs on the device under
# test (the GPU where there is one); a test of host logic (validation, protocol, set-up,
# the fake aiter's bookkeeping) pins them to the CPU; a test for one kind of machine is
# marked so, its skip reason naming the machine it needs.
HAS_GPU = torch.cuda.is_available()
DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA or AMD GPU")


def cpu_only(why: str):
    return pytest.mark.skipif(HAS_GPU, reason=f"CPU-only: {why}")


# The Triton set-up installs where none is (tools/torch-triton-pins.txt), the leaderboard
# runner's line: the compiler that the static gfx950 figures were checked against.
PINNED_TRITON = next(line.split("==", 1)[1] for line in
                     (REPO_ROOT / "tools" / "torch-triton-pins.txt").read_text().splitlines()
                     if line.startswith("triton=="))


def on_pinned_triton_line() -> bool:
    """Whether the installed Triton is of the pinned line (3.6.x for the pin 3.6.0)."""
    import triton
    return triton.__version__.startswith(".".join(PINNED_TRITON.split(".")[:2]) + ".")


def pinned_triton_codegen(what: str):
    """Skips a check of what the pinned Triton line emits for gfx950 (spills, the loads a
    loop makes, listings read by hand, Triton's own upcast, the instructions the gfx950
    emulator implements) under another line, naming both: other versions compile
    differently, and results/2026-12-02-cpu-triton-versions records how."""
    import triton
    return pytest.mark.skipif(
        not on_pinned_triton_line(),
        reason=f"{what}: checked against the gfx950 code of the pinned Triton {PINNED_TRITON}; triton "
               f"{triton.__version__} compiles differently (results/2026-12-02-cpu-triton-versions)")


# Why the emulator's tests skip off the pinned line (pinned_triton_codegen's `what`).
EMULATED_PINNED_CODE = ("the gfx950 emulator on compiled kernels (written for the code the pinned line emits: "
                        "other lines emit instructions it does not implement, and other listings)")

# The marks of a test that compiles kernels for gfx950 and runs them in the emulator: a
# process with TRITON_INTERPRET=1 cannot compile; another Triton line emits instructions
# the emulator does not implement, and other listings.
EMULATES_COMPILED_GFX950 = [
    pytest.mark.gfx950_emulator,
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                       reason="compiles kernels for gfx950: needs TRITON_INTERPRET unset"),
    pinned_triton_codegen(EMULATED_PINNED_CODE)]


def runnable_forms(kv_format: str) -> list[str]:
    """The name of every kernel form of kv_format that runs on the device under test: each
    Triton form compiles on every GPU (gfx950's convert instruction is a launch choice,
    KernelLaunch.hw_convert, not a form of its own); a Gluon form runs where Gluon imports
    on gfx950 or NVIDIA sm_80+ (a Hopper form on sm_90 alone), never under the interpreter or
    on a CPU."""
    import submission
    arch = submission.device_arch(DEVICE)[1]
    return [form.name for form in submission.forms_of(kv_format)
            if form.language != "gluon" or submission.gluon_forms_here(arch, form)]


def interpreted_forms(kv_format: str) -> tuple:
    """The kernel forms of kv_format that Triton's interpreter runs: every Triton form. The
    Gluon forms do not run under TRITON_INTERPRET=1 (Gluon asks for a GPU driver): their
    NVIDIA twin runs on a GPU, and their gfx950 code is compiled on a CPU."""
    import submission
    return tuple(form.name for form in submission.forms_of(kv_format) if form.language != "gluon")


# A subprocess that must see no GPU (eval.py's protocol, run as on a CPU machine): CUDA
# and ROCm builds of torch both read these.
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "-1", "HIP_VISIBLE_DEVICES": "-1"}


def versions_line() -> str:
    from utils import describe_platform
    return f"versions and device: {describe_platform()}"


def pytest_report_header(config):
    return versions_line()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    """-q hides pytest's header, and the README's test command uses -q: there the versions
    line is printed alone, first."""
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None and not terminal.showheader:
        terminal.write_line(versions_line())


@pytest.fixture
def info_report(request, capsys):
    """info_report(text): what a passing test found worth reading (the aiter call sites that
    would not bind on the PyPI wheel, the plan lookup's cost), kept out of a quiet run:
    printed as the test's own output, which pytest shows when the test fails, and written
    to the terminal too with -v."""
    def report(text: str):
        print(text)
        if request.config.get_verbosity() > 0:
            with capsys.disabled():
                print(text)
    return report


@pytest.fixture
def fresh_plans(monkeypatch):
    """No plan, no reported failure and no route-steering variable leaks between tests."""
    import submission
    for name in PLAN_ENV:
        monkeypatch.delenv(name, raising=False)
    submission.reset_plans()
    yield
    submission.reset_plans()


# Submissions for eval.py runs. Each is a whole file; MLA_SUBMISSION points eval.py at it.
SUBMISSIONS = {
    "correct": (
        "from reference import ref_kernel\n"
        "def custom_kernel(data):\n"
        "    return ref_kernel(data)\n"
        "def describe_route(data):\n"
        "    return 'route-of-test-submission'\n"),
    "zeros": (
        "import torch\n"
        "def custom_kernel(data):\n"
        "    q = data[0]\n"
        "    return torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)\n"),
    # Right on most elements, off by 0.5 on every 8th: 12.5% mismatches.
    "perturbed": (
        "from reference import ref_kernel\n"
        "def custom_kernel(data):\n"
        "    out = ref_kernel(data).clone()\n"
        "    out.view(-1)[::8] += 0.5\n"
        "    return out\n"),
    # Correct on its first input, then replays that output: only rechecks catch it.
    "stale_cache": (
        "from reference import ref_kernel\n"
        "_first_output = []\n"
        "def custom_kernel(data):\n"
        "    if not _first_output:\n"
        "        _first_output.append(ref_kernel(data))\n"
        "    return _first_output[0].clone()\n"),
}


@pytest.fixture
def submission_file(tmp_path):
    """submission_file(name) -> path of that submission from SUBMISSIONS, in tmp."""
    def write(name: str) -> Path:
        path = tmp_path / f"submission_{name}.py"
        path.write_text(SUBMISSIONS[name])
        return path
    return write


@pytest.fixture
def run_eval(tmp_path):
    """run_eval(args, submission, protocol=True, env=None, gpu=False) -> (returncode, result
    lines as a list of (key, value), stdout, stderr). With protocol, POPCORN_FD is fd 3 of a
    file. eval.py sees no GPU unless gpu=True: the protocol is host logic, and on a GPU
    eval.py's benchmark modes flush 64 GB before every timed run."""
    def run(args: list[str], submission: Path, protocol: bool = True, env: dict | None = None,
            gpu: bool = False):
        results = tmp_path / "popcorn_results.txt"
        environment = {key: value for key, value in os.environ.items()
                       if not key.startswith(("POPCORN_", "MLA_"))}
        environment.update({} if gpu else NO_GPU_ENV)
        environment.update(env or {}, MLA_SUBMISSION=str(submission))
        with open(results, "w") as fd_file:
            pass_fds = ()
            if protocol:
                environment["POPCORN_FD"] = str(fd_file.fileno())
                pass_fds = (fd_file.fileno(),)
            proc = subprocess.run([sys.executable, str(REPO_ROOT / "eval.py"), *args],
                                  cwd=tmp_path, env=environment, pass_fds=pass_fds,
                                  capture_output=True, text=True, timeout=300)
        lines = [tuple(line.split(": ", 1)) for line in results.read_text().splitlines()]
        return proc.returncode, lines, proc.stdout, proc.stderr
    return run


@pytest.fixture
def cases_file(tmp_path):
    """cases_file(lines) -> path of a one-case-a-line file."""
    def write(lines: list[str]) -> Path:
        path = tmp_path / "cases.txt"
        path.write_text("\n".join(lines) + "\n")
        return path
    return write
