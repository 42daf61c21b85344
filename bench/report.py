"""Benchmark report: per shape, how far the chosen route is from the hardware limit.

Two steps, so the GPU minutes only measure:
  measure:  python3 -m bench.report measure --out DIR     (on the GPU; writes DIR/report.json)
  render:   python3 -m bench.report render DIR/report.json [--readme docs/results.md]
            (anywhere; writes report.md and roofline.png beside the JSON and, with
            --readme, replaces the table between that page's report markers)

Per shape it records: the route the autopick chose; the time on the leaderboard's clock
(as its harness times: synchronize, utils.clear_l2_cache_large, which is the harness's
64 GB randn and keeps the GPU busy for milliseconds, then CUDA events around the Python
call; the host's part of the call is hidden behind the busy GPU, so this reads device
time including the gaps between kernels); the device time of the same call replayed from
a CUDA graph; the host time of one call in a caller's own loop (calls back to back, wall
time over count; host_after_flush_us in the JSON: the same call's wall time right after
the flush and synchronize, as the leaderboard runs it, when the host is colder); the
bytes the route must read, the % of the roofline (those bytes over the measured bandwidth)
that the leaderboard time reaches, and x ideal: the time over the ideal, the one-launch floor
plus the roofline time; the error of the served output against exact attention over the
bf16 cache (relative RMS, rms(out - exact) / rms(exact), and the largest element error over
rms(exact)): what the route's KV format and roundings cost. Measured in the same run: the
HBM read bandwidth, and floors on the leaderboard's clock (events only; one trivial Triton
launch). The shapes, the clocks and the byte counts are tools/leaderboard.py's. Beside
them the table shows FlashMLA's times for the same shapes, measured on 2026-11-29 apart from
this tree (FLASHMLA_US: another program, another day and another clock: labelled so).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
from pathlib import Path

from tools.leaderboard import (BENCHMARK_SHAPES, SEEDS, device_us, geomean, host_loop_us, leaderboard_clock_us,
                               measure_read_bandwidth, route_bytes, trivial_launch_floor)

README_BEGIN = "<!-- report:begin -->"
README_END = "<!-- report:end -->"
# DeepSeek's FlashMLA (CUTLASS, sm_90a, dense bf16 decode) on the lent H200, replayed from a
# CUDA graph (device time), measured 2026-11-29 by a program outside this tree: us per
# benchmark shape.
FLASHMLA_US = dict(zip(BENCHMARK_SHAPES, (17.5, 30.9, 26.4, 93.6, 38.0, 168.0, 92.9, 585.0)))
FLASHMLA_LABEL = "FlashMLA bf16 (H200, graph-replayed, 2026-11-29)"


# ------------------------------------------------------------------------------------
# measure (GPU)
# ------------------------------------------------------------------------------------
def summarize_shape(batch: int, kv_len: int, route: str, check: str, check_message: str,
                    leaderboard: list[float], host: float, device: float | None,
                    bandwidth: float, floor: dict, errors: dict | None = None) -> dict:
    """One row of the report; the roofline figures come from the leaderboard time; errors:
    output_errors' of the served output against exact attention over the bf16 cache."""
    mean = statistics.mean(leaderboard)
    nbytes = route_bytes(route, batch, kv_len)
    roofline_us = nbytes / bandwidth * 1e6
    ideal_us = floor["one_triton_launch_us"] + roofline_us
    return {
        "batch": batch, "kv_len": kv_len, "route": route, "check": check, "check_message": check_message,
        "leaderboard_us": mean, "leaderboard_err_us": statistics.stdev(leaderboard) / math.sqrt(len(leaderboard)),
        "leaderboard_best_us": min(leaderboard), "device_us": device, "host_us": host,
        "bytes": nbytes, "roofline_us": roofline_us, "achieved_gbps": nbytes / (mean * 1e-6) / 1e9,
        "pct_roofline": 100 * roofline_us / mean, "x_floor": mean / floor["one_triton_launch_us"],
        "ideal_us": ideal_us, "x_ideal": mean / ideal_us, "error_vs_bf16": errors,
        "flashmla_us": FLASHMLA_US.get((batch, kv_len)),
    }


