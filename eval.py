"""Runs submission.custom_kernel the way the leaderboard does, on CPU, NVIDIA or ROCm.

Protocol mode (what the leaderboard runner does): POPCORN_FD names a file descriptor for
`key: value` result lines; POPCORN_SEED (optional) is mixed into each case seed.
    python eval.py {test|benchmark|leaderboard|profile} CASES_FILE
CASES_FILE has one case a line: `batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217`
(blank lines and lines starting with `#` are skipped; a trailing `;` is allowed).
Exit codes: 0 pass, 112 a check failed, 113 unreadable cases (a line that is not
`key: value` parts, an unknown, duplicate or missing key, a value that is not an integer,
a size out of bounds (CASE_BOUNDS), no case at all; or a case whose inputs need more
memory than the machine has available, said before any input is built), 2 usage (a bad
mode or case set, a bad POPCORN_FD or POPCORN_SEED, a submission that fails to import,
defines no custom_kernel or, as configured, cannot run on this machine, e.g. MLA_ROUTE
forcing a Triton route on a CPU; or results that cannot be written: stdout or POPCORN_FD on
a full disk, /dev/full, a closed pipe), 130 interrupted (Ctrl-C: one line, the worker ended).
(Upstream's leaderboard mode exits 0 even after `check: fail`; here it exits 112 like the
others.) On a CPU the timer is time.perf_counter_ns around the call instead of CUDA events.

Human mode (no POPCORN_FD): a table on stdout; on stderr, each case as it starts and, once
it has run 5 s, what it is doing (at each new step, and every 30 s within one).
    python eval.py {test|benchmark|leaderboard} [CASES_FILE]
Cases default to task.yml (tests; benchmarks, or cpu_benchmarks without a GPU). Without a
mode, eval.py names the modes and runs nothing. A forced Triton route under Triton's
interpreter (TRITON_INTERPRET=1 MLA_ROUTE=triton_...) needs a CASES_FILE: the task's
full-size cases would take hours there.
    python eval.py cases {tests|benchmarks|cpu_benchmarks}   prints a CASES_FILE

MLA_SUBMISSION=path/to/file.py runs that file instead of ./submission.py. If the
submission defines describe_route(data) -> str, human mode shows the route per case; if it
defines cannot_run_here() -> str | None (submission.py: a bad or unservable MLA_ROUTE, a
switch spelled wrong), a reason it gives ends the run before anything else is printed.
Without torch or triton (or, for human mode, pyyaml) eval.py names what is missing and the
set-up to run, exit 2; `-h` / `--help` prints this text.
"""
import base64
import dataclasses
import fcntl
import importlib.util
import inspect
import math
import multiprocessing
import os
import re
import signal
import sys
import time
import traceback
from pathlib import Path


EXIT_PASS, EXIT_USAGE, EXIT_CHECK_FAILED, EXIT_BAD_CASES = 0, 2, 112, 113
USAGE_LINES = """usage: python3 eval.py {test|benchmark|leaderboard} [CASES_FILE]
       python3 eval.py cases {tests|benchmarks|cpu_benchmarks}
       POPCORN_FD=N python3 eval.py {test|benchmark|leaderboard|profile} CASES_FILE"""
USAGE = f"{USAGE_LINES}\n(python3 eval.py --help says more)"
# The modules eval.py imports that set-up installs (module -> pip's name), and the modes
# that need each: torch and triton every mode (the submission runs on them), yaml for the
# human modes and `cases` (task.yml), which protocol mode does not read.
NEEDED_MODULES = {"torch": "torch", "triton": "triton", "yaml": "pyyaml"}
PROTOCOL_MODULES = ("torch", "triton")


def _interrupted_while_starting(signum, frame):
    print("eval.py: interrupted (Ctrl-C)", file=sys.stderr)
    raise SystemExit(130)


def missing_modules(protocol: bool) -> list[str]:
    """pip's names of the modules eval.py needs (NEEDED_MODULES) that this Python cannot find."""
    names = PROTOCOL_MODULES if protocol else NEEDED_MODULES
    return [NEEDED_MODULES[name] for name in names if importlib.util.find_spec(name) is None]


def missing_modules_line(missing: list[str]) -> str:
    listed = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
    verb = "is" if len(missing) == 1 else "are"
    return (f"eval.py: {listed} {verb} not installed for this Python ({sys.executable}): run "
            f"`bash tools/setup.sh` in {Path(__file__).resolve().parent} (README.md, Start), or, if you set up "
            f"a venv, activate it first")


class OutputFailed(Exception):
    """Results that could not be written (a full disk, /dev/full, a reader gone): main() says
    so in one line, exit 2, instead of a traceback."""


