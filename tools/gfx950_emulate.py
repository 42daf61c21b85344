"""Run every gfx950 kernel specialization the autopick offers on an MI355X, as Triton compiles
it for gfx950, in the emulator (tools/gfx950_emu) on small inputs, and check each result
(the cases and their oracles: tools/gfx950_cases.py).

    python3 -m tools.gfx950_emulate                     # every specialization, every case
    python3 -m tools.gfx950_emulate --quick             # every specialization, one small case (CI)
    python3 -m tools.gfx950_emulate --submission PATH   # another copy of submission.py (a mutant)
    python3 -m tools.gfx950_emulate --json OUT.json --only mxfp4
    python3 -m tools.gfx950_emulate --forced-combine    # every form forced, its in-kernel combine

Prints a table (kernel, cases, instructions executed, wall time, result) and exits 1 if any
case fails (a wrong result, a memory / ordering / barrier violation, an instruction the
emulator does not implement), 2 for a usage error. What the emulator checks, and what it
cannot show (timing, caches, clocks), is in docs/gfx950.md. No AMD GPU is involved."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tools.mutants import import_submission


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small case a specialization (CI's subset)")
    parser.add_argument("--submission", metavar="PATH", help="run this copy of submission.py instead of the checkout's")
    parser.add_argument("--only", metavar="TEXT", help="only the specializations whose label contains TEXT")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--forced-combine", action="store_true",
                        help="instead of the offered specializations, every form forced with its in-kernel combine")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("gfx950_emulate: compiles for gfx950; run it with TRITON_INTERPRET unset", file=sys.stderr)
        return 2
    if args.submission is not None:  # imported as `submission` before gfx950_cases imports it
        source = Path(args.submission).resolve()
        if not source.is_file():
            print(f"gfx950_emulate: --submission {args.submission}: no such file", file=sys.stderr)
            return 2
        if source.name != "submission.py":  # the listings' source lines name the file submission.py
            folder = Path(tempfile.mkdtemp(prefix="gfx950_emulate_"))
            source = Path(shutil.copy(source, folder / "submission.py"))
        import_submission(source)
    import submission
    from tools import gfx950_cases as cases

    targets = cases.forced_combine_targets() if args.forced_combine else cases.offered_targets()
    if args.only:
        targets = [t for t in targets if args.only in t.label]
        if not targets:
            print(f"gfx950_emulate: no specialization's label contains {args.only!r}", file=sys.stderr)
            return 2
    what = ("forced forms' in-kernel combine specializations at 64 x 8192" if args.forced_combine
            else "specializations offered for the 8 benchmark shapes")
    print(f"gfx950_emulate: {len(targets)} gfx950 {what} "
          f"(submission {Path(submission.__file__).resolve()}), "
          f"{'one small case each (--quick)' if args.quick else f'{len(cases.FULL_CASES)} cases each'}; "
          f"emulated on this CPU, no AMD GPU", flush=True)
    rows, records, failed = [], [], 0
    started = time.perf_counter()
    for target in targets:
        chosen = [cases.quick_case(target)] if args.quick else list(cases.FULL_CASES)
        results = [cases.run_target(target, case) for case in chosen]
        passed = sum(r.passed for r in results)
        failed += len(results) - passed
        first_failure = next((r for r in results if not r.passed), None)
        verdict = "pass" if first_failure is None else f"FAIL ({first_failure.case}): {first_failure.detail}"
        rows.append((target.label, f"{passed}/{len(results)}", sum(r.instructions for r in results),
                     sum(r.seconds for r in results), verdict))
        print(f"{target.label:<96} {passed}/{len(results)} {rows[-1][2]:>10,} {rows[-1][3]:7.1f} s  {verdict}",
              flush=True)
        for r in results:
            records.append({"target": target.label, "route": target.offered.route, "case": r.case,
                            "instructions": r.instructions, "seconds": round(r.seconds, 2), "passed": r.passed,
                            "detail": r.detail, "violations": [str(v) for v in r.violations[:10]],
                            "atomics": r.atomics, "measures": r.measures})
    total = time.perf_counter() - started
    print(f"{len(records)} cases, {failed} failed, {sum(r[2] for r in rows):,} instructions, {total:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"quick": args.quick, "seconds": round(total, 1),
                                               "failed": failed, "cases": records}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
