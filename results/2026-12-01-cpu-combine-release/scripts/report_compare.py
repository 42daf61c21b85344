"""Every specialization of two bench/gfx950_report.py --json reports, matched by name (the
ARRIVALS constexpr the fix adds taken out of the names), with every figure that differs
(the offered launches, which gain the launch's each_thread_releases field, and compile times
left out).

    python3 report_compare.py BEFORE.json AFTER.json
"""
import json
import re
import sys

IGNORED = {"name", "launch", "offered", "compile_seconds"}


def by_name(path: str) -> dict:
    return {re.sub(r"\.ARRIVALS=\d+", "", k["name"]): k for k in json.load(open(path))["kernels"]}


before, after = by_name(sys.argv[1]), by_name(sys.argv[2])
print(f"specializations: {len(before)} before, {len(after)} after, same names: {set(before) == set(after)}")
for name in sorted(before):
    old, new = before[name], after.get(name, {})
    diffs = {field: (old[field], new.get(field)) for field in old if field not in IGNORED and old[field] != new.get(field)}
    in_kernel = old["launch"]["constexprs"].get("COMBINE_IN_KERNEL")
    print(("IN-KERNEL COMBINE " if in_kernel else "") + name + ": " + ("unchanged" if not diffs else json.dumps(diffs)))
