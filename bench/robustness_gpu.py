"""The robustness cases that need a GPU, per route, as a PASS/FAIL table and JSON.

  python3 -m bench.robustness_gpu --out results/robustness            (CUDA; minutes)
  python3 -m bench.robustness_gpu --out /tmp/robustness --smoke       (CPU: tiny shapes,
        the torch route and, under the Triton interpreter, the Triton routes)

Cases, for every route (torch, triton_mxfp4, triton_fp8, aiter_fp8 where aiter exists, or
those given with --routes, which may name a Triton kernel form: triton_fp8:e4m3_waves), each
forced with MLA_ROUTE:
  memory_flat    memory in use after 10 and after 1000 calls is the same
                 (torch.cuda.memory_allocated; on the CPU, tracemalloc's count)
  recheck        100 calls with fresh inputs (seed += 13, as leaderboard mode), every
                 output checked with the reference rule and against exact attention
                 (SCALED_OUTPUT_BOUND, which the rule alone is not); the previous output, still
                 alive, keeps its own values in its own storage
  ragged         variable lengths with zero-length sequences and lengths that are no
                 multiple of any block
  magnitude/*    q and KV of very large and very small magnitude
  nonfinite/*    NaN or Inf in q or in the KV
  padded_scales, uint8_spelling (MXFP4 readers), noncontiguous_q, fnuz (fp8 readers:
                 correct, or refused with an error; never a silent wrong answer)
  short_buffer   a KV buffer of 53 rows, under one tile of every form: an empty sequence,
                 a single token, 52 tokens (with the MXFP4 bytes spelled uint8)
  single_token   one sequence of one token: a buffer of one row
  views          q, every KV format's rows and the MXFP4 scales views inside larger
                 buffers (NaN around them)
  empty_cache    every sequence empty, every KV buffer of no rows (the output is zeros)
  misaligned_after_aligned  the same plan fed inputs whose addresses are not 16-byte
                 aligned after an aligned first call (Triton specializes on alignment)
plus, for the automatic route, plan_cache_bound (more distinct shapes than
PLAN_CACHE_SIZE: the cache stays at its bound and memory stops growing). The last four run
for the automatic, torch and Triton routes (aiter's route serves sequences of 256 tokens and
more only). --forced-only leaves the automatic route out (a run of forced forms alone). A
route or form that cannot run on this machine (a Gluon form on a CPU or under the
interpreter, a Hopper form off sm_90) is SKIP, with the submission's reason.

  python3 -m bench.robustness_gpu --out DIR --gluon-forms
runs them for each Gluon form of the device's ARCH forced (MLA_ROUTE=triton_<format>:gluon;
the Hopper forms have bench/hopper_safety.py), compares each case with its format's route
unforced, runs the odd-input cases again under compute-sanitizer memcheck where this machine
has it (tools/external_programs.py), and writes DIR/gluon_forms.json and one summary line a form (GPU with Gluon forms
only: it refuses elsewhere).

Outputs are judged against exact attention (reference.attention_fp32) over the KV format
the route reads: NaN and +-Inf in exactly the same places, every finite element within
ORACLE_TOL * (|expected| + max|expected|) (E4M3_ORACLE_TOL for routes that round Q to e4m3). Where the leaderboard rule can judge (finite
inputs, the a8w8 reference well conditioned) reference.check_implementation must pass too.
Exit status 1 when any case fails.

The inputs, the oracle and the sizes are tools/robustness.py's, which the CPU tests share.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import torch

import reference
from reference import check_implementation, generate_input
from tools import external_programs
from tools.robustness import (ALIGNMENT_REFUSAL, MAGNITUDES, NONFINITE, ROUTES, SHORT_BUFFER_LENGTHS,
                              SINGLE_TOKEN_LENGTHS, Sizes, empty_cache, exact_attention, exact_attention_ieee,
                              format_read_by, in_larger_buffers, mxfp4_only, oracle_mismatch, oracle_tolerance,
                              ragged_input, reference_rule_applies, scaled_output_problem, shifted, with_kv,
                              with_nonfinite)
from utils import get_device


# ------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------
class Skip(Exception):
    """A case that cannot be measured here (the reason is reported)."""


REFUSAL = "no route passed verification"


def judge(sub, data, check_rule=True, may_refuse=False, oracle=exact_attention):
    """Runs custom_kernel once: None when right, else what was wrong, or ("REFUSED", why)
    when may_refuse and the forced route failed its verification on this input (a clear
    error, not a wrong answer: the route's own KV format is too lossy here)."""
    try:
        out = sub.custom_kernel(data)
    except RuntimeError as error:
        if may_refuse and REFUSAL in str(error):
            return "REFUSED", str(error)[:1000]
        raise
    label = sub.describe_route(data)
    problem = oracle_mismatch(out, oracle(data, format_read_by(label)), oracle_tolerance(label))
    if problem:
        return f"{label}: {problem}"
    if check_rule and reference_rule_applies(data):
        good, message = check_implementation(data, out)
        if not good:
            return f"{label}: reference rule: {message[:160]}"
    return None


def case_recheck(sub, sizes, route):
    batch, kv_len = sizes.shape
    previous = None
    for i in range(sizes.recheck_calls):
        data = generate_input(batch, 1, kv_len, sizes.recheck_seed + 13 * i)
        out = sub.custom_kernel(data)
        good, message = check_implementation(data, out)
        if not good:
            return f"call {i}: {message[:160]}"
        problem = scaled_output_problem(sub, data, out)
        if problem:
            return f"call {i}: {problem}"
        if previous is not None:
            prev_out, prev_copy = previous
            if prev_out.data_ptr() == out.data_ptr() or not torch.equal(prev_out, prev_copy):
                return f"call {i}: the previous output was overwritten"
        previous = (out, out.clone())
    return None


def _memory_in_use(device) -> int:
    if device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated(device)
    return tracemalloc.get_traced_memory()[0]


def case_memory_flat(sub, sizes, route):
    batch, kv_len = sizes.shape
    data = generate_input(batch, 1, kv_len, 7)
    if data[0].device.type != "cuda" and route.startswith("triton"):
        raise Skip("the Triton interpreter keeps Python objects per launch; measured on the GPU")
    first, total = sizes.memory_calls
    tracemalloc.start()
    try:
        for i in range(total):
            sub.custom_kernel(data)  # the output is dropped at once
            if i + 1 == first:
                early = _memory_in_use(data[0].device)
        late = _memory_in_use(data[0].device)
    finally:
        tracemalloc.stop()
    slack = 0 if data[0].device.type == "cuda" else 64 << 10  # tracemalloc: small Python noise
    if late - early > slack:
        return f"memory after {first} calls {early} B, after {total} calls {late} B"
    return None


def case_plan_cache_bound(sub, sizes, route):
    """More distinct shapes than the cache holds: it stays at its bound, and dropping the
    plans gives back all their memory (nothing outside the cache holds on to any)."""
    device = get_device()
    in_use = (lambda: torch.cuda.memory_allocated(device)) if device.type == "cuda" else (lambda: 0)
    inputs = [ragged_input([3] * batch, seed=batch)
              for batch in range(1, sub.PLAN_CACHE_SIZE + sizes.plan_shapes + 1)]
    sub.custom_kernel(inputs[0])  # one-time state (compiled kernels, lazy globals) first
    sub.reset_plans()
    baseline = in_use()
    for data in inputs:
        sub.custom_kernel(data)
    if len(sub._PLANS) != sub.PLAN_CACHE_SIZE:
        return f"{len(sub._PLANS)} plans cached, bound {sub.PLAN_CACHE_SIZE}"
    held = in_use()
    sub.reset_plans()
    if in_use() != baseline:
        return f"memory in use {baseline} B before, {in_use()} B after the plans were dropped"
    print(f"  {sub.PLAN_CACHE_SIZE} plans held {held - baseline} B")
    return None


def case_ragged(sub, sizes, route):
    return judge(sub, ragged_input(sizes.ragged, seed=11))


def case_magnitude(name):
    def run(sub, sizes, route):
        q_scale, kv_scale = MAGNITUDES[name]
        return judge(sub, ragged_input(sizes.small, seed=12, q_scale=q_scale, kv_scale=kv_scale),
                     may_refuse=route not in ("auto", "torch"))
    return run


def case_nonfinite(name):
    def run(sub, sizes, route):
        where, value, dim = NONFINITE[name]
        return judge(sub, with_nonfinite(ragged_input(sizes.small, seed=13), where, value, dim),
                     may_refuse=route not in ("auto", "torch"), oracle=exact_attention_ieee)
    return run


def _mxfp4_data(data, route):
    """For the torch route the KV holds only MXFP4 (so that it is the format read)."""
    return with_kv(data, mxfp4_only(data)) if route == "torch" else data


def case_padded_scales(sub, sizes, route):
    data = ragged_input(sizes.ragged, seed=14, ties="away", padded=True)
    return judge(sub, _mxfp4_data(data, route), check_rule=False)


def case_uint8_spelling(sub, sizes, route):
    data = ragged_input(sizes.small, seed=15)
    spelled = dict(data[1], mxfp4=mxfp4_only(data, "uint8")["mxfp4"])
    if route == "torch":
        spelled = mxfp4_only(data, "uint8")
    return judge(sub, with_kv(data, spelled), check_rule=False)


def case_noncontiguous_q(sub, sizes, route):
    data = ragged_input(sizes.small, seed=16)
    wide = torch.zeros((data[0].shape[0], 16, 2 * 576), dtype=torch.bfloat16, device=data[0].device)
    wide[..., ::2] = data[0]
    return judge(sub, (wide[..., ::2], *data[1:]))


def case_misaligned_after_aligned(sub, sizes, route):
    """The same plan key (shapes, strides) with fresh inputs at addresses that are not
    16-byte aligned: whatever the plan specialized or replays for the first, aligned call
    must not be reused blindly."""
    aligned = ragged_input(sizes.small, seed=18)
    problem = judge(sub, aligned)
    if problem:
        return f"aligned call: {problem}"
    fresh = ragged_input(sizes.small, seed=19)
    kv_data = {name: shifted(value) if torch.is_tensor(value) else tuple(shifted(p) for p in value)
               for name, value in fresh[1].items()}
    moved = (shifted(fresh[0]), kv_data, shifted(fresh[2]), shifted(fresh[3]), fresh[4])
    if sub.plan_key(moved) != sub.plan_key(aligned):
        return "the shifted views changed the plan key: the case tests nothing"
    try:
        return judge(sub, moved)
    except ValueError as error:
        # A form that reads MXFP4 rows as 4-byte words refuses other rows by name.
        if ALIGNMENT_REFUSAL.search(str(error)):
            return "REFUSED", str(error)[:200]
        raise


def case_short_buffer(sub, sizes, route):
    data = ragged_input(SHORT_BUFFER_LENGTHS, seed=20)
    return judge(sub, with_kv(data, dict(data[1], mxfp4=mxfp4_only(data, "uint8")["mxfp4"])))


def case_single_token(sub, sizes, route):
    # One token: the output is that token's V row as the format holds it, with no average
    # over tokens to shrink its rounding. MXFP4's e2m1 codes miss the reference rule there
    # (9% of elements on the H200), so an MXFP4 route refuses it and another route serves.
    return judge(sub, ragged_input(SINGLE_TOKEN_LENGTHS, seed=21), may_refuse=route.startswith("triton_mxfp4"))


def case_views(sub, sizes, route):
    return judge(sub, in_larger_buffers(ragged_input(sizes.small, seed=22)))


def case_empty_cache(sub, sizes, route):
    data = empty_cache(ragged_input([1, 1, 1], seed=23))
    out = sub.custom_kernel(data)
    if out.shape != (3, 16, 512) or not bool((out == 0).all()):
        return f"{sub.describe_route(data)}: an output over no tokens that is not all zeros"
    return None


def case_fnuz(sub, sizes, route):
    """fp8 e4m3fnuz (gfx942's) KV: right, or refused with an error; never wrong."""
    data = ragged_input(sizes.small, seed=17)
    saved = reference.FP8_DTYPE
    reference.FP8_DTYPE = torch.float8_e4m3fnuz
    try:
        return judge(sub, with_kv(data, {"fp8": reference.quantize_fp8(data[1]["bf16"])}),
                     may_refuse=route != "torch")
    finally:
        reference.FP8_DTYPE = saved


READS_MXFP4 = ("torch", "triton_mxfp4")
READS_FP8 = ("torch", "triton_fp8", "aiter_fp8")


def base_route(route):
    return route.partition(":")[0]


def cases_for(route):
    odd_buffers = {"short_buffer": case_short_buffer, "single_token": case_single_token, "views": case_views,
                   "empty_cache": case_empty_cache}
    if route == "auto":
        cases = {"plan_cache_bound": case_plan_cache_bound, "ragged": case_ragged}
        cases.update({f"magnitude/{name}": case_magnitude(name) for name in MAGNITUDES})
        cases.update({f"nonfinite/{name}": case_nonfinite(name) for name in NONFINITE})
        return cases | odd_buffers
    cases = {"memory_flat": case_memory_flat, "recheck": case_recheck, "ragged": case_ragged,
             "noncontiguous_q": case_noncontiguous_q, "misaligned_after_aligned": case_misaligned_after_aligned}
    cases.update({f"magnitude/{name}": case_magnitude(name) for name in MAGNITUDES})
    cases.update({f"nonfinite/{name}": case_nonfinite(name) for name in NONFINITE})
    if base_route(route) in READS_MXFP4:
        cases.update(padded_scales=case_padded_scales, uint8_spelling=case_uint8_spelling)
    if base_route(route) in READS_FP8:
        cases["fnuz"] = case_fnuz
    if base_route(route) != "aiter_fp8":
        cases.update(odd_buffers)
    return cases


# ------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------
def available_routes(sub, device, routes=ROUTES) -> dict:
    """route -> None when it can run here, else why not. A route may name a Triton kernel
    form, as MLA_ROUTE does (triton_fp8:e4m3_waves)."""
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    why_not = {}
    for route in routes:
        if base_route(route) not in sub.ROUTES:
            why_not[route] = "not in submission.ROUTES"
        elif route == "aiter_fp8" and (sub.aiter_ops is None or device.type != "cuda"):
            why_not[route] = "aiter is not importable here (ROCm only)"
        elif route.startswith("triton") and device.type != "cuda" and not interpreted:
            why_not[route] = "no CUDA device and TRITON_INTERPRET is not 1"
        elif route.startswith("triton") and not hasattr(sub, "mxfp4_decode"):
            why_not[route] = "the Triton section of submission.py is not implemented"
        elif route.startswith("triton") and route.partition(":")[2] in sub.ROUTES[base_route(route)].forms:
            why_not[route] = sub.ROUTES[base_route(route)].unavailable_reason(device, route.partition(":")[2])
        else:
            why_not[route] = None
    return why_not


def run_case(sub, sizes, route, name, case) -> dict:
    os.environ["MLA_ROUTE"] = route if route != "auto" else ""
    sub.reset_plans()
    began = time.perf_counter()
    try:
        outcome = case(sub, sizes, route)
    except Skip as why:
        outcome = "SKIP", str(why)
    except Exception as error:  # a crash is a failure, reported with its type
        outcome = f"raised {type(error).__name__}: {str(error)[:200]}"
    status, detail = outcome if isinstance(outcome, tuple) else ("FAIL" if outcome else "PASS", outcome or "")
    return {"route": route, "case": name, "status": status, "detail": detail,
            "seconds": round(time.perf_counter() - began, 3)}


def print_table(rows) -> None:
    width = max(len(r["case"]) for r in rows)
    route_width = max(len(r["route"]) for r in rows)
    for r in rows:
        detail = f"  {r['detail']}" if r["detail"] else ""
        print(f"{r['route']:<{route_width}}  {r['case']:<{width}}  {r['status']:<7}  {r['seconds']:7.2f}s{detail}")


def run_routes(sub, sizes, routes, filters, with_auto=True) -> list[dict]:
    """Every case of every route (the automatic one first unless with_auto is False) whose
    name contains one of `filters` (all when none), as rows; a route that cannot run here
    is one SKIP row."""
    device = get_device()
    why_not = available_routes(sub, device, routes)
    rows, plan = [], []
    for route in (["auto"] if with_auto else []) + list(routes):
        if route != "auto" and why_not.get(route, "unknown route"):
            rows.append({"route": route, "case": "*", "status": "SKIP",
                         "detail": why_not.get(route, "unknown route"), "seconds": 0.0})
            continue
        plan += [(route, name, case) for name, case in cases_for(route).items()]
    for route, name, case in plan:
        if filters and not any(f in name for f in filters):
            continue
        rows.append(run_case(sub, sizes, route, name, case))
        print(f"{rows[-1]['status']} {route} {name} {rows[-1]['detail']}", flush=True)
    os.environ.pop("MLA_ROUTE", None)
    return rows


def status_counts(rows) -> dict:
    return {s: sum(r["status"] == s for r in rows) for s in ("PASS", "REFUSED", "FAIL", "SKIP")}


# ------------------------------------------------------------------------------------
# --gluon-forms: each Gluon form forced, against its format's route unforced, and under
# compute-sanitizer memcheck
# ------------------------------------------------------------------------------------
# Cases a form may refuse by its own measured bound where its route unforced serves (an
# e4m3 Q under peaked scores or huge magnitudes: bench/verify_errors.py's extreme inputs).
BOUND_REFUSALS_ALLOWED = ("magnitude/peaked", "magnitude/both_huge")
# Inputs the Gluon forms refuse by name by design: fp8 bytes other than e4m3fn (gfx950's fp8;
# fnuz is gfx942's, where no Gluon form is offered) and rows not 16-byte aligned (their
# 16-byte copies).
DESIGN_REFUSALS_ALLOWED = ("fnuz", "misaligned_after_aligned")
# The odd inputs memcheck runs (small sizes: --smoke), each form forced.
MEMCHECK_CASES = ("ragged", "short_buffer", "single_token", "views", "empty_cache", "padded_scales", "uint8_spelling",
                  "noncontiguous_q", "misaligned_after_aligned")
MEMCHECK_TIMEOUT_S = 75


def compare_forced(forced_rows: list[dict], unforced_rows: list[dict]) -> dict:
    """A forced form's rows against its route's unforced ones on the cases the form did not
    pass: {"refused_by_bound": [case and why], "refused_by_design": [...], "short": [cases the
    unforced route passes and the form does not, other than those allowed refusals],
    "also_unforced": [cases the unforced route does not pass either]}."""
    unforced = {r["case"]: r for r in unforced_rows}
    result = {"refused_by_bound": [], "refused_by_design": [], "short": [], "also_unforced": []}
    for row in forced_rows:
        if row["status"] == "PASS":
            continue
        other = unforced.get(row["case"])
        entry = {"case": row["case"], "status": row["status"], "detail": row["detail"],
                 "unforced": other["status"] if other else "not run"}
        if other is None or other["status"] != "PASS":
            result["also_unforced"].append(entry)
        elif row["status"] == "REFUSED" and row["case"] in BOUND_REFUSALS_ALLOWED:
            result["refused_by_bound"].append(entry)
        elif row["status"] == "REFUSED" and row["case"] in DESIGN_REFUSALS_ALLOWED:
            result["refused_by_design"].append(entry)
        else:
            result["short"].append(entry)
    return result


def memcheck(route: str, out_dir: Path, sanitizer: list, timeout: int = MEMCHECK_TIMEOUT_S) -> dict:
    """The odd-input cases of `route` (small sizes) in a process run by compute-sanitizer
    memcheck, with torch's caching allocator off (every tensor its own allocation, so an
    access past one is outside any)."""
    command = [*sanitizer, "--tool", "memcheck", "--error-exitcode", "99", "--print-limit", "10", sys.executable,
               "-m", "bench.robustness_gpu", "--smoke", "--forced-only", "--out", str(out_dir), "--routes", route,
               "--cases", ",".join(MEMCHECK_CASES)]
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    out_dir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=Path(__file__).resolve().parent.parent)
    except subprocess.TimeoutExpired as stopped:
        return {"status": "TIMEOUT", "seconds": timeout, "output": str(stopped.stdout or "")[-2000:]}
    output = proc.stdout + proc.stderr
    (out_dir / "memcheck.log").write_text(output)
    summary, errors = external_programs.sanitizer_summary(output)
    status = "CLEAN" if proc.returncode == 0 and errors == 0 else "ERRORS" if errors else f"EXIT {proc.returncode}"
    return {"status": status, "errors": errors, "summary": summary, "exit": proc.returncode,
            "seconds": round(time.perf_counter() - began, 1)}


