"""What the installed Triton gives this project, on a CPU (no GPU needed).

    python3 -m bench.triton_versions [--targets gfx950,sm_90] [--jobs N] [--json FILE]

Run it with the Python of the environment whose Triton is under test (e.g. a venv made
with --system-site-packages and its own `pip install triton==X`, beside the global torch).
It reports, for that Triton:
  1. the versions, that submission.py imports, and per Gluon architecture ("cdna4" for
     gfx950, "ampere" for NVIDIA) whether submission offers its Gluon forms, or why not
     (submission.gluon_problem: the Gluon API check and the versions refused);
  2. one forced Triton route interpreted on a small case: MLA_ROUTE=triton_fp8 (both fp8
     Triton forms, and the autopick's a8w8 yardstick with the interpreted Q quantizer)
     under TRITON_INTERPRET=1 on 2 sequences of 40 tokens, the output checked with
     reference.check_implementation;
  3. per target, every distinct kernel specialization the autopick offers for the 8
     benchmark shapes (tools/compile_target.py: offered_launches, the aiter route's Triton
     launches on gfx950 included), compiled into an empty Triton cache, in N worker
     processes (a failed C++ assert aborts a process: the compile it was in is named);
     on gfx950 with the registers, spills and occupancy the compiler reports.
     A specialization that fails to compile makes its candidates fail at the first call
     on that GPU; the autopick skips them (reported once) and the next one serves: they
     are listed as "not offered on triton X", with the first line of the error.
Exit status 1 where submission.py does not import, the interpreted route does not serve
or its output fails the check, or a compile worker dies; compile failures alone are
reported, not failed: that is how a new Triton can drift, and what the report is for.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTERPRETED_CASE = {"batchsize": 2, "qseqlen": 1, "kvseqlen": 40, "seed": 11}
INTERPRETED_ROUTE = "triton_fp8"


def _child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLA_") and k != "TRITON_INTERPRET"}
    env.update(extra)
    return env


# ------------------------------------------------------------------------------------
# 1. versions, import, Gluon
# ------------------------------------------------------------------------------------
def import_report() -> dict:
    import torch
    import triton
    report = {"triton": triton.__version__, "torch": torch.__version__}
    try:
        import submission
    except Exception as error:  # reported, and the run fails
        report["submission_import"] = f"{type(error).__name__}: {error}"
        return report
    report["submission_import"] = "ok"
    report["gluon"] = {arch: submission.gluon_problem(arch) or "offered" for arch in ("cdna4", "ampere")}
    return report


# ------------------------------------------------------------------------------------
# 2. one interpreted forced Triton route
# ------------------------------------------------------------------------------------
def interpreted_case() -> None:
    """In a process with TRITON_INTERPRET=1 and MLA_ROUTE set: one JSON line."""
    import submission
    from reference import check_implementation, generate_input
    started = time.perf_counter()
    data = generate_input(**INTERPRETED_CASE)
    good, message = check_implementation(data, submission.custom_kernel(data))
    print(json.dumps({"route": submission.describe_route(data), "check": bool(good), "message": message,
                      "seconds": round(time.perf_counter() - started, 1)}))


def interpreted_report() -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.triton_versions", "interpreted-case"], cwd=ROOT, capture_output=True, text=True,
                          env=_child_env(TRITON_INTERPRET="1", MLA_ROUTE=INTERPRETED_ROUTE), timeout=600)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"ok": False, "error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    result = json.loads(lines[-1])
    result["ok"] = result["check"] and result["route"].startswith(INTERPRETED_ROUTE + "[")
    return result


# ------------------------------------------------------------------------------------
# 3. the offered specializations, compiled
# ------------------------------------------------------------------------------------
def offered_specializations(target: str) -> list:
    """[(Specialization, sorted offers)], one per distinct compile, in a fixed order; an
    offer is "route form" (a Triton route's kernel form; the aiter route's a8w8 / a16w8)."""
    from tools import compile_target
    found, offers = {}, {}
    for offered in compile_target.offered_launches(target, with_aiter=target.startswith("gfx")):
        if offered.route == "aiter_fp8":
            form = "a8w8" if offered.launch["q_in_fp8"] else "a16w8"
        else:
            form = offered.launch.form
        for call in offered.calls:
            spec = compile_target.specialize(call, compile_target.TARGETS[target])
            found.setdefault(spec.identity, spec)
            offers.setdefault(spec.identity, set()).add(f"{offered.route} {form}")
    return [(spec, sorted(offers[identity])) for identity, spec in found.items()]


def _describe(spec) -> str:
    values = spec.constexpr_values()
    shown = {k: values[k] for k in ("KV_FORMAT", "FORM", "HW_CONVERT", "SPLIT", "COMBINE_IN_KERNEL", "BLOCK_N",
                                    "WAVE_GROUPS") if k in values}
    options = {k: v for k, v in spec.non_default_options().items() if k in ("num_warps", "num_stages", "waves_per_eu")}
    return f"{spec.kernel.fn.__name__} {shown} {options}"


def compile_worker(target: str, index: int, count: int) -> None:
    """Compiles every count-th offered specialization from `index`, one JSON line before
    (so a crash names it) and one after each."""
    import tempfile

    from triton import knobs

    from tools import amdgcn
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        for number, (spec, offers) in enumerate(offered_specializations(target)):
            if number % count != index:
                continue
            entry = {"number": number, "kernel": _describe(spec), "language": spec.language, "offers": offers}
            print(json.dumps({"compiling": entry}), flush=True)
            started = time.perf_counter()
            try:
                compiled = spec.compile()
                entry["error"] = ""
                if target.startswith("gfx"):  # what the compiler made of it: registers, spills, occupancy
                    found = amdgcn.resources(compiled.asm["amdgcn"])
                    entry.update({key: found[key] for key in ("total_vgpr", "vgpr_spill", "sgpr_spill",
                                                              "occupancy_registers")})
            except Exception as error:
                entry["error"] = f"{type(error).__name__}: " + (str(error).strip().splitlines() or [""])[-1][:300]
            entry["seconds"] = round(time.perf_counter() - started, 2)
            print(json.dumps({"compiled": entry}), flush=True)


def compile_report(target: str, jobs: int) -> dict:
    workers = [subprocess.Popen([sys.executable, "-m", "bench.triton_versions", "compile-worker", target, str(i),
                                 str(jobs)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
               for i in range(jobs)]
    results, crashes = [], []
    for worker in workers:
        out, err = worker.communicate(timeout=1800)
        pending = None
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if "compiling" in record:
                pending = record["compiling"]
            else:
                results.append(record["compiled"])
                pending = None
        if worker.returncode != 0:
            tail = (err.strip().splitlines() or [""])[-1][:300]
            crashes.append({"exit": worker.returncode, "while_compiling": pending, "stderr": tail})
    results.sort(key=lambda entry: entry["number"])
    return {"target": target, "specializations": results, "crashes": crashes,
            "compiled": sum(not r["error"] for r in results), "failed": sum(bool(r["error"]) for r in results),
            "seconds": round(sum(r["seconds"] for r in results), 1)}


def offered_forms(target_report: dict) -> dict:
    """"route form" -> (specializations that compile, specializations in all)."""
    forms = {}
    for entry in target_report["specializations"]:
        for offer in entry["offers"]:
            good, total = forms.get(offer, (0, 0))
            forms[offer] = (good + (not entry["error"]), total + 1)
    return forms


# ------------------------------------------------------------------------------------
def print_report(report: dict) -> None:
    version = report["import"]["triton"]
    print(f"triton {version}, torch {report['import']['torch']}: submission.py import "
          f"{report['import']['submission_import']}")
    for arch, state in report["import"].get("gluon", {}).items():
        print(f"  Gluon {arch}: {state}")
    if "interpreted" in report:
        case = report["interpreted"]
        if case["ok"]:
            print(f"  interpreted MLA_ROUTE={INTERPRETED_ROUTE}: {case['route']} served, check passed "
                  f"({case['seconds']} s)")
        else:
            print(f"  interpreted MLA_ROUTE={INTERPRETED_ROUTE}: FAILED {case.get('error') or case}")
    for target in report["targets"]:
        print(f"  {target['target']}: {target['compiled']} of {len(target['specializations'])} offered "
              f"specializations compile ({target['seconds']} s of compiles)")
        for offer, (good, total) in sorted(offered_forms(target).items()):
            print(f"    {offer}: {good}/{total}" + ("" if good == total else "  (the rest not offered)"))
        for entry in target["specializations"]:
            if entry.get("vgpr_spill") or entry.get("sgpr_spill"):
                print(f"    spills {entry['vgpr_spill']} VGPRs, {entry['sgpr_spill']} SGPRs ({entry['total_vgpr']} "
                      f"VGPRs, occupancy {entry['occupancy_registers']}): {entry['kernel']} for "
                      f"{', '.join(entry['offers'])}")
        for entry in target["specializations"]:
            if entry["error"]:
                print(f"    not offered on triton {version}: {entry['kernel']} for {', '.join(entry['offers'])}: "
                      f"{entry['error']}")
        for crash in target["crashes"]:
            print(f"    a compile worker died (exit {crash['exit']}) while compiling {crash['while_compiling']}: "
                  f"{crash['stderr']}")


def main() -> int:
    if sys.argv[1:2] == ["interpreted-case"]:
        interpreted_case()
        return 0
    if sys.argv[1:2] == ["compile-worker"]:
        compile_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="gfx950,sm_90", help="comma-separated; gfx950 and/or sm_90")
    parser.add_argument("--jobs", type=int, default=1, help="compile worker processes per target")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    report = {"import": import_report(), "targets": []}
    if report["import"]["submission_import"] == "ok":
        report["interpreted"] = interpreted_report()
        for target in filter(None, args.targets.split(",")):
            report["targets"].append(compile_report(target, args.jobs))
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    print_report(report)
    print(f"  {report['wall_seconds']} s in all")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    failed = (report["import"]["submission_import"] != "ok" or not report["interpreted"]["ok"]
              or any(target["crashes"] for target in report["targets"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
