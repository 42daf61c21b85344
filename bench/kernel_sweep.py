"""Sweep of the Triton MXFP4 / fp8 decode kernels: correctness and device time per launch config.

GPU:   python bench/kernel_sweep.py [--out DIR]       (writes DIR/kernel_sweep.json)
Smoke: python bench/kernel_sweep.py --smoke          (CPU, Triton interpreter, tiny shapes:
                                                      proves the script runs end to end)

Per benchmark shape and format it
  1. quantizes unit-variance bf16 KV (fp8 per tensor; MXFP4 with the scale rule of
     PROBLEM.md and round-to-nearest codes) and checks each config against fp32
     attention on the same dequantized data (max abs error);
  2. times device time per call: the launcher replayed from a CUDA graph, rotating over
     enough copies of the inputs that they do not fit the 60 MB L2;
  3. sweeps splits at a default tile, then tiles / warps / stages at the best splits;
  4. compares the two split combines: in-kernel (last program merges, one launch)
     against a second reduce kernel, in device time and leaderboard-style time (CUDA
     events around the Python call, L2 flushed first), beside one trivial Triton launch.
bytes = KV bytes the format must read (MXFP4: 288 + 18 scale bytes a row; fp8: 576).
"""
from __future__ import annotations

import argparse
import concurrent.futures
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import submission as sub  # noqa: E402
from submission import TritonLaunch, _combine_splits  # noqa: E402

HEADS, DIM, NOPE = 16, 576, 512
SM_SCALE = DIM ** -0.5
ROOFLINE_BPS = 3.96e12
L2_BYTES = 60 << 20
BENCHMARK_SHAPES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192),
                    (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
SMOKE_SHAPES = [(2, 40), (3, 70)]
FORMATS = ("mxfp4", "fp8")
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


# ------------------------------------------------------------------ inputs and reference
def quantize_fp8(kv):
    scale = (kv.abs().amax().float() / 448.0).reshape(1)
    return (kv.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn), scale


def quantize_mxfp4(kv):
    """(rows, 576) -> bytes (rows, 1, 288), e8m0 scales (rows, 18) uint8."""
    rows = kv.shape[0]
    blocks = kv.float().reshape(rows, 18, 32)
    amax_bits = blocks.abs().amax(-1).view(torch.int32)
    exponent = ((((amax_bits + 0x200000) >> 23) & 0xFF) - 127 - 2).clamp(-127, 127)
    scaled = blocks * torch.exp2(-exponent.float())[..., None]
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=kv.device)
    codes = torch.bucketize(scaled.abs(), mids).to(torch.uint8) | ((scaled < 0).to(torch.uint8) << 3)
    codes = codes.reshape(rows, 288, 2)
    packed = codes[..., 0] | (codes[..., 1] << 4)
    return packed.reshape(rows, 1, 288), (exponent + 127).to(torch.uint8)


def dequant_mxfp4(packed, scales):
    rows = packed.shape[0]
    b = packed.reshape(rows, 288).long()
    codes = torch.stack([b & 15, b >> 4], -1).reshape(rows, DIM)
    lut = torch.tensor(E2M1, device=packed.device)
    values = lut[codes & 7] * (1 - 2 * (codes >> 3)).float()
    return values * torch.repeat_interleave(torch.exp2(scales.float() - 127), 32, dim=1)


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
            fp4, scales = quantize_mxfp4(kv)
            fp8, fp8_scale = quantize_fp8(kv.reshape(rows, 1, DIM))
            self.copies["mxfp4"].append((q, fp4, scales))
            self.copies["fp8"].append((q, fp8, fp8_scale))
            if i == 0:
                self.ref["mxfp4"] = attention_fp32(q, dequant_mxfp4(fp4, scales), batch, length)
                self.ref["fp8"] = attention_fp32(q, fp8.reshape(rows, DIM).float() * fp8_scale, batch, length)
            del kv
        self.bytes = {"mxfp4": rows * (288 + 18), "fp8": rows * DIM}


# ------------------------------------------------------------------ the two combines
@triton.jit
def _reduce_splits_kernel(part_o_ptr, part_lse_ptr, qo_indptr_ptr, out_ptr, total_q, num_splits,
                          stride_o_tok, stride_o_head, HEADS_PER_PROGRAM: tl.constexpr):
    b = tl.program_id(0)
    head0 = tl.program_id(1) * HEADS_PER_PROGRAM
    o = _combine_splits(part_o_ptr, part_lse_ptr, b, num_splits, head0, HEADS_PER_PROGRAM)
    q_row = tl.minimum(tl.maximum(tl.load(qo_indptr_ptr + b), 0), total_q - 1)
    heads = head0 + tl.arange(0, HEADS_PER_PROGRAM)
    cols = tl.arange(0, 512)
    tl.store(out_ptr + q_row.to(tl.int64) * stride_o_tok + heads[:, None] * stride_o_head + cols[None, :],
             o.to(out_ptr.dtype.element_ty))