def output_errors(output, exact) -> dict:
    """The output's error against exact attention (float64 over the elements finite in both):
    rel_rms = rms(out - exact) / rms(exact), max_over_rms = max |out - exact| / rms(exact),
    and the elements where exactly one of the two is not finite."""
    out, ref = output.double(), exact.double()
    finite = out.isfinite() & ref.isfinite()
    diff, ref = (out - ref)[finite], ref[finite]
    rms = ref.pow(2).mean().sqrt().item() if ref.numel() else 0.0
    scale = rms if rms > 0 else 1.0
    return {"rel_rms": (diff.pow(2).mean().sqrt().item() if diff.numel() else 0.0) / scale,
            "max_over_rms": (diff.abs().max().item() if diff.numel() else 0.0) / scale,
            "nonfinite": int((output.isfinite() != exact.isfinite()).sum())}


def measure(out_dir: Path, runs: int) -> dict:
    import torch
    import triton
    import reference
    import submission

    bandwidth = measure_read_bandwidth()
    floor = trivial_launch_floor(runs)
    rows = []
    for (batch, kv_len), seed in zip(BENCHMARK_SHAPES, SEEDS):
        data = reference.generate_input(batch, 1, kv_len, seed)
        output = submission.custom_kernel(data)  # builds the plan (autopick) on first sight
        good, message = reference.check_implementation(data, output)
        exact = submission.TorchRunner(submission.CallShape.of(data), "bf16").exact(*data[:4])
        errors = output_errors(output, exact)
        call = lambda: submission.custom_kernel(data)  # noqa: E731
        leaderboard, host_after_flush = leaderboard_clock_us(call, runs)
        rows.append(summarize_shape(batch, kv_len, submission.describe_route(data), "pass" if good else "fail",
                                    message, leaderboard, host_loop_us(call, runs), device_us(call, runs),
                                    bandwidth, floor, errors))
        rows[-1]["host_after_flush_us"] = statistics.median(host_after_flush)
        r = rows[-1]
        device = r["device_us"] if r["device_us"] else float("nan")
        print(f"{batch:>4} x {kv_len:<5} {r['route']:<60} leaderboard {r['leaderboard_us']:8.1f} us  "
              f"device {device:8.1f} us  host {r['host_us']:6.1f} us  x ideal {r['x_ideal']:.2f}  "
              f"error vs bf16 {errors['rel_rms']:.2%} (max {errors['max_over_rms']:.1%})", flush=True)
        del data, output, exact
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "triton": triton.__version__,
        "runs_per_shape": runs,
        "hbm_read_tbps": bandwidth / 1e12, "floor": floor, "rows": rows,
        "geomean_leaderboard_us": geomean([r["leaderboard_us"] for r in rows]),
        "geomean_device_us": geomean([r["device_us"] for r in rows if r["device_us"]]),
        "geomean_host_us": geomean([r["host_us"] for r in rows]),
        "command": "python3 -m bench.report measure --out " + str(out_dir),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    return report


# ------------------------------------------------------------------------------------
# render (anywhere)
# ------------------------------------------------------------------------------------
def _error_cells(r: dict) -> str:
    errors = r.get("error_vs_bf16")  # reports measured before the column have none
    if not errors:
        return "n/a | n/a"
    nonfinite = f" ({errors['nonfinite']} non-finite)" if errors.get("nonfinite") else ""
    return f"{100 * errors['rel_rms']:.2f}%{nonfinite} | {100 * errors['max_over_rms']:.1f}%"


