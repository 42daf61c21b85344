"""Runs submission.custom_kernel the way the leaderboard does, on CPU, NVIDIA or ROCm.

Protocol mode (what the leaderboard runner does): POPCORN_FD names a file descriptor for
`key: value` result lines; POPCORN_SEED (optional) is mixed into each case seed.
    python eval.py {test|benchmark|leaderboard|profile} CASES_FILE
CASES_FILE has one case a line: `batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217`.
Exit codes: 0 pass, 112 a check failed, 113 unreadable cases, 2 usage. (Upstream's
leaderboard mode exits 0 even after `check: fail`; here it exits 112 like the others.)
On a CPU the timer is time.perf_counter_ns around the call instead of CUDA events.

Human mode (no POPCORN_FD): a table on stdout, progress on stderr.
    python eval.py [test|benchmark|leaderboard] [CASES_FILE]
Cases default to task.yml (tests; benchmarks, or cpu_benchmarks without a GPU).
    python eval.py cases {tests|benchmarks|cpu_benchmarks}   prints a CASES_FILE

MLA_SUBMISSION=path/to/file.py runs that file instead of ./submission.py. If the
submission defines describe_route(data) -> str, human mode shows the route per case.
"""
import base64
import dataclasses
import importlib.util
import math
import multiprocessing
import os
import re
import sys
import time
from pathlib import Path

import torch

from reference import check_implementation, generate_input
from utils import clear_l2_cache_large, describe_platform, set_seed

