"""Sweep of the Triton MXFP4 / fp8 decode kernels: correctness and device time per launch config.

GPU:   python3 -m bench.kernel_sweep [--out DIR]       (writes DIR/kernel_sweep.json)
       python3 -m bench.kernel_sweep --candidates      (every launch the autopick offers on this
                                                      device and on the MI355X: DIR/kernel_candidates.json)
Smoke: python3 -m bench.kernel_sweep --smoke          (CPU, Triton interpreter, tiny shapes:
                                                      proves the script runs end to end)
ncu:   ncu --clock-control none -k regex:_mla_decode python3 -m bench.kernel_sweep --profile-best DIR/kernel_sweep.json

Per benchmark shape and format it
  1. quantizes unit-variance bf16 KV with reference.py's quantizers (fp8 per tensor;
     MXFP4 by aiter's current rule) and checks each config against fp32
     attention on the same dequantized data (max abs error, output poisoned first, and
     again after the timed calls);
  2. times device time per call: the launcher replayed from a CUDA graph, rotating over
     enough copies of the inputs that they do not fit the 60 MB L2;
  3. sweeps splits at two tiles, then more tiles and stages at the best splits, then the
     best with the in-kernel split combine (one launch);
  4. times the best config and the launcher's default (launch_candidates()[0])
     on the leaderboard's clock (its harness's 64 GB randn flush, then CUDA events around
     the Python call), beside one trivial Triton launch timed the same way.
bytes = KV bytes the format must read (MXFP4: 288 + 18 scale bytes a row; fp8: 576).
Its H200 runs chose the launch rule of launch_candidates (results/2026-11-29-h200-*;
the latest: results/2026-11-29-h200-combine-kernel).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

if "--smoke" in sys.argv:  # before the first import of triton, also in spawned workers
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import reference  # noqa: E402
import submission as sub  # noqa: E402
from submission import KernelLaunch  # noqa: E402
from tools import leaderboard  # noqa: E402
from tools.leaderboard import BENCHMARK_SHAPES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

HEADS, DIM, NOPE = 16, 576, 512
SM_SCALE = DIM ** -0.5
ROOFLINE_BPS = 3.96e12
L2_BYTES = 60 << 20
SMOKE_SHAPES = [(2, 40), (3, 70)]
FORMATS = ("mxfp4", "fp8")


# ------------------------------------------------------------------ inputs and reference
def attention_fp32(q, kv, batch, length):
    k = kv.reshape(batch, length, DIM).float()
    p = torch.softmax(torch.bmm(q.float(), k.transpose(1, 2)) * SM_SCALE, dim=-1)
    return torch.bmm(p, k[:, :, :NOPE])


class Problem:
    """One shape: inputs in both formats (several copies for L2 rotation) and references."""

    def __init__(self, batch, length, device, copies):
        gen = torch.Generator(device=device).manual_seed(batch * 100003 + length)
        self.batch, self.length = batch, length
        rows = batch * length
        self.qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=device)
        self.kv_indptr = torch.arange(batch + 1, dtype=torch.int32, device=device) * length
        self.copies = {"mxfp4": [], "fp8": []}
        self.ref = {}
        for i in range(copies):
            q = torch.randn(batch, HEADS, DIM, generator=gen, device=device).bfloat16()
            kv = torch.randn(rows, DIM, generator=gen, device=device).bfloat16()
            fp4, scales = reference.quantize_mxfp4(kv.reshape(rows, 1, DIM))
            fp8, fp8_scale = reference.quantize_fp8(kv.reshape(rows, 1, DIM))
            self.copies["mxfp4"].append((q, fp4, scales))
            self.copies["fp8"].append((q, fp8, fp8_scale))
            if i == 0:
                mxfp4 = reference.dequantize_mxfp4(fp4, scales, (rows, 1, DIM), torch.float32)
                self.ref["mxfp4"] = attention_fp32(q, mxfp4, batch, length)
                self.ref["fp8"] = attention_fp32(q, fp8.reshape(rows, DIM).float() * fp8_scale, batch, length)
            del kv
        self.bytes = {"mxfp4": rows * (288 + 18), "fp8": rows * DIM}


# ------------------------------------------------------------------ one call
def decode(fmt, problem_args, out, scratch, launch):
    """One call through the submission's public launchers."""
    q, buf, scale, qo, kvi = problem_args
    if fmt == "mxfp4":
        sub.mxfp4_decode(q, buf, scale, qo, kvi, SM_SCALE, out, scratch, launch)
    else:
        sub.fp8_decode(q, buf, scale, qo, kvi, SM_SCALE, out, scratch, launch)


