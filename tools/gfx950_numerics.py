"""Torch models of the gfx950 Gluon forms' rounding (submission.py, section 2.3, ARCH "cdna4"):
what the MI355X code multiplies, rounds and accumulates, step by step, so that its error
against exact attention can be measured on inputs far larger than the gfx950 emulator runs
(bench/verify_errors.py's rows for the forms' bounds), and held to the emulated code on the
emulator's small cases (tools/gfx950_cases.py: the model must agree with the emulated
kernel's output).

Both forms, per sequence and split (the kernel's split bounds, tiles of BLOCK_N rows from
each split's first row):
  Q: each head's 576 dims times the power of two that puts their amax in [128, 256)
     (submission._q_e4m3_scale), rounded to e4m3 (nearest, ties to even); the scores
     take the inverse back (a multiply for fp8, Q's e8m0 block scale for MXFP4).
  fp8 gluon: S = Q8 . K8^T over e4m3 K (16x16x128 and 16x16x32 fp8 MFMAs: exact products,
     fp32 sums), times (Q's inverse x (sm_scale log2 e x the KV scale)); four groups of 32
     rows a tile, each with its own running max; P = exp2(S - max) in fp32, the row sum l
     taken from it, P x 2^8 rounded to e4m3 for P.V against the e4m3 V (fp32 sums); the
     accumulator and l rescaled by exp2(old max - new max) each tile; after the loop the
     groups merged by their maxima, the output acc x (KV scale / 2^8) x (1 / l).
  MXFP4 gluon: S = K . (Q8 x Q's inverse) over the e2m1 K with its e8m0 scales (the scaled
     MFMA: exact products, fp32 sums), times sm_scale log2 e; one running max a head over
     the whole tile; P rounded to bf16 for P.V against V decoded by the convert instruction
     (e2m1 x 2^(s-127) exactly in bf16; a block of scale byte 0 decodes to zeros); l the
     sum of the fp32 P; output acc x (1 / l).
  Several splits: each split's normalized output (fp32) and log2-sum-exp, merged by their
  weights exp2(lse - max lse), divided by the weights' sum; the output rounded to bf16.
What the model does not reproduce: the order of the MFMAs' fp32 sums and the GPU's exp2 /
log2 (a few fp32 ulps), which is why it is held to the emulated kernel within a tolerance
and not bit for bit.
"""
from __future__ import annotations

import torch

import reference

LOG2E = 1.4426950408889634
BLOCK_N = 128
GROUPS = 4
P_SCALE = 256.0  # the fp8 form's P x 2^8 before its e4m3 cast
E4M3 = torch.float8_e4m3fn


def q_e4m3(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q rounded as the forms multiply it: e4m3 values of q x scale, as float32; the inverse
    scale per head, NaN for a head holding inf or NaN) for q (..., 16, 576) bf16, by
    submission._q_e4m3_scale's bit operations."""
    q = q.float()
    amax = q.abs().amax(-1)
    exponent = (amax.view(torch.int32) >> 23) & 0xFF
    scale_bits = (261 - exponent).clamp(1, 253)
    scale = (scale_bits << 23).view(torch.float32)
    inverse = ((254 - scale_bits) << 23).view(torch.float32)
    inverse = torch.where(exponent == 255, float("nan"), inverse)
    return (q * scale[..., None]).to(E4M3).float(), inverse


