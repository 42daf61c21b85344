"""The Hopper forms' safety runs on an H200, one command, a summary line a form.

    python3 -m bench.hopper_safety --out DIR [--limit-s 220] [--sanitizer-wheel WHEEL]

Three parts, each in its own process under its share of --limit-s (a part stopped at its
limit is reported as such):
  1. robustness: bench/robustness_gpu.py with each Hopper form forced in turn
     (MLA_ROUTE=triton_fp8:hopper_two_term, ...; --forced-only), its GPU sizes:
     DIR/robustness/robustness_gpu.json, DIR/robustness.log;
  2. GPU tests: tests/test_hopper_forms.py (every Hopper launch on odd inputs within its
     bound of exact attention, a NaN row kept in its sequence) and the memory-safety run,
     tests/test_memory_safety_gpu.py: every launch the autopick offers on this GPU (the
     Hopper forms' among them, unforced and forced) inside NaN fences on the 8 benchmark
     inputs and the robustness inputs, and the deliberately wrong kernels the fences must
     catch: DIR/memory_safety.log (pytest -s: per input, the launches fenced per form);
  3. memcheck: the robustness cases that reach every path of the kernels (ragged lengths
     with empty sequences and several splits, a NaN in the KV, MXFP4's padded scales, a
     non-contiguous q, misaligned rows after aligned ones) at their small sizes, the three
     forms in one process under compute-sanitizer --tool memcheck, where this machine has it
     (tools/external_programs.py; --sanitizer-wheel: NVIDIA's nvidia-cuda-sanitizer-api
     wheel, unpacked here first, default dev_scratch/sanitizer/*.whl): DIR/memcheck/
     robustness_gpu.json, DIR/memcheck.log (an error there names its kernel: the two fp8
     forms share theirs).
Then DIR/hopper_safety.json and one line a form on stdout (and DIR/summary.txt). Exit
status 1 when a part failed or stopped at its limit.

On a machine without an H200 every part still runs and says why it measured nothing: the
robustness cases SKIP with the submission's reason (a Hopper form runs on sm_90 alone, never
interpreted), the GPU tests skip saying so (the host tests of tests/test_hopper_forms.py run;
the memory-safety file's interpreted mutant test is left out there: -k "not
deliberately_wrong"), memcheck is not run without a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from tools import external_programs

ROOT = Path(__file__).resolve().parent.parent
FORMS = ("triton_fp8:hopper_two_term", "triton_fp8:hopper_one_term", "triton_mxfp4:hopper")
MEMCHECK_CASES = "ragged,nonfinite/nan_kv,padded_scales,noncontiguous_q,misaligned_after_aligned"
# Each part's share of --limit-s: robustness, the GPU tests, memcheck.
SHARES = {"robustness": 0.3, "memory_safety": 0.4, "memcheck": 0.3}


def run_part(command: list, log: Path, limit_s: float, env: dict | None = None) -> dict:
    """Runs command from the repository root, stdout and stderr to log: {exit, seconds, stopped}."""
    began = time.perf_counter()
    with open(log, "w") as out:
        try:
            proc = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=limit_s,
                                  env=env)
            code, stopped = proc.returncode, False
        except subprocess.TimeoutExpired:
            code, stopped = None, True
    return {"command": " ".join(command), "exit": code, "stopped_at_limit_s": limit_s if stopped else None,
            "seconds": round(time.perf_counter() - began, 1)}


def robustness_counts(json_path: Path) -> dict:
    """form -> {status: count, "failed": [case ...], "skipped": why} from a robustness_gpu.json."""
    if not json_path.is_file():
        return {}
    counts = {}
    for row in json.loads(json_path.read_text())["rows"]:
        entry = counts.setdefault(row["route"], {"PASS": 0, "REFUSED": 0, "FAIL": 0, "SKIP": 0, "failed": []})
        entry[row["status"]] += 1
        if row["status"] == "FAIL":
            entry["failed"].append(f"{row['case']}: {row['detail'][:200]}")
        if row["status"] == "SKIP" and row["case"] == "*":
            entry["skipped"] = row["detail"]
    return counts


_FENCED = re.compile(r"^\[(?P<input>[^\]]+)\] (?P<total>\d+) launches fenced \((?P<forms>[^)]*)\), (?P<failed>\d+) failed")
_FAILED = re.compile(r"^\[(?P<input>[^\]]+)\] FAILED (?P<what>.*)")


def memory_safety_counts(log: Path) -> dict:
    """form ("fp8:hopper_two_term") -> {"inputs", "launches", "failed": [...]}, and the
    pytest summary line, from tests/test_memory_safety_gpu.py's -s output."""
    forms, summary = {}, ""
    text = log.read_text() if log.is_file() else ""
    for line in text.splitlines():
        if match := _FENCED.match(line):
            for part in filter(None, match.group("forms").split(", ")):
                form, count = part.rsplit(" ", 1)
                entry = forms.setdefault(form, {"inputs": 0, "launches": 0, "failed": []})
                entry["inputs"] += 1
                entry["launches"] += int(count)
        elif match := _FAILED.match(line):
            label = match.group("what")
            for form, entry in forms.items():
                fmt, name = form.split(":")
                if label.startswith(f"triton_{fmt}[form={name},"):
                    entry["failed"].append(f"{match.group('input')}: {label[:200]}")
        if re.match(r"^=*\s*\d+ (passed|failed|skipped|error)", line) or re.match(r"^\d+ (passed|failed|skipped)", line):
            summary = line.strip("= ")
    return {"forms": forms, "pytest": summary}