def compiled_kernel(fmt, problem_args, out, scratch, launch):
    """The same call's decode kernel, launched through the JIT, which returns Triton's
    compiled kernel (registers and spills for the log)."""
    q, buf, scale, qo, kvi = problem_args
    if fmt == "mxfp4":
        buf, scale = sub._mxfp4_operands(buf, scale, launch)
    arguments = sub.decode_arguments(fmt, launch, q, buf, scale, SM_SCALE, scratch)
    decode = sub.decode_calls(fmt, launch, arguments, q, buf, scale, qo, kvi, out)[0]
    return decode.kernel[decode.grid](**decode.arguments, **decode.options)


# ------------------------------------------------------------------ timing
def device_time_us(fn_per_copy, n_copies, device):
    """Median per-call time of a CUDA graph of back-to-back calls over rotating inputs."""
    if device.type != "cuda":
        t = time.perf_counter()
        fn_per_copy(0)
        return (time.perf_counter() - t) * 1e6
    n_calls = max(n_copies, 20)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(min(n_copies, 3)):
            fn_per_copy(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(n_calls):
            fn_per_copy(i % n_copies)
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(7):
        samples.append(leaderboard.event_us(graph.replay) / n_calls)
    return statistics.median(samples)


def leaderboard_time_us(fn, device, runs=40):
    """On the leaderboard's clock (tools/leaderboard.py: its harness's flush, events around the call)."""
    if device.type != "cuda":
        return device_time_us(lambda i: fn(), 1, device)
    return statistics.mean(leaderboard.leaderboard_clock_us(fn, runs + 3)[0][3:])


@triton.jit
def _trivial_kernel(x_ptr):
    tl.store(x_ptr, 1.0)


def measure_read_bandwidth(device):
    return leaderboard.measure_read_bandwidth(gib=2.0) if device.type == "cuda" else float("nan")


# ------------------------------------------------------------------ configs
def split_choices(batch, length, smoke):
    if smoke:
        return [1, 3]
    return [s for s in (1, 2, 4, 8, 16, 32, 64) if length // s >= 64 and batch * s <= 4 * 132]


BASE_TILES = [(32, 4), (64, 8)]   # (block_n, warps), swept over splits
EXTRA_TILES = [(64, 4), (32, 8)]  # tried at the best splits
STAGES = (1, 2, 3)


def default_stages(fmt):
    return 1 if fmt == "mxfp4" else 3


def all_compile_configs():
    """Every (format, launch) the sweep is likely to run, for the parallel precompile."""
    return [(fmt, KernelLaunch(splits, bn, warps, stages, in_kernel))
            for fmt in FORMATS for bn, warps in BASE_TILES + EXTRA_TILES for stages in STAGES
            for splits, in_kernel in ((1, False), (2, False), (2, True))]


def _precompile_one(job):
    fmt, launch, device = job
    problem = Problem(2, 128, torch.device(device), 1)
    return run_config(problem, fmt, launch, torch.device(device), timed=False)


def precompile(jobs):
    """Fill Triton's disk cache from several processes; the sweep then only loads."""
    ctx = multiprocessing.get_context("spawn")
    t = time.time()
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1), mp_context=ctx) as pool:
        for row in pool.map(_precompile_one, jobs):  # (format, launch, device)
            if "error" in row:
                print("precompile failed:", json.dumps(row), flush=True)
    print(f"precompiled {len(jobs)} kernels in {time.time() - t:.0f} s", flush=True)


