"""A CPU replay of the MXFP4 Gluon kernel's index algebra, written by hand after
submission.py's MXFP4 Gluon part (it imports none of it: Gluon does not run on a CPU): the
reshapes, permutes, splits and joins as written there (torch semantics: join = stack on a
new last dim, split = unbind the last dim of 2), the tables in shared memory, the tile base
and validity feature, the split merge, against exact attention over the same MXFP4 cache,
in float64 (the scores rounded to float32 where the kernel's are). Layouts move no values,
so this checks the permutations, tables and masks the kernel composes, not Gluon's
lowering (the gfx950 emulator and the NVIDIA twin do that). A deliberately wrong
permutation (of the output's columns, or of Q's K order) gives errors of order 1.

    python3 results/2026-12-01-gfx950-mxfp4-v2/index_algebra_check.py > results/2026-12-01-gfx950-mxfp4-v2/index_algebra_check.txt
"""
import math
import sys
import torch

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from test_triton_kernels import make_mxfp4, dequant_mxfp4, make_indptr  # noqa: E402

E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float64)


def e2m1(nib):
    v = E2M1[(nib & 7).long()]
    return torch.where((nib & 8) != 0, -v, v)


def join(a, b):
    return torch.stack([a, b], -1)


def split(x):
    return x[..., 0], x[..., 1]


def step_order(x):  # [R, 16C]
    R, C = x.shape[0], x.shape[1] // 16
    return x.reshape(R, 4, 4, C).permute(0, 2, 1, 3).reshape(R, 16 * C)