def decode(fmt, problem_args, out, scratch, launch, fused=True):
    """One call of a kernel route: fused = the submission's launcher (one launch);
    not fused = the same kernel without its in-kernel combine, then a reduce kernel."""
    q, buf, scale, qo, kvi = problem_args
    if fused:
        if fmt == "mxfp4":
            sub.triton_mxfp4_decode(q, buf, scale, qo, kvi, SM_SCALE, out, scratch, launch)
        else:
            sub.triton_fp8_decode(q, buf, scale, qo, kvi, SM_SCALE, out, scratch, launch)
        return
    launch_kernel_directly(fmt, problem_args, out, scratch, launch, fused=False)
    if launch.num_splits > 1:
        batch = kvi.shape[0] - 1
        _reduce_splits_kernel[(batch, 4)](scratch.part_o, scratch.part_lse, qo, out, q.shape[0],
                                          launch.num_splits, out.stride(0), out.stride(1),
                                          HEADS_PER_PROGRAM=4, num_warps=4)


def launch_kernel_directly(fmt, problem_args, out, scratch, launch, fused):
    """The submission's kernel with the combine chosen here; returns Triton's compiled
    kernel (registers and spills for the log)."""
    q, buf, scale, qo, kvi = problem_args
    is_mxfp4 = fmt == "mxfp4"
    return sub._mla_decode_kernel[(launch.num_splits, kvi.shape[0] - 1)](
        q, buf, scale, qo, kvi, out, scratch.part_o, scratch.part_lse, scratch.counters,
        SM_SCALE * sub._LOG2E, q.shape[0], buf.shape[0], launch.num_splits,
        q.stride(0), q.stride(1), buf.stride(0), scale.stride(0) if is_mxfp4 else 0,
        scale.stride(1) if is_mxfp4 else 0, out.stride(0), out.stride(1),
        IS_MXFP4=is_mxfp4, SPLIT=launch.num_splits > 1, BLOCK_N=launch.block_n,
        DOT_DTYPE=sub._TRITON_DOT_DTYPE, FUSED_COMBINE=fused, MMA_FORM=sub._TRITON_MMA_FORM,
        num_warps=launch.num_warps, num_stages=launch.num_stages)


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
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / n_calls)
    return statistics.median(samples)


def leaderboard_time_us(fn, device, runs=40):
    """Events around the Python call, L2 flushed before each run (as upstream eval.py)."""
    if device.type != "cuda":
        return device_time_us(lambda i: fn(), 1, device)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=device)
    samples = []
    for _ in range(runs + 3):
        flush.zero_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.mean(samples[3:])


@triton.jit
def _trivial_kernel(x_ptr):
    tl.store(x_ptr, 1.0)


def measure_read_bandwidth(device):
    if device.type != "cuda":
        return float("nan")
    x = torch.ones(1 << 30, dtype=torch.bfloat16, device=device)
    x.sum()
    return x.numel() * 2 / (device_time_us(lambda i: x.sum(), 1, device) * 1e-6)


# ------------------------------------------------------------------ configs
def split_choices(batch, length, smoke):
    if smoke:
        return [1, 3]
    return [s for s in (1, 2, 4, 8, 16, 32, 64) if length // s >= 64 and batch * s <= 4 * 132]


# MMA forms (submission._TRITON_MMA_FORM): 0 heads on M (mma.sync M=16), 1 the same in
# 4 batched chunks of 128 dims (independent MMA chains), 2 tokens on M (wgmma when
# BLOCK_N >= 64). Per form: two base tiles (block_n, warps) swept over splits, then
# more tiles and stages at the best splits.
FORM_TILES = {
    0: ([(32, 4), (64, 8)], [(16, 4), (32, 8), (64, 4)]),
    1: ([(32, 4), (64, 8)], [(16, 4), (32, 8), (64, 4)]),
    2: ([(64, 4), (64, 8)], [(128, 8), (128, 4), (32, 4)]),
}
FORMS = (0, 1, 2)
STAGES = (1, 2, 3)


def all_compile_configs():
    """Every (format, launch, fused, form) the sweep is likely to run, for the precompile."""
    out = []
    for fmt in FORMATS:
        for form in FORMS:
            base, extra = FORM_TILES[form]
            for bn, warps in base + extra:
                for stages in STAGES:
                    for splits in (1, 2):
                        out.append((fmt, TritonLaunch(splits, bn, warps, stages), True, form))
                out.append((fmt, TritonLaunch(2, bn, warps, 1), False, form))
    return out


def _precompile_one(job):
    fmt, launch, fused, form, device = job
    sub._TRITON_MMA_FORM = form
    problem = Problem(2, 128, torch.device(device), 1)
    return run_config(problem, fmt, launch, fused, torch.device(device), timed=False)


def precompile(jobs):
    """Fill Triton's disk cache from several processes; the sweep then only loads."""
    ctx = multiprocessing.get_context("spawn")
    t = time.time()
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1), mp_context=ctx) as pool:
        for row in pool.map(_precompile_one, jobs):  # (format, launch, fused, form, device)
            if "error" in row:
                print("precompile failed:", json.dumps(row), flush=True)
    print(f"precompiled {len(jobs)} kernels in {time.time() - t:.0f} s", flush=True)


