"""The Hopper forms (submission.py section 2.4). Host logic, CPU tensors: offered on sm_90
alone and first there, their own launches, the other forms' candidates unchanged behind
them, the Gluon API check's Hopper part, the inputs they hand over with a ValueError, their
TMA descriptors, and bench/hopper_safety.py's reading of what the GPU runs write. On an
sm_90 GPU: every launch of theirs on odd inputs within its bound of exact attention, and a
NaN row kept in its own sequence. Their kernels run there alone (Gluon does not run under
the interpreter): compiled for sm_90 on a CPU by tests/test_sm90_compile.py, fenced by
tests/test_memory_safety_gpu.py, run forced by bench/hopper_safety.py."""
import dataclasses
import json

import pytest
import torch

import reference
import submission as sub
from bench import hopper_safety
from conftest import DEVICE, HAS_GPU
from tools import compile_target
from tools.robustness import ragged_input

pytestmark = pytest.mark.fast

HOPPER = {("fp8", "hopper_two_term"), ("fp8", "hopper_one_term"), ("mxfp4", "hopper")}
SHAPES = compile_target.BENCHMARK_SHAPES


def hopper_launches(launches) -> list:
    return [launch for launch in launches if launch.gluon_arch == "hopper"]


@pytest.fixture
def compiled_here(monkeypatch):
    """As on a GPU where the kernels are compiled, not interpreted."""
    monkeypatch.setattr(sub, "_INTERPRETED", False)


def test_the_hopper_records_name_sm_90_alone():
    records = {(form.kv_format, form.name): form for form in sub.KERNEL_FORMS if form.gluon_arch}
    assert set(records) == HOPPER
    assert [arch.name for arch in sub.ARCHITECTURES.values() if "hopper" in arch.exclusive_gluon_archs] == ["sm_90"]
    for form in records.values():
        assert form.language == "gluon" and set(form.places) == {"sm_90"}
        assert form.tiles == (sub.Tile(64, num_stages=2 if form.kv_format == "fp8" else 1, threads=128),)
        assert sub.arch_record("sm_90").warp_size * 4 == form.tiles[0].threads  # one warpgroup
        assert sub.form_runs_on(form, "sm_90") and not any(
            sub.form_runs_on(form, arch) for arch in ("sm_80", "sm_100", "gfx950", ""))


@pytest.mark.usefixtures("compiled_here")
@pytest.mark.parametrize("kv_format", ["fp8", "mxfp4"])
def test_on_sm_90_the_hopper_forms_lead_and_the_others_follow_as_before(kv_format, monkeypatch):
    others = tuple(form for form in sub.KERNEL_FORMS if not form.gluon_arch)
    for batch, kv_len in SHAPES:
        offered = sub.launch_candidates(kv_format, batch, kv_len, 132, "sm_90")
        first = hopper_launches(offered)
        assert first and offered[:len(first)] == first  # the Hopper forms' launches come first
        with monkeypatch.context() as without:
            without.setattr(sub, "KERNEL_FORMS", others)
            without.setattr(sub, "_FORMS_BY_NAME", {(f.kv_format, f.name): f for f in others})
            before = sub.launch_candidates(kv_format, batch, kv_len, 132, "sm_90")
        assert offered[len(first):] == before
    for arch in ("sm_80", "gfx950", ""):
        assert not hopper_launches(sub.launch_candidates(kv_format, 4, 1024, 132, arch))


