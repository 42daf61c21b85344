"""Why leaderboard mode reads slower than benchmark mode for the same route and shape.

Times one shape's custom_kernel call as eval.py does (sync, L2 flush, events around the
Python call), once over the same input every run (benchmark mode) and once over a fresh
input generated before every run (leaderboard mode), and records beside each run the host
time of the Python call itself (perf_counter). If the fresh-input runs grow in host time,
the gap is the host (cold caches after the generation); if only the event time grows, it
is the device (e.g. fresh pages).

Then, to tell our code from the machine, it times single steps the first time after the
harness's prelude (synchronize, L2 flush) and again straight after ("cold", "warm"): a
whole call, plan_key, the output's torch.empty and a pure-Python no-op, over the same
input, over fresh inputs, and over fresh inputs followed by a 10 ms sleep. If the no-op
slows down as much as our steps, the host itself is slow right after the generation.

    python3 -m bench.leaderboard_overhead --out DIR     (GPU)
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


SHAPES = [(4, 1024), (64, 1024), (256, 8192)]


def timed(call, flush):
    import torch
    torch.cuda.synchronize()
    flush()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    began = time.perf_counter()
    call()
    host_us = (time.perf_counter() - began) * 1e6
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3, host_us


def run_shape(batch: int, kv_len: int, runs: int) -> dict:
    import reference
    import submission
    import utils
    data = reference.generate_input(batch, 1, kv_len, 1)
    submission.custom_kernel(data)  # plan
    result = {"batch": batch, "kv_len": kv_len, "route": submission.describe_route(data)}
    for mode in ("same_input", "fresh_input"):
        events, hosts = [], []
        for seed in range(runs):
            if mode == "fresh_input":
                data = reference.generate_input(batch, 1, kv_len, 100 + seed)
            event_us, host_us = timed(lambda: submission.custom_kernel(data), utils.clear_l2_cache_large)
            events.append(event_us)
            hosts.append(host_us)
        result[mode] = {"event_us_median": statistics.median(events), "host_us_median": statistics.median(hosts)}
    return result


def cold_steps(batch: int, kv_len: int, runs: int) -> dict:
    import torch
    import reference
    import submission
    import utils
    data = reference.generate_input(batch, 1, kv_len, 1)
    submission.custom_kernel(data)  # plan
    steps = {"custom_kernel": submission.custom_kernel, "plan_key": submission.plan_key,
             "output_empty": lambda d: torch.empty((batch, 16, 512), dtype=torch.bfloat16, device="cuda"),
             "python_noop": lambda d: sum(range(50))}
    result = {}
    for mode in ("same_input", "fresh_input", "fresh_input_then_sleep"):
        for name, step in steps.items():
            cold, warm = [], []
            for seed in range(runs):
                if mode != "same_input":
                    data = reference.generate_input(batch, 1, kv_len, 100 + seed)
                if mode == "fresh_input_then_sleep":
                    torch.cuda.synchronize()
                    time.sleep(0.01)
                torch.cuda.synchronize()
                utils.clear_l2_cache_large()
                for samples in (cold, warm):
                    began = time.perf_counter()
                    step(data)
                    samples.append((time.perf_counter() - began) * 1e6)
            result[f"{mode}/{name}"] = {"cold_us_median": statistics.median(cold),
                                        "warm_us_median": statistics.median(warm)}
    return {"batch": batch, "kv_len": kv_len, "steps": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    rows = [run_shape(batch, kv_len, args.runs) for batch, kv_len in SHAPES]
    cold = [cold_steps(batch, kv_len, args.runs // 2) for batch, kv_len in (SHAPES[0], SHAPES[-1])]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "leaderboard_overhead.json").write_text(json.dumps(rows, indent=1))
    (args.out / "cold_steps.json").write_text(json.dumps(cold, indent=1))
    print(f"{'shape':>10} {'route':<52} {'same: event/host us':>22} {'fresh: event/host us':>22}")
    for r in rows:
        same, fresh = r["same_input"], r["fresh_input"]
        print(f"{r['batch']:>4}x{r['kv_len']:<5} {r['route']:<52} "
              f"{same['event_us_median']:>10.1f}/{same['host_us_median']:<10.1f} "
              f"{fresh['event_us_median']:>10.1f}/{fresh['host_us_median']:<10.1f}")
    for c in cold:
        print(f"{c['batch']}x{c['kv_len']} cold/warm us:")
        for key, v in c["steps"].items():
            print(f"  {key:<40} {v['cold_us_median']:8.1f} {v['warm_us_median']:8.1f}")


if __name__ == "__main__":
    main()
