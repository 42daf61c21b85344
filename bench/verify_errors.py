"""Errors against exact attention that the autopick's verifier bounds (submission.error_bound):
measured for every route, the a8w8 reference, and torch emulations of the kernel forms
coming for gfx950, on the leaderboard's inputs and the robustness inputs.

  python3 -m bench.verify_errors --out DIR            (GPU: the 8 benchmark inputs, the
                                                      robustness inputs at GPU sizes)
  python3 -m bench.verify_errors --out DIR --smoke    (CPU: small inputs; the Triton routes
                                                      under the interpreter, slow: --routes)
  python3 -m bench.verify_errors --out DIR --routes model_fp8_hopper_two_term,...
                                                      (CPU: the GPU's inputs, the Hopper torch models)
  python3 -m bench.verify_errors --out DIR --routes gluon_fp8,gluon_mxfp4
                                                      (CPU: the GPU's inputs, the gfx950 Gluon models)

Candidates, each judged against exact fp32 attention over the KV format it reads (the
torch route's math, submission.TorchRunner(shape, fmt).exact):
  torch[bf16|fp8|mxfp4]   the torch route over each format (only its bf16 output rounding)
  triton_fp8[...], triton_mxfp4[...]   every launch candidate of the Triton routes, forced
  reference_a8w8          reference.ref_kernel: Q per tensor in e4m3, the fp8 KV (aiter's
                          a8w8 where aiter exists, else its torch emulation): fp8
  coming_fp8              the gfx950 fp8 kernel's math: Q in e4m3 per (token, head), the
                          fp8 KV, fp32 softmax, P * 256 in e4m3 for P.V, fp32 sums: fp8
  coming_mxfp4            the gfx950 MXFP4 kernel's math: Q in e4m3 per (token, head)
                          against the E2M1 K, P in bf16 for P.V: mxfp4
  model_fp8_hopper_two_term, model_fp8_hopper_one_term, model_mxfp4_hopper
                          the Hopper forms' numerics (submission.py section 2.4), tile by
                          tile at their leading launch on the H200 (hopper_form_model); any
                          device, so a CPU measures them on the GPU's inputs
  gluon_fp8, gluon_mxfp4  the gfx950 Gluon forms' rounding, step by step
                          (tools/gfx950_numerics.py, held to the emulated gfx950 code by
                          tools/gfx950_cases.py), once for each split count the autopick
                          offers the form on an MI355X (256 CUs) for the input's shape:
                          form "gluon" of fp8 / mxfp4. Torch on the CPU at any size (no
                          interpreter: under it no Gluon form is offered)
Metrics (submission.output_errors): the worst sequence's relative RMS error, the largest
element error over the output's RMS, and elements whose NaN/Inf differ. Also the check
rule's mismatch against reference.ref_kernel.

Inputs are "regular" (scores of order 1: the benchmark inputs, the verification tests'
inputs, ragged lengths, tiny or huge q or KV alone) or "extreme" (peaked scores: q x 8,
and q and KV both 1e15). The bounds are set from the regular inputs with MARGIN; on an
extreme input a route may exceed them, and the autopick then falls back to a route that
passes (the torch route always does). Writes DIR/verify_errors.json; prints every row and,
per format and form, the worst regular and extreme errors, the bound in force and the bound
that MARGIN over the worst regular error would give (bench/error_bounds.py derives
the records' bounds from these files).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

import reference
from tools import gfx950_numerics
from tools.leaderboard import BENCHMARK_SHAPES, SEEDS
from tools.robustness import MAGNITUDES, Sizes, ragged_input
from utils import get_device, match_reference

MARGIN = 3.0
EXTREME_MAGNITUDES = ("peaked", "both_huge")
BENCHMARK_CASES = [(batch, kv_len, seed) for (batch, kv_len), seed in zip(BENCHMARK_SHAPES, SEEDS)]
# The verification tests' inputs (tests/test_verification.py): batch 2 at the two lengths.
TEST_SHAPES = [(2, 1024, 31), (2, 8192, 32)]
E4M3 = torch.float8_e4m3fn
P_SCALE = 256.0  # P in [0, 1] times 2^8 before its e4m3 cast: 1 maps to 256 (max 448)


# ------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------
def inputs(smoke: bool):
    """(name, category, data) of every input, built lazily."""
    sizes = Sizes(smoke)
    shapes = [] if smoke else BENCHMARK_CASES
    for batch, kv_len, seed in shapes + TEST_SHAPES:
        yield f"generate_input({batch},1,{kv_len},{seed})", "regular", reference.generate_input(batch, 1, kv_len, seed)
    yield f"ragged{sizes.ragged}", "regular", ragged_input(sizes.ragged, seed=11)
    for name, (q_scale, kv_scale) in MAGNITUDES.items():
        category = "extreme" if name in EXTREME_MAGNITUDES else "regular"
        yield (f"magnitude/{name}{sizes.small}", category,
               ragged_input(sizes.small, seed=12, q_scale=q_scale, kv_scale=kv_scale))


# ------------------------------------------------------------------------------------
# Candidates: (label, kv format read, output of data)
# ------------------------------------------------------------------------------------
def e4m3_per_head(q: torch.Tensor) -> torch.Tensor:
    """q (rows, heads, dim) through e4m3 with one scale per (row, head): amax -> 448."""
    q = q.float()
    scale = (q.abs().amax(-1, keepdim=True) / torch.finfo(E4M3).max).clamp(min=torch.finfo(torch.float32).tiny)
    return (q / scale).to(E4M3).float() * scale


def coming_form(data, kv_format: str) -> torch.Tensor:
    """Emulates the gfx950 kernel forms: e4m3 Q per head for Q.K^T, and for P.V either
    P * 256 in e4m3 (fp8) or P in bf16 (MXFP4); fp32 softmax, sums and accumulation.
    The softmax max is the sequence's (the kernels' running max is the tile's so far,
    which only makes P larger and its rounding finer)."""
    sub = _submission()
    q, kv_data, qo_indptr, kv_indptr, config = data
    shape = sub.CallShape.of(data)
    q8 = e4m3_per_head(q)
    out = torch.zeros((q.shape[0], 16, 512), dtype=torch.bfloat16, device=q.device)
    bounds = kv_indptr.tolist()
    for b, (start, end) in enumerate(zip(bounds, bounds[1:])):
        if end == start:
            continue
        keys = sub._kv_rows_fp32(kv_data, kv_format, start, end)
        scores = q8[b] @ keys.T * shape.sm_scale                   # (16, len)
        p = torch.exp(scores - scores.amax(-1, keepdim=True))
        total = p.sum(-1, keepdim=True)
        if kv_format == "fp8":
            weights = (p * P_SCALE).to(E4M3).float() / P_SCALE
        else:
            weights = p.to(torch.bfloat16).float()
        out[b] = (weights @ keys[:, :512] / total).to(torch.bfloat16)
    return out


# The kernel form whose math each emulation is (its record holds its bound).
COMING_FORMS = {"fp8": "e4m3_waves", "mxfp4": "waves"}


# ------------------------------------------------------------------------------------
# The Hopper forms' numerics, modelled in torch (any device): what each kernel rounds, as
# it rounds it (submission.py section 2.4).
#   fp8: Q times a power of two per head (_q_e4m3_scale: amax into [128, 256)) in e4m3,
#        one term or two (the second the e4m3 of what the first left out); K and V the
#        cache's e4m3 values; scores by fp32 accumulation, times Q's inverse scale x sm_scale
#        x log2(e) x the cache's scale; P = exp2(score - running max) and P x 2^8 in e4m3
#        (one or two terms); O^T = V^T . P^T in fp32, times the cache's scale / 2^8.
#   MXFP4: K and V decoded exactly, each 32-block's E2M1 values times 2^(s - c) in bf16 (s
#        the block's scale byte, c its token's largest; 0 for a block 2^252 below it); bf16 Q;
#        scores by fp32 accumulation, times 2^(c - 127) x sm_scale x log2(e); P' = P x
#        2^(c - 127) rounded to bf16; O^T = V^T . P'^T in fp32.
# Both: a sequence cut into the splits of the form's leading launch on the H200's 132 SMs
# (its split rule; the split bounds of _split_bounds), each split read in 64-token
# tiles, P taken against the running maximum after each tile (the accumulator rescaled by
# powers of two, exact), its sum unrounded; the splits merged by their log2-sum-exp; the
# output rounded to bf16. Left out: the hardware's exp2 approximation, the order of the
# fp32 sums and how the tensor cores accumulate fp8 products.
# ------------------------------------------------------------------------------------
HOPPER_MODELS = {"model_fp8_hopper_two_term": ("fp8", "hopper_two_term"),
                 "model_fp8_hopper_one_term": ("fp8", "hopper_one_term"),
                 "model_mxfp4_hopper": ("mxfp4", "hopper")}
H200_SMS = 132
HOPPER_TILE = 64
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e4m3_terms(x: torch.Tensor, terms: int) -> torch.Tensor:
    """x (fp32) as one e4m3 value, or as the sum of two (the second the e4m3 of the rest)."""
    first = x.to(E4M3).float()
    return first if terms == 1 else first + (x - first).to(E4M3).float()


def hopper_q_e4m3(q: torch.Tensor, terms: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q times its power of two per head, as e4m3 terms; the inverse scale per head, NaN
    where the head holds inf or NaN)."""
    q = q.float()
    exponent = (q.abs().amax(-1).view(torch.int32) >> 23) & 0xFF
    scale_bits = (261 - exponent).clamp(1, 253)
    scale = (scale_bits << 23).view(torch.float32)
    inverse = ((254 - scale_bits) << 23).view(torch.float32)
    return e4m3_terms(q * scale[..., None], terms), torch.where(exponent == 255, float("nan"), inverse)