# ------------------------------------------------------------------ one measurement
def run_config(problem, fmt, launch, fused, device, timed=True):
    scratch = sub.make_triton_scratch(problem.batch, launch, device)
    out = torch.empty((problem.batch, HEADS, NOPE), dtype=torch.bfloat16, device=device)
    copies = problem.copies[fmt]

    def call(i):
        q, buf, scale = copies[i]
        decode(fmt, (q, buf, scale, problem.qo_indptr, problem.kv_indptr), out, scratch, launch, fused)

    def error():  # poisoned output, so an unwritten element shows as nan
        out.fill_(float("nan"))
        call(0)
        return (out.float() - problem.ref[fmt]).abs().max().item()

    row = {"format": fmt, "batch": problem.batch, "kv_len": problem.length, "fused_combine": fused,
           "mma_form": sub._TRITON_MMA_FORM,
           "num_splits": launch.num_splits, "block_n": launch.block_n, "num_warps": launch.num_warps,
           "num_stages": launch.num_stages}
    try:
        err = error()
        if timed:
            us = device_time_us(call, len(copies), device)
            err = max(err, error())  # again after many calls: counters were reset each time
            row.update(device_us=us, gbps=problem.bytes[fmt] / us / 1e3,
                       roofline_pct=100 * problem.bytes[fmt] / ROOFLINE_BPS / (us * 1e-6))
            if device.type == "cuda":
                q, buf, scale = copies[0]
                k = launch_kernel_directly(fmt, (q, buf, scale, problem.qo_indptr, problem.kv_indptr), out,
                                           scratch, launch, fused)
                row.update(n_regs=k.n_regs, n_spills=k.n_spills)
        row["max_abs_err"] = err if err == err else float("inf")
    except Exception as exc:  # a config that fails to compile or run is reported, not fatal
        row.update(error=f"{type(exc).__name__}: {str(exc)[:300]}", device_us=float("inf"))
    return row


def sweep_form(problem, fmt, form, device, smoke, run):
    sub._TRITON_MMA_FORM = form
    base, extra = FORM_TILES[form]
    best = None

    def keep(row):
        nonlocal best
        if best is None or row["device_us"] < best["device_us"]:
            best = row

    for splits in split_choices(problem.batch, problem.length, smoke):
        for bn, warps in base:
            keep(run(TritonLaunch(splits, bn, warps, 1)))
    splits = best["num_splits"]
    for bn, warps in extra[:1] if smoke else extra:
        keep(run(TritonLaunch(splits, bn, warps, 1)))
    for stages in STAGES[1:]:
        keep(run(TritonLaunch(splits, best["block_n"], best["num_warps"], stages)))
    return best