# ------------------------------------------------------------------ one measurement
def run_config(problem, fmt, launch, device, timed=True):
    scratch = sub.make_split_scratch(problem.batch, launch, device)
    out = torch.empty((problem.batch, HEADS, NOPE), dtype=torch.bfloat16, device=device)
    copies = problem.copies[fmt]

    def args(i):
        q, buf, scale = copies[i]
        return q, buf, scale, problem.qo_indptr, problem.kv_indptr

    def call(i):
        decode(fmt, args(i), out, scratch, launch)

    def error():  # poisoned output, so an unwritten element shows as nan
        out.fill_(float("nan"))
        call(0)
        err = (out.float() - problem.ref[fmt]).abs().max().item()
        return err if err == err else float("inf")

    def relative_rms_error():
        out.fill_(float("nan"))
        call(0)
        ref = problem.ref[fmt]
        return ((out.float() - ref).pow(2).mean() / ref.pow(2).mean()).sqrt().item()

    row = {"format": fmt, "form": sub.form_of_launch(fmt, launch).name, "batch": problem.batch, "kv_len": problem.length,
           "num_splits": launch.num_splits, "block_n": launch.block_n, "num_warps": launch.num_warps,
           "num_stages": launch.num_stages, "combine_in_kernel": launch.combine_in_kernel,
           "waves_per_eu": launch.waves_per_eu}
    try:
        err = error()
        row["relative_rms_err"] = relative_rms_error()
        if timed:
            us = device_time_us(call, len(copies), device)
            err = max(err, error())  # again after many calls
            row.update(device_us=us, gbps=problem.bytes[fmt] / us / 1e3,
                       roofline_pct=100 * problem.bytes[fmt] / ROOFLINE_BPS / (us * 1e-6))
            if device.type == "cuda":
                kernel = compiled_kernel(fmt, args(0), out, scratch, launch)
                row.update(n_regs=kernel.n_regs, n_spills=kernel.n_spills)
        row["max_abs_err"] = err
    except Exception as exc:  # a config that fails to compile or run is reported, not fatal
        row.update(error=f"{type(exc).__name__}: {str(exc)[:300]}", device_us=float("inf"))
    return row


def leaderboard_row(problem, fmt, launch, device):
    """Leaderboard-style time of one config, allocating the output as a route does."""
    scratch = sub.make_split_scratch(problem.batch, launch, device)
    q, buf, scale = problem.copies[fmt][0]

    def call():
        out = torch.empty((problem.batch, HEADS, NOPE), dtype=torch.bfloat16, device=device)
        decode(fmt, (q, buf, scale, problem.qo_indptr, problem.kv_indptr), out, scratch, launch)

    try:
        return leaderboard_time_us(call, device)
    except Exception:  # already reported in its row
        return float("inf")


def launch_of(row):
    return KernelLaunch(row["num_splits"], row["block_n"], row["num_warps"], row["num_stages"],
                        row["combine_in_kernel"], row.get("form", ""),
                        row.get("waves_per_eu", 0))


def candidate_launches(fmt, batch, length, device):
    """Every launch the autopick offers here, then the MI355X's (its AMD-only option
    dropped off ROCm), without repeats."""
    num_sms, arch = sub.device_arch(device)
    here = sub.launch_candidates(fmt, batch, length, num_sms, arch)
    mi355x = sub.launch_candidates(fmt, batch, length, 256, "gfx950")
    if arch.name != "gfx950":  # the AMD option and gfx950's convert instruction stay on the MI355X
        mi355x = [dataclasses.replace(launch, waves_per_eu=0, hw_convert=False) for launch in mi355x]
    return list(dict.fromkeys(here + mi355x))


def candidates_shape(problem, fmt, device, log):
    """Device time and error of every candidate launch (--candidates)."""
    rows = []
    for launch in candidate_launches(fmt, problem.batch, problem.length, device):
        rows.append(run_config(problem, fmt, launch, device))
        log(rows[-1])
    return rows