@pytest.mark.usefixtures("compiled_here")
def test_each_hopper_form_gets_its_leading_splits_in_kernel_half_of_them_and_the_combine_kernel():
    for kv_format, name in sorted(HOPPER):
        for batch, kv_len in SHAPES:
            launches = sub.launch_candidates(kv_format, batch, kv_len, 132, "sm_90", form=name)
            fill = sub._pow2_floor(min(264 // batch, 64, kv_len // 64))  # two programs an SM
            plan = [(launch.num_splits, launch.combine_in_kernel) for launch in launches]
            assert plan == ([(1, False)] if fill == 1 else [(fill, True), (fill // 2, fill // 2 > 1), (fill, False)])
            assert all(launch.form == name and launch.num_warps == 4 and launch.block_n == 64 and
                       launch.gluon_arch == "hopper" and not launch.each_wave_fences for launch in launches)
            assert "form=" + name + "," in sub.launch_label(kv_format, launches[0])


@pytest.mark.usefixtures("compiled_here")
def test_a_hopper_form_forced_off_sm_90_is_refused_by_name():
    for arch in ("gfx950", "sm_80", "sm_100"):
        with pytest.raises(ValueError, match="runs on sm_90 GPUs only"):
            sub.launch_candidates("fp8", 4, 1024, 132, arch, form="hopper_two_term")
    assert "runs on sm_90 GPUs only" in sub.ROUTES["triton_mxfp4"].unavailable_reason(torch.device("cpu"), "hopper")


def test_under_the_interpreter_a_hopper_form_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(sub, "_INTERPRETED", True)  # as TRITON_INTERPRET=1 decides at import
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        sub.launch_candidates("fp8", 4, 1024, 132, "sm_90", form="hopper_one_term")
    assert not hopper_launches(sub.launch_candidates("fp8", 4, 1024, 132, "sm_90"))


@pytest.mark.usefixtures("compiled_here", "fresh_plans")
def test_a_gluon_lacking_a_hopper_name_offers_the_other_forms_and_says_why_once(monkeypatch, capsys):
    lookup = sub._gluon_lookup
    monkeypatch.setattr(sub, "_gluon_lookup", lambda path: None if path == "gl_hopper.warpgroup_mma" else lookup(path))
    monkeypatch.setattr(sub, "_GLUON_PROBLEMS", sub._check_gluon_api())
    assert sub._GLUON_PROBLEMS["hopper"].endswith("lacks gl_hopper.warpgroup_mma")
    assert not sub._GLUON_PROBLEMS["ampere"] and not sub._GLUON_PROBLEMS["cdna4"]
    monkeypatch.setenv("MLA_DEBUG", "1")
    for _ in range(2):
        offered = sub.launch_candidates("fp8", 4, 1024, 132, "sm_90")
        assert not hopper_launches(offered) and any(launch.form == "gluon" for launch in offered)
    said = [line for line in capsys.readouterr().err.splitlines() if "no Gluon" in line]
    assert said == [f"[mla] no Gluon hopper form on sm_90: {sub._GLUON_PROBLEMS['hopper']}"]
    with pytest.raises(ValueError, match="no Gluon hopper form on sm_90: .*lacks gl_hopper.warpgroup_mma"):
        sub.launch_candidates("fp8", 4, 1024, 132, "sm_90", form="hopper_two_term")


def test_hopper_modules_that_do_not_import_refuse_the_hopper_part_alone(monkeypatch):
    monkeypatch.setattr(sub, "_GLUON_HOPPER_IMPORT_ERROR", "Gluon's Hopper modules do not import: ImportError: test")
    problems = sub._check_gluon_api()
    assert problems["hopper"] == sub._GLUON_HOPPER_IMPORT_ERROR
    assert not problems[""] and not problems["ampere"] and not problems["cdna4"]


def _launch(kv_format: str, name: str, splits: int = 4):
    form = sub.kernel_form(kv_format, name)
    return dataclasses.replace(sub._launch(splits, form.tiles[0], form, "sm_90"), combine_in_kernel=True)


@pytest.mark.parametrize("kv_format,name", sorted(HOPPER))
def test_inputs_a_hopper_form_cannot_read_are_handed_over_with_a_value_error(kv_format, name):
    data = reference.generate_input(2, 1, 40, 3, device="cpu")
    launch = _launch(kv_format, name)
    kv_data = data[1]
    buffer, scale = kv_data[kv_format]
    shifted = torch.empty(buffer.numel() + 1, dtype=torch.uint8)[1:].view(buffer.dtype).view(buffer.shape)
    with pytest.raises(ValueError, match="needs 16-byte aligned rows"):
        sub.kv_operands({kv_format: (shifted, scale)}, kv_format, launch)
    # an empty buffer is served without a launch (its TMA descriptors would describe no rows)
    empty_kv, _ = sub.kv_operands({kv_format: (buffer[:0], scale)}, kv_format, launch)
    out = torch.full((2, 16, 512), float("nan"), dtype=torch.bfloat16)
    assert sub.zeros_over_an_empty_buffer(kv_format, launch, empty_kv, out) and (out == 0).all()
    if kv_format == "fp8":
        with pytest.raises(ValueError, match="reads torch.float8_e4m3fn bytes"):
            sub.kv_operands({"fp8": (buffer.view(torch.uint8).view(torch.float8_e4m3fnuz), scale)}, "fp8",
                                   launch)
    kv, kv_scale = sub.kv_operands(kv_data, kv_format, launch)
    scratch = sub.make_split_scratch(2, launch, "cpu")
    with pytest.raises(ValueError, match="reads 64-row tiles"):
        sub.decode_arguments(kv_format, dataclasses.replace(launch, block_n=32), data[0].to("meta"), kv.to("meta"),
                             kv_scale.to("meta"), 0.04, scratch)
    if kv_format == "mxfp4":
        with pytest.raises(ValueError, match="a scale row for every KV row"):
            sub.decode_arguments(kv_format, launch, data[0].to("meta"), kv.to("meta"), kv_scale[:10].to("meta"),
                                 0.04, scratch)


@pytest.mark.parametrize("kv_format,name", sorted(HOPPER))
def test_a_hopper_call_takes_the_kv_as_two_tma_descriptors(kv_format, name):
    data = compile_target.contract_inputs(4, 1024)
    launch = _launch(kv_format, name)
    decode, combine = compile_target.decode_kernel_calls(data, kv_format, dataclasses.replace(
        launch, combine_in_kernel=False))
    arguments = decode.arguments
    nope, rope = arguments["nope_desc"], arguments["rope_desc"]
    row_bytes = 576 if kv_format == "fp8" else 288
    assert nope.shape == rope.shape == [4 * 1024, row_bytes] and nope.strides == [row_bytes, 1]
    assert nope.block_shape == [64, row_bytes * 8 // 9] and rope.block_shape == [64, row_bytes // 9]
    assert arguments["kv_scale_ptr"].shape == ((1,) if kv_format == "fp8" else (4 * 1024, 18))
    assert arguments["SPLIT"] and not arguments["COMBINE_IN_KERNEL"] and arguments["WAVE_FENCE_THREADS"] == 0
    assert decode.options == {"num_warps": 4, "num_stages": 1}
    assert combine.kernel is sub._combine_splits_kernel
    if kv_format == "fp8":
        assert arguments["STAGES"] == 2 and arguments["SPLIT_OPERANDS"] == (name == "hopper_two_term")
    assert set(arguments) == set(decode.kernel.arg_names)
    single = compile_target.decode_kernel_calls(data, kv_format, launch)
    assert len(single) == 1 and single[0].arguments["COMBINE_IN_KERNEL"] and single[0].arguments["WAVE_FENCE_THREADS"] == 0


# ---------------------------------------------------------------- on an H200
HERE = sub.device_arch(DEVICE)
needs_sm90 = pytest.mark.skipif(
    not (HAS_GPU and sub.gluon_forms_here(HERE[1], sub.kernel_form("fp8", "hopper_two_term"))),
    reason="needs an NVIDIA sm_90 GPU (H100, H200) whose Triton builds Gluon's Hopper kernels: they do not run "
           "under TRITON_INTERPRET=1 (Gluon asks for a GPU driver), on a CPU, or on another GPU")
ODD_INPUTS = {"1 token": ([1], {}), "2 x 31 (a buffer shorter than a tile)": ([31, 31], {}),
              "3 x 300": ([300] * 3, {}), "lengths 5, 200, 64, 1, 700": ([5, 200, 64, 1, 700], {}),
              "lengths 0, 129, 0": ([0, 129, 0], {}), "aiter's older padded scales": ([300, 300], dict(
                  ties="away", padded=True))}


@needs_sm90
@pytest.mark.parametrize("kv_format,name", sorted(HOPPER))
@pytest.mark.parametrize("case", list(ODD_INPUTS))
def test_every_hopper_launch_is_within_its_bound_of_exact_attention(kv_format, name, case):
    lengths, options = ODD_INPUTS[case]
    data = ragged_input(lengths, seed=21, device=DEVICE, **options)
    shape = sub.CallShape.of(data)
    exact = sub.TorchRunner(shape, kv_format).exact(*data[:4])
    bound = sub.kernel_form(kv_format, name).error_bound
    for launch in sub.launch_candidates(kv_format, shape.batch, shape.max_kv_len, *HERE, name):
        out = torch.full((shape.total_q, 16, 512), float("nan"), dtype=torch.bfloat16, device=DEVICE)
        runner = sub.KernelRunner(shape, kv_format, launch)
        runner(*data[:4], out=out)
        errors = sub.output_errors(out, exact, data[2])
        assert errors["nonfinite"] == 0 and errors["sequence_rms"] <= bound.sequence_rms, (runner.label, errors)
        assert errors["element"] <= bound.element, (runner.label, errors)


@needs_sm90
@pytest.mark.parametrize("kv_format,name", sorted(HOPPER))
def test_a_nan_row_of_one_sequence_stays_out_of_the_others(kv_format, name):
    # The first sequence's last row NaN in the cache's own bytes (e4m3 0x7F; the e8m0 scale 0xFF)
    data = ragged_input([100, 90, 80], seed=22, device=DEVICE)
    buffer, scales = data[1][kv_format]
    (buffer if kv_format == "fp8" else scales).view(torch.uint8)[99] = 0x7F if kv_format == "fp8" else 0xFF
    shape = sub.CallShape.of(data)
    exact = sub.TorchRunner(shape, kv_format).exact(*data[:4])
    bound = sub.kernel_form(kv_format, name).error_bound
    for launch in sub.launch_candidates(kv_format, shape.batch, shape.max_kv_len, *HERE, name):
        runner = sub.KernelRunner(shape, kv_format, launch)
        out = runner(*data[:4])
        assert bool(exact[0].isnan().all()) and bool(out[0].isnan().any()), runner.label
        rest = sub.output_errors(out[1:], exact[1:], data[2][1:] - 1)
        assert rest["nonfinite"] == 0 and rest["sequence_rms"] <= bound.sequence_rms, (runner.label, rest)


# ---------------------------------------------------------------- bench/hopper_safety.py
def test_the_safety_summary_reads_the_gpu_runs(tmp_path):
    rows = [{"route": "triton_fp8:hopper_two_term", "case": "ragged", "status": "PASS", "detail": ""},
            {"route": "triton_fp8:hopper_two_term", "case": "fnuz", "status": "REFUSED", "detail": "no"},
            {"route": "triton_mxfp4:hopper", "case": "recheck", "status": "FAIL", "detail": "call 3: off"},
            {"route": "triton_fp8:hopper_one_term", "case": "*", "status": "SKIP", "detail": "not here"}]
    (tmp_path / "robustness_gpu.json").write_text(json.dumps({"rows": rows}))
    counts = hopper_safety.robustness_counts(tmp_path / "robustness_gpu.json")
    assert counts["triton_fp8:hopper_two_term"]["PASS"] == 1 and counts["triton_fp8:hopper_two_term"]["REFUSED"] == 1
    assert counts["triton_mxfp4:hopper"]["failed"] == ["recheck: call 3: off"]
    assert counts["triton_fp8:hopper_one_term"]["skipped"] == "not here"
    log = tmp_path / "memory_safety.log"
    log.write_text("..\n[benchmark/4x1024] 12 launches fenced (fp8:f16 6, fp8:hopper_two_term 3, mxfp4:hopper 3), "
                   "1 failed, verifier and finiteness judged\n"
                   "[benchmark/4x1024] FAILED triton_mxfp4[form=hopper,splits=16,block_n=64]: 8 fence bytes\n"
                   "[ragged] 3 launches fenced (fp8:hopper_two_term 3), 0 failed\n"
                   "F.\n1 failed, 21 passed in 80.0s\n")
    fenced = hopper_safety.memory_safety_counts(log)
    assert fenced["pytest"] == "1 failed, 21 passed in 80.0s"
    assert fenced["forms"]["fp8:hopper_two_term"] == {"inputs": 2, "launches": 6, "failed": []}
    assert fenced["forms"]["mxfp4:hopper"]["failed"] == [
        "benchmark/4x1024: triton_mxfp4[form=hopper,splits=16,block_n=64]: 8 fence bytes"]
    sanitized = tmp_path / "memcheck.log"
    sanitized.write_text("========= COMPUTE-SANITIZER\n...\n========= ERROR SUMMARY: 0 errors\n")
    assert hopper_safety.memcheck_errors(sanitized) == 0 and hopper_safety.memcheck_errors(log) is None
    part = {"exit": 0, "stopped_at_limit_s": None}
    result = {"robustness": dict(part, counts=counts), "memory_safety": dict(part, counts=fenced),
              "memcheck": {"not_run": "", "run": dict(part, errors=0, counts=counts)}}
    lines = hopper_safety.summary_lines(result)
    assert lines[0] == ("triton_fp8:hopper_two_term: robustness 1 PASS, 1 REFUSED, 0 FAIL; memory safety 6 launches on "
                        "2 inputs fenced, 0 failed (GPU tests: 1 failed, 21 passed in 80.0s); memcheck 2 cases run "
                        "(0 FAIL), 0 errors in the run of the three forms")
    assert "robustness SKIP (not here)" in lines[1] and "1 FAIL (recheck: call 3: off)" in lines[2]
    assert not hopper_safety.failed(result)
    result["memcheck"]["run"]["errors"] = 2
    assert hopper_safety.failed(result)
    result["memcheck"] = {"not_run": "no GPU here", "run": None}
    result["memory_safety"]["stopped_at_limit_s"] = 88.0
    assert hopper_safety.failed(result) and "memcheck not run (no GPU here)" in hopper_safety.summary_lines(result)[0]
