"""Does the gfx950 emulator read what the installed Triton emits, and do the offered kernels
pass in it? (Issue 28 item 4, for Triton lines other than the pin.)

    PY -m bench.gfx950_emulator_census [--read-only] --json OUT.json

`python3 -m tools.gfx950_emulate` fails a kernel at the first line it cannot read, so it
cannot say what else a version emits. This reads every listing whole instead:
each gfx950 specialization the autopick offers for the 8 benchmark shapes
(tools/gfx950_cases.py offered_targets) and each form forced on an MI355X (the calls of
gfx950_cases.forced_form_calls, less the forms the submission refuses to force on this Triton),
compiled with the installed Triton; every line that the
listing reader or the emulator's instruction registry refuses is recorded with the
reason. Each offered specialization whose every instruction reads is then run as
`python3 -m tools.gfx950_emulate --quick` runs it (run_target on quick_case), unless
--read-only (where that tool itself read and ran them all).
Prints one line a specialization and the refused opcodes / modifiers with counts; exit
status 1 where anything is refused or fails. Compiles for gfx950: TRITON_INTERPRET unset.
"""
import argparse
import collections
import dataclasses
import json
import re
import sys
import time
from pathlib import Path

import triton

from tools import gfx950_cases as cases
from tools.gfx950_emu import ListingError, NotImplementedInstruction, read_listing
from tools.gfx950_emu.registry import compile_instruction


def refusals(listing_text: str) -> list[str]:
    """Every line of the listing that the emulator refuses, with the reason: the listing
    reader's refusals first (each such line blanked and the listing read again), then the
    instruction registry's, over the rest."""
    lines = listing_text.split("\n")
    refused = []
    while True:
        try:
            kernel = read_listing("\n".join(lines))
            break
        except ListingError as error:
            m = re.match(r"line (\d+): (.*)", str(error))
            if not m:
                raise
            refused.append(f"read: {m.group(2)}")
            lines[int(m.group(1)) - 1] = ""
    for ins in kernel.instructions:
        try:
            compile_instruction(ins, kernel)
        except NotImplementedInstruction as error:
            refused.append("run: " + re.sub(r"^line \d+: ", "", str(error)))
    return refused


def what_is_refused(reason: str) -> str:
    """The opcode, or the modifier and its opcode, that a refusal names (for the counts)."""
    m = re.search(r"unknown modifier '([^':]+)[^']*' in '(\S+)", reason)
    if m:
        return f"modifier {m.group(1)} ({m.group(2)})"
    m = re.search(r"instruction `([^`]+)` not implemented", reason)
    if m:
        return f"instruction {m.group(1)}"
    m = re.search(r"modifier\(s\) \[([^\]]*)\] of `(\S+)", reason)
    if m:
        return f"modifier {m.group(1)} ({m.group(2)})"
    return reason


def forced_calls(records: list) -> list:
    """The calls of gfx950_cases.forced_form_calls (each form forced on an MI355X, as it builds
    them), less the forms this Triton's submission refuses to force (a Gluon form where its
    Gluon lacks a name: a ValueError), each recorded as not offered."""
    calls = []
    data = cases.ct.contract_inputs(64, 8192)
    for record in (record for record in cases.sub.KERNEL_FORMS if cases.sub.form_runs_on(record, "gfx950")):
        kv_format, form = record.kv_format, record.name
        try:
            launch = cases.sub.launch_candidates(kv_format, 64, 8192, 256, "gfx950", form=form)[0]
        except ValueError as error:
            records.append({"kind": "forced", "label": f"forced {kv_format} {form}", "refused": [],
                            "not_offered": str(error)})
            print(f"forced  {kv_format} {form}: not offered by this Triton's submission: {error}", flush=True)
            continue
        if launch.num_splits > 1:
            launch = dataclasses.replace(launch, combine_in_kernel=True)
        calls += [(kv_format, form, call) for call in cases.ct.decode_kernel_calls(data, kv_format, launch)]
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--read-only", action="store_true",
                        help="read the listings, run nothing (where python3 -m tools.gfx950_emulate --quick ran them)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"triton {triton.__version__}: the gfx950 emulator on every offered and forced specialization", flush=True)
    records, counts = [], collections.Counter()
    listings = []
    for target in cases.offered_targets():
        spec = cases.ct.specialize(target.offered.calls[target.call_index], cases.GFX950)
        listings.append(("offered", target.label, target, spec))
    seen = {spec.identity for *_, spec in listings}
    for kv_format, form, call in forced_calls(records):
        spec = cases.ct.specialize(call, cases.GFX950)
        if spec.identity not in seen:
            seen.add(spec.identity)
            listings.append(("forced", f"{call.kernel.fn.__name__} forced {kv_format} {form}", None, spec))
    for kind, label, target, spec in listings:
        refused = refusals(spec.compile().asm["amdgcn"])
        counts.update(what_is_refused(r) for r in refused)
        record = {"kind": kind, "label": label, "refused": refused}
        if refused:
            verdict = f"{len(refused)} line(s) refused, the first: {refused[0]}"
        elif target is None or args.read_only:
            verdict = "reads (not run here)"
        else:
            result = cases.run_target(target, cases.quick_case(target))
            record.update(case=result.case, passed=result.passed, detail=result.detail,
                          instructions=result.instructions, seconds=round(result.seconds, 1))
            verdict = f"reads; {result.case}: {'pass' if result.passed else 'FAIL'}: {result.detail}"
        records.append(record)
        print(f"{kind:<7} {label:<100} {verdict}", flush=True)
    unreadable = [r for r in records if r["refused"]]
    failed = [r for r in records if r.get("passed") is False]
    ran = [r for r in records if "passed" in r]
    print(f"{len(records)} specializations ({sum(r['kind'] == 'offered' for r in records)} offered): "
          f"{len(unreadable)} with refused lines; of the {len(ran)} run, {len(failed)} failed; "
          f"{time.perf_counter() - started:.0f} s")
    for what, n in counts.most_common():
        print(f"  refused {n:4d} x {what}")
    if args.json:
        Path(args.json).write_text(json.dumps({"triton": triton.__version__, "refused_counts": dict(counts),
                                               "specializations": records}, indent=1))
    return 1 if unreadable or failed else 0


if __name__ == "__main__":
    sys.exit(main())