def sweep_shape(problem, fmt, device, smoke, log):
    rows = []
    best = None
    stages = default_stages(fmt)

    def run(launch):
        nonlocal best
        row = run_config(problem, fmt, launch, device)
        rows.append(row)
        log(row)
        if best is None or row["device_us"] < best["device_us"]:
            best = row
        return row

    for splits in split_choices(problem.batch, problem.length, smoke):
        for bn, warps in BASE_TILES:
            run(KernelLaunch(splits, bn, warps, stages))
    splits = best["num_splits"]
    for bn, warps in EXTRA_TILES[:1] if smoke else EXTRA_TILES:
        run(KernelLaunch(splits, bn, warps, stages))
    for other in STAGES:
        if other != best["num_stages"]:
            run(KernelLaunch(splits, best["block_n"], best["num_warps"], other))
    if best["num_splits"] > 1:  # the one-launch form of the best (device time favours the two-launch form)
        run(dataclasses.replace(launch_of(best), combine_in_kernel=True))
    best_launch = launch_of(best)
    default = sub.launch_candidates(fmt, problem.batch, problem.length, 132)[0]
    default_row = next((r for r in rows if "error" not in r and launch_of(r) == default), None) or run_config(
        problem, fmt, default, device)
    default_row = dict(default_row, leaderboard_us=leaderboard_row(problem, fmt, default, device))
    best = dict(best, leaderboard_us=leaderboard_row(problem, fmt, best_launch, device))
    return rows, best, default_row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "results")))
    parser.add_argument("--no-precompile", action="store_true")
    parser.add_argument("--candidates", action="store_true",
                        help="instead of the sweep: every launch the autopick offers here and on the MI355X")
    parser.add_argument("--profile-best", metavar="JSON",
                        help="run once each best config of the largest shape in JSON (for ncu) and exit")
    args = parser.parse_args()
    if args.profile_best:
        profile_best(args.profile_best)
        return
    device = torch.device("cpu" if args.smoke else "cuda")
    shapes = SMOKE_SHAPES if args.smoke else BENCHMARK_SHAPES
    if args.candidates:
        run_candidates(shapes, device, args)
        return
    if not args.no_precompile:  # the smoke run only proves the worker pool works
        jobs = [job + (device.type,) for job in all_compile_configs()]
        precompile(jobs[:2] if args.smoke else jobs)

    def log(row):
        print(json.dumps(row), flush=True)

    floor = leaderboard_time_us(lambda: _trivial_kernel[(1,)](torch.empty(1, device=device)), device)
    bandwidth = measure_read_bandwidth(device)
    print(f"trivial launch {floor:.1f} us, HBM read {bandwidth / 1e12:.2f} TB/s", flush=True)
    results = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu (interpreter)",
               "torch": torch.__version__, "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "trivial_launch_leaderboard_us": floor, "hbm_read_bps": bandwidth, "rows": [], "summary": []}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / ("kernel_sweep_smoke.json" if args.smoke else "kernel_sweep.json")
    for batch, length in shapes:
        kv_bytes = batch * length * (288 + 18)
        copies = 1 if args.smoke else max(1, min(64, math.ceil(3 * L2_BYTES / kv_bytes)))
        problem = Problem(batch, length, device, copies)
        for fmt in FORMATS:
            rows, best, default_row = sweep_shape(problem, fmt, device, args.smoke, log)
            results["rows"] += rows
            results["summary"].append({"format": fmt, "batch": batch, "kv_len": length, "best": best,
                                       "default": default_row})
        del problem
        if device.type == "cuda":
            torch.cuda.empty_cache()
        path.write_text(json.dumps(results, indent=1))  # after every shape: a timeout keeps what ran
    print_table(results)
    print(f"wrote {path}")