def output_failed(where: str, stream, error: OSError) -> OutputFailed:
    """The OutputFailed for a failed write to stream. Its descriptor is pointed at /dev/null
    first: what is still buffered then goes nowhere when the interpreter flushes at exit or the
    file is closed, instead of failing a second time with a second message."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):   # a stream without a descriptor (a test's capture)
        pass
    return OutputFailed(f"cannot write {where}: {error.strerror or error}")


def emit(text: str) -> None:
    """Results on stdout, flushed at once; a write that fails raises OutputFailed."""
    try:
        print(text, flush=True)
    except OSError as error:
        raise output_failed("the results to stdout", sys.stdout, error) from error


def before_any_import(argv: list[str]) -> int | None:
    """What eval.py does before torch is imported: the help text (-h, --help), or one line
    naming the modules this Python lacks, with the set-up to run. None: go on."""
    if "-h" in argv[1:] or "--help" in argv[1:]:
        try:
            emit(f"{USAGE_LINES}\n\n{__doc__.strip()}\n\nMore: docs/commands.md")
        except OutputFailed as failed:
            if isinstance(failed.__cause__, BrokenPipeError):   # `--help | head`: the reader has what it wanted
                return EXIT_PASS
            print(f"eval.py: {failed}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_PASS
    missing = missing_modules(protocol=bool(os.environ.get("POPCORN_FD")))
    if missing:
        print(missing_modules_line(missing), file=sys.stderr)
        return EXIT_USAGE
    return None


if __name__ == "__main__":   # Ctrl-C while torch imports: one line; main() takes over after
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    if (early_exit := before_any_import(sys.argv)) is not None:
        sys.exit(early_exit)

import torch

try:
    from reference import check_implementation, generate_input
except ValueError as error:   # a bad MLA_CHECK_RULE or MLA_MXFP4_GENERATION
    if __name__ != "__main__":
        raise
    print(f"eval.py: {error}", file=sys.stderr)
    sys.exit(EXIT_USAGE)
from utils import clear_l2_cache_large, describe_platform, set_seed

TASK_FILE = Path(__file__).resolve().with_name("task.yml")
CASE_FIELD = re.compile(r"\s*([a-zA-Z_]\w*)\s*:\s*(\S(?:.*\S)?)\s*")
INTEGER = re.compile(r"[+-]?[0-9]+")
# Bounds of a case's values, checked when a cases file is read: sizes of at least one
# (every sequence has a query and a KV token, as the task's inputs do), the torch
# generator's seed range. CASE_TOTALS bounds products: kv_indptr and qo_indptr are int32.
# What fits in memory is checked apart, against the machine (memory_problem).
CASE_BOUNDS = {"batchsize": (1, None), "qseqlen": (1, None), "kvseqlen": (1, None),
               "seed": (-2**63, 2**64 - 1)}
INT32_MAX = 2**31 - 1
SECRET_SEED_MAX = 2**32 - 1   # POPCORN_SEED seeds numpy too (utils.set_seed)
CASE_TOTALS = {("batchsize", "kvseqlen"): "kv_indptr", ("batchsize", "qseqlen"): "qo_indptr"}
SEED_STEP = 13            # leaderboard mode: a fresh input every timed run, as upstream
WALL_LIMIT_NS = 120e9     # per benchmark case, as upstream
TARGET_RELATIVE_ERR = 0.001
PROGRESS_INTERVAL_S = 5.0   # human mode: a case's first progress line on stderr after 5 s,
PROGRESS_REPEAT_S = 30.0    # then one at each new step and every 30 s within a step
MODES = ("test", "benchmark", "leaderboard", "profile")
HUMAN_MODES = ("test", "benchmark", "leaderboard")
EXIT_INTERRUPTED = 130    # 128 + SIGINT, as a shell reports a command ended by Ctrl-C


@dataclasses.dataclass
class TestCase:
    args: dict
    spec: str


@dataclasses.dataclass
class Stats:
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float


@dataclasses.dataclass
class CaseResult:
    good: bool
    message: str
    stats: Stats | None = None
    route: str | None = None
    seconds: float = 0.0


@dataclasses.dataclass
class BenchmarkLimits:
    max_runs: int
    max_time_ns: float


class PopcornOutput:
    def __init__(self, fd: int):
        self.fd = fd
        self.file = os.fdopen(fd, "w")
        os.set_inheritable(fd, False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def log(self, key, value):
        try:
            print(f"{key}: {value}", file=self.file, flush=True)
        except OSError as error:
            raise output_failed(f"the result lines to POPCORN_FD={self.fd}", self.file, error) from error


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def combine_seeds(a: int, b: int) -> int:
    """Cantor pairing: a large secret seed b makes every combined seed large."""
    return int(a + (a + b) * (a + b + 1) // 2)


def case_parameters() -> dict[str, inspect.Parameter]:
    """The keys a case may have: generate_input's parameters, less its device."""
    parameters = inspect.signature(generate_input, eval_str=True).parameters
    return {name: parameter for name, parameter in parameters.items() if name != "device"}


