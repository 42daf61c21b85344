"""The a8w8 route's per-call Q quantization on the GPU: bit-exactness and device time.

GPU only. From the repository root:
    python3 -m bench.q_quant_time --out "$OUT"
writes $OUT/q_quant_time.json and $OUT/q_quant_time.md and prints the tables.

1. Bit-exactness on the 8 benchmark inputs (reference.generate_input with task.yml's
   benchmark seeds): submission.quantize_q_fp8 (new buffers) and quantize_q_fp8_into
   (plan buffers, as the aiter route calls it) against reference.quantize_fp8 on the same
   device, bytes and scale bits; the reference on the GPU against itself on the CPU; and
   how far the old torch sequence ("before") is from the reference.
2. Time of one quantization of each benchmark Q, before (the torch sequence the aiter
   route ran until this script's commit: abs, amax, divide, clamp, then q / scale, clamp,
   cast, in fp32) and after (submission's two Triton launches into plan buffers), median
   of --runs, in us, on tools/leaderboard.py's two clocks:
   - leaderboard: as upstream's harness times a call: synchronize, utils.clear_l2_cache_large
     (the harness's 64 GB randn), start event, the call, end event, synchronize, with no
     synchronize between the flush and the start event. The flush keeps the GPU busy for
     milliseconds (its device time is measured and recorded; the script refuses a flush
     under 1 ms), so the host has queued the call before the GPU reaches it and the events
     read device time: the kernels and the gaps between them, not the host's Python.
   - graph: the same call captured in a CUDA graph, replayed between events after the
     same flush.
   The after form is also timed on the graph clock at other block sizes (elements a
   program handles per step), to see whether the default (submission.Q_FP8_BLOCK) matters.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
from pathlib import Path

import torch
import triton
import yaml

import reference
import submission
import utils
from tools import leaderboard as clocks

ROOT = Path(__file__).resolve().parent.parent

FLUSH_MIN_DEVICE_US = 1000.0
OTHER_BLOCKS = (2048, 8192, 16384)


def quantize_before(q, fp8_dtype):
    """AiterRunner._quantize_q as it was before the Triton quantizer (commit cc57055)."""
    fp8_max = torch.finfo(fp8_dtype).max
    scale = (q.abs().amax().float() / fp8_max).clamp_(min=1e-12).reshape(1)
    q_fp8 = (q.float() / scale).clamp_(-fp8_max, fp8_max).to(fp8_dtype)
    return q_fp8, scale


def benchmark_cases() -> list[dict]:
    return yaml.safe_load((ROOT / "task.yml").read_text())["benchmarks"]


def device_us_of(work, repeats: int = 5) -> float:
    """Median device time of `work` alone (synchronized before and after)."""
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        samples.append(clocks.event_us(work))
    return statistics.median(samples)


def leaderboard_clock_us(call, runs: int) -> float:
    return statistics.median(clocks.leaderboard_clock_us(call, runs)[0])


def _bytes(q_fp8) -> torch.Tensor:
    return q_fp8.view(torch.uint8)


def benchmark_q(case: dict) -> torch.Tensor:
    """The Q of one benchmark input, as the harness generates it (the KV is dropped)."""
    return reference.generate_input(case["batchsize"], case["qseqlen"], case["kvseqlen"], case["seed"])[0]


def check_exact(case: dict, q) -> dict:
    """Bit-exactness on one benchmark Q; returns its row of the exactness table."""
    fp8_dtype = reference.FP8_DTYPE
    want_bytes, want_scale = reference.quantize_fp8(q)
    public = submission.quantize_q_fp8(q, fp8_dtype)
    scratch = submission.make_q_fp8_scratch(q.shape, fp8_dtype, q.device)
    planned = submission.quantize_q_fp8_into(q, scratch)
    cpu_bytes, cpu_scale = reference.quantize_fp8(q.cpu())
    before_bytes, before_scale = quantize_before(q, fp8_dtype)

    def same(got):
        return (torch.equal(_bytes(got[0]), _bytes(want_bytes))
                and torch.equal(got[1].view(torch.int32), want_scale.view(torch.int32)))

    return {
        **case, "q_shape": list(q.shape), "fp8_dtype": str(fp8_dtype),
        "scale": want_scale.item(),
        "quantize_q_fp8_exact": same(public),
        "quantize_q_fp8_into_exact": same(planned),
        "reference_gpu_equals_cpu": same((cpu_bytes.cuda(), cpu_scale.cuda())),
        "before_bytes_differing": int((_bytes(before_bytes) != _bytes(want_bytes)).sum()),
        "before_scale": before_scale.item(),
    }


def time_shape(case: dict, q, runs: int) -> dict:
    fp8_dtype = reference.FP8_DTYPE
    scratch = submission.make_q_fp8_scratch(q.shape, fp8_dtype, q.device)
    before = lambda: quantize_before(q, fp8_dtype)  # noqa: E731
    after = lambda: submission.quantize_q_fp8_into(q, scratch)  # noqa: E731
    for call in (before, after):
        call()
    row = {"batch": case["batchsize"], "kv_len": case["kvseqlen"], "q_shape": list(q.shape),
           "programs": scratch.programs, "block": scratch.block,
           "before_leaderboard_us": leaderboard_clock_us(before, runs),
           "after_leaderboard_us": leaderboard_clock_us(after, runs),
           "before_graph_us": clocks.device_us(before, runs),
           "after_graph_us": clocks.device_us(after, runs)}
    for block in OTHER_BLOCKS:
        other = submission.make_q_fp8_scratch(q.shape, fp8_dtype, q.device, block=block)
        row[f"after_graph_us_block_{block}"] = clocks.device_us(
            lambda: submission.quantize_q_fp8_into(q, other), runs)
    return row


def tables(report: dict) -> str:
    lines = [f"Q quantization, {report['device']} (torch {report['torch']}, triton {report['triton']}), "
             f"{report['date']}; flush '{report['flush']}' keeps the GPU busy {report['flush_device_us']:.0f} us; "
             f"median of {report['runs']} runs, us.", "",
             "| batch | kv_len | Q shape | exact (public / plan) | ref GPU = CPU | before: bytes off the ref "
             "| before leaderboard | after leaderboard | before graph | after graph |",
             "|---:|---:|---|---|---|---:|---:|---:|---:|---:|"]
    for check, row in zip(report["exactness"], report["timing"]):
        lines.append(
            f"| {row['batch']} | {row['kv_len']} | {tuple(row['q_shape'])} | "
            f"{check['quantize_q_fp8_exact']} / {check['quantize_q_fp8_into_exact']} | "
            f"{check['reference_gpu_equals_cpu']} | {check['before_bytes_differing']} | "
            f"{row['before_leaderboard_us']:.1f} | {row['after_leaderboard_us']:.1f} | "
            f"{row['before_graph_us']:.1f} | {row['after_graph_us']:.1f} |")
    g = {key: clocks.geomean([row[key] for row in report["timing"]]) for key in
         ("before_leaderboard_us", "after_leaderboard_us", "before_graph_us", "after_graph_us")}
    lines.append(f"| geomean | | | | | | {g['before_leaderboard_us']:.1f} | {g['after_leaderboard_us']:.1f} | "
                 f"{g['before_graph_us']:.1f} | {g['after_graph_us']:.1f} |")
    blocks = (report["default_block"],) + OTHER_BLOCKS
    lines += ["", "After, graph clock, by block (elements a program handles per step):", "",
              "| batch | kv_len | " + " | ".join(str(b) for b in blocks) + " |",
              "|---:|---:|" + "---:|" * len(blocks)]
    for row in report["timing"]:
        values = [row["after_graph_us"]] + [row[f"after_graph_us_block_{b}"] for b in OTHER_BLOCKS]
        lines.append(f"| {row['batch']} | {row['kv_len']} | " + " | ".join(f"{v:.1f}" for v in values) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU")
    args.out.mkdir(parents=True, exist_ok=True)
    utils.clear_l2_cache_large()
    flush_us = device_us_of(utils.clear_l2_cache_large)
    if flush_us < FLUSH_MIN_DEVICE_US:
        raise SystemExit(f"utils.clear_l2_cache_large keeps the GPU busy only {flush_us:.0f} us: the host's "
                         f"time would show in the events")
    exactness, timing = [], []
    for case in benchmark_cases():
        q = benchmark_q(case)
        exactness.append(check_exact(case, q))
        timing.append(time_shape(case, q, args.runs))
        row = exactness[-1]
        print(f"{case['batchsize']}x{case['kvseqlen']}: exact public {row['quantize_q_fp8_exact']}, "
              f"plan {row['quantize_q_fp8_into_exact']}; ref GPU=CPU {row['reference_gpu_equals_cpu']}; timed",
              flush=True)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "flush": "utils", "flush_device_us": flush_us, "runs": args.runs,
              "default_block": submission.Q_FP8_BLOCK, "exactness": exactness, "timing": timing,
              "all_exact": all(row["quantize_q_fp8_exact"] and row["quantize_q_fp8_into_exact"]
                               for row in exactness)}
    (args.out / "q_quant_time.json").write_text(json.dumps(report, indent=1))
    text = tables(report)
    (args.out / "q_quant_time.md").write_text(text + "\n")
    print(text)
    if not report["all_exact"]:
        raise SystemExit("NOT bit-exact on every benchmark input (see the table)")


if __name__ == "__main__":
    main()