def run_candidates(shapes, device, args):
    results = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu (interpreter)",
               "torch": torch.__version__, "triton": triton.__version__,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": []}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / ("kernel_candidates_smoke.json" if args.smoke else "kernel_candidates.json")
    if not args.no_precompile:  # each kernel once (the split count is not specialized: 1 or 2 stand for all)
        jobs = {(fmt, dataclasses.replace(launch, num_splits=min(launch.num_splits, 2)), device.type)
                for batch, length in shapes for fmt in FORMATS
                for launch in candidate_launches(fmt, batch, length, device)}
        precompile(sorted(jobs, key=str))
    for batch, length in shapes:
        kv_bytes = batch * length * (288 + 18)
        problem = Problem(batch, length, device, 1 if args.smoke else max(1, min(64, math.ceil(3 * L2_BYTES / kv_bytes))))
        for fmt in FORMATS:
            results["rows"] += candidates_shape(problem, fmt, device, lambda row: None)
        del problem
        if device.type == "cuda":
            torch.cuda.empty_cache()
        path.write_text(json.dumps(results, indent=1))
    print(f"{'fmt':5} {'shape':>10} {'form':>18} {'s,bn,w,st':>12} {'dev us':>8} {'%roof':>6} {'max err':>8} {'rel rms':>8}")
    for r in results["rows"]:
        cfg = f"{r['num_splits']},{r['block_n']},{r['num_warps']},{r['num_stages']}{',ik' if r['combine_in_kernel'] else ''}"
        print(f"{r['format']:5} {r['batch']:>4}x{r['kv_len']:<5} {r['form']:>18} {cfg:>12} {r['device_us']:8.1f} "
              f"{r.get('roofline_pct', float('nan')):6.1f} {r.get('max_abs_err', float('nan')):8.4f} "
              f"{r.get('relative_rms_err', float('nan')):8.4f}" + (f"  {r['error']}" if "error" in r else ""))
    print(f"wrote {path}")


def profile_best(path):
    """One call of each format's best config at the largest shape, for ncu to profile."""
    results = json.loads(Path(path).read_text())
    batch, length = BENCHMARK_SHAPES[-1]
    problem = Problem(batch, length, torch.device("cuda"), 1)
    for summary in results["summary"]:
        if (summary["batch"], summary["kv_len"]) == (batch, length):
            b = summary["best"]
            launch = launch_of(b)
            row = run_config(problem, summary["format"], launch, torch.device("cuda"), timed=False)
            print("profiled", json.dumps(row), flush=True)


def print_table(results):
    nan = float("nan")
    print(f"\n{results['device']}  trivial launch {results['trivial_launch_leaderboard_us']:.1f} us  "
          f"HBM read {results['hbm_read_bps'] / 1e12:.2f} TB/s  (roofline at 3.96 TB/s)")
    print(f"{'fmt':5} {'shape':>10} {'best s,bn,w,st':>14} {'dev us':>8} {'%roof':>6} {'err':>7} {'lb us':>7} | "
          f"{'default':>14} {'dev us':>8} {'lb us':>7}")

    def cfg(r):
        return f"{r['num_splits']},{r['block_n']},{r['num_warps']},{r['num_stages']}{',ik' if r['combine_in_kernel'] else ''}"

    for s in results["summary"]:
        b, d = s["best"], s["default"]
        print(f"{s['format']:5} {s['batch']:>4}x{s['kv_len']:<5} {cfg(b):>14} {b['device_us']:8.1f} "
              f"{b.get('roofline_pct', nan):6.1f} {b.get('max_abs_err', nan):7.4f} {b['leaderboard_us']:7.1f} | "
              f"{cfg(d):>14} {d['device_us']:8.1f} {d['leaderboard_us']:7.1f}")
    failed = [r for r in results["rows"] if "error" in r]
    worst = max((r["max_abs_err"] for r in results["rows"] if "error" not in r), default=nan)
    print(f"{len(results['rows'])} configs run, {len(failed)} failed, worst max abs err {worst:.4f}")


if __name__ == "__main__":
    main()
