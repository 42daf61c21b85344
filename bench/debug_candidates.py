"""Tables from an H200 session's logs: each kernel form's best candidate per shape, and
the leaderboard means.

    python3 -m bench.debug_candidates DEBUG_LOG [PROTOCOL_FILE ...]

DEBUG_LOG: the stderr of `MLA_DEBUG=1 eval.py benchmark`, one "[mla] <shape>: chose
<label> | <candidate>: <t> us ok (...) | ..." line a plan. Per shape it prints the chosen
launch and, per (route, form), the fastest candidate that passed verification (times on
the autopick's clock, the leaderboard's) with the count of candidates that failed it.
PROTOCOL_FILE: eval.py's POPCORN_FD lines; prints the 8 means (us) and their geomean.
"""
from __future__ import annotations

import math
import re
import sys

_SHAPE = re.compile(r"^\[mla\] batch=(\d+) q_seq_len=\d+ kv=(\d+) on \S+: chose (\S+)")
_CANDIDATE = re.compile(r"^((\w+)\[form=(\w+)[^\]]*\]|\w+(\[[^\]]*\])?): (?:([\d.]+) us ok|(REJECTED|RAISED))")


def candidate_rows(path: str) -> list[dict]:
    rows = []
    for line in open(path):
        shape = _SHAPE.match(line)
        if not shape:
            continue
        best, failed = {}, {}
        for part in line.rstrip("\n").split(" | ")[1:]:
            found = _CANDIDATE.match(part.strip())
            if not found:
                continue
            label, route, form, _, time_us, failure = found.groups()
            key = f"{route}:{form}" if form else label.split("[")[0]
            if failure:
                failed[key] = failed.get(key, 0) + 1
            elif key not in best or float(time_us) < best[key][0]:
                best[key] = (float(time_us), label)
        rows.append({"batch": int(shape.group(1)), "kv_len": int(shape.group(2)), "chosen": shape.group(3),
                     "best": best, "failed": failed})
    return rows


def protocol_means(path: str) -> list[float]:
    return [float(m) / 1000 for m in re.findall(r"benchmark\.\d+\.mean: ([\d.]+)", open(path).read())]


def main() -> None:
    for row in candidate_rows(sys.argv[1]):
        print(f"{row['batch']}x{row['kv_len']}: chose {row['chosen']}")
        for key, (time_us, label) in sorted(row["best"].items(), key=lambda item: item[1][0]):
            print(f"    {key:24s} {time_us:8.1f} us  {label}")
        for key, count in row["failed"].items():
            print(f"    {key:24s} {count} candidate(s) failed verification or raised")
    for path in sys.argv[2:]:
        means = protocol_means(path)
        geomean = math.exp(sum(map(math.log, means)) / len(means))
        print(f"{path}: means " + " ".join(f"{m:.1f}" for m in means) + f" us; geomean {geomean:.1f} us")


if __name__ == "__main__":
    main()