EXIT_PASS, EXIT_USAGE, EXIT_CHECK_FAILED, EXIT_BAD_CASES = 0, 2, 112, 113
TASK_FILE = Path(__file__).resolve().with_name("task.yml")
CASE_FIELD = re.compile(r"\s*([a-zA-Z_]\w*):\s*([a-zA-Z_]\w*|[+-]?[0-9]+)\s*")
SEED_STEP = 13            # leaderboard mode: a fresh input every timed run, as upstream
WALL_LIMIT_NS = 120e9     # per benchmark case, as upstream
TARGET_RELATIVE_ERR = 0.001
PROGRESS_INTERVAL_NS = 5e9   # human mode: one progress line on stderr per 5 s of a case


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
        self.file = os.fdopen(fd, "w")
        os.set_inheritable(fd, False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def log(self, key, value):
        print(f"{key}: {value}", file=self.file, flush=True)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def combine_seeds(a: int, b: int) -> int:
    """Cantor pairing: a large secret seed b makes every combined seed large."""
    return int(a + (a + b) * (a + b + 1) // 2)


def parse_cases(text: str, secret_seed: int | None = None) -> list[TestCase]:
    """One case a line, `key: value` parts separated by ';'. Raises ValueError."""
    cases = []
    for line in text.splitlines():
        args = {}
        for part in line.split(";"):
            match = CASE_FIELD.fullmatch(part)
            if not match:
                raise ValueError(f"invalid test case: '{line}': '{part}'")
            key, value = match[1], match[2]
            try:
                args[key] = int(value)
            except ValueError:
                args[key] = {"true": True, "false": False}.get(value, value)
        if secret_seed is not None and "seed" in args:
            args["seed"] = combine_seeds(args["seed"], secret_seed)
        cases.append(TestCase(args=args, spec=line))
    return cases


def read_cases(file_name: str, secret_seed: int | None) -> list[TestCase]:
    try:
        return parse_cases(Path(file_name).read_text(), secret_seed)
    except (OSError, ValueError) as error:
        print(f"Could not read test cases from `{file_name}`: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_CASES)


def load_task() -> dict:
    import yaml   # only human mode reads task.yml; the leaderboard passes a cases file
    return yaml.safe_load(TASK_FILE.read_text())


def case_lines(section: str) -> list[str]:
    """task.yml's `section` as CASES_FILE lines."""
    return ["; ".join(f"{key}: {value}" for key, value in case.items())
            for case in load_task()[section]]


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
    data = generate_input(**case.args)
    synchronize()
    start = time.perf_counter()
    output = submission.custom_kernel(clone_data(data))
    synchronize()
    seconds = time.perf_counter() - start
    good, message = checked(data, output)
    route = describe_route(submission, data) if want_route else None
    return CaseResult(good=good, message=message, route=route, seconds=seconds)


def run_benchmark_case(case: TestCase, recheck: bool, limits: BenchmarkLimits,
                       want_route: bool = False, progress: str = "") -> CaseResult:
    """One correctness check, then timed runs until limits.max_runs, limits.max_time_ns
    of measured time, 2 minutes of wall time, or a relative error of the mean < 0.1%.
    recheck: a fresh input (seed + 13) before every timed run, each output checked."""
    submission = load_submission()
    args = dict(case.args)
    data = generate_input(**args)
    expected_input = clone_data(data)
    good, message = checked(expected_input, submission.custom_kernel(data))
    if not good:
        return CaseResult(good=False, message=message)
    durations = []
    wall_start = last_progress_ns = time.perf_counter_ns()
    for run in range(limits.max_runs):
        if recheck:
            if "seed" in args:
                args["seed"] += SEED_STEP
            data = generate_input(**args)
            expected_input = clone_data(data)
        output, elapsed_ns = timed_call(submission.custom_kernel, data)
        if recheck:
            good, message = checked(expected_input, output)
            if not good:
                return CaseResult(good=False, message=message)
        del output
        durations.append(elapsed_ns)
        if progress and time.perf_counter_ns() - last_progress_ns > PROGRESS_INTERVAL_NS:
            last_progress_ns = time.perf_counter_ns()
            print(f"{progress} run {run + 1}/{limits.max_runs}", file=sys.stderr, flush=True)
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


def protocol_main(fd: int, argv: list[str], secret_seed: int | None) -> int:
    if len(argv) < 3:
        return EXIT_USAGE
    mode = argv[1]
    if mode not in ("test", "benchmark", "leaderboard", "profile"):
        return EXIT_USAGE
    cases = read_cases(argv[2], secret_seed)
    with PopcornOutput(fd) as logger, multiprocessing.get_context("spawn").Pool(1) as pool:
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
    line = f"eval.py: {describe_platform()}"
    if on_gpu():
        return line
    return (f"{line}: test runs the task's tests at full size; benchmark and leaderboard use "
            f"task.yml's reduced cpu_benchmarks")


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
    print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip(),
          flush=True)


def human_run_case(pool, mode: str, case: TestCase, label: str) -> CaseResult:
    print(f"{label} {case.spec}", file=sys.stderr, flush=True)
    try:
        if mode == "test":
            return pool.apply(run_test_case, (case, True))
        return pool.apply(run_benchmark_case, (case, mode == "leaderboard", human_limits(mode),
                                               True, label))
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


def human_main(argv: list[str], secret_seed: int | None) -> int:
    mode = argv[1] if len(argv) > 1 else "test"
    if mode == "cases":
        print("\n".join(case_lines(argv[2] if len(argv) > 2 else "tests")))
        return EXIT_PASS
    if mode not in ("test", "benchmark", "leaderboard"):
        print(__doc__, file=sys.stderr)
        return EXIT_USAGE
    print(device_line(), flush=True)
    if len(argv) > 2:
        cases = read_cases(argv[2], secret_seed)
    else:
        cases = parse_cases("\n".join(default_cases(mode)), secret_seed)
    print_row(["case", "status", "mean +- err" if mode != "test" else "time", "best",
               "route / message"])
    means, passed = [], True
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        for idx, case in enumerate(cases):
            result = human_run_case(pool, mode, case, f"[{idx + 1}/{len(cases)}]")
            print_row(human_row(mode, case, result))
            passed &= result.good
            if result.stats:
                means.append(result.stats.mean)
    if means and len(means) == len(cases):
        geomean = math.exp(sum(math.log(m) for m in means) / len(means))
        print(f"geomean of {len(means)} means: {format_ns(geomean)}")
    print(f"check: {'pass' if passed else 'fail'}")
    return EXIT_PASS if passed else EXIT_CHECK_FAILED


def main() -> int:
    secret_seed = os.environ.pop("POPCORN_SEED", None)   # keep it from the worker
    secret_seed = int(secret_seed) if secret_seed else None
    set_seed(secret_seed or 42)
    fd = os.getenv("POPCORN_FD")
    if fd:
        return protocol_main(int(fd), sys.argv, secret_seed)
    return human_main(sys.argv, secret_seed)


if __name__ == "__main__":
    sys.exit(main())