def row_pairs(x):  # [B, ROWS] -> [B, ROWS/2, 2]
    B, ROWS = x.shape
    return x.reshape(B, ROWS // 32, 2, 16).permute(0, 1, 3, 2).reshape(B, ROWS // 2, 2)


def step_keys(view):  # [4, P, 2] -> [2P, 4]
    P = view.shape[1]
    return view.reshape(4, P // 16, 16, 2).permute(1, 3, 2, 0).reshape(2 * P, 4)


def tile_base(start, hi, BN=128):
    return max(min(start, hi - BN), 0)


def decode_words(words, scales):  # words [.., ] int64 (uint32 values), scales bytes -> [.., 8] fp64 values 2j+n
    out = []
    for j in range(4):
        byte = (words >> (8 * j)) & 0xFF
        for n in range(2):
            out.append(e2m1((byte >> (4 * n)) & 0xF))
    vals = torch.stack(out, -1)  # index 2j + n
    scale = torch.where(scales == 0, torch.tensor(2.0 ** -127, dtype=torch.float64), torch.exp2(scales.double() - 127))
    return vals * scale[..., None]


def attend(q, buf, sc, lo, hi, qk_scale):
    BN, G = 128, 4
    rows_total = buf.shape[0]
    assert rows_total >= BN
    # Q steps (fp64, no e4m3 rounding: the ampere twin's bf16 Q is not modelled either; the
    # check is on the index algebra)
    q = q.double()
    cols = torch.arange(128)
    q_steps = [q[:, (cols // 32 * 4 + k) * 32 + cols % 32] for k in range(4)]  # [16, 128] each
    q_pe = torch.zeros(16, 128, dtype=torch.float64)
    q_pe[:, :64] = q[:, 512:576]
    q_pe[:, 64] = 1.0
    m = torch.full((16,), float("-inf"), dtype=torch.float64)
    l = torch.zeros(128, 16, dtype=torch.float64)
    accs = [torch.zeros(128, 16, dtype=torch.float64) for _ in range(4)]
    for start in range(lo, hi, BN):
        base = tile_base(start, hi)
        rows = torch.arange(base, base + BN)
        nope = buf[rows, :256].long()
        rope_codes = buf[rows, 256:288].long()
        keys = sc[rows, :16].long().T  # [16 blocks, 128 rows]
        pe = sc[rows, 16:18].long().T
        valid = (rows >= start) & (rows < hi)
        # staging
        nope_lds = step_order(nope)
        rope_lds = torch.zeros(BN, 64, dtype=torch.long)
        rope_lds[:, :32] = rope_codes
        rope_lds[:, 32] = torch.where(valid, 0, 0x0F)
        keys = torch.where(valid[None, :], keys, 0)
        keys = step_order(keys.T).T  # [16 u, 128]
        values = keys
        key_tab = row_pairs(keys)
        pe_tab = torch.zeros(4, 64, 2, dtype=torch.long)
        pe_tab[2] = 254
        pe_tab[3] = 127
        pe_tab[:2] = row_pairs(torch.where(valid[None, :], pe, 0))
        # scores
        s = torch.zeros(BN, 16, dtype=torch.float64)
        for k in range(4):
            codes = nope_lds[:, 64 * k:64 * k + 64]  # [128, 64 bytes]: lane group g bytes 16g..
            kk = step_keys(key_tab[4 * k:4 * k + 4])  # [128, 4]
            # values of K step k: byte b of the 64 -> features 2b, 2b+1; block = b // 16
            lo_n, hi_n = e2m1(codes & 0xF), e2m1(codes >> 4)
            kv = torch.stack([lo_n, hi_n], -1).reshape(BN, 128)
            blk = torch.arange(128) // 32
            kv = kv * torch.exp2(kk[:, blk].double() - 127)
            s += kv @ q_steps[k].T
        codes = rope_lds
        kk = step_keys(pe_tab)
        kv = torch.stack([e2m1(codes & 0xF), e2m1(codes >> 4)], -1).reshape(BN, 128)
        kv = (kv * torch.exp2(kk[:, torch.arange(128) // 32].double() - 127)).float().double()  # fp32 overflow
        s += kv @ q_pe.T
        s = s.float().double()
        m_new = torch.maximum(m, s.max(0).values * qk_scale)
        m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
        alpha = torch.exp2(m - m_safe)
        p = torch.exp2(s * qk_scale - m_safe[None, :])
        l = l * alpha[None, :] + p
        accs = [a * alpha[None, :] for a in accs]
        # P.V by K step of 32 rows
        words_all = nope_lds.reshape(BN, 64, 4)
        words_all = words_all[..., 0] | (words_all[..., 1] << 8) | (words_all[..., 2] << 16) | (words_all[..., 3] << 24)
        for step in range(4):
            r = slice(32 * step, 32 * step + 32)
            words = words_all[r].reshape(32, 16, 4)
            scales = values.T[r]  # [32, 16 u]
            scales3 = scales[:, :, None].expand(32, 16, 4)
            vals = decode_words(words, scales3).reshape(32, 64, 8)  # [row, word, 2j+n]
            pt = p[r]  # [32 rows, 16 heads]
            for j in range(4):
                v = torch.stack([vals[:, :, 2 * j], vals[:, :, 2 * j + 1]], -1)  # [row, word, n]
                v = v.reshape(32, G, 16, 2).permute(1, 3, 2, 0).reshape(32 * G, 32)
                accs[j] = accs[j] + v @ pt
        m = m_new
    # output
    o = join(join(accs[0], accs[1]), join(accs[2], accs[3]))  # [m, h, j0, j1]
    o = o.reshape(G, 2, 4, 4, 16, 2, 2).permute(4, 2, 0, 3, 6, 5, 1).reshape(16, 512)
    return o, m, l.sum(0)


def main():
    torch.manual_seed(0)
    worst = 0.0
    for lengths, splits, padded in (([1], 1, False), ([31], 1, True), ([129], 1, False), ([256], 2, True),
                                    ([300, 0, 1, 129], 3, False), ([5 * 128 + 7, 31], 2, True), ([700, 3, 0, 129], 4, False)):
        qo, kv_indptr = make_indptr(lengths)
        total = int(kv_indptr[-1])
        rows = max(total, 128)
        gen = torch.Generator().manual_seed(sum(lengths) + splits)
        buf, scales = make_mxfp4(rows, 122, 130, padded=padded, gen=gen)
        buf = buf.view(torch.uint8).reshape(rows, 288)
        sc = scales.view(torch.uint8)
        kv = dequant_mxfp4(buf, scales).double()
        q = torch.randn(len(lengths), 16, 576, generator=gen).double()
        qk = 576 ** -0.5 * 1.4426950408889634
        for b in range(len(lengths)):
            s0, s1 = int(kv_indptr[b]), int(kv_indptr[b + 1])
            if s1 == s0:
                continue
            chunk = math.ceil(math.ceil((s1 - s0) / splits) / 128) * 128
            parts = []
            for sp in range(splits):
                lo = min(s0 + sp * chunk, s1)
                hi = min(lo + chunk, s1)
                parts.append(attend(q[b], buf, sc, lo, hi, qk))
            mm = torch.stack([p[1] for p in parts]).max(0).values
            num = sum(p[0] * torch.exp2(p[1] - mm)[:, None] for p in parts if p[2].sum() > 0)
            den = sum(p[2] * torch.exp2(p[1] - mm) for p in parts if p[2].sum() > 0)
            out = num / den[:, None]
            ref = torch.softmax(q[b] @ kv[s0:s1].T * 576 ** -0.5, -1) @ kv[s0:s1, :512]
            err = ((out - ref).abs().max() / ref.abs().max()).item()
            worst = max(worst, err)
            print(lengths, splits, padded, b, f"{err:.2e}")
    print("worst", worst)
    assert worst < 1e-5, "the replay does not give exact attention"


main()
