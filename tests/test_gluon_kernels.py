"""The Gluon decode kernels, fp8 and MXFP4 (submission.py, section "Gluon kernels").

Gluon compiles for a GPU only: it runs neither under TRITON_INTERPRET=1 (it asks for a GPU
driver) nor on a CPU. On a CPU these tests check that the form is refused there, by a
ValueError that says why, before any launch, and that submission.py still imports under
the interpreter. On an NVIDIA GPU (sm_80+: the Gluon twin, ampere copies and mma_v2) or an
MI355X (the cdna4 kernel) the form runs against exact attention on small odd shapes; its
numerics are the e4m3_waves form's (e4m3 Q per head, P * 2^8 in e4m3), so the bounds are
test_triton_kernels' for that form. The MXFP4 form rounds only P (to bf16, for P.V) before
the output: its bound is that rounding's (bf16_p_bound), over Q rounded to e4m3 on gfx950. (The CPU compile for gfx950 and sm_90 is tested with
the static report.)
"""
import os
import subprocess
import sys

import pytest
import torch

import submission as sub
from conftest import DEVICE, HAS_GPU, REPO_ROOT, cpu_only
from test_triton_kernels import (SM_SCALE, assert_close, assert_e4m3_p_close, attention_ref, dequant_mxfp4,
                                 equal_scores_fp8_input, make_fp8, make_indptr, make_mxfp4, q_e4m3)

ARCH = sub.device_arch(DEVICE)[1]
FP8_GLUON, MXFP4_GLUON = sub.kernel_form("fp8", "gluon"), sub.kernel_form("mxfp4", "gluon")
needs_gluon_gpu = pytest.mark.skipif(
    not sub.gluon_forms_here(ARCH),
    reason="needs an NVIDIA GPU (sm_80+) for the Gluon twin, or an MI355X (gfx950), with a Triton whose Gluon "
           "builds the kernel there" + (f" (here: {sub.gluon_problem(ARCH.gluon_arch)})"
                                        if ARCH.gluon_arch and sub.gluon_problem(ARCH.gluon_arch) else ""))


def run_in_fresh_python(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLA_") and k != "TRITON_INTERPRET"}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=environment, capture_output=True,
                          text=True, timeout=300)


