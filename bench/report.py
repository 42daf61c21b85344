"""Benchmark report: per shape, how far the chosen route is from the hardware limit.

Two steps, so the GPU minutes only measure:
  measure:  python bench/report.py measure --out DIR     (on the GPU; writes DIR/report.json)
  render:   python bench/report.py render DIR/report.json [--readme docs/results.md]
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
bytes the route must read, and the % of the roofline that the leaderboard time reaches.
Measured in the same run: the HBM read bandwidth, and floors on the leaderboard's clock
(events only; one trivial Triton launch).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCHMARK_SHAPES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192),
                    (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
SEEDS = [4217, 4220, 5412, 5415, 1357, 1360, 9823, 9826]
README_BEGIN = "<!-- report:begin -->"
README_END = "<!-- report:end -->"


# ------------------------------------------------------------------------------------
# measure (GPU)
# ------------------------------------------------------------------------------------
def _events():
    import torch
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def event_us(work) -> float:
    """Microseconds between two CUDA events recorded around work(), the host waiting for
    the end event (what the work queued runs between them, no synchronize before it)."""
    start, end = _events()
    start.record()
    work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3


def measure_read_bandwidth(gib: float = 4.0, repeats: int = 20) -> float:
    """Bytes per second of a full read of a large bf16 tensor (a sum)."""
    import torch
    x = torch.randn(int(gib * (1 << 30)) // 2, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        x.sum()
    samples = []
    for _ in range(repeats):
        samples.append(event_us(x.sum) / 1e6)
    return x.numel() * 2 / statistics.median(samples)


def leaderboard_clock_us(call, runs: int) -> tuple[list[float], list[float]]:
    """(event times, host times) in us of `runs` calls timed as the leaderboard's harness
    times them: synchronize, utils.clear_l2_cache_large, start event, call, end event,
    synchronize. The host time is the Python call's own wall time."""
    import torch
    import utils
    events, hosts = [], []
    for _ in range(runs):
        torch.cuda.synchronize()
        utils.clear_l2_cache_large()
        start, end = _events()
        start.record()
        began = time.perf_counter()
        call()
        hosts.append((time.perf_counter() - began) * 1e6)
        end.record()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end) * 1e3)
    return events, hosts


def host_loop_us(call, runs: int) -> float:
    """The host time of one call as a caller's own loop sees it: `runs` calls back to back
    (none synchronizes), the wall time divided by runs. Right after a synchronize the
    host is slower (results/2026-11-29-h200-host-cold), which leaderboard_clock_us's
    host times show."""
    import torch
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(runs):
        call()
    elapsed = time.perf_counter() - began
    torch.cuda.synchronize()
    return elapsed * 1e6 / runs


def device_us(call, runs: int) -> float | None:
    """Median replay time of the call captured in a CUDA graph, each replay queued behind
    the leaderboard's flush (the replay's launch is hidden too)."""
    import torch
    import utils
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()  # warm: compile and allocate outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            call()
    except Exception:  # a route that syncs (the torch fallback) cannot be captured
        return None
    samples = []
    for _ in range(runs):
        utils.clear_l2_cache_large()
        samples.append(event_us(graph.replay))
    return statistics.median(samples)


def trivial_launch_floor(runs: int) -> dict:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _touch(ptr):
        tl.store(ptr, tl.load(ptr) + 1)

    cell = torch.zeros(1, device="cuda")
    _touch[(1,)](cell)
    empty, _ = leaderboard_clock_us(lambda: None, runs)
    one, _ = leaderboard_clock_us(lambda: _touch[(1,)](cell), runs)
    return {"events_only_us": statistics.median(empty), "one_triton_launch_us": statistics.median(one)}


def route_bytes(label: str, batch: int, kv_len: int) -> int:
    """Fewest bytes the route must move: its KV format, q read once, out written once."""
    per_row = {"mxfp4": 288 + 18, "fp8": 576, "bf16": 1152}
    fmt = next((f for f in per_row if f in label), "bf16")
    if label.startswith("aiter"):
        fmt = "fp8"
    return batch * kv_len * per_row[fmt] + batch * 16 * (576 + 512) * 2