def parse_value(key: str, value: str, parameter: inspect.Parameter):
    """A case value: an integer, true/false, else the text; an int parameter takes only an
    integer. Raises ValueError naming the key."""
    if INTEGER.fullmatch(value):
        return int(value)
    if parameter.annotation is int:
        raise ValueError(f"key '{key}' needs an integer, got '{value}'")
    return {"true": True, "false": False}.get(value, value)


def parse_case_line(line: str, parameters: dict) -> dict:
    """One case's arguments from `key: value; ...` (a trailing ';' allowed). Raises
    ValueError naming the key."""
    args = {}
    parts = line.split(";")
    if len(parts) > 1 and not parts[-1].strip():
        parts.pop()
    for part in parts:
        match = CASE_FIELD.fullmatch(part)
        if not match:
            raise ValueError(f"'{part.strip()}' is not `key: value` (a case is `key: value` "
                             f"parts separated by ';')")
        key, value = match[1], match[2]
        if key not in parameters:
            raise ValueError(f"unknown key '{key}'; the keys are {', '.join(parameters)}")
        if key in args:
            raise ValueError(f"key '{key}' given twice")
        args[key] = parse_value(key, value, parameters[key])
    missing = [name for name, parameter in parameters.items()
               if name not in args and parameter.default is inspect.Parameter.empty]
    if missing:
        raise ValueError(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    return args


def bounds_problem(args: dict) -> str | None:
    """Which value of a case is out of CASE_BOUNDS or CASE_TOTALS, naming the key and the
    bound; None where all are within."""
    for key, (low, high) in CASE_BOUNDS.items():
        value = args.get(key)
        if not isinstance(value, int):
            continue
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"from {low} to {high}"
            return f"key '{key}' must be {bound}, got {value}"
    for (first, second), indptr in CASE_TOTALS.items():
        if isinstance(args.get(first), int) and isinstance(args.get(second), int):
            total = args[first] * args[second]
            if total > INT32_MAX:
                return (f"{first} x {second} = {total} exceeds {INT32_MAX} (2**31 - 1), the "
                        f"range of the int32 {indptr}")
    return None


def parse_cases(text: str, secret_seed: int | None = None) -> list[TestCase]:
    """One case a line, `key: value` parts separated by ';', the keys generate_input's;
    blank lines and lines starting with '#' are skipped. Raises ValueError naming the line
    and the key (a value out of bounds too, the seed after POPCORN_SEED's mixing); also
    where there is no case."""
    parameters, cases = case_parameters(), []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            args = parse_case_line(line, parameters)
            problem = bounds_problem(args)
            if problem is None and secret_seed is not None and "seed" in args:
                public_seed = args["seed"]
                args["seed"] = combine_seeds(public_seed, secret_seed)
                if bounds_problem(args):
                    low, high = CASE_BOUNDS["seed"]
                    problem = (f"seed {public_seed} mixed with POPCORN_SEED gives {args['seed']}, "
                               f"outside torch's seed range, {low} to {high}")
            if problem:
                raise ValueError(problem)
        except ValueError as error:
            raise ValueError(f"line {number}: {error}: '{line}'") from None
        cases.append(TestCase(args=args, spec=line.strip()))
    if not cases:
        raise ValueError("no cases (one case a line: `batchsize: 4; qseqlen: 1; kvseqlen: 1024; "
                         "seed: 4217`)")
    return cases


def read_cases(file_name: str, secret_seed: int | None) -> list[TestCase]:
    try:
        return parse_cases(Path(file_name).read_text(), secret_seed)
    except (OSError, ValueError) as error:
        print(f"eval.py: cannot read test cases from `{file_name}`: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_CASES)


# ---------------------------------------------------------------------------
# Memory a case needs
# ---------------------------------------------------------------------------

# A case's peak, on the device its inputs live on: each KV row in its three formats (bf16
# 1152 B, fp8 576 B, MXFP4 288 B and up to 24 scale bytes) and each query row (q and the
# output, bf16) held INPUT_COPIES[mode] times (the submission's input and the clone the
# check compares with; profile mode keeps no clone), plus the work of the generator, the
# submission's torch route and the reference, which run over bounded chunks (WORK_BYTES).
# Measured on a CPU by bench/cpu_times.py (docs/commands.md gives the figures).
KV_ROW_BYTES = 576 * 2 + 576 + 288 + 24
QUERY_ROW_BYTES = 16 * 576 * 2 + 16 * 512 * 2
INPUT_COPIES = {"test": 2, "benchmark": 2, "leaderboard": 2, "profile": 1}
WORK_BYTES = 600 * 2**20


def case_memory_need(args: dict, mode: str) -> int:
    """Bytes a case needs at its peak in `mode`, beyond what the worker holds before it."""
    kv_rows = args["batchsize"] * args["kvseqlen"]
    query_rows = args["batchsize"] * args["qseqlen"]
    return INPUT_COPIES[mode] * (kv_rows * KV_ROW_BYTES + query_rows * QUERY_ROW_BYTES) + WORK_BYTES


def memory_problem(cases: list[TestCase], mode: str, available: int | None, where: str) -> str | None:
    """The first case that needs more memory than is available, with both figures; None
    where every case fits or the platform does not say what is available."""
    if available is None:
        return None
    for case in cases:
        need = case_memory_need(case.args, mode)
        if need > available:
            copies = "once" if INPUT_COPIES[mode] == 1 else f"{INPUT_COPIES[mode]} times"
            return (f"the case `{case.spec}` needs about {need / 2**30:.1f} GiB of memory in "
                    f"{mode} mode (its inputs {copies}, and the reference's work), and "
                    f"{available / 2**30:.1f} GiB is {where}: give a cases file of smaller cases "
                    f"(docs/commands.md gives each mode's peak)")
    return None


def load_task() -> dict:
    import yaml   # only human mode reads task.yml; the leaderboard passes a cases file
    return yaml.safe_load(TASK_FILE.read_text())


def case_sets(task: dict) -> list[str]:
    """task.yml's sections that are lists of cases: tests, benchmarks, cpu_benchmarks."""
    return [name for name, value in task.items()
            if isinstance(value, list) and value and all(isinstance(case, dict) for case in value)
            and set(value[0]) <= set(case_parameters())]


def case_lines(section: str) -> list[str]:
    """task.yml's `section` as CASES_FILE lines. Raises KeyError naming the known sets."""
    task = load_task()
    if section not in case_sets(task):
        raise KeyError(f"no case set '{section}' in task.yml; the sets are "
                       f"{', '.join(case_sets(task))}")
    return ["; ".join(f"{key}: {value}" for key, value in case.items())
            for case in task[section]]


# ---------------------------------------------------------------------------
# Worker side (runs in the spawned process)
# ---------------------------------------------------------------------------

def load_submission():
    """The submission module, imported once per worker: ./submission.py or MLA_SUBMISSION."""
    if "submission" in sys.modules:
        return sys.modules["submission"]
    path = os.environ.get("MLA_SUBMISSION")
    if not path:
        import submission
        return submission
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module


def submission_problem() -> str | None:
    """Why the submission cannot run here, before any case: it fails to import, defines no
    custom_kernel, or its cannot_run_here() gives a reason (submission.py: a forced
    MLA_ROUTE this machine cannot serve, a switch spelled wrong). None when it can run."""
    where = os.environ.get("MLA_SUBMISSION") or "submission.py"
    try:
        submission = load_submission()
    except Exception as error:
        return (f"cannot import the submission {where}: "
                + "".join(traceback.format_exception_only(error)).strip())
    if not callable(getattr(submission, "custom_kernel", None)):
        return f"the submission {where} defines no custom_kernel(data) function"
    cannot_run_here = getattr(submission, "cannot_run_here", None)
    return cannot_run_here() if cannot_run_here else None


# The worker's current step, for the parent's progress lines (human mode): a shared
# character array the pool's initializer hands each worker; None in protocol mode.
PHASE_BYTES = 120
_phase_board = None


def init_worker(board=None):
    """Each worker's start: Ctrl-C is the parent's to handle (it ends the worker), so the
    worker ignores SIGINT instead of dying with a traceback of its own."""
    global _phase_board
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _phase_board = board


def available_memory() -> tuple[int | None, str]:
    """(bytes free for a case's inputs, where that figure comes from) on the device the
    inputs go to: the GPU's free memory, else the CPU's MemAvailable (Linux). None where
    the platform does not say."""
    if on_gpu():
        return torch.cuda.mem_get_info()[0], "free on the GPU"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "available (MemAvailable)"
    except OSError:
        pass
    return None, "unknown"


def set_phase(text: str):
    if _phase_board is not None:
        _phase_board.value = text.encode()[:PHASE_BYTES - 1]


def on_gpu() -> bool:
    return torch.cuda.is_available()


def synchronize():
    if on_gpu():
        torch.cuda.synchronize()


def clone_data(data):
    if isinstance(data, (tuple, list)):
        return type(data)(clone_data(item) for item in data)
    if isinstance(data, dict):
        return {key: clone_data(value) for key, value in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def checked(data, output) -> tuple[bool, str]:
    """check_implementation's verdict; older problems returned only an error string."""
    result = check_implementation(data, output)
    if isinstance(result, tuple):
        return result
    return not bool(result), result


def describe_route(submission, data) -> str | None:
    describe = getattr(submission, "describe_route", None)
    return str(describe(data)) if describe else None


def timed_call(custom_kernel, data) -> tuple[torch.Tensor, float]:
    """(output, ns): sync, flush L2, time the Python call (events on GPU), sync. On a GPU
    the flush is the leaderboard's 64 GB randn: the GPU is still busy with it while the host
    queues the call, so the events read device time, as on the leaderboard."""
    synchronize()
    clear_l2_cache_large()
    if on_gpu():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        output = custom_kernel(data)
        end.record()
        torch.cuda.synchronize()
        return output, start.elapsed_time(end) * 1e6
    start_ns = time.perf_counter_ns()
    output = custom_kernel(data)
    return output, float(time.perf_counter_ns() - start_ns)


def calculate_stats(durations: list[float]) -> Stats:
    runs, mean = len(durations), sum(durations) / len(durations)
    variance = sum((d - mean) ** 2 for d in durations) / (runs - 1) if runs > 1 else 0.0
    std = math.sqrt(variance)
    return Stats(runs=runs, mean=mean, std=std, err=std / math.sqrt(runs),
                 best=float(min(durations)), worst=float(max(durations)))


def run_test_case(case: TestCase, want_route: bool = False) -> CaseResult:
    submission = load_submission()
    set_phase("generating the input")
    data = generate_input(**case.args)
    synchronize()
    set_phase("running the submission (its first call on a shape plans and picks a route)")
    start = time.perf_counter()
    output = submission.custom_kernel(clone_data(data))
    synchronize()
    seconds = time.perf_counter() - start
    set_phase("checking the output against the reference")
    good, message = checked(data, output)
    route = describe_route(submission, data) if want_route else None
    return CaseResult(good=good, message=message, route=route, seconds=seconds)


def run_benchmark_case(case: TestCase, recheck: bool, limits: BenchmarkLimits,
                       want_route: bool = False) -> CaseResult:
    """One correctness check, then timed runs until limits.max_runs, limits.max_time_ns
    of measured time, 2 minutes of wall time, or a relative error of the mean < 0.1%.
    recheck: a fresh input (seed + 13) before every timed run, each output checked."""
    submission = load_submission()
    args = dict(case.args)
    set_phase("generating the input")
    data = generate_input(**args)
    expected_input = clone_data(data)
    set_phase("first call (plans and picks a route) and its check")
    good, message = checked(expected_input, submission.custom_kernel(data))
    if not good:
        return CaseResult(good=False, message=message)
    durations = []
    wall_start = time.perf_counter_ns()
    for run in range(limits.max_runs):
        set_phase(f"run {run + 1} of at most {limits.max_runs}")
        if recheck:
            if "seed" in args:
                args["seed"] += SEED_STEP
            data = expected_input = None   # freed before the next input is built
            data = generate_input(**args)
            expected_input = clone_data(data)
        output, elapsed_ns = timed_call(submission.custom_kernel, data)
        if recheck:
            good, message = checked(expected_input, output)
            if not good:
                return CaseResult(good=False, message=message)
        del output
        durations.append(elapsed_ns)
        if run > 1:
            stats = calculate_stats(durations)
            if (stats.err / stats.mean < TARGET_RELATIVE_ERR
                    or stats.mean * stats.runs > limits.max_time_ns
                    or time.perf_counter_ns() - wall_start > WALL_LIMIT_NS):
                break
    route = describe_route(submission, data) if want_route else None
    return CaseResult(good=True, message="", stats=calculate_stats(durations), route=route)


def run_profile_case(case: TestCase) -> str:
    from torch.profiler import ProfilerActivity, profile
    submission = load_submission()
    data = generate_input(**case.args)
    synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu() else [])
    with profile(activities=activities) as prof:
        submission.custom_kernel(data)
        synchronize()
    sort_key = "self_cuda_time_total" if on_gpu() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort_key, row_limit=20)


# ---------------------------------------------------------------------------
# Protocol mode
# ---------------------------------------------------------------------------

WARMUP_LIMITS = {"benchmark": BenchmarkLimits(100, 10e7), "leaderboard": BenchmarkLimits(100, 1e7)}
MODE_LIMITS = {"benchmark": BenchmarkLimits(1000, 50e9), "leaderboard": BenchmarkLimits(100, 30e9)}


def log_stats(logger, idx: int, result: CaseResult):
    for field in dataclasses.fields(Stats):
        logger.log(f"benchmark.{idx}.{field.name}", getattr(result.stats, field.name))


def verdict(logger, passed: bool) -> int:
    logger.log("check", "pass" if passed else "fail")
    return EXIT_PASS if passed else EXIT_CHECK_FAILED


def protocol_test(logger, pool, cases) -> int:
    passed = True
    logger.log("test-count", len(cases))
    for idx, case in enumerate(cases):
        logger.log(f"test.{idx}.spec", case.spec)
        result = pool.apply(run_test_case, (case,))
        if result.good:
            logger.log(f"test.{idx}.status", "pass")
            if result.message:
                logger.log(f"test.{idx}.message", result.message)
        else:
            logger.log(f"test.{idx}.status", "fail")
            logger.log(f"test.{idx}.error", result.message)
            passed = False
    return verdict(logger, passed)


def protocol_benchmark(logger, pool, cases, mode: str) -> int:
    """benchmark: timed runs on one input; leaderboard: fresh, checked input every run.
    The first failing case ends the run, as upstream."""
    recheck = mode == "leaderboard"
    pool.apply(run_benchmark_case, (cases[0], False, WARMUP_LIMITS[mode]))
    logger.log("benchmark-count", len(cases))
    for idx, case in enumerate(cases):
        logger.log(f"benchmark.{idx}.spec", case.spec)
        result = pool.apply(run_benchmark_case, (case, recheck, MODE_LIMITS[mode]))
        if not result.good:
            logger.log(f"benchmark.{idx}.status", "fail")
            logger.log(f"benchmark.{idx}.error", result.message)
            return verdict(logger, False)
        log_stats(logger, idx, result)
    return verdict(logger, True)


def protocol_profile(logger, pool, cases) -> int:
    logger.log("benchmark-count", len(cases))
    for idx, case in enumerate(cases):
        logger.log(f"benchmark.{idx}.spec", case.spec)
        report = pool.apply(run_profile_case, (case,))
        logger.log(f"benchmark.{idx}.report",
                   base64.b64encode(report.encode("utf-8"), b"+*").decode("utf-8"))
    return verdict(logger, True)


def usage_error(message: str) -> int:
    print(f"eval.py: {message}\n{USAGE}", file=sys.stderr)
    return EXIT_USAGE


def setting_error(message: str) -> int:
    """A usage error in an environment variable's value: one line, no usage text."""
    print(f"eval.py: {message}", file=sys.stderr)
    return EXIT_USAGE


def cannot_run(pool) -> bool:
    """Asks the worker whether the submission can run here; says why not on stderr."""
    problem = pool.apply(submission_problem)
    if problem:
        print(f"eval.py: {problem}", file=sys.stderr)
    return bool(problem)


def cases_too_large(pool, cases: list[TestCase], mode: str) -> bool:
    """Asks the worker how much memory its device has free, before any input is built;
    says on stderr which case needs more."""
    problem = memory_problem(cases, mode, *pool.apply(available_memory))
    if problem:
        print(f"eval.py: {problem}", file=sys.stderr)
    return bool(problem)


def start_pool(context, initargs=()):
    """One worker process, started with SIGINT ignored (it inherits that through its start,
    and init_worker keeps it): Ctrl-C is the parent's to handle, and ends the worker."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return context.Pool(1, initializer=init_worker, initargs=initargs)
    finally:
        signal.signal(signal.SIGINT, previous)


def protocol_main(fd: int, argv: list[str], secret_seed: int | None) -> int:
    if len(argv) < 3:
        return usage_error("protocol mode (POPCORN_FD set) needs a mode and a CASES_FILE")
    mode = argv[1]
    if mode not in MODES:
        return usage_error(f"unknown mode '{mode}'; the modes are {', '.join(MODES)}")
    cases = read_cases(argv[2], secret_seed)
    with PopcornOutput(fd) as logger, start_pool(multiprocessing.get_context("spawn")) as pool:
        if cannot_run(pool):
            return EXIT_USAGE
        if cases_too_large(pool, cases, mode):
            return EXIT_BAD_CASES
        if mode == "test":
            return protocol_test(logger, pool, cases)
        if mode == "profile":
            return protocol_profile(logger, pool, cases)
        return protocol_benchmark(logger, pool, cases, mode)


# ---------------------------------------------------------------------------
# Human mode
# ---------------------------------------------------------------------------

def format_ns(ns: float) -> str:
    for unit, size in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= size:
            return f"{ns / size:.3g} {unit}"
    return f"{ns:.0f} ns"


def device_line() -> str:
    """Human mode's first line: the versions in use and the device."""
    return f"eval.py: {describe_platform()}"


def run_line(mode: str, cases: list[TestCase], cases_file: str | None) -> str:
    """Human mode's second line: what runs, from where, and what its times are."""
    count = f"{len(cases)} case{'s' if len(cases) != 1 else ''}"
    if cases_file:
        source = f"{count} from {cases_file}"
    elif mode == "test":
        source = f"the task's {count} (task.yml tests), at full size"
    elif on_gpu():
        source = f"the task's {count} (task.yml benchmarks)"
    else:
        source = f"the task's reduced {count} for a CPU (task.yml cpu_benchmarks)"
    if mode == "test":
        what = "one call a case, checked against the reference; time: that call's wall time"
    else:
        limits = human_limits(mode)
        clock = ("CUDA events around each call after an L2 flush, as the leaderboard"
                 if on_gpu() else "wall time of each call (perf_counter)")
        fresh = ", a fresh checked input every run" if mode == "leaderboard" else ""
        what = (f"checked once, then up to {limits.max_runs} timed runs or "
                f"{limits.max_time_ns / 1e9:g} s a case{fresh}; time: {clock}")
    return f"{mode}: {source}; {what}"


def default_cases(mode: str) -> list[str]:
    if mode == "test":
        return case_lines("tests")
    return case_lines("benchmarks" if on_gpu() else "cpu_benchmarks")


def human_limits(mode: str) -> BenchmarkLimits:
    if on_gpu():
        return MODE_LIMITS[mode]
    cpu = load_task()["cpu_benchmark_limits"]
    return BenchmarkLimits(cpu["max_runs"], cpu["max_seconds"] * 1e9)


def print_row(cells: list[str]):
    widths = (56, 6, 22, 11, 0)
    emit("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip())


def wait_with_progress(pending, board, label: str):
    """pending's result; meanwhile, on stderr, how long the case has run and what the
    worker is doing: after PROGRESS_INTERVAL_S, then at each new step, and every
    PROGRESS_REPEAT_S during a long one."""
    started = last_line = time.perf_counter()
    last_phase = None
    while True:
        pending.wait(PROGRESS_INTERVAL_S)
        if pending.ready():
            return pending.get()
        now, phase = time.perf_counter(), board.value.decode()
        if phase != last_phase or now - last_line >= PROGRESS_REPEAT_S:
            print(f"{label} {now - started:.0f} s: {phase}", file=sys.stderr, flush=True)
            last_phase, last_line = phase, now


def human_run_case(pool, board, mode: str, case: TestCase, label: str) -> CaseResult:
    print(f"{label} {case.spec}", file=sys.stderr, flush=True)
    if mode == "test":
        function, args = run_test_case, (case, True)
    else:
        function, args = run_benchmark_case, (case, mode == "leaderboard", human_limits(mode), True)
    try:
        return wait_with_progress(pool.apply_async(function, args), board, label)
    except Exception as error:   # show the failure in the table and go on to the next case
        return CaseResult(good=False, message=f"{type(error).__name__}: {error}")


def human_row(mode: str, case: TestCase, result: CaseResult) -> list[str]:
    status = "pass" if result.good else "FAIL"
    if result.stats:
        timing = f"{format_ns(result.stats.mean)} +- {format_ns(result.stats.err)}"
        best = format_ns(result.stats.best)
    elif mode == "test" and result.good:
        timing, best = f"{result.seconds:.3g} s (1 call)", "-"
    else:
        timing, best = "-", "-"
    notes = " ".join(part for part in (result.route, result.message) if part)
    return [case.spec, status, timing, best, notes]


def warm_up(pool, board, case: TestCase, mode: str):
    """As the protocol does: the first case run untimed (its runs' allocations, caches and
    compiled kernels warm) before any case is timed. Its failure shows in that case's row."""
    print(f"[warm-up] {case.spec}, untimed", file=sys.stderr, flush=True)
    try:
        wait_with_progress(pool.apply_async(run_benchmark_case, (case, False, WARMUP_LIMITS[mode])),
                           board, "[warm-up]")
    except Exception:
        pass


def print_case_set(name: str) -> int:
    try:
        emit("\n".join(case_lines(name)))
    except KeyError as error:
        return usage_error(f"cases: {error.args[0]}")
    return EXIT_PASS


def interpreted_triton_route() -> str | None:
    """MLA_ROUTE where it forces a Triton route and TRITON_INTERPRET=1 runs Triton's
    interpreter: every kernel then runs in Python (docs/commands.md gives its times)."""
    route = os.environ.get("MLA_ROUTE", "")
    return route if os.environ.get("TRITON_INTERPRET") == "1" and route.startswith("triton") else None


def human_main(argv: list[str], secret_seed: int | None) -> int:
    if len(argv) < 2:
        return usage_error("name a mode: test (the task's 4 test cases at full size), benchmark "
                           "(the benchmark table), leaderboard (as benchmark, every run a fresh "
                           "checked input) or `cases NAME`; docs/commands.md says what each runs, "
                           "how long it takes and the memory it needs")
    mode = argv[1]
    if mode == "cases":
        return print_case_set(argv[2] if len(argv) > 2 else "tests")
    if mode not in HUMAN_MODES:
        return usage_error(f"unknown mode '{mode}'; the modes are {', '.join(HUMAN_MODES)} "
                           f"(and profile, in protocol mode), or cases NAME")
    if len(argv) > 3:
        return usage_error(f"one CASES_FILE at most; got {' '.join(argv[2:])}")
    cases_file = argv[2] if len(argv) > 2 else None
    if cases_file:
        cases = read_cases(cases_file, secret_seed)
    else:
        cases = parse_cases("\n".join(default_cases(mode)), secret_seed)
    context = multiprocessing.get_context("spawn")
    board = context.Array("c", PHASE_BYTES, lock=False)
    with start_pool(context, (board,)) as pool:
        # A setting the run cannot go on with (the submission's own check of MLA_ROUTE and
        # its switches) is refused before the versions line and the header.
        if cannot_run(pool):
            return EXIT_USAGE
        interpreted = interpreted_triton_route()
        if interpreted and not cases_file:
            return setting_error(
                f"MLA_ROUTE={interpreted!r} under TRITON_INTERPRET=1 runs Triton's interpreter, "
                f"which would take hours over the task's full-size cases (docs/commands.md "
                f"gives its times): give a cases file of small cases, e.g. the 4 x 1024 test "
                f"case: `python3 eval.py cases tests | head -n 1 > small_cases.txt`, then "
                f"`TRITON_INTERPRET=1 MLA_ROUTE={interpreted} python3 eval.py {mode} small_cases.txt`")
        emit(device_line())
        emit(run_line(mode, cases, cases_file))
        if cases_too_large(pool, cases, mode):
            return EXIT_BAD_CASES
        if mode != "test":
            warm_up(pool, board, cases[0], mode)
        print_row(["case", "status", "mean +- err" if mode != "test" else "time", "best",
                   "route / message"])
        means, passed = [], True
        for idx, case in enumerate(cases):
            result = human_run_case(pool, board, mode, case, f"[{idx + 1}/{len(cases)}]")
            print_row(human_row(mode, case, result))
            passed &= result.good
            if result.stats:
                means.append(result.stats.mean)
    if means and len(means) == len(cases):
        geomean = math.exp(sum(math.log(m) for m in means) / len(means))
        emit(f"geomean of {len(means)} means: {format_ns(geomean)}")
    emit(f"check: {'pass' if passed else 'fail'}")
    return EXIT_PASS if passed else EXIT_CHECK_FAILED


def popcorn_fd_problem(text: str) -> str | None:
    """Why POPCORN_FD's value cannot take the result lines: not a number, not an open file
    descriptor, or one open for reading only. None where it can."""
    example = "e.g. `POPCORN_FD=3 python3 eval.py test cases.txt 3>results.txt`"
    if not INTEGER.fullmatch(text.strip()) or int(text) < 0:
        return f"POPCORN_FD={text!r} is not a file descriptor number ({example})"
    try:
        flags = fcntl.fcntl(int(text), fcntl.F_GETFL)
    except OSError:
        return f"POPCORN_FD={text!r}: file descriptor {int(text)} is not open ({example})"
    if flags & os.O_ACCMODE == os.O_RDONLY:
        return f"POPCORN_FD={text!r}: file descriptor {int(text)} is open for reading only ({example})"
    return None


def main() -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    secret_seed = os.environ.pop("POPCORN_SEED", None)   # keep it from the worker
    if secret_seed and not (INTEGER.fullmatch(secret_seed.strip())
                            and 0 <= int(secret_seed) <= SECRET_SEED_MAX):
        return setting_error(f"POPCORN_SEED={secret_seed!r} is not an integer from 0 to "
                           f"{SECRET_SEED_MAX} (2**32 - 1, numpy's seed range, which set_seed uses)")
    secret_seed = int(secret_seed) if secret_seed else None
    set_seed(secret_seed or 42)
    fd = os.getenv("POPCORN_FD")
    try:
        if fd:
            problem = popcorn_fd_problem(fd)
            if problem:
                return setting_error(problem)
            return protocol_main(int(fd), sys.argv, secret_seed)
        return human_main(sys.argv, secret_seed)
    except KeyboardInterrupt:   # the pool's exit has ended the worker
        print("eval.py: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OutputFailed as failed:   # the pool's exit has ended the worker
        print(f"eval.py: {failed}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
