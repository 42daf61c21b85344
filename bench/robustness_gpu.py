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
  misaligned_after_aligned  the same plan fed inputs whose addresses are not 16-byte
                 aligned after an aligned first call (Triton specializes on alignment)
plus, for the automatic route, plan_cache_bound (more distinct shapes than
PLAN_CACHE_SIZE: the cache stays at its bound and memory stops growing); --no-auto leaves the
automatic route out (a run of forced forms alone). A route or form that cannot run on this
machine (a Gluon form on a CPU or under the interpreter, a Hopper form off sm_90) is SKIP,
with the submission's reason.

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
import sys
import time
import tracemalloc
from pathlib import Path

import torch

import reference
from reference import check_implementation, generate_input
from tools.robustness import (ALIGNMENT_REFUSAL, MAGNITUDES, NONFINITE, ROUTES, Sizes, exact_attention,
                              exact_attention_ieee, format_read_by, mxfp4_only, oracle_mismatch, oracle_tolerance,
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
            return "REFUSED", str(error)[:200]
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
    if route == "auto":
        cases = {"plan_cache_bound": case_plan_cache_bound, "ragged": case_ragged}
        cases.update({f"magnitude/{name}": case_magnitude(name) for name in MAGNITUDES})
        cases.update({f"nonfinite/{name}": case_nonfinite(name) for name in NONFINITE})
        return cases
    cases = {"memory_flat": case_memory_flat, "recheck": case_recheck, "ragged": case_ragged,
             "noncontiguous_q": case_noncontiguous_q, "misaligned_after_aligned": case_misaligned_after_aligned}
    cases.update({f"magnitude/{name}": case_magnitude(name) for name in MAGNITUDES})
    cases.update({f"nonfinite/{name}": case_nonfinite(name) for name in NONFINITE})
    if base_route(route) in READS_MXFP4:
        cases.update(padded_scales=case_padded_scales, uint8_spelling=case_uint8_spelling)
    if base_route(route) in READS_FP8:
        cases["fnuz"] = case_fnuz
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
        elif route.startswith("triton") and not hasattr(sub, "triton_mxfp4_decode"):
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory for robustness_gpu.json")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes; runs on the CPU")
    parser.add_argument("--routes", default=",".join(ROUTES), help="comma-separated subset")
    parser.add_argument("--cases", default="", help="only cases whose name contains one of these (comma-separated)")
    parser.add_argument("--no-auto", action="store_true", help="leave the automatic route's cases out")
    args = parser.parse_args(argv)
    device = get_device()
    if device.type != "cuda" and not args.smoke:
        parser.error("no CUDA device: run with --smoke on the CPU")
    if device.type != "cuda":
        # Before submission (and so triton) is imported: Triton reads it at decoration.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import submission as sub

    sizes = Sizes(args.smoke)
    filters = [f for f in args.cases.split(",") if f]
    why_not = available_routes(sub, device, args.routes.split(","))
    rows = []
    if args.smoke:
        sub.PLAN_CACHE_SIZE = 8  # the bound's logic, not its value, is what smoke checks
    plan = []
    for route in ([] if args.no_auto else ["auto"]) + args.routes.split(","):
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

    print()
    print_table(rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("PASS", "REFUSED", "FAIL", "SKIP")}
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