def summarize_shape(batch: int, kv_len: int, route: str, check: str, check_message: str,
                    leaderboard: list[float], host: float, device: float | None,
                    bandwidth: float, floor: dict) -> dict:
    """One row of the report; the roofline figures come from the leaderboard time."""
    mean = statistics.mean(leaderboard)
    nbytes = route_bytes(route, batch, kv_len)
    roofline_us = nbytes / bandwidth * 1e6
    return {
        "batch": batch, "kv_len": kv_len, "route": route, "check": check, "check_message": check_message,
        "leaderboard_us": mean, "leaderboard_err_us": statistics.stdev(leaderboard) / math.sqrt(len(leaderboard)),
        "leaderboard_best_us": min(leaderboard), "device_us": device, "host_us": host,
        "bytes": nbytes, "roofline_us": roofline_us, "achieved_gbps": nbytes / (mean * 1e-6) / 1e9,
        "pct_roofline": 100 * roofline_us / mean, "x_floor": mean / floor["one_triton_launch_us"],
    }


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
        call = lambda: submission.custom_kernel(data)  # noqa: E731
        leaderboard, host_after_flush = leaderboard_clock_us(call, runs)
        rows.append(summarize_shape(batch, kv_len, submission.describe_route(data), "pass" if good else "fail",
                                    message, leaderboard, host_loop_us(call, runs), device_us(call, runs),
                                    bandwidth, floor))
        rows[-1]["host_after_flush_us"] = statistics.median(host_after_flush)
        r = rows[-1]
        device = r["device_us"] if r["device_us"] else float("nan")
        print(f"{batch:>4} x {kv_len:<5} {r['route']:<60} leaderboard {r['leaderboard_us']:8.1f} us  "
              f"device {device:8.1f} us  host {r['host_us']:6.1f} us", flush=True)
        del data, output
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "triton": triton.__version__,
        "runs_per_shape": runs,
        "hbm_read_tbps": bandwidth / 1e12, "floor": floor, "rows": rows,
        "geomean_leaderboard_us": _geomean([r["leaderboard_us"] for r in rows]),
        "geomean_device_us": _geomean([r["device_us"] for r in rows if r["device_us"]]),
        "geomean_host_us": _geomean([r["host_us"] for r in rows]),
        "command": "python bench/report.py measure --out " + str(out_dir),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    return report


def _geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


# ------------------------------------------------------------------------------------
# render (anywhere)
# ------------------------------------------------------------------------------------
def table(report: dict) -> str:
    floor = report["floor"]
    lines = [
        f"Measured {report['date']} on {report['machine']} (torch {report['torch']}, triton {report['triton']}), "
        f"{report['runs_per_shape']} runs a shape. HBM read bandwidth measured in the same run: "
        f"{report['hbm_read_tbps']:.2f} TB/s. Floors on the leaderboard's clock: events only "
        f"{floor['events_only_us']:.1f} us, one trivial Triton launch {floor['one_triton_launch_us']:.1f} us.",
        "",
        "| batch | kv_len | route | check | leaderboard clock mean ± err (us) | best | x floor | device (us) "
        "| host (us) | bytes read | GB/s | % roofline |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        dev = f"{r['device_us']:.1f}" if r["device_us"] else "n/a"
        lines.append(f"| {r['batch']} | {r['kv_len']} | `{r['route']}` | {r['check']} | {r['leaderboard_us']:.1f} ± "
                     f"{r['leaderboard_err_us']:.1f} | {r['leaderboard_best_us']:.1f} | {r['x_floor']:.2f} | {dev} | "
                     f"{r['host_us']:.1f} | {r['bytes'] / 1e6:.1f} MB | {r['achieved_gbps']:.0f} | "
                     f"{r['pct_roofline']:.0f}% |")
    lines += ["", f"Geomean over the 8 shapes: leaderboard clock {report['geomean_leaderboard_us']:.1f} us, "
                  f"device {report['geomean_device_us']:.1f} us, host {report['geomean_host_us']:.1f} us.",
              "", "Leaderboard clock: as the leaderboard's harness times (its 64 GB randn flush keeps the GPU "
                  "busy, so the call's host time is hidden); GB/s and % roofline come from it. Device: the "
                  "call replayed from a CUDA graph. Host: one call's wall time in a loop of calls (no synchronize between them).",
              "", f"Produced by `{report['command']}`, rendered by `python bench/report.py render`."]
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