def memcheck_errors(log: Path) -> int | None:
    """compute-sanitizer's ERROR SUMMARY count, None when the log has none."""
    return external_programs.sanitizer_summary(log.read_text() if log.is_file() else "")[1]


def sanitizer_command(wheel: str, scratch: Path) -> tuple[list | None, str]:
    """(compute-sanitizer's command, "") or (None, why not): as found on this machine, else
    from NVIDIA's wheel unpacked into scratch."""
    if external_programs.problem("compute-sanitizer") is None:
        return external_programs.command("compute-sanitizer"), ""
    wheels = sorted(Path(ROOT).glob(wheel)) if not Path(wheel).is_absolute() else sorted(Path("/").glob(wheel[1:]))
    if not wheels:
        return None, external_programs.problem("compute-sanitizer") + f"; no wheel matches {wheel}"
    with zipfile.ZipFile(wheels[-1]) as archive:
        archive.extractall(scratch)
    programs = sorted(scratch.glob("nvidia/*/bin/compute-sanitizer"))
    if not programs:
        return None, f"{wheels[-1]} holds no nvidia/*/bin/compute-sanitizer"
    for program in programs[0].parent.iterdir():
        program.chmod(0o755)
    os.environ["PATH"] = f"{programs[0].parent}{os.pathsep}{os.environ.get('PATH', '')}"
    why = external_programs.problem("compute-sanitizer")
    return (None, why) if why else (external_programs.command("compute-sanitizer"), "")


