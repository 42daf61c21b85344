"""The times and memory that the README and docs state for a CPU machine, measured in one
command, each with the machine's load while it ran.

    python3 -m bench.cpu_times --out DIR [--only NAME ...]     measure (default: all)
    python3 -m bench.cpu_times --list                          what each NAME runs
    python3 -m bench.cpu_times peak MODE CASE_LINE ...         each case alone: peak memory
                                                               beside eval.py's estimate
    python3 -m bench.cpu_times table DIR/times.json ...        the markdown table of saved runs

Each measurement runs one command from the repository's folder as a user would (no GPU
visible), and records its wall time, its exit status, its peak memory (the largest
resident set of any one process of it: os.wait4's ru_maxrss, which covers eval.py's
worker), and the load average (/proc/loadavg's 1-minute figure) before, after and
sampled every LOAD_SAMPLE_S during it, with the machine's cores. DIR gets NAME.log (the
command's stdout and stderr) for each, times.json for all and table.md (its markdown
table, as `table` renders it); the table also goes to stdout.

On a 2-core machine the whole set takes about an hour, most of it `eval.py test` at full
size and the two test suite passes; they slow down roughly in proportion to the load.
Run it on the tree whose figures the docs should show; DIR is the results folder
(results/<date>-cpu-<topic>/), whose README.md then cites the figures.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOAD_SAMPLE_S = 10.0
NO_GPU = {"CUDA_VISIBLE_DEVICES": "-1", "HIP_VISIBLE_DEVICES": "-1"}
SMALL_CASE = "batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4220"   # task.yml's first test


@dataclasses.dataclass
class Measurement:
    name: str
    what: str
    command: list[str]
    env: dict = dataclasses.field(default_factory=dict)
    fd_file: str | None = None   # POPCORN_FD=3 goes to this file in DIR


def measurements(scratch: Path) -> list[Measurement]:
    """Every measurement, in the order run; `scratch` holds the cases files and the venv."""
    small, tests = scratch / "small_case.txt", scratch / "tests.txt"
    interpreted = [Measurement(
        f"interpreted_{kv_format}", f"the forced triton_{kv_format} route under Triton's "
        f"interpreter, the 4 x 1024 test case", ["python3", "eval.py", "test", str(small)],
        {"TRITON_INTERPRET": "1", "MLA_ROUTE": f"triton_{kv_format}"})
        for kv_format in ("fp8", "mxfp4")]
    return [
        Measurement("setup_fresh_venv", "the README's order in a fresh venv: torch's CPU build, "
                    "then tools/setup.sh (tests/test_setup.py's steps)",
                    ["python3", "-m", "bench.cpu_times", "setup-in-venv", str(scratch / "venv")]),
        Measurement("eval_benchmark", "python3 eval.py benchmark (task.yml cpu_benchmarks)",
                    ["python3", "eval.py", "benchmark"]),
        Measurement("eval_leaderboard", "python3 eval.py leaderboard (cpu_benchmarks, a fresh "
                    "input every run)", ["python3", "eval.py", "leaderboard"]),
        Measurement("eval_test", "python3 eval.py test (the 4 test cases at full size)",
                    ["python3", "eval.py", "test"]),
        Measurement("eval_profile", "POPCORN_FD=3 python3 eval.py profile over the 4 test cases",
                    ["python3", "eval.py", "profile", str(tests)], fd_file="eval_profile.popcorn"),
        *interpreted,
        Measurement("suite", "python3 -m pytest -q tests (.ci/run's first pass)",
                    ["python3", "-m", "pytest", "-q", "tests", "--durations=15"]),
        Measurement("suite_simulated_rocm", ".ci/run's second pass: the fake aiter importable, "
                    "the gfx950 emulator's and the fresh_venv tests deselected",
                    ["python3", "-m", "pytest", "-q", "tests", "-m",
                     "not gfx950_emulator and not fresh_venv", "--durations=15"],
                    {"PYTHONPATH": str(ROOT / "tests" / "simulated_rocm")}),
    ]


def load_1min() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def shown(measurement: Measurement) -> str:
    """The command as a shell line, paths inside the repository relative to it."""
    env = dict(measurement.env, **({"POPCORN_FD": "3"} if measurement.fd_file else {}))
    words = [f"{key}={shlex.quote(os.path.relpath(value, ROOT) if value.startswith(str(ROOT)) else value)}"
             for key, value in env.items()]
    words += [shlex.quote(os.path.relpath(part, ROOT) if part.startswith(str(ROOT)) else part)
              for part in measurement.command]
    return " ".join(words) + (f" 3>{measurement.fd_file}" if measurement.fd_file else "")


def run_measured(measurement: Measurement, out: Path) -> dict:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MLA_", "POPCORN_", "TRITON_INTERPRET"))}
    env.update(NO_GPU, PYTHONUNBUFFERED="1", **measurement.env)
    pass_fds = ()
    if measurement.fd_file:
        fd = os.open(out / measurement.fd_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        env["POPCORN_FD"], pass_fds = str(fd), (fd,)
    samples, done = [load_1min()], threading.Event()

    def sample():
        while not done.wait(LOAD_SAMPLE_S):
            samples.append(load_1min())
    sampler = threading.Thread(target=sample, daemon=True)
    started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(out / f"{measurement.name}.log", "w") as log:
        start = time.perf_counter()
        sampler.start()
        proc = subprocess.Popen(measurement.command, cwd=ROOT, env=env, pass_fds=pass_fds,
                                stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if pass_fds:
        os.close(pass_fds[0])
    samples.append(load_1min())
    return {"name": measurement.name, "what": measurement.what, "command": shown(measurement),
            "started_utc": started_utc, "wall_s": round(wall, 1),
            "exit_status": os.waitstatus_to_exitcode(status),
            "peak_rss_gib": round(usage.ru_maxrss / 2**20, 3),
            "load_before": samples[0], "load_after": samples[-1],
            "load_mean": round(sum(samples) / len(samples), 2), "load_max": max(samples)}


def setup_in_venv(venv: Path) -> int:
    """The README's first screen in a fresh venv: torch's CPU build (as tests/test_setup.py
    gets it), then tools/setup.sh; each step's time printed."""
    from tools import gpu_stack
    shutil.rmtree(venv, ignore_errors=True)
    arguments = gpu_stack.cpu_torch_install_arguments(gpu_stack.read_pins()["torch"])
    if arguments is None:
        print("cannot get torch's CPU build here (no index, no local wheel)")
        return 1
    steps = [("venv", [sys.executable, "-m", "venv", str(venv)]),
             ("torch", [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *arguments]),
             ("setup", ["bash", str(ROOT / "tools" / "setup.sh")])]
    env = gpu_stack.venv_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                              VIRTUAL_ENV=str(venv))
    try:
        for label, command in steps:
            start = time.perf_counter()
            rc = subprocess.run(command, env=env, cwd=ROOT).returncode
            print(f"step {label}: {time.perf_counter() - start:.1f} s, exit {rc}", flush=True)
            if rc:
                return rc
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    return 0


