"""Per-shape comparison of two eval.py leaderboard runs from their protocol (POPCORN_FD) files:
this project's harness files against upstream's eval.py and utils.py beside the same
submission.py, reference.py and task.py, with the same POPCORN_SEED.

    python3 -m bench.compare_protocol OURS.txt UPSTREAM.txt [--tolerance 0.05]

Prints, per benchmark case: our mean and upstream's (us), their ratio, and whether it is
within the tolerance; then both geomeans and both `check` lines. Exit status 0 when both
runs say `check: pass`, they hold the same cases, and every ratio is within the tolerance.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def read_protocol(path: Path) -> dict:
    """{'check': ..., 'cases': {spec: mean in ns}} of one protocol file."""
    lines = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    count = int(lines.get("benchmark-count", 0))
    cases = {}
    for index in range(count):
        spec, mean = lines.get(f"benchmark.{index}.spec"), lines.get(f"benchmark.{index}.mean")
        if spec is not None and mean is not None:
            cases[spec] = float(mean)
    return {"check": lines.get("check", "missing"), "cases": cases}


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def compare(ours: dict, upstream: dict, tolerance: float) -> tuple[list[str], bool]:
    lines = [f"{'case':<52} {'ours (us)':>10} {'upstream (us)':>14} {'ratio':>7}  within {tolerance:.0%}"]
    good = ours["check"] == upstream["check"] == "pass"
    specs = list(ours["cases"])
    if set(specs) != set(upstream["cases"]) or not specs:
        good = False
        lines.append(f"cases differ: ours {sorted(ours['cases'])}, upstream {sorted(upstream['cases'])}")
        specs = [s for s in specs if s in upstream["cases"]]
    for spec in specs:
        mine, theirs = ours["cases"][spec] / 1e3, upstream["cases"][spec] / 1e3
        ratio = mine / theirs
        within = abs(ratio - 1) <= tolerance
        good &= within
        lines.append(f"{spec:<52} {mine:>10.1f} {theirs:>14.1f} {ratio:>7.3f}  {'yes' if within else 'NO'}")
    lines.append(f"{'geomean':<52} {geomean(ours['cases'][s] / 1e3 for s in specs):>10.1f} "
                 f"{geomean(upstream['cases'][s] / 1e3 for s in specs):>14.1f}")
    lines.append(f"check: ours {ours['check']}, upstream {upstream['check']}")
    return lines, good


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ours", type=Path)
    parser.add_argument("upstream", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args(argv)
    lines, good = compare(read_protocol(args.ours), read_protocol(args.upstream), args.tolerance)
    print("\n".join(lines))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