def test_the_interpreter_imports_submission_and_refuses_the_gluon_form():
    """Under TRITON_INTERPRET=1 submission.py imports, offers no Gluon form, and forcing
    one (MLA_ROUTE=triton_fp8:gluon, triton_mxfp4:gluon) is refused with a message naming
    the interpreter."""
    code = (
        "import os, torch, submission as sub\n"
        "from reference import generate_input\n"
        "assert not sub.gluon_forms_here('sm_90') and not sub.gluon_forms_here('gfx950')\n"
        "for fmt in ('fp8', 'mxfp4'):\n"
        "    assert all(c.form != 'gluon' for c in sub.launch_candidates(fmt, 4, 1024, 256, 'gfx950'))\n"
        "data = generate_input(batchsize=2, qseqlen=1, kvseqlen=64, seed=5)\n"
        "for route in ('triton_fp8:gluon', 'triton_mxfp4:gluon'):\n"
        "    os.environ['MLA_ROUTE'] = route\n"
        "    sub.reset_plans()\n"
        "    try:\n"
        "        sub.custom_kernel(data)\n"
        "    except ValueError as error:\n"
        "        print(route, 'refused:', error)\n")
    proc = run_in_fresh_python(code, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="-1", HIP_VISIBLE_DEVICES="-1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for route in ("triton_fp8:gluon", "triton_mxfp4:gluon"):
        refusal = next((line for line in proc.stdout.splitlines() if line.startswith(route + " refused:")), "")
        assert "TRITON_INTERPRET=1" in refusal, proc.stdout + proc.stderr[-2000:]


@cpu_only("a CPU has no GPU for Gluon")
def test_the_gluon_form_is_refused_without_a_gpu(monkeypatch):
    assert not sub.gluon_forms_here("")
    for kv_format in ("fp8", "mxfp4"):
        with pytest.raises(ValueError, match="no GPU"):
            sub.launch_candidates(kv_format, 4, 1024, 1, "", form="gluon")
    launch = sub._launch(1, MXFP4_GLUON.tiles[0], MXFP4_GLUON, "sm_90")
    buf, scales = make_mxfp4(4, 127, 127)
    if sub.GLUON_AVAILABLE:
        with pytest.raises(ValueError, match="no GPU"):
            sub.mxfp4_decode(torch.zeros(1, 16, 576, dtype=torch.bfloat16), buf, scales,
                                    *make_indptr([4]), SM_SCALE, torch.empty(1, 16, 512, dtype=torch.bfloat16),
                                    sub.make_split_scratch(1, launch, "cpu"), launch)
    # and on a CPU tensor even where a launch was built for a GPU
    launch = sub._launch(1, FP8_GLUON.tiles[0], FP8_GLUON, "sm_90")
    q = torch.zeros(1, 16, 576, dtype=torch.bfloat16)
    buf, scale, _ = make_fp8(4, torch.Generator().manual_seed(1))
    scratch = sub.make_split_scratch(1, launch, "cpu")
    if sub.GLUON_AVAILABLE:
        with pytest.raises(ValueError, match="no GPU"):
            sub.decode_arguments("fp8", launch, q, buf, scale, SM_SCALE, scratch)


def test_gluon_launches_split_a_tile_among_64_thread_groups():
    """The same tile is 4 waves on gfx950 and 8 warps on NVIDIA: 4 groups of 64 threads,
    each owning 32 rows; the ring's depth is the tile's num_stages."""
    for arch, warps in (("gfx950", 4), ("sm_90", 8), ("sm_80", 8)):
        for kv_format in ("fp8", "mxfp4"):
            form = sub.kernel_form(kv_format, "gluon")
            launch = sub._launch(2, form.tiles[0], form, sub.arch_record(arch))
            assert launch.num_warps == warps and launch.num_stages >= 2
            assert sub._wave_groups(form, launch) == 4
    assert sub.arch_record("sm_75").gluon_arch == "" and sub.arch_record("gfx942").gluon_arch == ""


def gluon_launch(splits: int, in_kernel: bool, kv_format: str = "fp8"):
    form = sub.kernel_form(kv_format, "gluon")
    launch = sub._launch(splits, form.tiles[0], form, ARCH)
    return sub.dataclasses.replace(launch, combine_in_kernel=in_kernel)


def run_gluon_decode(decode, q, buf, scale, qo, kv_indptr, launch):
    """decode (submission.fp8_decode or mxfp4_decode) on the device under
    test, into an output of NaN: the output on the CPU, after checking that the in-kernel
    combine reset its counters."""
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    scratch = sub.make_split_scratch(q.shape[0], launch, DEVICE)
    decode(q.to(DEVICE), buf.to(DEVICE), scale.to(DEVICE), qo.to(DEVICE), kv_indptr.to(DEVICE), SM_SCALE, out,
           scratch, launch)
    assert (scratch.counters == 0).all(), "the in-kernel combine must reset its counters for the next call"
    return out.cpu()


BLOCK_N = FP8_GLUON.tiles[0].block_n
# (lengths, splits, in-kernel combine): one token, a tile less one, a tile and one, a split
# ending exactly on a tile, ragged lengths with an empty sequence, several tiles a split
# (the ring wraps), both merges of the splits.
GPU_CASES = [([1], 1, False), ([31], 1, False), ([BLOCK_N + 1], 1, False), ([2 * BLOCK_N], 2, False),
             ([2 * BLOCK_N], 2, True), ([300, 0, 1, BLOCK_N + 1], 3, True), ([5 * BLOCK_N + 7, 31], 2, False),
             ([700, 3, 0, 129], 4, True)]


@needs_gluon_gpu
@pytest.mark.parametrize("lengths,splits,in_kernel", GPU_CASES)
def test_gluon_fp8_form_matches_fp64_attention_on_e4m3_q(lengths, splits, in_kernel):
    gen = torch.Generator().manual_seed(sum(lengths) + splits)
    qo, kv_indptr = make_indptr(lengths)
    buf, scale, kv = make_fp8(int(kv_indptr[-1]), gen)
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    out = run_gluon_decode(sub.fp8_decode, q, buf, scale, qo, kv_indptr, gluon_launch(splits, in_kernel))
    assert_e4m3_p_close(out, q, kv, qo, kv_indptr)
    assert (out[torch.tensor(lengths) == 0] == 0).all()


@needs_gluon_gpu
def test_gluon_fp8_form_is_exact_where_p_is():
    """Every score equal (equal_scores_fp8_input): P is 1, exact in e4m3, so the output is
    the mean of V: a wrong row, column or scale shows."""
    q, buf, scale, kv, qo, kv_indptr = equal_scores_fp8_input([5, 70, 2 * BLOCK_N + 3])
    out = run_gluon_decode(sub.fp8_decode, q, buf, scale, qo, kv_indptr, gluon_launch(2, False))
    assert_close(out, attention_ref(q, kv, qo, kv_indptr))


@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA or AMD GPU")
@pytest.mark.parametrize("route", ["triton_fp8:gluon", "triton_mxfp4:gluon"])
def test_forcing_the_gluon_form_serves_or_says_why(monkeypatch, route):
    """MLA_ROUTE=triton_fp8:gluon / triton_mxfp4:gluon: where Gluon runs, the plan serves
    it; elsewhere a ValueError names the reason (no launch happens)."""
    from reference import generate_input
    monkeypatch.setenv("MLA_ROUTE", route)
    sub.reset_plans()
    data = generate_input(batchsize=2, qseqlen=1, kvseqlen=300, seed=7)
    try:
        if sub.gluon_forms_here(ARCH):
            sub.custom_kernel(data)
            assert "form=gluon" in sub.describe_route(data)
        else:
            with pytest.raises(ValueError, match="Gluon"):
                sub.custom_kernel(data)
    finally:
        sub.reset_plans()


def test_gluon_mxfp4_refuses_rows_not_16_byte_aligned():
    """The MXFP4 Gluon form loads rows 16 bytes a thread: a row stride or a start address
    that is not a multiple of 16 is refused by name (the bf16 form takes the same bytes)."""
    rows = 128
    scales = torch.zeros((rows, 18), dtype=torch.uint8)
    launch = sub.KernelLaunch(1, 128, 4, 2, form="gluon")
    wide = torch.zeros((rows, 292), dtype=torch.uint8)
    for buf in (wide[:, :288], wide.view(-1)[4:4 + rows * 288].view(rows, 288)):
        with pytest.raises(ValueError, match="16-byte aligned"):
            sub.kv_operands({"mxfp4": (buf, scales)}, "mxfp4", launch)
    aligned = torch.zeros((rows, 288), dtype=torch.uint8)
    assert sub.kv_operands({"mxfp4": (aligned, scales)}, "mxfp4", launch)[0] is aligned


def test_gluon_mxfp4_takes_a_buffer_shorter_than_a_tile():
    """The MXFP4 Gluon form keeps each tile inside the buffer (_gluon_mxfp4_tile_shift, and a
    buffer shorter than a tile clamped), so a KV buffer of fewer rows than a tile, and trimmed
    or padded scales, are its operands as given; its arguments need a scale row for every KV
    row (its tiles read the scales of every row they cover). Host logic, on the CPU (the
    kernel itself: the GPU tests below and the gfx950 emulator)."""
    launch = sub.KernelLaunch(1, 128, 4, 2, form="gluon", gluon_arch="cdna4")
    scratch = sub.make_split_scratch(1, launch, "cpu")
    q = torch.empty((1, 16, 576), dtype=torch.bfloat16, device="meta")
    for rows, scale_shape in ((1, (1, 18)), (53, (53, 18)), (127, (256, 24))):
        kv_data = {"mxfp4": (torch.zeros((rows, 1, 288), dtype=torch.uint8), torch.zeros(scale_shape, dtype=torch.uint8))}
        kv, scales = sub.kv_operands(kv_data, "mxfp4", launch)
        assert kv.shape[0] == rows and scales.shape == scale_shape
        assert sub.decode_arguments("mxfp4", launch, q, kv, scales, 0.04, scratch)[0]["kv_rows"] == rows
    with pytest.raises(ValueError, match="a scale row for every KV row"):
        sub.decode_arguments("mxfp4", launch, q, torch.zeros((53, 288), dtype=torch.uint8),
                             torch.zeros((52, 18), dtype=torch.uint8), 0.04, scratch)


@pytest.mark.parametrize("kv_format", ["fp8", "mxfp4"])
def test_gluon_forms_write_zeros_over_an_empty_kv_buffer(kv_format):
    """The Gluon forms' loads read a row before the kernel knows a split is empty (row 0
    for an empty split at the buffer's start; on the H200 the MXFP4 form once faulted on an
    empty buffer: results/2026-12-01-h200-final-suite). Over a KV buffer of no rows every
    sequence is empty: no Gluon launch happens, the output is zeroed (what every form writes
    for an empty sequence); a buffer of one row launches. Host logic, on the CPU."""
    launch = sub.KernelLaunch(1, 128, 4, 2, form="gluon", gluon_arch="ampere")
    if kv_format == "fp8":
        kv_data = {"fp8": (torch.zeros((0, 1, 576), dtype=torch.float8_e4m3fn), torch.ones(1))}
    else:
        kv_data = {"mxfp4": (torch.zeros((0, 1, 288), dtype=torch.uint8), torch.zeros((0, 18), dtype=torch.uint8))}
    kv, _ = sub.kv_operands(kv_data, kv_format, launch)
    out = torch.full((3, 16, 512), float("nan"), dtype=torch.bfloat16)
    assert sub.zeros_over_an_empty_buffer(kv_format, launch, kv, out) and (out == 0).all()
    one_row = kv.new_zeros((1, *kv.shape[1:]))
    assert not sub.zeros_over_an_empty_buffer(kv_format, launch, one_row, out)
    triton_launch = sub.KernelLaunch(1, 128, 4, 1, form=sub.forms_of(kv_format)[0].name)
    assert not sub.zeros_over_an_empty_buffer(kv_format, triton_launch, kv, out)  # its loops read nothing


MXFP4_BLOCK_N = MXFP4_GLUON.tiles[0].block_n
# (lengths, splits, in-kernel combine, padded scales): one token, a tile less one, a tile and
# one, a split ending exactly on a tile, ragged lengths with an empty sequence, several
# tiles a split (the ring wraps), both merges, trimmed and padded (row stride 24) scales.
MXFP4_GPU_CASES = [([1], 1, False, False), ([31], 1, False, True), ([MXFP4_BLOCK_N + 1], 1, False, False),
                   ([2 * MXFP4_BLOCK_N], 2, False, True), ([2 * MXFP4_BLOCK_N], 2, True, False),
                   ([300, 0, 1, MXFP4_BLOCK_N + 1], 3, True, True), ([5 * MXFP4_BLOCK_N + 7, 31], 2, False, False),
                   ([700, 3, 0, 129], 4, True, True)]


def bf16_p_bound(q, kv, qo, kv_indptr):
    """The largest output change from rounding P to bf16 for P.V (relative 2^-9 each, the
    sum l taken before rounding): 2^-9 x sum_j p_j |v_j| / l per element, with exact
    attention's own weights; twice that as the bound."""
    bound = torch.zeros(q.shape[0], 16, 512, dtype=torch.float64)
    for b in range(len(kv_indptr) - 1):
        start, end = int(kv_indptr[b]), int(kv_indptr[b + 1])
        if start < end:
            p = torch.softmax((q[int(qo[b])].double() @ kv[start:end].T) * SM_SCALE, dim=-1)
            bound[int(qo[b])] = 2.0 ** -8 * (p @ kv[start:end, :512].abs())
    return bound


@needs_gluon_gpu
@pytest.mark.parametrize("lengths,splits,in_kernel,padded", MXFP4_GPU_CASES)
def test_gluon_mxfp4_form_matches_fp64_attention(lengths, splits, in_kernel, padded):
    """Against exact attention over the same MXFP4 cache, within P's bf16 rounding (the
    only rounding before the output's: on NVIDIA Q is bf16 and K, V decode exactly; on
    gfx950 the reference takes Q (all 576 dims, one power-of-two scale a head) rounded to
    e4m3 as its scaled MFMA does), and a relative RMS error under 2^-8 (a half-scaled
    output is 50% off)."""
    gen = torch.Generator().manual_seed(sum(lengths) + splits)
    qo, kv_indptr = make_indptr(lengths)
    # The buffer ends where the last sequence does (a buffer of one row for one token).
    buf, scales = make_mxfp4(int(kv_indptr[-1]), 122, 130, padded=padded, gen=gen)
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    launch = gluon_launch(splits, in_kernel, "mxfp4")
    out = run_gluon_decode(sub.mxfp4_decode, q, buf, scales, qo, kv_indptr, launch)
    q_seen = q_e4m3(q, 576) if launch.gluon_arch == "cdna4" else q
    kv = dequant_mxfp4(buf, scales)
    ref = attention_ref(q_seen, kv, qo, kv_indptr)
    assert_close(out, ref, bf16_p_bound(q_seen, kv, qo, kv_indptr))
    written = ref.abs().sum((1, 2)) > 0
    relative_rms = ((out.double() - ref)[written].pow(2).mean() / ref[written].pow(2).mean()).sqrt().item()
    assert relative_rms <= 2.0 ** -8, relative_rms
    assert (out[torch.tensor(lengths) == 0] == 0).all()


@needs_gluon_gpu
@pytest.mark.parametrize("splits", [1, 2])
def test_gluon_mxfp4_rows_of_another_sequence_do_not_leak(splits):
    """A split shorter than a tile reads its own rows only (the rows past its end repeat its
    last): another sequence's rows must weigh nothing, even where their scale byte is e8m0's
    NaN (0xFF). Sequence 0 holds such a row (its own output is then non-finite, as exact
    attention's); sequence 1, 50 rows, must match exact attention."""
    gen = torch.Generator().manual_seed(50 + splits)
    lengths = [100, 50]
    qo, kv_indptr = make_indptr(lengths)
    buf, scales = make_mxfp4(MXFP4_BLOCK_N + 22, 122, 130, gen=gen)
    scales[60, 3] = 0xFF
    q = torch.randn(2, 16, 576, generator=gen).bfloat16()
    launch = gluon_launch(splits, False, "mxfp4")
    out = run_gluon_decode(sub.mxfp4_decode, q, buf, scales, qo, kv_indptr, launch)
    q_seen = q_e4m3(q, 576) if launch.gluon_arch == "cdna4" else q
    kv = dequant_mxfp4(buf, scales)
    ref = attention_ref(q_seen, kv, qo, kv_indptr)
    assert torch.isfinite(out[1]).all()
    assert_close(out[1:], ref[1:], bf16_p_bound(q_seen, kv, qo, kv_indptr)[1:])