def table(report: dict) -> str:
    floor = report["floor"]
    lines = [
        f"Measured {report['date']} on {report['machine']} (torch {report['torch']}, triton {report['triton']}), "
        f"{report['runs_per_shape']} runs a shape. HBM read bandwidth measured in the same run: "
        f"{report['hbm_read_tbps']:.2f} TB/s. Floors on the leaderboard's clock: events only "
        f"{floor['events_only_us']:.1f} us, one trivial Triton launch {floor['one_triton_launch_us']:.1f} us.",
        "",
        "| batch | kv_len | route | check | leaderboard clock mean ± err (us) | best | x ideal | device (us) "
        "| host (us) | bytes read | GB/s | % roofline | error vs exact bf16: rel. RMS | max / rms "
        f"| {FLASHMLA_LABEL} (us) |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        dev = f"{r['device_us']:.1f}" if r["device_us"] else "n/a"
        x_ideal = f"{r['x_ideal']:.2f}" if "x_ideal" in r else "n/a"
        flashmla = FLASHMLA_US.get((r["batch"], r["kv_len"]))
        lines.append(f"| {r['batch']} | {r['kv_len']} | `{r['route']}` | {r['check']} | {r['leaderboard_us']:.1f} ± "
                     f"{r['leaderboard_err_us']:.1f} | {r['leaderboard_best_us']:.1f} | {x_ideal} | {dev} | "
                     f"{r['host_us']:.1f} | {r['bytes'] / 1e6:.1f} MB | {r['achieved_gbps']:.0f} | "
                     f"{r['pct_roofline']:.0f}% | {_error_cells(r)} | "
                     f"{f'{flashmla:g}' if flashmla else 'n/a'} |")
    shapes = [(r["batch"], r["kv_len"]) for r in report["rows"]]
    flashmla_geomean = geomean([FLASHMLA_US[s] for s in shapes]) if all(s in FLASHMLA_US for s in shapes) else None
    lines += ["", f"Geomean over the 8 shapes: leaderboard clock {report['geomean_leaderboard_us']:.1f} us, "
                  f"device {report['geomean_device_us']:.1f} us, host {report['geomean_host_us']:.1f} us"
                  + (f"; {FLASHMLA_LABEL} {flashmla_geomean:.1f} us." if flashmla_geomean else "."),
              "", "Leaderboard clock: as the leaderboard's harness times (its 64 GB randn flush keeps the GPU "
                  "busy, so the call's host time is hidden); GB/s, % roofline (the route's format's bytes over the "
                  "HBM read bandwidth measured in this run) and x ideal (the time over the one-launch floor plus "
                  "that roofline time) come from it. Device: the call replayed from a CUDA graph. Host: one call's "
                  "wall time in a loop of calls (no synchronize between them). Error: the served output against "
                  "exact fp32 attention over the bf16 cache (what the route's KV format and roundings cost), "
                  "rms(out - exact) / rms(exact) and the largest element error over rms(exact). "
                  f"{FLASHMLA_LABEL}: DeepSeek's dense bf16 decode measured on 2026-11-29 apart from this "
                  "tree, device time of a CUDA-graph replay on another day, not this run nor this clock.",
              "", f"Produced by `{report['command']}`, rendered by `python3 -m bench.report render`."]
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = report["rows"]
    names = [f"{r['batch']}x{r['kv_len']}" for r in rows]
    pct = [r["pct_roofline"] or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4))
    bars = ax.bar(names, pct, color="#3b7dd8")
    ax.axhline(80, color="#c0392b", linestyle="--", linewidth=1, label="80% target")
    for bar, r in zip(bars, rows):
        ax.annotate(r["route"].split("[")[0], (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("% of HBM roofline (leaderboard clock)")
    ax.set_xlabel("batch x kv_len")
    ax.set_title(f"MLA decode on {report['machine']}, {report['date']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def render(json_path: Path, readme: Path | None) -> None:
    report = json.loads(json_path.read_text())
    text = table(report)
    (json_path.parent / "report.md").write_text(text + "\n")
    plot(report, json_path.parent / "roofline.png")
    print(text)
    if readme is not None:
        content = readme.read_text()
        begin, end = content.index(README_BEGIN) + len(README_BEGIN), content.index(README_END)
        # Paths as the page links them: relative to its own folder (docs/results.md: ../results/...)
        folder = Path(os.path.relpath(json_path.parent.resolve(), readme.parent.resolve()))
        source = f"\n\nFrom `{(folder / json_path.name).as_posix()}`:\n\n"
        chart = f"![% of roofline per shape]({(folder / 'roofline.png').as_posix()})"
        readme.write_text(content[:begin] + source + text + "\n\n" + chart + "\n\n" + content[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_out")))
    m.add_argument("--runs", type=int, default=50)
    r = sub.add_parser("render")
    r.add_argument("json", type=Path)
    r.add_argument("--readme", type=Path)
    args = parser.parse_args()
    if args.step == "measure":
        report = measure(args.out, args.runs)
        print(table(report))
    else:
        render(args.json, args.readme)


if __name__ == "__main__":
    main()