def summary_line(route: str, rows: list[dict], comparison: dict, checked: dict) -> str:
    counts = status_counts(rows)
    refused = "; ".join(f"{e['case']}: {_bound_failure(e['detail'])}" for e in comparison["refused_by_bound"])
    short = ", ".join(f"{e['case']} ({e['status']})" for e in comparison["short"])
    by_design = ", ".join(e["case"] for e in comparison["refused_by_design"])
    if checked.get("status") == "CLEAN":
        sanitized = f"memcheck clean ({len(MEMCHECK_CASES)} cases, {checked['seconds']} s)"
    elif checked.get("status") == "NOT RUN":
        sanitized = f"memcheck not run: {checked['why']}"
    else:
        sanitized = f"memcheck {checked.get('status')}: {checked.get('summary') or checked.get('output', '')[-200:]}"
    return (f"{route}: {len(rows)} cases, {counts['PASS']} PASS, {counts['REFUSED']} REFUSED, {counts['FAIL']} FAIL, "
            f"{counts['SKIP']} SKIP; refused by its own bound where unforced passes: {refused or 'none'}; "
            f"refused by design (named): {by_design or 'none'}; short of the unforced route: {short or 'none'}; "
            f"{sanitized}")


def _bound_failure(detail: str) -> str:
    found = re.findall(r"(sequence relative RMS error [^;(]+|largest element error [^;(]+)", detail)
    return ", ".join(f.strip() for f in found[:2]) or detail[:160]


