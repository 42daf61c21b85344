"""The autopick's candidates for a shape on a GPU architecture, in the order it verifies and
times them, on any machine (no GPU needed).

    python3 -m bench.candidates --arch gfx950 --shape 4x1024 [--shape 256x8192 ...] [--sms N] [--no-aiter]
    python3 -m bench.candidates --markdown      the README's table of what is offered where

For each shape (batch x kv_len, every sequence that long, the three KV formats present): the
candidates submission.plan_candidates gives a call of that shape on the architecture, each
with its route, form and launch (its label), as the autopick would try them there: the
device's SMs or CUs are the MI355X's 256 on gfx950 and the H200's 132 on sm_90 (--sms for
another count or architecture); aiter counts as present on an AMD GPU (ROCm's aiter on an
MI355X), unless --no-aiter. The Gluon forms are offered where this Triton builds them, as on
the GPU with the same Triton. Which candidate serves is decided there, by measurement: the
autopick keeps the fastest that passes verification. TRITON_INTERPRET must be unset (the
kernels are compiled on a GPU, not interpreted).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

if os.environ.get("TRITON_INTERPRET") == "1":
    raise SystemExit("bench.candidates: unset TRITON_INTERPRET (the candidates a GPU is offered are those of compiled "
                     "kernels)")

import submission as sub  # noqa: E402
from tools.leaderboard import BENCHMARK_SHAPES  # noqa: E402

# The SMs / CUs of the GPUs the project measures or targets.
DEVICE_UNITS = {"gfx950": 256, "sm_90": 132}
# The architectures of the README's table, with the GPU each stands for.
TABLE_ARCHS = (("gfx950", "MI355X (gfx950), aiter present"), ("sm_90", "H200 (sm_90)"))


def assumed_shape(batch: int, kv_len: int, arch: sub.GpuArch, num_sms: int, aiter: bool) -> sub.CallShape:
    """The facts of a leaderboard-like call (uniform lengths, all three formats) on `arch`."""
    return sub.CallShape(batch=batch, q_seq_len=1, total_q=batch, total_kv=batch * kv_len, sm_scale=576 ** -0.5,
                         device=torch.device("cuda"), formats=("bf16", "fp8", "mxfp4"), q_contiguous=True,
                         max_kv_len=kv_len, min_kv_len=kv_len, uniform_kv_len=True, num_sms=num_sms, arch=arch,
                         aiter=aiter and arch.amd_options)


def candidates(arch_name: str, batch: int, kv_len: int, num_sms: int | None = None, aiter: bool = True) -> list:
    """submission.plan_candidates for a call of batch x kv_len on `arch_name`."""
    if num_sms is None:
        if arch_name not in DEVICE_UNITS:
            raise SystemExit(f"bench.candidates: give --sms for {arch_name} (known: {sorted(DEVICE_UNITS)})")
        num_sms = DEVICE_UNITS[arch_name]
    arch = sub.arch_record(arch_name)
    return sub.plan_candidates(assumed_shape(batch, kv_len, arch, num_sms, aiter))


def _grouped(found: list) -> list[tuple[str, list]]:
    """[(route:form, its candidates)] in the order offered."""
    groups: list[tuple[str, list]] = []
    for candidate in found:
        name = f"{candidate.route}:{candidate.form}"
        if not groups or groups[-1][0] != name:
            groups.append((name, []))
        groups[-1][1].append(candidate)
    return groups


def _label_fields(label: str) -> dict:
    return dict(part.split("=", 1) for part in label[label.index("[") + 1:-1].split(",") if "=" in part)


def _group_summary(group: list) -> str:
    """A route and form's candidates in few words: a kernel form's launches by their splits
    ("s16"; "s16/64": 64-row tiles, where the form has tiles of several sizes; "+ik": merged
    in the kernel), aiter's numerics by their split counts."""
    route = group[0].route
    if route.startswith("triton_"):
        launches = [_label_fields(c.label) for c in group]
        tiles = len({fields["block_n"] for fields in launches}) > 1  # name the tile where the form has several
        return " ".join(f"s{fields['splits']}" + (f"/{fields['block_n']}" if tiles else "")
                        + ("+ik" if fields.get("combine") == "in_kernel" else "") for fields in launches)
    if route == "aiter_fp8":
        numerics = dict.fromkeys(c.label.split("[")[0].removeprefix("aiter_") for c in group)
        splits = dict.fromkeys(_label_fields(c.label)["splits"] for c in group)
        return f"{', '.join(numerics)} x {'/'.join(splits)} splits"
    return ""


def markdown() -> str:
    """The README's table: per benchmark shape and architecture, the candidates in order,
    grouped by route and form (_group_summary)."""
    lines = ["| shape | " + " | ".join(title for _, title in TABLE_ARCHS) + " |",
             "|---|" + "---|" * len(TABLE_ARCHS)]
    for batch, kv_len in BENCHMARK_SHAPES:
        cells = []
        for arch_name, _ in TABLE_ARCHS:
            parts = []
            for name, group in _grouped(candidates(arch_name, batch, kv_len)):
                summary = _group_summary(group)
                parts.append(f"`{name}`" + (f" {summary}" if summary else ""))
            cells.append("; ".join(parts))
        lines.append(f"| {batch} x {kv_len} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", help="a GPU architecture as the device reports it: gfx950, sm_90, sm_80, gfx942, ...")
    parser.add_argument("--shape", action="append", default=[], help="BATCHxKV_LEN, e.g. 4x1024 (repeatable)")
    parser.add_argument("--sms", type=int, help="the device's SMs or CUs (default: the MI355X's or the H200's)")
    parser.add_argument("--no-aiter", action="store_true", help="as on an AMD GPU without ROCm's aiter")
    parser.add_argument("--markdown", action="store_true", help="the README's table (gfx950 and sm_90, 8 shapes)")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0
    if not args.arch or not args.shape:
        parser.error("give --arch and at least one --shape (or --markdown)")
    try:
        arch_record = sub.arch_record(args.arch)
        shapes = [tuple(int(part) for part in shape.lower().split("x")) for shape in args.shape]
    except ValueError as error:
        parser.error(f"{error} (a shape is BATCHxKV_LEN, e.g. 4x1024)")
    for batch, kv_len in shapes:
        found = candidates(args.arch, batch, kv_len, args.sms, not args.no_aiter)
        units = args.sms or DEVICE_UNITS.get(args.arch)
        print(f"{batch} x {kv_len} on {arch_record.name} ({units} SMs/CUs"
              f"{', aiter present' if found and found[0].route == 'aiter_fp8' else ''}): {len(found)} candidates")
        for rank, candidate in enumerate(found):
            print(f"  {rank:>3}  {candidate.route + ':' + candidate.form:<28} {candidate.label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
