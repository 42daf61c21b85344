"""The Gluon fp8 decode kernel (submission.py, section "Gluon kernels").

Gluon compiles for a GPU only: it runs neither under TRITON_INTERPRET=1 (it asks for a GPU
driver) nor on a CPU. On a CPU these tests check that the form is refused there, by a
ValueError that says why, before any launch, and that submission.py still imports under
the interpreter. On an NVIDIA GPU (sm_80+: the Gluon twin, ampere copies and mma_v2) or an
MI355X (the cdna4 kernel) the form runs against exact attention on small odd shapes; its
numerics are the e4m3_waves form's (e4m3 Q per head, P * 2^8 in e4m3), so the bounds are
test_triton_kernels' for that form. (The CPU compile for gfx950 and sm_90 is tested with
the static report.)
"""
import os
import subprocess
import sys

import pytest
import torch

import submission as sub
from conftest import DEVICE, HAS_GPU, REPO_ROOT, cpu_only
from test_triton_kernels import SM_SCALE, assert_close, assert_e4m3_p_close, attention_ref, make_fp8, make_indptr

ARCH = sub._device_sms_and_arch(DEVICE)[1]
needs_gluon_gpu = pytest.mark.skipif(
    not sub.gluon_forms_here(ARCH),
    reason="needs an NVIDIA GPU (sm_80+) for the Gluon twin, or an MI355X (gfx950), with Gluon importable")


def run_in_fresh_python(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLA_") and k != "TRITON_INTERPRET"}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=environment, capture_output=True,
                          text=True, timeout=300)


def test_the_interpreter_imports_submission_and_refuses_the_gluon_form():
    """Under TRITON_INTERPRET=1 submission.py imports, offers no Gluon form, and forcing
    one (MLA_ROUTE=triton_fp8:gluon) is refused with a message naming the interpreter."""
    code = (
        "import torch, submission as sub\n"
        "from reference import generate_input\n"
        "assert not sub.gluon_forms_here('sm_90') and not sub.gluon_forms_here('gfx950')\n"
        "assert all(c.form != 'gluon' for c in sub.triton_launch_candidates('fp8', 4, 1024, 256, 'gfx950'))\n"
        "data = generate_input(batchsize=2, qseqlen=1, kvseqlen=64, seed=5)\n"
        "try:\n"
        "    sub.custom_kernel(data)\n"
        "except ValueError as error:\n"
        "    print('refused:', error)\n")
    proc = run_in_fresh_python(code, TRITON_INTERPRET="1", MLA_ROUTE="triton_fp8:gluon", CUDA_VISIBLE_DEVICES="-1",
                               HIP_VISIBLE_DEVICES="-1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused:" in proc.stdout and "TRITON_INTERPRET=1" in proc.stdout, proc.stdout + proc.stderr[-2000:]


@cpu_only("a CPU has no GPU for Gluon")
def test_the_gluon_form_is_refused_without_a_gpu(monkeypatch):
    assert not sub.gluon_forms_here("")
    with pytest.raises(ValueError, match="no GPU"):
        sub.triton_launch_candidates("fp8", 4, 1024, 1, "", form="gluon")
    # and on a CPU tensor even where a launch was built for a GPU
    launch = sub._launch(1, sub._FORM_TILES[("fp8", "gluon")][0], "gluon", "sm_90")
    q = torch.zeros(1, 16, 576, dtype=torch.bfloat16)
    buf, scale, _ = make_fp8(4, torch.Generator().manual_seed(1))
    scratch = sub.make_triton_scratch(1, launch, "cpu")
    if sub.GLUON_AVAILABLE:
        with pytest.raises(ValueError, match="no GPU"):
            sub.decode_tails(q, buf, scale, "fp8", SM_SCALE, scratch, launch)


def test_gluon_launches_split_a_tile_among_64_thread_groups():
    """The same tile is 4 waves on gfx950 and 8 warps on NVIDIA: 4 groups of 64 threads,
    each owning 32 rows; the ring's depth is the tile's num_stages."""
    for arch, warps in (("gfx950", 4), ("sm_90", 8), ("sm_80", 8)):
        launch = sub._launch(2, sub._FORM_TILES[("fp8", "gluon")][0], "gluon", arch)
        assert launch.num_warps == warps and launch.num_stages >= 2
        assert sub._wave_groups("fp8_gluon", launch) == 4
    assert sub.gluon_arch("sm_75") == "" and sub.gluon_arch("gfx942") == ""


def gluon_launch(splits: int, in_kernel: bool):
    launch = sub._launch(splits, sub._FORM_TILES[("fp8", "gluon")][0], "gluon", ARCH)
    return sub.dataclasses.replace(launch, combine_in_kernel=in_kernel)


BLOCK_N = sub._FORM_TILES[("fp8", "gluon")][0][0]
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
    launch = gluon_launch(splits, in_kernel)
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    scratch = sub.make_triton_scratch(q.shape[0], launch, DEVICE)
    sub.triton_fp8_decode(q.to(DEVICE), buf.to(DEVICE), scale.to(DEVICE), qo.to(DEVICE), kv_indptr.to(DEVICE),
                          SM_SCALE, out, scratch, launch)
    assert (scratch.counters == 0).all(), "the in-kernel combine must reset its counters for the next call"
    assert_e4m3_p_close(out.cpu(), q, kv, qo, kv_indptr)
    assert (out[torch.tensor(lengths, device=DEVICE) == 0] == 0).all()


@needs_gluon_gpu
def test_gluon_fp8_form_is_exact_where_p_is():
    """Every score equal (Q zero on the nope dims, one rope row for all tokens): P is 1,
    exact in e4m3, so the output is the mean of V: a wrong row, column or scale shows."""
    gen = torch.Generator().manual_seed(29)
    lengths = [5, 70, 2 * BLOCK_N + 3]
    qo, kv_indptr = make_indptr(lengths)
    buf, scale, kv = make_fp8(int(kv_indptr[-1]), gen)
    buf[:, :, 512:] = buf[0, :, 512:]
    kv[:, 512:] = kv[0, 512:]
    q = torch.randn(3, 16, 576, generator=gen)
    q[:, :, :512] = 0
    q = q.bfloat16()
    out = torch.empty((3, 16, 512), dtype=torch.bfloat16, device=DEVICE)
    launch = gluon_launch(2, False)
    sub.triton_fp8_decode(q.to(DEVICE), buf.to(DEVICE), scale.to(DEVICE), qo.to(DEVICE), kv_indptr.to(DEVICE),
                          SM_SCALE, out, sub.make_triton_scratch(3, launch, DEVICE), launch)
    assert_close(out.cpu(), attention_ref(q, kv, qo, kv_indptr))


@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA or AMD GPU")
def test_forcing_the_gluon_form_serves_or_says_why(monkeypatch):
    """MLA_ROUTE=triton_fp8:gluon: where Gluon runs, the plan serves it; elsewhere a
    ValueError names the reason (no launch happens)."""
    from reference import generate_input
    monkeypatch.setenv("MLA_ROUTE", "triton_fp8:gluon")
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
