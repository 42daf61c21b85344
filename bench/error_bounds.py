"""The verifier's error bounds per (KV format, form), derived from committed measurements,
and the smallest uniform scaling of the output each bound rejects.

  python3 -m bench.error_bounds                 (CPU, about a minute: prints both tables)
  python3 -m bench.error_bounds --json FILE     (also writes them as JSON)

Bounds: for each (format, form), MARGIN (3x) the worst error measured on the regular
inputs by bench/verify_errors.py in MEASUREMENTS, rounded up to two significant digits, for
both of submission.ErrorBound's measures (the worst sequence's relative RMS error and the
largest element error over the output's RMS). A form with no measurement keeps its
format's bound (submission.bound_of says so when it judges). tests/test_error_bounds.py
checks that the records' bounds (submission.measured_error_bounds) are what this derives.

Rows are assigned to forms by their "form" field, or, in the committed files that have
none, by their label (LEGACY_FORMS): their "e4m3" and "scaled" rows measured the roundings
of today's "e4m3_waves" and "waves" (e4m3 Q per head; P x 256 in e4m3 for fp8, P in bf16 for
MXFP4; the forms differ only in how the waves split a tile), and their unnamed Triton rows
are the f16 and bf16 forms. The "coming_*" rows emulate the e4m3_waves / waves math in
torch and count for those forms; the "model_*" rows model the Hopper forms' numerics and
count for theirs (their "form" field); the "gluon_*_gfx950_model" rows are the gfx950 Gluon
forms' models (tools/gfx950_numerics.py, held to the emulated gfx950 code) and count for
"gluon".

Device check: for forms whose measurements are a model's (the Hopper forms' numerics in torch,
measured on a CPU), what the H200 measured of them (DEVICE_CHECKS) must lie inside the bound,
and the fraction of it each uses is printed.

Scalings: an output s x exact has sequence error |1 - s| and element error |1 - s| x
max|exact| / rms(exact), so a bound (S, E) rejects every s with |1 - s| > min(S, E x
rms / max). Measured on the benchmark inputs of batch 4 and 32 at kv 1024 and the batch 4
one at 8192 (exact attention over the bf16 KV; the ratio rms / max barely depends on the
format), the largest such |1 - s| over those inputs is what the bound guarantees to reject.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


MARGIN = 3.0
MEASUREMENTS = ("results/2026-11-30-h200-session2/verify/verify_errors.json",
                "results/2026-11-30-cpu-verify-errors/verify_errors.json",
                "results/2026-12-01-cpu-verify-errors/verify_errors.json",
                # the Hopper forms' numerics modelled in torch on a CPU (bench/verify_errors.py's model_* routes)
                "results/2026-12-03-cpu-hopper-error-bounds/verify_errors.json",
                # the gfx950 Gluon forms' torch models (tools/gfx950_numerics.py), benchmark sizes
                "results/2026-12-03-cpu-gluon-error-bounds/verify_errors.json",
                # every launch candidate on the H200, the Hopper forms' own code among them
                "results/2026-12-03-h200-final/run1/verify/verify_errors.json")
LEGACY_FORMS = {"torch[": "torch", "reference_a8w8": "a8w8", "coming_fp8": "e4m3_waves", "coming_mxfp4": "waves",
                "form=e4m3,": "e4m3_waves", "form=scaled,": "waves", "form=f16,": "f16", "form=bf16,": "bf16",
                "triton_fp8[splits=": "f16", "triton_mxfp4[splits=": "bf16"}
SCALING_INPUTS = ((4, 1024, 4217), (32, 1024, 5412), (4, 8192, 4220))
# What the H200 measured of forms whose bounds come from a model (the Hopper forms, phase 1:
# results/2026-12-03-h200-hopper-forms, bench/hopper_forms_h200.py at commit 33622d5): per
# file, its variants that are the folded forms' code (run1's fp8 kernel had one e4m3 term).
# Each variant's cases give the error of the whole output, not per sequence (relative RMS,
# a lower bound of the worst sequence's), and the largest element error over the output's
# RMS; both must lie inside the form's bound, with room (device_check).
DEVICE_CHECKS = {
    "results/2026-12-03-h200-hopper-forms/run1/hopper_forms.json": {
        "fp8_s2_fill2": ("fp8", "hopper_one_term"), "fp8_s2_fill2_launch": ("fp8", "hopper_one_term"),
        "fp8_s2_slots32": ("fp8", "hopper_one_term"), "mxfp4vs_s1_fill2": ("mxfp4", "hopper")},
    "results/2026-12-03-h200-hopper-forms/run3-quick/hopper_forms.json": {
        "fp8_s2_fill2": ("fp8", "hopper_two_term"), "fp8single_s2_fill2": ("fp8", "hopper_one_term")},
}


def form_of(row: dict) -> str:
    if "form" in row:
        return row["form"]
    matches = [form for mark, form in LEGACY_FORMS.items() if mark in row["candidate"]]
    if len(matches) != 1:
        raise ValueError(f"no single form for the row {row['candidate']!r}: {matches}")
    return matches[0]


def counts_for_its_form(row: dict) -> bool:
    """Whether a row measures its form's own numerics. The "gluon" bounds are the gfx950
    code's: only the models of its rounding count (gluon_*_gfx950_model); the NVIDIA twin
    of a Gluon form (MLA_ROUTE=...:gluon on an NVIDIA GPU) rounds otherwise (MXFP4: a bf16
    Q where gfx950 multiplies e4m3)."""
    return form_of(row) != "gluon" or "gfx950_model" in row["candidate"]


def round_up(value: float, digits: int = 2) -> float:
    """value rounded up to `digits` significant digits."""
    if value <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return round(math.ceil(round(value / step, 9)) * step, 12)


def measured_bounds(paths=MEASUREMENTS) -> dict:
    """(format, form) -> {"sequence_rms", "element": the bound; "worst": the worst regular
    measurement of each, with where it came from}."""
    worst = {}
    for path in paths:
        for row in json.loads((ROOT / path).read_text())["rows"]:
            if row["category"] != "regular" or not counts_for_its_form(row):
                continue
            key = (row["kv_format"], form_of(row))
            entry = worst.setdefault(key, {})
            for metric in ("sequence_rms", "element"):
                if metric not in entry or row[metric] > entry[metric]["value"]:
                    entry[metric] = {"value": row[metric], "candidate": row["candidate"], "input": row["input"],
                                     "file": path}
    return {key: {"sequence_rms": round_up(MARGIN * entry["sequence_rms"]["value"]),
                  "element": round_up(MARGIN * entry["element"]["value"]), "worst": entry}
            for key, entry in sorted(worst.items())}


def device_check(bounds: dict, checks=DEVICE_CHECKS) -> dict:
    """(format, form) -> the worst device measurement of DEVICE_CHECKS (whole-output relative
    RMS, element) with where it came from, and each as a fraction of `bounds`' (sequence,
    element) for that form."""
    worst = {}
    for path, variants in checks.items():
        correctness = json.loads((ROOT / path).read_text())["correctness"]
        for variant, key in variants.items():
            entry = worst.setdefault(key, {"cases": 0})
            for case in correctness[variant]:
                entry["cases"] += 1
                for metric, measured in (("rel_rms", "rel_rms"), ("element", "max_rel")):
                    if metric not in entry or case[measured] > entry[metric]["value"]:
                        entry[metric] = {"value": case[measured], "case": case["case"], "variant": variant,
                                         "file": path}
    for key, entry in worst.items():
        bound = bounds[key]
        entry["fraction_of_bound"] = {"sequence_rms": entry["rel_rms"]["value"] / bound["sequence_rms"],
                                      "element": entry["element"]["value"] / bound["element"]}
    return worst


def rms_over_max(batch: int, kv_len: int, seed: int) -> float:
    import reference
    import submission
    data = reference.generate_input(batch, 1, kv_len, seed, device="cpu")
    exact = submission.TorchRunner(submission.CallShape.of(data), "bf16").exact(*data[:4]).double()
    return float(exact.pow(2).mean().sqrt() / exact.abs().max())


def rejected_scalings(bounds: dict, ratios: dict) -> dict:
    """name -> the deviation |1 - s| above which the bound rejects s x exact on each input,
    and the largest over the inputs."""
    result = {}
    for name, bound in bounds.items():
        per_input = {label: min(bound.sequence_rms, bound.element * ratio) for label, ratio in ratios.items()}
        result[name] = {"per_input": per_input, "guaranteed": max(per_input.values())}
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the tables here")
    args = parser.parse_args(argv)
    import submission
    derived = measured_bounds()
    print(f"Bounds: {MARGIN:g}x the worst regular error measured, rounded up (files: {', '.join(MEASUREMENTS)})")
    print(f"{'format/form':<18} {'worst seq':>10} {'worst elem':>10} {'bound seq':>10} {'bound elem':>10}  worst from")
    for (fmt, form), entry in derived.items():
        w = entry["worst"]
        print(f"{fmt + '/' + form:<18} {w['sequence_rms']['value']:>10.4f} {w['element']['value']:>10.4f} "
              f"{entry['sequence_rms']:>10.4g} {entry['element']:>10.4g}  {w['sequence_rms']['candidate']} "
              f"on {w['sequence_rms']['input']} / {w['element']['candidate']} on {w['element']['input']}")
    checked = device_check(derived)
    print("\nThe H200's measurements of forms bounded from a model (whole-output relative RMS, element), "
          "as a fraction of the bound:")
    for (fmt, form), entry in sorted(checked.items()):
        share = entry["fraction_of_bound"]
        print(f"{fmt + '/' + form:<18} {entry['rel_rms']['value']:.4f} ({share['sequence_rms']:.0%} of "
              f"{derived[(fmt, form)]['sequence_rms']:g}) {entry['element']['value']:.4f} ({share['element']:.0%} "
              f"of {derived[(fmt, form)]['element']:g})  {entry['cases']} cases; worst {entry['rel_rms']['variant']} "
              f"on {entry['rel_rms']['case']} / {entry['element']['variant']} on {entry['element']['case']}")
    in_force = {f"{fmt}/{form}": bound for (fmt, form), bound in submission.measured_error_bounds().items()}
    in_force.update({f"{fmt}/(any other form)": bound for fmt, bound in submission.FORMAT_ERROR_BOUNDS.items()})
    ratios = {f"{b}x{n}": rms_over_max(b, n, seed) for b, n, seed in SCALING_INPUTS}
    scalings = rejected_scalings(in_force, ratios)
    print("\nSmallest uniform scaling each bound in force rejects: s x exact is rejected when |1 - s| > t")
    print(f"rms / max of the exact output: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
    print(f"{'format/form':<24} {'seq':>7} {'elem':>7} " + " ".join(f"{k:>9}" for k in ratios) + "  guaranteed t")
    for name, bound in in_force.items():
        row = scalings[name]
        print(f"{name:<24} {bound.sequence_rms:>7.4g} {bound.element:>7.4g} "
              + " ".join(f"{row['per_input'][k]:>9.4f}" for k in ratios)
              + f"  {row['guaranteed']:.4f} (rejects s < {1 - row['guaranteed']:.3f} and s > {1 + row['guaranteed']:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "derived_bounds": {f"{fmt}/{form}": entry for (fmt, form), entry in derived.items()},
            "device_check": {f"{fmt}/{form}": entry for (fmt, form), entry in checked.items()},
            "rms_over_max": ratios, "rejected_scalings": scalings,
            "bounds_in_force": {name: vars(bound) for name, bound in in_force.items()}}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