def hopper_mxfp4_rows(buffer, scales, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(Rows start..end-1 as the MXFP4 Hopper kernel decodes them: E2M1 x 2^(s - c) in bf16,
    held in fp32; each row's 2^(c - 127) in fp32)."""
    codes = buffer.view(torch.uint8).reshape(buffer.shape[0], -1)[start:end].long()
    codes = torch.stack((codes & 0xF, codes >> 4), -1).reshape(end - start, -1)  # low nibble: even feature
    magnitudes = torch.tensor(E2M1, dtype=torch.float64, device=codes.device)
    values = magnitudes[codes & 7] * (1 - 2 * (codes >> 3)).double()
    s = scales.view(torch.uint8)[start:end, :18].long()
    c = s.amax(1, keepdim=True)
    relative = torch.where(s - c >= -252, torch.exp2((s - c).double()), 0.0)
    decoded = (values * relative.repeat_interleave(32, 1)).to(torch.bfloat16).float()
    row_factor = torch.clamp(c[:, 0] << 23, min=0x00400000).to(torch.int32).view(torch.float32)
    return decoded, row_factor


def _hopper_split(scores: torch.Tensor, weigh, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Normalized output [16, 512], log2-sum-exp [16]) of one split: scores [16, n] in the
    log2 domain, weigh(P) -> P as the kernel rounds it for P.V, values [n, 512]."""
    heads, n = scores.shape
    tiles = -(-n // HOPPER_TILE)
    padded = torch.full((heads, tiles * HOPPER_TILE), float("-inf"), dtype=torch.float32, device=scores.device)
    padded[:, :n] = scores
    by_tile = padded.view(heads, tiles, HOPPER_TILE)
    running = by_tile.amax(-1).cummax(-1).values  # the running maximum after each tile
    running = torch.where(running == float("-inf"), 0.0, running)
    p = torch.exp2(by_tile - running[..., None]).reshape(heads, -1)[:, :n]
    later = torch.exp2(running - running[:, -1:]).repeat_interleave(HOPPER_TILE, 1)[:, :n]  # the later alphas
    total = (p * later).sum(1)
    out = (weigh(p) * later) @ values / torch.where(total > 0, total, 1.0)[:, None]
    return out, torch.where(total > 0, running[:, -1] + torch.log2(total), float("-inf"))


def hopper_form_model(data, kv_format: str, form_name: str) -> torch.Tensor:
    """A Hopper form's output on `data`, its numerics modelled in torch (above)."""
    sub = _submission()
    q, kv_data, qo_indptr, kv_indptr, config = data
    shape = sub.CallShape.of(data)
    form = sub.kernel_form(kv_format, form_name)
    splits = sub.arch_record("sm_90").split_rule(form, shape.batch, shape.max_kv_len, H200_SMS)[0]
    qk_scale = torch.tensor(shape.sm_scale * sub._LOG2E, dtype=torch.float32)
    out = torch.zeros((q.shape[0], 16, 512), dtype=torch.bfloat16, device=q.device)
    if kv_format == "fp8":
        terms = 2 if form.constexprs["SPLIT_OPERANDS"] else 1  # Q and P as one e4m3 term or two
        q_terms, q_inverse = hopper_q_e4m3(q, terms)
        buffer, kv_scale = kv_data["fp8"]
        score_scale = q_inverse * (qk_scale * kv_scale.float())
    else:
        buffer, block_scales = kv_data["mxfp4"]
    bounds, q_rows = kv_indptr.tolist(), qo_indptr.tolist()
    for b, (start, end) in enumerate(zip(bounds, bounds[1:])):
        row, length = q_rows[b], end - start
        if length <= 0:
            continue  # a sequence without tokens: zeros, as the kernel writes
        if kv_format == "fp8":
            keys = buffer[start:end].reshape(length, -1).float()
            scores = (q_terms[row] @ keys.T) * score_scale[row][:, None]
            row_factor = None
        else:
            keys, row_factor = hopper_mxfp4_rows(buffer, block_scales, start, end)
            scores = (q[row].float() @ keys.T) * (row_factor * qk_scale)
        chunk = -(-(-(-length // splits)) // HOPPER_TILE) * HOPPER_TILE
        parts = []
        for lo in range(0, length, chunk):
            hi = min(lo + chunk, length)
            if kv_format == "fp8":
                weigh = lambda p: e4m3_terms(p * 256.0, terms) * (kv_scale.float() / 256.0)  # noqa: E731
            else:
                weigh = lambda p, f=row_factor[lo:hi]: (p * f).to(torch.bfloat16).float()  # noqa: E731
            parts.append(_hopper_split(scores[:, lo:hi], weigh, keys[lo:hi, :512]))
        outs, lse = torch.stack([o for o, _ in parts]), torch.stack([s for _, s in parts])
        top = lse.amax(0)
        weights = torch.exp2(lse - torch.where(top == float("-inf"), 0.0, top))[..., None]
        merged = (weights * outs).sum(0) / torch.where(weights.sum(0) > 0, weights.sum(0), 1.0)
        out[row] = merged.to(torch.bfloat16)
    return out


def candidates(data, routes: set, device):
    """(label, kv format, form, callable returning the output) of every candidate that
    applies; the form as the verifier's bound is named (submission.error_bound: a kernel
    form's name, "torch"; reference_a8w8 is the aiter route's a8w8 numerics, coming_* emulate
    a kernel form's math)."""
    sub = _submission()
    shape = sub.CallShape.of(data)
    args = data[:4]
    for fmt in shape.formats:
        if "torch" in routes:
            runner = sub.TorchRunner(shape, fmt)
            yield f"torch[{fmt}]", fmt, "torch", lambda runner=runner: runner(*args)
    for fmt in ("fp8", "mxfp4"):
        if f"triton_{fmt}" in routes and fmt in shape.formats and shape.q_seq_len == 1:
            num_sms, arch = sub.device_arch(device)
            for launch in sub.launch_candidates(fmt, shape.batch, shape.max_kv_len, num_sms, arch):
                runner = sub.KernelRunner(shape, fmt, launch)
                yield runner.label, fmt, runner.form, lambda runner=runner: runner(*args)
    if "reference_a8w8" in routes:
        yield "reference_a8w8", "fp8", "a8w8", lambda: reference.ref_kernel(data)
    for fmt in ("fp8", "mxfp4"):
        if f"coming_{fmt}" in routes:
            yield f"coming_{fmt}", fmt, COMING_FORMS[fmt], lambda fmt=fmt: coming_form(data, fmt)
    for label, (fmt, form) in HOPPER_MODELS.items():
        if label in routes and fmt in shape.formats and shape.q_seq_len == 1:
            yield label, fmt, form, lambda fmt=fmt, form=form: hopper_form_model(data, fmt, form)
    for fmt in ("fp8", "mxfp4"):
        if f"gluon_{fmt}" in routes and fmt in shape.formats and shape.q_seq_len == 1:
            for splits in gfx950_numerics.gfx950_split_counts(sub, fmt, shape.batch, shape.max_kv_len, GFX950_CUS):
                yield (f"gluon_{fmt}_gfx950_model[splits={splits}]", fmt, "gluon",
                       lambda fmt=fmt, splits=splits: gluon_model(data, fmt, splits))


def gluon_model(data, kv_format: str, splits: int) -> torch.Tensor:
    """The gfx950 Gluon form's output on data (tools/gfx950_numerics.py)."""
    q, kv_data, _, kv_indptr, config = data
    buffer, scale = kv_data[kv_format]
    if kv_format == "mxfp4":
        buffer, scale = buffer.view(torch.uint8), scale.view(torch.uint8)
    return gfx950_numerics.gluon_form_output(kv_format, q.cpu(), (buffer.cpu(), scale.cpu()), kv_indptr.cpu(),
                                             config["sm_scale"], splits).to(q.device)


ALL_ROUTES = ("torch", "triton_fp8", "triton_mxfp4", "reference_a8w8", "coming_fp8", "coming_mxfp4", "gluon_fp8",
              "gluon_mxfp4", *HOPPER_MODELS)
# The routes that run in torch alone (no kernel): on the CPU too, at the GPU's sizes.
MODEL_ROUTES = {"torch", "reference_a8w8", "coming_fp8", "coming_mxfp4", "gluon_fp8", "gluon_mxfp4",
                *HOPPER_MODELS}
GFX950_CUS = 256  # an MI355X's compute units: the split counts the Gluon models run with


def _submission():
    import submission
    return submission


# ------------------------------------------------------------------------------------
# Measuring
# ------------------------------------------------------------------------------------
def measure(smoke: bool, routes: set, device) -> list[dict]:
    sub = _submission()
    rows = []
    for input_name, category, data in inputs(smoke):
        shape = sub.CallShape.of(data)
        exact, rule_expected = {}, []
        for label, fmt, form, run in candidates(data, routes, device):
            if fmt not in exact:
                exact[fmt] = sub.TorchRunner(shape, fmt).exact(*data[:4])
            began = time.perf_counter()
            output = run()
            errors = sub.output_errors(output, exact[fmt], data[2])
            if not rule_expected:  # the reference's output, computed once an input
                rule_expected.append(reference.ref_kernel(data))
            good, _ = match_reference(data, output, lambda _: rule_expected[0], rtol=reference.CHECK_RTOL,
                                      atol=reference.CHECK_ATOL)
            rows.append({"input": input_name, "category": category, "candidate": label, "kv_format": fmt,
                         "form": form,
                         "sequence_rms": errors["sequence_rms"], "element": errors["element"],
                         "nonfinite": errors["nonfinite"], "worst_sequence": errors["worst_sequence"],
                         "reference_rule": "pass" if good else "fail",
                         "seconds": round(time.perf_counter() - began, 2)})
            r = rows[-1]
            print(f"{input_name:<34} {label:<60} {fmt:<5} seq {r['sequence_rms']:.2e} elem {r['element']:.2e} "
                  f"nonfinite {r['nonfinite']} rule {r['reference_rule']} {r['seconds']:.1f}s", flush=True)
        del data, exact
    return rows


def summary(rows: list[dict]) -> dict:
    """Per format and form ("fp8/e4m3_waves"): the worst regular and extreme errors (with
    where they came from), the bound in force and MARGIN times the worst regular error."""
    sub = _submission()
    result = {}
    for fmt, form in sorted({(r["kv_format"], r["form"]) for r in rows}):
        mine = [r for r in rows if (r["kv_format"], r["form"]) == (fmt, form)]
        bound, bound_name = sub.error_bound(fmt, form)
        entry = {"bound_in_force": vars(bound), "bound_name": bound_name, "margin": MARGIN}
        for category in ("regular", "extreme"):
            group = [r for r in mine if r["category"] == category]
            for metric in ("sequence_rms", "element"):
                if group:
                    worst = max(group, key=lambda r: r[metric])
                    entry[f"{category}_worst_{metric}"] = {"value": worst[metric], "candidate": worst["candidate"],
                                                          "input": worst["input"]}
        entry["margin_x_regular_worst"] = {metric: MARGIN * entry[f"regular_worst_{metric}"]["value"]
                                           for metric in ("sequence_rms", "element")
                                           if f"regular_worst_{metric}" in entry}
        entry["outside_bound"] = [f"{r['candidate']} on {r['input']} ({r['category']})" for r in mine
                                  if r["sequence_rms"] > bound.sequence_rms or r["element"] > bound.element
                                  or r["nonfinite"]]
        result[f"{fmt}/{form}"] = entry
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory for verify_errors.json")
    parser.add_argument("--smoke", action="store_true", help="small inputs; runs on the CPU")
    parser.add_argument("--routes", default=",".join(ALL_ROUTES), help=f"comma-separated subset of {ALL_ROUTES}")
    args = parser.parse_args(argv)
    device = get_device()
    routes = set(args.routes.split(","))
    if routes - set(ALL_ROUTES):
        parser.error(f"unknown routes {sorted(routes - set(ALL_ROUTES))}")
    if device.type != "cuda" and not args.smoke and not routes <= MODEL_ROUTES:
        parser.error(f"no CUDA device: run with --smoke on the CPU, or with --routes among {sorted(MODEL_ROUTES)}")
    if device.type != "cuda" and routes & {"triton_fp8", "triton_mxfp4"}:
        if routes & {"gluon_fp8", "gluon_mxfp4"}:
            parser.error("on the CPU the Triton routes run under TRITON_INTERPRET=1, under which no Gluon form is "
                         "offered: run gluon_fp8 / gluon_mxfp4 apart")
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before submission imports triton
    rows = measure(args.smoke, routes, device)
    result = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "smoke": args.smoke, "routes": sorted(routes),
              "command": "python3 -m bench.verify_errors " + " ".join(argv if argv is not None else sys.argv[1:]),
              "rows": rows, "summary": summary(rows)}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "verify_errors.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
