"""Does the autopick time on the leaderboard's clock? Per benchmark shape, the plan's verified
runners (the chosen one and its fallbacks) timed three ways on the same input:

  autopick      submission.time_call_us on submission.LeaderboardClock (a spin kernel keeps
                the GPU busy, the L2 is flushed, no synchronize before the start event)
  leaderboard   as the leaderboard's harness: synchronize, utils.clear_l2_cache_large (its
                64 GB randn), events around the call (tools/leaderboard.py's leaderboard_clock_us)
  synchronized  an L2-sized flush, a synchronize, then the events: a clock that counts
                the host's time too, which the leaderboard's hides

    python3 -m bench.clock_check --out DIR        (GPU; writes DIR/clock_check.json)

Prints medians (us), the autopick / leaderboard ratio (within 5%?), and whether the
runner fastest on the autopick's clock is within 5% of the fastest on the leaderboard's.
Exit status 1 when either fails.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


TOLERANCE = 0.05
SAMPLES = 15


def synchronized_us(call, runs: int) -> float:
    import torch
    from tools import leaderboard
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    samples = []
    for _ in range(runs):
        flush.zero_()
        torch.cuda.synchronize()
        samples.append(leaderboard.event_us(call))
    return statistics.median(samples)


def check_shape(batch: int, kv_len: int, seed: int) -> dict:
    import torch
    import reference
    from tools import leaderboard
    import submission
    data = reference.generate_input(batch, 1, kv_len, seed)
    submission.custom_kernel(data)
    args = data[:4]
    clock = submission.LeaderboardClock(torch.device("cuda"))
    runners = []
    for runner in submission._plan_for(data).runners:
        call = lambda runner=runner: runner(*args)  # noqa: E731
        autopick = statistics.median(submission.time_call_us(runner, args, clock)
                                     for _ in range(SAMPLES // submission.AUTOPICK_REPEATS))
        leaderboard_us = statistics.median(leaderboard.leaderboard_clock_us(call, SAMPLES)[0])
        runners.append({"route": runner.label, "autopick_us": autopick, "leaderboard_us": leaderboard_us,
                        "synchronized_us": synchronized_us(call, SAMPLES), "ratio": autopick / leaderboard_us})
    autopick_choice = min(runners, key=lambda r: r["autopick_us"])
    best_leaderboard = min(r["leaderboard_us"] for r in runners)
    return {"batch": batch, "kv_len": kv_len, "runners": runners, "autopick_choice": autopick_choice["route"],
            "choice_holds": autopick_choice["leaderboard_us"] <= (1 + TOLERANCE) * best_leaderboard}


def main(argv=None) -> int:
    import torch
    from tools import leaderboard
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a GPU")
    shapes, good = [], True
    print(f"{'shape':<12} {'route':<66} {'autopick':>9} {'leaderb.':>9} {'synchr.':>9} {'ratio':>6}")
    for (batch, kv_len), seed in zip(leaderboard.BENCHMARK_SHAPES, leaderboard.SEEDS):
        shape = check_shape(batch, kv_len, seed)
        shapes.append(shape)
        for r in shape["runners"]:
            within = abs(r["ratio"] - 1) <= TOLERANCE
            good &= within
            print(f"{batch:>4} x {kv_len:<5} {r['route']:<66} {r['autopick_us']:>9.1f} {r['leaderboard_us']:>9.1f} "
                  f"{r['synchronized_us']:>9.1f} {r['ratio']:>6.3f}{'' if within else '  OFF'}", flush=True)
        good &= shape["choice_holds"]
        if not shape["choice_holds"]:
            print(f"{batch:>4} x {kv_len:<5} the autopick's choice is over 5% slower on the leaderboard's clock "
                  "than another runner")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "clock_check.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(0), "tolerance": TOLERANCE, "samples": SAMPLES,
         "shapes": shapes, "all_within": good}, indent=1) + "\n")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