def peak_of_cases(mode: str, lines: list[str]) -> int:
    """Each case line run alone by eval.py in `mode` (profile: in protocol mode), its peak
    resident set beside eval.case_memory_need's estimate plus what the worker holds before
    any input (the first line should be a tiny case, e.g. `batchsize: 1; qseqlen: 1;
    kvseqlen: 1; seed: 1`, whose peak is that)."""
    import eval as harness
    status = 0
    with tempfile.TemporaryDirectory(prefix="cpu_peak_") as folder:
        for line in lines:
            cases = Path(folder) / "case.txt"
            cases.write_text(line + "\n")
            measurement = Measurement("peak", line, ["python3", "eval.py", mode, str(cases)],
                                      fd_file="peak.popcorn" if mode == "profile" else None)
            row = run_measured(measurement, Path(folder))
            need = harness.case_memory_need(harness.parse_cases(line)[0].args, mode) / 2**30
            print(f"{mode:12} {line:55} exit {row['exit_status']} {row['wall_s']:7.1f} s  "
                  f"peak {row['peak_rss_gib']:.3f} GiB  estimate {need:.3f} GiB + the worker's own  "
                  f"load {row['load_mean']:.2f}", flush=True)
            status |= row["exit_status"]
    return status


def machine() -> dict:
    import torch
    import triton
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    memory = next(line for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    return {"tree": head + (" (with uncommitted changes)" if dirty else ""), "cores": os.cpu_count(),
            "memory_total": memory.split(":", 1)[1].strip(), "python": platform.python_version(),
            "torch": torch.__version__, "triton": triton.__version__}


def print_table(rows: list[dict]):
    print(f"{'name':22} {'exit':>4} {'wall':>9} {'peak RSS':>10}  load before/mean/max/after")
    for row in rows:
        print(f"{row['name']:22} {row['exit_status']:>4} {row['wall_s']:>7.1f} s "
              f"{row['peak_rss_gib']:>6.2f} GiB  {row['load_before']:.2f} / {row['load_mean']:.2f} / "
              f"{row['load_max']:.2f} / {row['load_after']:.2f}")


SCRATCH_PATH = re.compile(r"/\S*/cpu_times_[^/\s]+/")   # the run's scratch folder


def markdown_table(reports: list[dict]) -> str:
    """Saved runs (times.json's contents) as one markdown table, a row a measurement, each
    with its run's tree; the scratch folder's files named alone (small_case.txt: the 4 x
    1024 test case, tests.txt: `eval.py cases tests`)."""
    lines = ["| name | command | tree | wall | exit | peak memory | load mean (max) |",
             "|---|---|---|---|---|---|---|"]
    for report in reports:
        tree = report["machine"]["tree"]
        for row in report["measurements"]:
            command = SCRATCH_PATH.sub("", row["command"]).replace("|", "\\|")
            lines.append(f"| {row['name']} | `{command}` | {tree} | {row['wall_s']:.1f} s | "
                         f"{row['exit_status']} | {row['peak_rss_gib']:.2f} GiB | "
                         f"{row['load_mean']:.2f} ({row['load_max']:.2f}) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[1:2] == ["setup-in-venv"]:
        return setup_in_venv(Path(argv[2]))
    if argv[1:2] == ["peak"] and len(argv) > 3:
        return peak_of_cases(argv[2], argv[3:])
    if argv[1:2] == ["table"] and len(argv) > 2:
        print(markdown_table([json.loads(Path(name).read_text()) for name in argv[2:]]), end="")
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="the results folder")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these measurements")
    parser.add_argument("--list", action="store_true", help="list the measurements and exit")
    args = parser.parse_args(argv[1:])
    with tempfile.TemporaryDirectory(prefix="cpu_times_") as folder:
        scratch = Path(folder)
        chosen = measurements(scratch)
        names = [m.name for m in chosen]
        if args.list:
            for m in chosen:
                print(f"{m.name:22} {m.what}")
            return 0
        unknown = sorted(set(args.only or []) - set(names))
        if unknown or args.out is None:
            parser.error(f"unknown measurement {', '.join(unknown)}; the names are {', '.join(names)}"
                         if unknown else "--out DIR is needed")
        if args.only:
            chosen = [m for m in chosen if m.name in args.only]
        (scratch / "small_case.txt").write_text(SMALL_CASE + "\n")
        tests = subprocess.run(["python3", "eval.py", "cases", "tests"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout
        (scratch / "tests.txt").write_text(tests)
        args.out.mkdir(parents=True, exist_ok=True)
        report = {"machine": machine(), "measurements": []}
        print(f"machine: {report['machine']}", flush=True)
        for measurement in chosen:
            print(f"running {measurement.name}: {measurement.what}", flush=True)
            report["measurements"].append(run_measured(measurement, args.out))
            (args.out / "times.json").write_text(json.dumps(report, indent=1))
            (args.out / "table.md").write_text(markdown_table([report]))
            print_table(report["measurements"][-1:])
    print_table(report["measurements"])
    return 0 if all(row["exit_status"] == 0 for row in report["measurements"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