def sweep_shape(problem, fmt, device, smoke, log):
    rows = []

    def run(launch, fused=True):
        row = run_config(problem, fmt, launch, fused, device)
        rows.append(row)
        log(row)
        return row

    best_by_form = {form: sweep_form(problem, fmt, form, device, smoke, run) for form in FORMS}
    best = min(best_by_form.values(), key=lambda r: r["device_us"])
    sub._TRITON_MMA_FORM = best["mma_form"]
    launch = TritonLaunch(best["num_splits"], best["block_n"], best["num_warps"], best["num_stages"])
    combine = {"launch": launch.__dict__, "mma_form": best["mma_form"]}
    multi = launch if launch.num_splits > 1 else TritonLaunch(
        max(s for s in split_choices(problem.batch, problem.length, smoke)), launch.block_n,
        launch.num_warps, launch.num_stages)
    for fused in (True, False):
        row = run(multi, fused)
        scratch = sub.make_triton_scratch(problem.batch, multi, device)
        q, buf, scale = problem.copies[fmt][0]

        def call():
            out = torch.empty((problem.batch, HEADS, NOPE), dtype=torch.bfloat16, device=device)
            decode(fmt, (q, buf, scale, problem.qo_indptr, problem.kv_indptr), out, scratch, multi, fused)

        key = "fused" if fused else "two_kernels"
        try:
            leaderboard_us = leaderboard_time_us(call, device)
        except Exception:  # already reported in its row
            leaderboard_us = float("inf")
        combine[key] = {"splits": multi.num_splits, "device_us": row["device_us"],
                        "leaderboard_us": leaderboard_us, "max_abs_err": row.get("max_abs_err", float("inf"))}
    sub._TRITON_MMA_FORM = 0
    default_row = run(sub.triton_launch_candidates(fmt, problem.batch, problem.length, 132)[0])
    return rows, best, best_by_form, combine, default_row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "results")))
    parser.add_argument("--no-precompile", action="store_true")
    parser.add_argument("--profile-best", metavar="JSON",
                        help="run once each best config of the largest shape in JSON (for ncu) and exit")
    args = parser.parse_args()
    if args.profile_best:
        profile_best(args.profile_best)
        return
    device = torch.device("cpu" if args.smoke else "cuda")
    shapes = SMOKE_SHAPES if args.smoke else BENCHMARK_SHAPES
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
            rows, best, best_by_form, combine, default_row = sweep_shape(problem, fmt, device, args.smoke, log)
            results["rows"] += rows
            results["summary"].append({"format": fmt, "batch": batch, "kv_len": length, "best": best,
                                       "best_by_form": best_by_form, "default": default_row, "combine": combine})
        del problem
        if device.type == "cuda":
            torch.cuda.empty_cache()
        path.write_text(json.dumps(results, indent=1))  # after every shape: a timeout keeps what ran
    print_table(results)
    print(f"wrote {path}")


def profile_best(path):
    results = json.loads(Path(path).read_text())
    batch, length = BENCHMARK_SHAPES[-1]
    problem = Problem(batch, length, torch.device("cuda"), 1)
    for summary in results["summary"]:
        if (summary["batch"], summary["kv_len"]) != (batch, length):
            continue
        for form, b in sorted(summary["best_by_form"].items()):
            sub._TRITON_MMA_FORM = int(form)
            launch = TritonLaunch(b["num_splits"], b["block_n"], b["num_warps"], b["num_stages"])
            row = run_config(problem, summary["format"], launch, True, torch.device("cuda"), timed=False)
            print("profiled", json.dumps(row), flush=True)


def print_table(results):
    nan = float("nan")
    print(f"\n{results['device']}  trivial launch {results['trivial_launch_leaderboard_us']:.1f} us  "
          f"HBM read {results['hbm_read_bps'] / 1e12:.2f} TB/s  (roofline at 3.96 TB/s)")
    print(f"{'fmt':5} {'shape':>10} {'best f:s,bn,w,st':>17} {'dev us':>7} {'%roof':>5} {'err':>7} "
          f"{'form0':>7} {'form1':>7} {'form2':>7} {'dflt':>7} | {'fused dev/lb':>13} {'2-kern dev/lb':>13}")
    for s in results["summary"]:
        b, c, d = s["best"], s["combine"], s["default"]
        cfg = f"{b['mma_form']}:{b['num_splits']},{b['block_n']},{b['num_warps']},{b['num_stages']}"
        forms = " ".join(f"{s['best_by_form'][f]['device_us']:7.1f}" for f in FORMS)
        f, t = c["fused"], c["two_kernels"]
        print(f"{s['format']:5} {s['batch']:>4}x{s['kv_len']:<5} {cfg:>17} {b['device_us']:7.1f} "
              f"{b.get('roofline_pct', nan):5.1f} {b.get('max_abs_err', nan):7.4f} {forms} {d['device_us']:7.1f} | "
              f"{f['device_us']:6.1f}/{f['leaderboard_us']:6.1f} {t['device_us']:6.1f}/{t['leaderboard_us']:6.1f}")
    failed = [r for r in results["rows"] if "error" in r]
    worst = max((r.get("max_abs_err", 0) for r in results["rows"] if "error" not in r), default=nan)
    print(f"{len(results['rows'])} configs run, {len(failed)} failed, worst max abs err {worst:.4f}")


if __name__ == "__main__":
    main()