def run_gluon_forms(args) -> int:
    device = get_device()
    if device.type != "cuda":
        print("robustness_gpu --gluon-forms: no GPU here: the Gluon forms run compiled on an MI355X (gfx950) or an "
              "NVIDIA GPU (sm_80+), never on a CPU or under the Triton interpreter", file=sys.stderr)
        return 2
    import submission as sub
    arch = sub.device_arch(device)[1]
    if not sub.gluon_forms_here(arch):
        print(f"robustness_gpu --gluon-forms: no Gluon form runs on {arch.name}: "
              f"{arch.gluon_arch and sub.gluon_problem(arch.gluon_arch) or 'no Gluon kernel for it'}", file=sys.stderr)
        return 2
    sizes = Sizes(False)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    why_no_sanitizer = external_programs.problem("compute-sanitizer")
    sanitizer = None if why_no_sanitizer else external_programs.command("compute-sanitizer")
    report = {"device": torch.cuda.get_device_name(device), "arch": arch, "torch": torch.__version__, "forms": {}}
    lines, status = [], 0
    # the Gluon forms of the device's ARCH (a Hopper form's own ARCH: bench/hopper_safety.py)
    for record in (f for f in sub.KERNEL_FORMS if f.language == "gluon" and not f.gluon_arch):
        route, unforced_route = f"triton_{record.kv_format}:{record.name}", f"triton_{record.kv_format}"
        print(f"== {route} forced", flush=True)
        rows = run_routes(sub, sizes, [route], [], with_auto=False)
        missed = [r["case"] for r in rows if r["status"] != "PASS"]
        print(f"== {unforced_route} unforced on the cases {route} did not pass: {missed}", flush=True)
        unforced_rows = run_routes(sub, sizes, [unforced_route], missed, with_auto=False) if missed else []
        unforced_rows = [r for r in unforced_rows if r["case"] in missed]
        comparison = compare_forced(rows, unforced_rows)
        if sanitizer:
            print(f"== {route} under compute-sanitizer memcheck", flush=True)
            checked = memcheck(route, out_dir / f"memcheck_{record.kv_format}_{record.name}", sanitizer)
        else:
            checked = {"status": "NOT RUN", "why": why_no_sanitizer}
        line = summary_line(route, rows, comparison, checked)
        lines.append(line)
        print(line, flush=True)
        report["forms"][route] = {"rows": rows, "unforced_rows": unforced_rows, "comparison": comparison,
                                  "memcheck": checked, "summary": line}
        if comparison["short"] or checked["status"] not in ("CLEAN", "NOT RUN") or status_counts(rows)["FAIL"]:
            status = 1
        # written after each form: a run cut short keeps what it finished
        (out_dir / "gluon_forms.json").write_text(json.dumps(report, indent=1) + "\n")
        (out_dir / "gluon_forms.txt").write_text("\n".join(lines) + "\n")
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory for robustness_gpu.json")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes; runs on the CPU")
    parser.add_argument("--routes", default=",".join(ROUTES), help="comma-separated subset")
    parser.add_argument("--cases", default="", help="only cases whose name contains one of these (comma-separated)")
    parser.add_argument("--forced-only", action="store_true", help="the routes given, without the automatic route")
    parser.add_argument("--gluon-forms", action="store_true",
                        help="each Gluon form forced, against its route unforced, and under compute-sanitizer "
                             "memcheck (GPU only): DIR/gluon_forms.json and a line a form")
    args = parser.parse_args(argv)
    if args.gluon_forms:
        return run_gluon_forms(args)
    device = get_device()
    if device.type != "cuda" and not args.smoke:
        parser.error("no CUDA device: run with --smoke on the CPU")
    if device.type != "cuda":
        # Before submission (and so triton) is imported: Triton reads it at decoration.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import submission as sub

    sizes = Sizes(args.smoke)
    filters = [f for f in args.cases.split(",") if f]
    if args.smoke:
        sub.PLAN_CACHE_SIZE = 8  # the bound's logic, not its value, is what smoke checks
    rows = run_routes(sub, sizes, args.routes.split(","), filters, with_auto=not args.forced_only)

    print()
    print_table(rows)
    counts = status_counts(rows)
    print("\n" + ", ".join(f"{n} {s}" for s, n in counts.items())
          + "  (REFUSED: a forced route failed its verification on this input and said so)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "smoke": args.smoke, "torch": torch.__version__,
              "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
              "plan_cache_size": sub.PLAN_CACHE_SIZE, "rows": rows, "counts": counts}
    (out_dir / "robustness_gpu.json").write_text(json.dumps(report, indent=1) + "\n")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
