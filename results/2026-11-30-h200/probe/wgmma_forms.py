"""Probe (not product code): the fp8 decode with tokens on the MMA's M side, so that
Triton emits Hopper wgmma instead of mma.sync (16 heads are too few rows for wgmma).
  wg16: K and V widened to fp16 in registers; S^T = K.Q^T and O^T = V^T.P^T (PV_T) by wgmma.
  wg8:  Q split into two e4m3 halves (hi + lo, per-head power-of-two scale), so S^T = K.Q^T
        is an fp8 wgmma straight from the loaded fp8 tile; PV by wgmma (PV_T) or mma.sync.
Each program writes its split's partial output and log-sum-exp; the probe merges in torch.
    python3 results/2026-11-30-h200/probe/wgmma_forms.py --sass   # any machine: compile for sm_90,
                                                                   # instruction mix of the main loop
    OUT=dir python3 results/2026-11-30-h200/probe/wgmma_forms.py  # GPU: device time and error
GPU mode times the submission's fp8 kernel at the measured-best launch beside each form
(bench/kernel_sweep.py's inputs and device timer), on the large shapes and 4 x 8192."""
import collections, json, math, os, re, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "bench"))
import torch
import triton, triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget


@triton.jit
def wg_kernel(q_ptr, kv_ptr, kv_scale_ptr, kv_indptr_ptr, part_o_ptr, part_lse_ptr,
              qk_scale, num_splits, stride_kv,
              BLOCK_N: tl.constexpr, PV_T: tl.constexpr):
    split = tl.program_id(0)
    b = tl.program_id(1)
    heads = tl.arange(0, 16)
    seq_end = tl.load(kv_indptr_ptr + b + 1)
    seq_start = tl.load(kv_indptr_ptr + b)
    chunk = tl.cdiv(tl.cdiv(seq_end - seq_start, num_splits), BLOCK_N) * BLOCK_N
    lo = tl.minimum(seq_start + split * chunk, seq_end)
    hi = tl.minimum(lo + chunk, seq_end)
    q_base = q_ptr + b.to(tl.int64) * 16 * 576 + heads[None, :] * 576
    qT_nope = tl.load(q_base + tl.arange(0, 512)[:, None]).to(tl.float16)
    qT_pe = tl.load(q_base + 512 + tl.arange(0, 64)[:, None]).to(tl.float16)
    kv_scale = tl.load(kv_scale_ptr)
    m_i = tl.full([16], float("-inf"), tl.float32)
    l_i = tl.zeros([16], tl.float32)
    if PV_T:
        acc = tl.zeros([512, 16], tl.float32)
    else:
        acc = tl.zeros([16, 512], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        r = tl.minimum(tl.arange(0, BLOCK_N), hi - 1 - start)
        rows = kv_ptr + tl.cast(start, tl.int64) * stride_kv + (r * stride_kv)[:, None]
        k_nope = tl.load(rows + tl.arange(0, 512)[None, :]).to(tl.float16)
        k_pe = tl.load(rows + 512 + tl.arange(0, 64)[None, :]).to(tl.float16)
        sT = tl.dot(k_pe, qT_pe, acc=tl.dot(k_nope, qT_nope))  # [BN, 16]
        ok = (start + tl.arange(0, BLOCK_N)) < hi
        sT = tl.where(ok[:, None], sT * (qk_scale * kv_scale), float("-inf"))
        m_new = tl.maximum(m_i, tl.max(sT, 0))
        alpha = tl.math.exp2(m_i - m_new)
        pT = tl.math.exp2(sT - m_new[None, :])
        l_i = l_i * alpha + tl.sum(pT, 0)
        if PV_T:
            acc = tl.dot(tl.trans(k_nope), pT.to(tl.float16), acc=acc * alpha[None, :])
        else:
            acc = tl.dot(tl.trans(pT.to(tl.float16)), k_nope, acc=acc * alpha[:, None])
        m_i = m_new
    part = b.to(tl.int64) * num_splits + split
    lse = m_i + tl.math.log2(l_i)
    tl.store(part_lse_ptr + part * 16 + heads, lse)
    if PV_T:
        o = acc * kv_scale / l_i[None, :]
        tl.store(part_o_ptr + part * 16 * 512 + heads[None, :] * 512 + tl.arange(0, 512)[:, None], o)
    else:
        o = acc * kv_scale / l_i[:, None]
        tl.store(part_o_ptr + part * 16 * 512 + heads[:, None] * 512 + tl.arange(0, 512)[None, :], o)

@triton.jit
def wg8_kernel(q_ptr, kv_ptr, kv_scale_ptr, kv_indptr_ptr, part_o_ptr, part_lse_ptr,
              qk_scale, num_splits, stride_kv,
              BLOCK_N: tl.constexpr, PV_T: tl.constexpr):
    split = tl.program_id(0)
    b = tl.program_id(1)
    heads = tl.arange(0, 16)
    seq_end = tl.load(kv_indptr_ptr + b + 1)
    seq_start = tl.load(kv_indptr_ptr + b)
    chunk = tl.cdiv(tl.cdiv(seq_end - seq_start, num_splits), BLOCK_N) * BLOCK_N
    lo = tl.minimum(seq_start + split * chunk, seq_end)
    hi = tl.minimum(lo + chunk, seq_end)
    q_base = q_ptr + b.to(tl.int64) * 16 * 576 + heads[None, :] * 576
    qn = tl.load(q_base + tl.arange(0, 512)[:, None]).to(tl.float32)   # [512, 16]
    qp = tl.load(q_base + 512 + tl.arange(0, 64)[:, None]).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(qn), 0), tl.max(tl.abs(qp), 0))
    amax_exponent = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
    scale_bits = tl.minimum(tl.maximum(amax_exponent - 7, 1), 248)
    q_scale = (scale_bits << 23).to(tl.float32, bitcast=True)
    inverse = ((254 - scale_bits) << 23).to(tl.float32, bitcast=True)
    qn = qn * inverse[None, :]
    qp = qp * inverse[None, :]
    qn_hi = qn.to(tl.float8e4nv)
    qn_lo = (qn - qn_hi.to(tl.float32)).to(tl.float8e4nv)
    qp_hi = qp.to(tl.float8e4nv)
    qp_lo = (qp - qp_hi.to(tl.float32)).to(tl.float8e4nv)
    kv_scale = tl.load(kv_scale_ptr)
    m_i = tl.full([16], float("-inf"), tl.float32)
    l_i = tl.zeros([16], tl.float32)
    if PV_T:
        acc = tl.zeros([512, 16], tl.float32)
    else:
        acc = tl.zeros([16, 512], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        r = tl.minimum(tl.arange(0, BLOCK_N), hi - 1 - start)
        rows = kv_ptr + tl.cast(start, tl.int64) * stride_kv + (r * stride_kv)[:, None]
        k_nope = tl.load(rows + tl.arange(0, 512)[None, :])
        k_pe = tl.load(rows + 512 + tl.arange(0, 64)[None, :])
        sT = tl.dot(k_nope, qn_hi)
        sT = tl.dot(k_nope, qn_lo, acc=sT)
        sT = tl.dot(k_pe, qp_hi, acc=sT)
        sT = tl.dot(k_pe, qp_lo, acc=sT)
        ok = (start + tl.arange(0, BLOCK_N)) < hi
        sT = tl.where(ok[:, None], sT * q_scale[None, :] * (qk_scale * kv_scale), float("-inf"))
        m_new = tl.maximum(m_i, tl.max(sT, 0))
        alpha = tl.math.exp2(m_i - m_new)
        pT = tl.math.exp2(sT - m_new[None, :])
        l_i = l_i * alpha + tl.sum(pT, 0)
        v = tl.load(rows + tl.arange(0, 512)[None, :], cache_modifier=".cg").to(tl.float16)
        if PV_T:
            acc = tl.dot(tl.trans(v), pT.to(tl.float16), acc=acc * alpha[None, :])
        else:
            acc = tl.dot(tl.trans(pT.to(tl.float16)), v, acc=acc * alpha[:, None])
        m_i = m_new
    part = b.to(tl.int64) * num_splits + split
    lse = m_i + tl.math.log2(l_i)
    tl.store(part_lse_ptr + part * 16 + heads, lse)
    if PV_T:
        o = acc * kv_scale / l_i[None, :]
        tl.store(part_o_ptr + part * 16 * 512 + heads[None, :] * 512 + tl.arange(0, 512)[:, None], o)
    else:
        o = acc * kv_scale / l_i[:, None]
        tl.store(part_o_ptr + part * 16 * 512 + heads[:, None] * 512 + tl.arange(0, 512)[None, :], o)

def compile_sm90(kernel, bn, w, st, pv_t):
    names = kernel.arg_names
    types = {"q_ptr": "*bf16", "kv_ptr": "*fp8e4nv", "kv_scale_ptr": "*fp32", "kv_indptr_ptr": "*i32",
             "part_o_ptr": "*fp32", "part_lse_ptr": "*fp32", "qk_scale": "fp32", "num_splits": "i32", "stride_kv": "i32"}
    constants = {"BLOCK_N": bn, "PV_T": pv_t}
    signature = {n: "constexpr" if n in constants else types[n] for n in names}
    aligned = [n for n in names if n.endswith("_ptr") or n == "stride_kv"]
    src = ASTSource(kernel, signature, {(names.index(n),): v for n, v in constants.items()},
                    {(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=w, num_stages=st))

def loop_mix(sass):
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*\.(L_x_\d+):", line))}
    ins = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
    best = None
    for i, line in enumerate(lines):
        br = re.search(r"BRA `\(\.(L_x_\d+)\)", line)
        if br and labels.get(br.group(1), i) < i:
            mix = collections.Counter(m.group(1) for body in lines[labels[br.group(1)]:i + 1] if (m := ins.match(body)))
            if any(op.startswith(("HMMA", "HGMMA")) for op in mix):
                if best is None or sum(mix.values()) > sum(best.values()):
                    best = mix
    return best



def loop_mix(sass):
    """Instruction counts of the longest loop holding MMAs (mma.sync or wgmma)."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*\.(L_x_\d+):", line))}
    ins = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
    best = None
    for i, line in enumerate(lines):
        br = re.search(r"BRA `\(\.(L_x_\d+)\)", line)
        if br and labels.get(br.group(1), i) < i:
            mix = collections.Counter(m.group(1) for body in lines[labels[br.group(1)]:i + 1] if (m := ins.match(body)))
            if any(op.startswith(("HMMA", "HGMMA", "QGMMA")) for op in mix):
                if best is None or sum(mix.values()) > sum(best.values()):
                    best = mix
    return best


FORMS = [("wg8", 64, 4, 2, False), ("wg8", 64, 8, 2, False), ("wg8", 64, 4, 3, False), ("wg8", 64, 4, 2, True),
         ("wg16", 64, 4, 2, True), ("wg16", 128, 8, 2, True), ("wg16", 64, 8, 2, True), ("wg8", 128, 8, 1, False),
         ("wg8", 64, 4, 1, False)]


def kernel_of(name):
    return wg8_kernel if name == "wg8" else wg_kernel


def print_sass_mix():
    import sass_loop
    for name, bn, w, st, pv_t in FORMS:
        compiled = compile_sm90(kernel_of(name), bn, w, st, pv_t)
        mix = loop_mix(sass_loop.disassemble(compiled.asm["cubin"]))
        total = sum(mix.values())
        print(f"{name} bn{bn} w{w} st{st} pvt{int(pv_t)}: smem {compiled.metadata.shared} B, loop {total} instructions "
              f"a warp a tile ({total * w / bn:.1f} a token over the program's warps); {mix.most_common(6)}")

def time_on_gpu():
    import kernel_sweep as ks
    import submission as sub
    dev = torch.device("cuda")
    SHAPES = [(256, 8192, 1), (64, 8192, 4), (256, 1024, 1), (32, 8192, 8), (4, 8192, 32)]
    BASE = {(256, 8192): (1, 32, 4), (64, 8192): (4, 32, 4), (256, 1024): (1, 32, 4), (32, 8192): (8, 32, 4), (4, 8192): (64, 32, 4)}
    out_rows = []

    def combine(part_o, part_lse, batch, splits):
        lse = part_lse.view(batch, splits, 16)
        w = torch.exp2(lse - lse.max(1, keepdim=True).values)
        o = (w[..., None] * part_o.view(batch, splits, 16, 512)).sum(1) / w.sum(1)[..., None]
        return o

    for batch, length, splits in SHAPES:
        copies = max(1, math.ceil(3 * ks.L2_BYTES / (batch * length * 576)))
        prob = ks.Problem(batch, length, dev, copies)
        ref = prob.ref["fp8"]
        row = {"batch": batch, "kv_len": length, "roofline_us": batch * length * 576 / 4.1e12 * 1e6}
        # baseline
        s, bn, w = BASE[(batch, length)]
        launch = sub.TritonLaunch(s, bn, w, 3)
        scratch = sub.make_triton_scratch(batch, launch, dev)
        outs = [torch.empty(batch, 16, 512, dtype=torch.bfloat16, device=dev) for _ in range(copies)]
        def base_call(i):
            q, buf, sc = prob.copies["fp8"][i]
            ks.decode("fp8", (q, buf, sc, prob.qo_indptr, prob.kv_indptr), outs[i], scratch, launch)
        base_call(0); torch.cuda.synchronize()
        row["base_err"] = (outs[0].float() - ref).abs().max().item()
        row["base_us"] = ks.device_time_us(base_call, copies, dev)
        print(batch, length, "base", row["base_us"], row["base_err"], flush=True)
        for kname, bnv, wv, stv, pvt in FORMS:
            key = f"{kname}_bn{bnv}_w{wv}_st{stv}_pvt{int(pvt)}"
            kern = kernel_of(kname)
            part_o = torch.empty(batch * splits * 16 * 512, dtype=torch.float32, device=dev)
            part_lse = torch.empty(batch * splits * 16, dtype=torch.float32, device=dev)
            def call(i):
                q, buf, sc = prob.copies["fp8"][i]
                kern[(splits, batch, 1)](q, buf, sc, prob.kv_indptr, part_o, part_lse, ks.SM_SCALE * 1.4426950408889634,
                                         splits, buf.stride(0), BLOCK_N=bnv, PV_T=pvt, num_warps=wv, num_stages=stv)
            try:
                call(0); torch.cuda.synchronize()
                o = combine(part_o, part_lse, batch, splits)
                err = (o - ref).abs().max().item()
                t = ks.device_time_us(call, copies, dev)
            except Exception as e:
                print(key, "FAILED", str(e)[:200], flush=True); row[key] = None; continue
            row[key] = {"us": t, "err": err}
            print(batch, length, key, round(t, 1), err, flush=True)
        out_rows.append(row)
        del prob; torch.cuda.empty_cache()
    json.dump(out_rows, open(os.path.join(os.environ.get("OUT", "."), "wg_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    if "--sass" in sys.argv:
        print_sass_mix()
    else:
        time_on_gpu()