def split_bounds(start: int, end: int, num_splits: int, block_n: int = BLOCK_N) -> list[tuple[int, int]]:
    """The kernel's [lo, hi) of each split of the rows [start, end) (submission._split_bounds)."""
    chunk = -(-(-(-(end - start) // num_splits)) // block_n) * block_n
    bounds = []
    for split in range(num_splits):
        lo = min(start + split * chunk, end)
        bounds.append((lo, min(lo + chunk, end)))
    return bounds


def _tile_rows(bounds: torch.Tensor, tile: int, block_n: int):
    """Row indices [P, block_n] of tile `tile` of each program's [lo, hi) (bounds [P, 2]),
    clamped to hi - 1, and whether each is in the program's rows."""
    rows = bounds[:, :1] + tile * block_n + torch.arange(block_n)
    valid = rows < bounds[:, 1:]
    return torch.minimum(rows, (bounds[:, 1:] - 1).clamp(min=0)), valid


def _fp8_program(q8, score_scale, keys, valid):
    """One tile's scores of the fp8 form, [P, G, 16, T], log2 domain, -inf where invalid."""
    programs = keys.shape[0]
    s = torch.einsum("phd,prd->phr", q8, keys) * score_scale[:, :, None]
    s = torch.where(valid[:, None, :], s, float("-inf"))
    return s.reshape(programs, 16, GROUPS, BLOCK_N // GROUPS).permute(0, 2, 1, 3)


def _softmax_step(s, m_i, l_i):
    """submission._softmax_step over the last axis, with the running sum."""
    m_new = torch.maximum(m_i, s.amax(-1))
    m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
    alpha = torch.exp2(m_i - m_safe)
    p = torch.exp2(s - m_safe[..., None])
    return p, alpha, m_new, l_i * alpha + p.sum(-1)


def _fp8_programs(q8, inverse, kv_codes, kv_scale, qk_scale, bounds):
    """(acc [P, 16, 512], m [P, 16], l [P, 16]) of the fp8 form's programs, merged over
    their groups, acc scaled back (KV scale / 2^8)."""
    programs = bounds.shape[0]
    score_scale = inverse * (qk_scale * kv_scale)                 # [P, 16]
    m_i = torch.full((programs, GROUPS, 16), float("-inf"))
    l_i = torch.zeros((programs, GROUPS, 16))
    acc = torch.zeros((programs, GROUPS, 16, 512))
    tiles = int(((bounds[:, 1] - bounds[:, 0]).clamp(min=0).max() + BLOCK_N - 1) // BLOCK_N) if programs else 0
    for tile in range(tiles):
        rows, valid = _tile_rows(bounds, tile, BLOCK_N)
        keys = kv_codes[rows].float()                             # [P, T, 576]: e4m3 values
        s = _fp8_program(q8, score_scale, keys, valid)
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i)
        p8 = (p * P_SCALE).to(E4M3).float()                       # [P, G, 16, 32]
        v = keys[..., :512].reshape(programs, GROUPS, BLOCK_N // GROUPS, 512)
        acc = acc * alpha[..., None] + torch.matmul(p8, v)
    acc = acc * (kv_scale * 0.00390625)
    m = m_i.amax(1)
    w = torch.exp2(m_i - torch.where(m == float("-inf"), 0.0, m)[:, None, :])
    return (acc * w[..., None]).sum(1), m, (l_i * w).sum(1)


def _v_convert(codes_u8, scale_bytes):
    """V [..., 512] as gfx950's convert decodes it (float32 holding bf16-exact values):
    e2m1 x the fp32 bits s << 23 (scale byte 0 gives 0)."""
    values = reference.mxfp4_to_f32(codes_u8[..., :256])
    scales = (scale_bytes[..., :16].to(torch.int32) << 23).view(torch.float32)
    return (values.unflatten(-1, (16, 32)) * scales[..., None]).flatten(-2)


def _mxfp4_programs(q8, inverse, kv_codes, kv_scales, qk_scale, bounds):
    """(acc [P, 16, 512], m [P, 16], l [P, 16]) of the MXFP4 form's programs."""
    programs = bounds.shape[0]
    q_scaled = q8 * inverse[..., None]                            # [P, 16, 576]: e4m3 x its power of two
    m_i = torch.full((programs, 16), float("-inf"))
    l_rows = torch.zeros((programs, BLOCK_N, 16))
    acc = torch.zeros((programs, 16, 512))
    tiles = int(((bounds[:, 1] - bounds[:, 0]).clamp(min=0).max() + BLOCK_N - 1) // BLOCK_N) if programs else 0
    for tile in range(tiles):
        rows, valid = _tile_rows(bounds, tile, BLOCK_N)
        codes, scales = kv_codes[rows], kv_scales[rows]           # [P, T, 288], [P, T, >= 18]
        keys = (reference.mxfp4_to_f32(codes).unflatten(-1, (18, 32))
                * reference.e8m0_to_f32(scales[..., :18])[..., None]).flatten(-2)
        s = torch.einsum("prd,phd->prh", keys, q_scaled)          # [P, T, 16]
        s = torch.where(valid[..., None], s, float("-inf"))
        m_new = torch.maximum(m_i, (s.amax(1) * qk_scale))
        m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
        alpha = torch.exp2(m_i - m_safe)
        p = torch.exp2(s * qk_scale - m_safe[:, None, :])         # [P, T, 16]
        l_rows = l_rows * alpha[:, None, :] + p
        v = _v_convert(codes, scales)                             # [P, T, 512]
        acc = acc * alpha[..., None] + torch.einsum("prh,prc->phc", p.to(torch.bfloat16).float(), v)
        m_i = m_new
    return acc, m_i, l_rows.sum(1)


def _finish(acc, m, l, num_splits: int) -> torch.Tensor:
    """The programs' states [B * splits, ...] -> the output [B, 16, 512] bf16: one split
    normalized and rounded, several merged by their log2-sum-exp (submission's combine)."""
    o = acc * (1.0 / torch.where(l > 0, l, 1.0))[..., None]
    if num_splits == 1:
        return o.to(torch.bfloat16)
    batch = o.shape[0] // num_splits
    o = o.reshape(batch, num_splits, 16, 512)
    lse = torch.where(l > 0, m + torch.log2(l), float("-inf")).reshape(batch, num_splits, 16)
    lse_max = lse.amax(1)
    weight = torch.exp2(lse - torch.where(lse_max == float("-inf"), 0.0, lse_max)[:, None])
    w_sum = weight.sum(1)
    return ((weight[..., None] * o).sum(1) / torch.where(w_sum > 0, w_sum, 1.0)[..., None]).to(torch.bfloat16)


def gluon_form_output(kv_format: str, q, kv_operands, kv_indptr, sm_scale: float, num_splits: int,
                      batch_chunk: int = 64) -> torch.Tensor:
    """The gfx950 Gluon form's output (total_q, 16, 512) bf16 for q (batch, 16, 576) bf16 (one
    query a sequence), the KV format's operands as submission.kv_operands gives them
    (fp8: the e4m3 buffer and its scale; MXFP4: code and scale bytes), kv_indptr, and the
    launch's split count; sequences in chunks of batch_chunk (memory)."""
    if kv_format not in ("fp8", "mxfp4"):
        raise ValueError(f"no Gluon form reads {kv_format!r}")
    q8, inverse = q_e4m3(q)
    qk_scale = torch.tensor(sm_scale * LOG2E, dtype=torch.float32)  # the kernel's fp32 argument
    if kv_format == "fp8":
        buffer, kv_scale = kv_operands
        codes = buffer.reshape(buffer.shape[0], 576)
        kv_scale = kv_scale.float().reshape(())
    else:
        buffer, scales = kv_operands
        codes = buffer.view(torch.uint8).reshape(buffer.shape[0], 288)
        scales = scales.view(torch.uint8)
    ends = [int(x) for x in kv_indptr.tolist()]
    out = torch.zeros((q.shape[0], 16, 512), dtype=torch.bfloat16)
    for first in range(0, q.shape[0], batch_chunk):
        sequences = range(first, min(first + batch_chunk, q.shape[0]))
        bounds = torch.tensor([b for i in sequences for b in split_bounds(ends[i], ends[i + 1], num_splits)],
                              dtype=torch.int64).reshape(-1, 2)
        program_q = q8[list(sequences)].repeat_interleave(num_splits, 0)
        program_inverse = inverse[list(sequences)].repeat_interleave(num_splits, 0)
        if kv_format == "fp8":
            acc, m, l = _fp8_programs(program_q, program_inverse, codes, kv_scale, qk_scale, bounds)
        else:
            acc, m, l = _mxfp4_programs(program_q, program_inverse, codes, scales, qk_scale, bounds)
        out[first:first + len(sequences)] = _finish(acc, m, l, num_splits)
    return out


def gfx950_split_counts(sub, kv_format: str, batch: int, max_kv_len: int, cus: int = 256) -> list[int]:
    """The split counts of the Gluon form's launches the autopick offers on gfx950 (cus CUs)
    for this batch and longest sequence (submission.launch_candidates, the form
    forced): the model runs once per count."""
    launches = sub.launch_candidates(kv_format, batch, max_kv_len, cus, "gfx950", form="gluon")
    return sorted({launch.num_splits for launch in launches})


def agreement(model: torch.Tensor, emulated: torch.Tensor, exact: torch.Tensor) -> dict:
    """How closely the model's output matches the emulated kernel's: the largest difference
    over the exact output's RMS, and the share of elements equal in bf16."""
    finite = torch.isfinite(model.float()) & torch.isfinite(emulated.float())
    diff = (model.float() - emulated.float())[finite].abs()
    rms = float(exact.double().pow(2).mean().sqrt()) or 1.0
    return {"largest_over_rms": float(diff.max()) / rms if diff.numel() else 0.0,
            "equal_share": float((model == emulated).float().mean()),
            "nonfinite_differ": int((torch.isfinite(model.float()) != torch.isfinite(emulated.float())).sum())}