def summary_lines(result: dict) -> list:
    lines = []
    for form in FORMS:
        robust = result["robustness"]["counts"].get(form, {})
        if robust.get("skipped"):
            robustness = f"robustness SKIP ({robust['skipped'][:120]})"
        elif robust:
            robustness = (f"robustness {robust['PASS']} PASS, {robust['REFUSED']} REFUSED, {robust['FAIL']} FAIL"
                          + (f" ({'; '.join(robust['failed'])[:300]})" if robust["failed"] else ""))
        else:
            robustness = "robustness: no result" + (" (stopped at its limit)"
                                                    if result["robustness"]["stopped_at_limit_s"] else "")
        fenced = result["memory_safety"]["counts"]["forms"].get(form.replace("triton_", ""))
        tests = f"GPU tests: {result['memory_safety']['counts']['pytest'] or 'no summary'}"
        if fenced:
            memory = (f"memory safety {fenced['launches']} launches on {fenced['inputs']} inputs fenced, "
                      f"{len(fenced['failed'])} failed ({tests})")
        else:
            memory = f"memory safety: none fenced ({tests})"
        check = result["memcheck"]["run"]
        if check is None:
            memcheck = f"memcheck not run ({result['memcheck']['not_run'][:160]})"
        elif check["stopped_at_limit_s"]:
            memcheck = f"memcheck stopped at its limit ({check['stopped_at_limit_s']:.0f} s)"
        else:
            cases = check["counts"].get(form, {})
            memcheck = (f"memcheck {cases.get('PASS', 0) + cases.get('REFUSED', 0)} cases run ({cases.get('FAIL', 0)} "
                        f"FAIL), {check['errors']} errors in the run of the three forms" if check["errors"] is not None
                        else f"memcheck: no ERROR SUMMARY (exit {check['exit']})")
        lines.append(f"{form}: {robustness}; {memory}; {memcheck}")
    return lines


def failed(result: dict) -> bool:
    parts = [result["robustness"], result["memory_safety"]] + [part for part in [result["memcheck"]["run"]] if part]
    if any(part["stopped_at_limit_s"] or part["exit"] not in (0, None) for part in parts):
        return True
    return bool(result["memcheck"]["run"] and result["memcheck"]["run"]["errors"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--limit-s", type=float, default=220.0, help="all three parts together (default 220)")
    parser.add_argument("--sanitizer-wheel", default="dev_scratch/sanitizer/nvidia_cuda_sanitizer_api-*.whl",
                        help="NVIDIA's compute-sanitizer wheel, used where the machine has no compute-sanitizer")
    args = parser.parse_args(argv)
    import torch
    gpu = torch.cuda.is_available()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MLA_ROUTE", "TRITON_INTERPRET")}
    python = sys.executable
    result = {"gpu": torch.cuda.get_device_name(0) if gpu else "none", "forms": list(FORMS), "limit_s": args.limit_s}

    share = args.limit_s * SHARES["robustness"]
    robustness = [python, "-m", "bench.robustness_gpu", "--out", str(out / "robustness"), "--routes",
                  ",".join(FORMS), "--forced-only"] + ([] if gpu else ["--smoke"])
    result["robustness"] = run_part(robustness, out / "robustness.log", share, env)
    result["robustness"]["counts"] = robustness_counts(out / "robustness" / "robustness_gpu.json")

    share = args.limit_s * SHARES["memory_safety"]
    memory = [python, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/test_hopper_forms.py",
              "tests/test_memory_safety_gpu.py"]
    if not gpu:
        memory += ["-k", "not deliberately_wrong"]
    result["memory_safety"] = run_part(memory, out / "memory_safety.log", share, env)
    result["memory_safety"]["counts"] = memory_safety_counts(out / "memory_safety.log")

    with tempfile.TemporaryDirectory() as scratch:
        sanitizer, why = sanitizer_command(args.sanitizer_wheel, Path(scratch)) if gpu else (None, "no GPU here")
        result["memcheck"] = {"not_run": why, "run": None}
        if sanitizer:
            command = [*sanitizer, "--tool", "memcheck", "--print-limit", "20", python, "-m", "bench.robustness_gpu",
                       "--out", str(out / "memcheck"), "--routes", ",".join(FORMS), "--forced-only", "--smoke",
                       "--cases", MEMCHECK_CASES]
            check = run_part(command, out / "memcheck.log", args.limit_s * SHARES["memcheck"], env)
            check["errors"] = memcheck_errors(out / "memcheck.log")
            check["counts"] = robustness_counts(out / "memcheck" / "robustness_gpu.json")
            result["memcheck"]["run"] = check

    lines = summary_lines(result)
    result["summary"] = lines
    (out / "hopper_safety.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed(result) else 0


if __name__ == "__main__":
    sys.exit(main())
