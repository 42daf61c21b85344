"""The ROCm (aiter) route of submission.py, end to end on the CPU.

aiter cannot run here, so `submission.aiter_ops` is replaced by tests/fake_aiter.py: a
recording fake that binds every call against aiter's real (March 2026) signatures,
checks every tensor as aiter's kernels would, and computes the attention the way the
persistent kernel does (split plan from the metadata, LSE merge). The device check
`submission._aiter_device` is patched so that CPU tensors count as an aiter device.

What is proven: the route table holds every aiter candidate (a8w8 and a16w8 for each
kv-split count); the autopick verifies them against reference.ref_kernel and reports
its choice; work buffers are the plan's, and every call rebuilds aiter's metadata into them
from its own lengths, after a length check on the device, so that calls of the same shapes
with other lengths are right and calls with sequences aiter would mis-plan come out NaN
(refused), never silently wrong; Q is quantized per call, as the reference quantizes it;
per call the device runs the length check (fused into the quantizer's first launch for
a8w8), aiter's metadata build and aiter's decode and nothing else (run under the Triton
interpreter, every launch and torch operation recorded); each shape has its own buffers;
outputs are right; a wrong or non-binding aiter loses to torch and is reported once; the
loader never mistakes another `aiter`.

Host logic: every input is pinned to the CPU, where the fake computes, on any machine.
"""
from __future__ import annotations

import math
import sys
import time
import types

import pytest
import torch

import reference
import submission
from bench.robustness_gpu import format_read_by, scaled_output_problem
from fake_aiter import FP8_DTYPES, FakeAiter, FakeAiterError, load_wheel_api
from interpreter_worker import DeviceWorkRecorder, InterpreterWorker, recording_triton_launches

CANDIDATES = [(kind, splits) for kind in ("a8w8", "a16w8") for splits in submission.AITER_KV_SPLIT_CANDIDATES]
LABELS = {f"aiter_{kind}[splits={splits}]" for kind, splits in CANDIDATES}
CALLS_PER_CANDIDATE_AT_PLAN_TIME = 1 + submission.AUTOPICK_WARMUP + submission.AUTOPICK_REPEATS
# The CPU fake is slower than the CPU torch route; on the GPU it is the other way round.
# Routing tests slow the torch route down so that an aiter candidate can win.
TORCH_DELAY_S = 0.06
# Max abs error allowed against exact attention over the fp8 KV (a8w8 measures ~0.013).
TIGHT_ATOL = 0.04
# Extra time a non-preferred aiter candidate takes, when a test steers the choice.
PENALTY_S = 0.025


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def clean_state(monkeypatch, fresh_plans):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    # The fake does many small tensor ops; on a shared CPU, intra-op threads spin and
    # make them 100x slower. One thread, restored afterwards.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _DelayedRunner:
    def __init__(self, runner, delay_s: float):
        self.runner, self.delay_s = runner, delay_s
        self.label, self.kv_format, self.form = runner.label, runner.kv_format, runner.form

    def __call__(self, *args):
        time.sleep(self.delay_s)
        return self.runner(*args)


class SlowTorchRoute:
    """submission's torch route, every call delayed."""
    name = "torch"

    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def variants(self, shape):
        return [lambda data, factory=factory: _DelayedRunner(factory(data), self.delay_s)
                for factory in submission.TorchRoute().variants(shape)]


def install(monkeypatch, fake: FakeAiter | None = None, torch_delay_s: float = TORCH_DELAY_S) -> FakeAiter:
    """Makes submission see `fake` as aiter and the CPU as an aiter device."""
    fake = fake if fake is not None else FakeAiter()
    monkeypatch.setattr(submission, "aiter_ops", fake)
    monkeypatch.setattr(submission, "_aiter_device", lambda device: True)
    monkeypatch.setattr(submission, "_aiter_arch", lambda device: fake.gfx)
    if torch_delay_s:
        monkeypatch.setitem(submission.ROUTES, "torch", SlowTorchRoute(torch_delay_s))
    return fake


def prefer(kind: str, splits: int):
    """A latency hook: every aiter candidate but (kind, splits) takes PENALTY_S longer."""
    def latency(call):
        this_kind = "a8w8" if call["q"].dtype in FP8_DTYPES else "a16w8"
        return 0.0 if (this_kind, call.metadata.max_split_per_batch) == (kind, splits) else PENALTY_S
    return latency


def harness_input(batch: int, kv_len: int, seed: int):
    return reference.generate_input(batch, 1, kv_len, seed, device="cpu")


def ragged_input(lengths, seed: int, fp8_dtype=reference.FP8_DTYPE):
    """q_seq_len 1, the given KV lengths, the bf16 and fp8 formats."""
    gen = torch.Generator().manual_seed(seed)
    batch, total = len(lengths), sum(lengths)
    q = torch.randn(batch, 16, 576, generator=gen).bfloat16()
    kv = torch.randn(total, 1, 576, generator=gen).bfloat16()
    scale = (kv.abs().amax().float() / torch.finfo(fp8_dtype).max).reshape(1)
    fp8 = (kv.float() / scale).to(fp8_dtype)
    kv_indptr = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    config = dict(batch_size=batch, num_heads=16, num_kv_heads=1, qk_head_dim=576, kv_lora_rank=512,
                  qk_rope_head_dim=64, v_head_dim=512, q_seq_len=1, kv_seq_len=max(lengths),
                  sm_scale=1 / math.sqrt(576))
    return q, {"bf16": kv, "fp8": (fp8, scale)}, torch.arange(batch + 1, dtype=torch.int32), kv_indptr, config


def exact_over_fp8(data) -> torch.Tensor:
    """Exact attention of the bf16 q over the fp8 KV the aiter route reads (float32)."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    buffer, scale = kv_data["fp8"]
    return reference.attention_fp32(q.float(), buffer.float() * scale, qo_indptr, kv_indptr, config["sm_scale"])


def assert_matches_reference(data, out):
    """The harness's check, and a tight one: with unit-randn inputs the outputs are ~0.06
    in magnitude, so the harness's atol 0.1 would let e.g. attention over the wrong KV
    ranges through. a8w8 stays within ~0.013 of exact attention over the fp8 KV. An
    absolute bound alone would pass an output scaled by 0.9 (outputs are below 0.4): each
    sequence is also held to SCALED_OUTPUT_BOUND relative RMS error."""
    good, message = reference.check_implementation(data, out)
    assert good, message
    error = (out.float() - exact_over_fp8(data)).abs().max().item()
    assert error <= TIGHT_ATOL, f"max abs error {error:.3g} against exact attention over the fp8 KV"
    problem = scaled_output_problem(submission, data, out, served_format(data))
    assert problem is None, problem


def served_format(data) -> str:
    """The KV format read by the route serving data's plan, or fp8 where no plan was built
    (an aiter runner called directly); building one here would add calls to the fake's log."""
    plan = submission._PLANS.get(submission.plan_key(data))
    return format_read_by(plan.label) if plan is not None else "fp8"


def plan_report(data) -> dict[str, str]:
    """label -> verdict of every candidate the plan of `data` tried."""
    return dict(line.split(": ", 1) for line in submission._plan_for(data).report)


def decode_buffers(call) -> tuple:
    return tuple(call[name] for name in ("work_meta_data", "work_indptr", "work_info_set", "reduce_indptr",
                                         "reduce_final_map", "reduce_partial_map"))


# ----------------------------------------------------------------------------- the loader


def test_loader_finds_aiter_exactly_where_reference_does():
    # None on a CPU or NVIDIA machine; ROCm's aiter (or tests/simulated_rocm) otherwise.
    assert (submission._load_aiter_ops() is not None) == reference.HAVE_AITER


@pytest.mark.parametrize("has_mla_names", [False, True])
def test_loader_ignores_an_unrelated_aiter_package(monkeypatch, has_mla_names):
    # `pip install aiter` gives an asyncio library; it imports fine but has no aiter.mla.
    unrelated = types.ModuleType("aiter")
    unrelated.__path__ = []  # a package with no submodules
    unrelated.map = unrelated.zip = lambda *args: None
    if has_mla_names:  # even names that look right do not make it ROCm's aiter
        unrelated.get_mla_metadata_info_v1 = unrelated.get_mla_metadata_v1 = lambda *args: None
    monkeypatch.setitem(sys.modules, "aiter", unrelated)
    monkeypatch.delitem(sys.modules, "aiter.mla", raising=False)
    assert submission._load_aiter_ops() is None


def test_loader_takes_rocm_aiter_when_it_is_there(monkeypatch):
    fake = FakeAiter()
    package = types.ModuleType("aiter")
    package.__path__ = []
    package.get_mla_metadata_info_v1 = fake.get_mla_metadata_info_v1
    package.get_mla_metadata_v1 = fake.get_mla_metadata_v1
    mla = types.ModuleType("aiter.mla")
    mla.mla_decode_fwd = fake.mla_decode_fwd
    package.mla = mla
    monkeypatch.setitem(sys.modules, "aiter", package)
    monkeypatch.setitem(sys.modules, "aiter.mla", mla)
    ops = submission._load_aiter_ops()
    assert ops is not None
    assert (ops.mla_decode_fwd, ops.get_mla_metadata_info_v1, ops.get_mla_metadata_v1) == (
        fake.mla_decode_fwd, fake.get_mla_metadata_info_v1, fake.get_mla_metadata_v1)


# ----------------------------------------------------------------------------- route table


def test_route_is_a_candidate_only_with_aiter_fp8_and_an_aiter_device(monkeypatch):
    data = harness_input(2, 400, seed=1)
    shape = submission.CallShape(data)
    route = submission.AiterRoute()
    monkeypatch.setattr(submission, "aiter_ops", FakeAiter())
    assert route.variants(shape) == []  # CPU: not an aiter device
    monkeypatch.setattr(submission, "_aiter_device", lambda device: True)
    monkeypatch.setattr(submission, "_aiter_arch", lambda device: "gfx950")
    assert len(route.variants(shape)) == len(CANDIDATES)
    no_fp8 = (data[0], {"bf16": data[1]["bf16"]}, *data[2:])
    assert route.variants(submission.CallShape(no_fp8)) == []
    monkeypatch.setattr(submission, "aiter_ops", None)
    assert route.variants(shape) == []


def test_every_aiter_candidate_is_built_verified_and_timed(monkeypatch):
    fake = install(monkeypatch)
    data = harness_input(2, 600, seed=2)
    out = submission.custom_kernel(data)
    report = plan_report(data)
    assert LABELS <= set(report), report
    assert all(report[label].endswith(")") and " us ok " in report[label] for label in LABELS), report
    # One metadata size query per candidate, with its own split count; a metadata build
    # right before every decode, into the buffers that decode reads.
    info = fake.calls_to("get_mla_metadata_info_v1")
    assert sorted((c["q_dtype"] in FP8_DTYPES, c["num_kv_splits"]) for c in info) == \
        sorted((kind == "a8w8", splits) for kind, splits in CANDIDATES)
    built_then_decoded = [c for c in fake.calls if c.name != "get_mla_metadata_info_v1"]
    builds, decodes = built_then_decoded[::2], built_then_decoded[1::2]
    assert len(builds) == len(decodes) >= len(CANDIDATES) * CALLS_PER_CANDIDATE_AT_PLAN_TIME
    for build, decode in zip(builds, decodes):
        assert (build.name, decode.name) == ("get_mla_metadata_v1", "mla_decode_fwd")
        assert build["work_metadata_ptrs"] is decode["work_meta_data"]
    assert {(c["dtype_q"] in FP8_DTYPES, c["max_split_per_batch"]) for c in builds} == \
        {(kind == "a8w8", splits) for kind, splits in CANDIDATES}
    assert submission.describe_route(data).startswith("aiter_")
    assert_matches_reference(data, out)


@pytest.mark.parametrize("kind, splits", [("a16w8", 16), ("a8w8", 4)])
def test_autopick_keeps_the_fastest_aiter_candidate(monkeypatch, kind, splits):
    install(monkeypatch, FakeAiter(latency=prefer(kind, splits)))
    data = harness_input(2, 600, seed=3)
    out = submission.custom_kernel(data)
    assert submission.describe_route(data) == f"aiter_{kind}[splits={splits}]"
    assert_matches_reference(data, out)


# ----------------------------------------------------------------------------- per plan, per call


def test_metadata_is_rebuilt_into_the_plans_buffers_every_call_and_q_is_quantized_per_call(monkeypatch):
    fake = install(monkeypatch, FakeAiter(latency=prefer("a8w8", 8)))
    batch, kv_len = 2, 600
    submission.custom_kernel(harness_input(batch, kv_len, seed=100))
    assert fake.count("get_mla_metadata_info_v1") == len(CANDIDATES)
    assert fake.count("mla_decode_fwd") >= len(CANDIDATES) * CALLS_PER_CANDIDATE_AT_PLAN_TIME
    runner = submission._plan_for(harness_input(batch, kv_len, seed=100)).run
    assert runner.label == "aiter_a8w8[splits=8]"
    plan_time_calls = fake.count("mla_decode_fwd")

    fake.clear_calls()
    scales = []
    for i, seed in enumerate(range(101, 121)):  # 20 fresh inputs of the same shape
        data = harness_input(batch, kv_len, seed=seed)
        data[0][i % batch, i % 16, i] = 6.0 + 0.5 * i  # a distinct amax each (randn stays < 6)
        out = submission.custom_kernel(data)
        assert_matches_reference(data, out)
        # Q is quantized from each input, as the reference quantizes it (the buffers are
        # the plan's, rewritten by every call: read them now).
        decode = fake.calls_to("mla_decode_fwd")[-1]
        q_fp8, q_scale = reference.quantize_fp8(data[0])
        assert torch.equal(decode["q"].view(torch.uint8), q_fp8.view(torch.uint8))
        assert torch.equal(decode["q_scale"], q_scale)
        scales.append(q_scale.item())
    assert plan_time_calls > 0
    assert fake.count("get_mla_metadata_info_v1") == 0
    builds, decodes = fake.calls_to("get_mla_metadata_v1"), fake.calls_to("mla_decode_fwd")
    assert len(builds) == len(decodes) == 20
    # Shape-only state is the plan's, the very same objects every call; the metadata is
    # rebuilt into it by every call, from the kv_indptr the call's length check wrote.
    buffers = decode_buffers(decodes[0])
    assert all(a is getattr(runner, name) for a, name in zip(buffers, (
        "work_meta_data", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map",
        "reduce_partial_map")))
    for build, call in zip(builds, decodes):
        assert all(a is b for a, b in zip(decode_buffers(call), buffers))
        assert build["work_metadata_ptrs"] is runner.work_meta_data
        assert build["seqlens_kv_indptr"] is runner.checked_kv_indptr is call["kv_indptr"]
        assert build["kv_last_page_lens"] is runner.kv_last_page_len is call["kv_last_page_lens"]
        assert call["kv_indices"] is runner.kv_indices
        assert call.metadata.kv_indptr == [0, kv_len, 2 * kv_len]
    assert len({id(call.metadata) for call in decodes}) == 20  # one build each
    assert len(set(scales)) == 20
    assert all(call["q"].dtype == reference.FP8_DTYPE for call in decodes)
    # The quantized Q and its scale live in the plan's buffers, the same every call.
    assert all(call["q"] is runner.q_scratch.q_fp8 and call["q_scale"] is runner.q_scratch.scale
               for call in decodes)


@pytest.mark.parametrize("kind, splits", CANDIDATES)
def test_same_shapes_and_config_with_other_lengths_are_right(monkeypatch, kind, splits):
    """The plan key holds shapes and config, not lengths: one plan serves calls whose
    lengths differ (here non-uniform, with the same total and the same config). Each is
    right, against exact attention over the fp8 KV, with metadata for its own lengths."""
    install(monkeypatch, FakeAiter(latency=prefer(kind, splits)))
    first = ragged_input((800, 800, 800), seed=40)
    assert_matches_reference(first, submission.custom_kernel(first))
    assert submission.describe_route(first) == f"aiter_{kind}[splits={splits}]"
    for seed, lengths in enumerate(((300, 1700, 400), (1600, 256, 544), (256, 256, 1888)), start=41):
        data = ragged_input(lengths, seed=seed)
        data[4]["kv_seq_len"] = 800  # the first call's config: the same plan key
        assert submission.plan_key(data) == submission.plan_key(first)
        out = submission.custom_kernel(data)
        assert submission._plan_for(data).run.label == f"aiter_{kind}[splits={splits}]"
        assert_matches_reference(data, out)


@pytest.mark.parametrize("kind", ["a8w8", "a16w8"])
@pytest.mark.parametrize("gfx", ["gfx950", "gfx942"])
def test_a_later_call_aiter_would_mis_plan_is_refused_as_nan_never_wrong(monkeypatch, kind, gfx):
    """Lengths the plan-time check refuses (a sequence under AITER_MIN_KV_LEN tokens, or
    indptrs past the KV rows) can reach a plan's later calls. Reading them on the host
    would synchronise, so the device refuses them: aiter's metadata is built from the
    plan's own valid kv_indptr instead (it never sees a length it mis-plans: the fake
    raises where aiter divides by zero) and the output is NaN in every element. The next
    valid call is right again."""
    fp8_dtype = torch.float8_e4m3fnuz if gfx == "gfx942" else reference.FP8_DTYPE
    fake = install(monkeypatch, FakeAiter(gfx=gfx, cu_num=304 if gfx == "gfx942" else 256,
                                          latency=prefer(kind, 16)))
    first = ragged_input((700, 700), seed=50, fp8_dtype=fp8_dtype)
    assert_matches_reference(first, submission.custom_kernel(first))
    assert submission.describe_route(first) == f"aiter_{kind}[splits=16]"
    refused = {"short": (1380, 20), "empty": (1400, 0), "one token under": (1145, 255)}
    for name, lengths in refused.items():
        data = ragged_input(lengths, seed=51, fp8_dtype=fp8_dtype)
        data[4]["kv_seq_len"] = 700
        fake.clear_calls()
        out = submission.custom_kernel(data)
        assert out.isnan().all(), name
        assert fake.calls_to("get_mla_metadata_v1")[0]["seqlens_kv_indptr"].tolist() == [0, 700, 1400], name
    past_the_rows = ragged_input((700, 700), seed=52, fp8_dtype=fp8_dtype)
    past_the_rows[3][2] = 1500
    # On a GPU, indptr values are validated at plan time only (MLA_CHECK_INDPTR=1 aside);
    # on the CPU every call: stand in the GPU's plan.
    submission._plan_for(past_the_rows).check_indptr_each_call = False
    assert submission.custom_kernel(past_the_rows).isnan().all()
    again = ragged_input((1000, 400), seed=53, fp8_dtype=fp8_dtype)
    again[4]["kv_seq_len"] = 700
    assert_matches_reference(again, submission.custom_kernel(again))
    assert submission._plan_for(again).run.label == f"aiter_{kind}[splits=16]"


_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


# Work that launches nothing on a GPU: the output's allocation and the KV buffer's view.
NO_DEVICE_WORK = {"aten.empty.memory_format", "aten.view.default"}


def _record_calls_in_worker(inputs, q_in_fp8):
    """Runs in the interpreter worker: one runner of the plan of inputs[0], then one call
    per input, each recorded: the device work in order, what aiter received, and the
    kv_indptr its metadata was built from."""
    fake = FakeAiter()
    saved, submission.aiter_ops = submission.aiter_ops, fake
    try:
        runner = submission.AiterRunner(submission.CallShape(inputs[0]), inputs[0], q_in_fp8, 8)
        recorder = DeviceWorkRecorder()
        for name in ("get_mla_metadata_v1", "mla_decode_fwd"):  # each one device launch (or more) in aiter
            def recorded(*args, _name=name, _call=getattr(fake, name), **kwargs):
                with recorder.launch("aiter", _name):
                    return _call(*args, **kwargs)
            setattr(fake, name, recorded)
        calls = []
        for data in inputs:
            recorder.events = []
            with recording_triton_launches(recorder), recorder:
                out = runner(*data[:4])
            received = fake.calls_to("mla_decode_fwd")[-1]
            q_scale = received["q_scale"]
            calls.append((recorder.events, received["q"].view(torch.uint8).clone() if q_in_fp8 else None,
                          None if q_scale is None else q_scale.clone(), out, received.metadata.kv_indptr))
        return calls
    finally:
        submission.aiter_ops = saved


@pytest.mark.parametrize("q_in_fp8", [True, False])
def test_each_call_is_the_length_check_the_metadata_then_the_decode_and_nothing_else(q_in_fp8):
    """Under the interpreter, as on a GPU, our kernels run as Triton launches. Per call,
    in order: a8w8 the quantizer's two launches (the first also checks the lengths),
    a16w8 the length check's one launch; then aiter's metadata build from the checked
    kv_indptr; then aiter's decode. No other torch operation runs but the output's
    allocation and a view. The calls share their shapes but not their lengths; each is
    right, and each input's Q reaches aiter quantized exactly as reference.quantize_fp8
    quantizes it; the call with a short sequence is refused: NaN everywhere, metadata
    built from the plan's first kv_indptr."""
    lengths = [(600, 600, 600), (300, 1000, 500), (1200, 300, 300), (100, 1000, 700)]
    inputs = [ragged_input(lens, seed=31 + i) for i, lens in enumerate(lengths)]
    for i, data in enumerate(inputs):
        data[0][1, 5, 7] = 6.0 + i  # a distinct amax each (randn stays < 6)
    calls = _worker.run(_record_calls_in_worker, inputs, q_in_fp8)
    check_and_quantize = [("triton", "_q_abs_max_partials_checked_kernel"),  # Q's amax partials + length check
                          ("triton", "_q_fp8_quantize_kernel")]  # Q scale and fp8 bytes
    check_alone = [("triton", "_kv_lengths_check_kernel")]  # length check, KV scale through it
    aiter = [("aiter", "get_mla_metadata_v1"),  # metadata from the checked kv_indptr
             ("aiter", "mla_decode_fwd")]  # the decode (aiter's split kernel and reduce)
    for data, lens, (events, q_bytes, q_scale, out, built_from) in zip(inputs, lengths, calls):
        launches = [event for event in events if event[0] != "torch"]
        assert launches == (check_and_quantize if q_in_fp8 else check_alone) + aiter, events
        torch_ops = [name for kind, name in events if kind == "torch"]
        assert set(torch_ops) <= NO_DEVICE_WORK and torch_ops.count("aten.empty.memory_format") == 1, events
        if min(lens) < submission.AITER_MIN_KV_LEN:
            assert out.isnan().all() and built_from == [0, 600, 1200, 1800]
            continue
        assert built_from == data[3].tolist()
        if q_in_fp8:
            want_bytes, want_scale = reference.quantize_fp8(data[0])
            assert torch.equal(q_bytes, want_bytes.view(torch.uint8)) and torch.equal(q_scale, want_scale)
        else:
            assert q_scale is None
        assert_matches_reference(data, out)
    if q_in_fp8:
        assert len({call[2].item() for call in calls[:3]}) == 3  # each from its own input
        assert calls[3][2].isnan().all()


# kv_indptr (batch 5, 5000 KV rows) -> whether the length check refuses it.
LENGTH_CHECK_CASES = {
    "ragged, all >= 256": ([0, 256, 1000, 3000, 4000, 5000], False),
    "ends before the last row": ([0, 256, 512, 768, 1024, 1280], False),
    "short in the last step": ([0, 1000, 2000, 3000, 4000, 4255], True),
    "empty": ([0, 1000, 1000, 3000, 4000, 5000], True),
    "decreasing": ([0, 1000, 900, 3000, 4000, 5000], True),
    "negative start": ([-300, 1000, 2000, 3000, 4000, 5000], True),
    "past the rows": ([0, 1000, 2000, 3000, 4000, 5001], True),
    "int32 wrap-around": ([0, 2**31 - 1, -2**31, -2**31 + 1000, 0, 1000], True),
}
LENGTH_CHECK_FALLBACK = [0, 1000, 2000, 3000, 4000, 5000]


def _length_check_in_worker(block):
    """Runs in the interpreter worker: a16w8's check kernel, `block` sequences a step, on
    every case, the kv_indptr read through a stride of 2."""
    results = {}
    for name, (values, _) in LENGTH_CHECK_CASES.items():
        strided = torch.zeros(2 * len(values), dtype=torch.int32)
        strided[::2] = torch.tensor(values, dtype=torch.int32)
        kv_indptr = strided[::2]
        checked, last_page, scale = torch.empty(6, dtype=torch.int32), torch.empty(5, dtype=torch.int32), torch.empty(1)
        submission.KernelCall(submission._kv_lengths_check_kernel, (1,), (
            torch.tensor([0.25]), scale, kv_indptr, kv_indptr.stride(0),
            torch.tensor(LENGTH_CHECK_FALLBACK, dtype=torch.int32), checked, last_page, 5, 5000,
            submission.AITER_MIN_KV_LEN, block, submission._FP32_NAN_BITS),
            dict(num_warps=4)).launch()
        results[name] = (checked.tolist(), last_page.tolist(), scale.item())
    return results


@pytest.mark.parametrize("block", [2, submission.KV_LENGTH_CHECK_BLOCK])
def test_the_length_check_refuses_what_aiter_would_mis_plan_and_passes_the_rest(block):
    """The Triton check (under the interpreter, in steps of `block` sequences) and its
    torch twin (CPU) agree: a served kv_indptr is copied with its lengths as last-page
    lengths and the scale passes; a refused one is replaced by the plan's, and the scale
    is NaN."""
    triton_results = _worker.run(_length_check_in_worker, block)
    fallback = torch.tensor(LENGTH_CHECK_FALLBACK, dtype=torch.int32)
    for name, (values, refused) in LENGTH_CHECK_CASES.items():
        served = LENGTH_CHECK_FALLBACK if refused else values
        want = (served, [b - a for a, b in zip(served, served[1:])])
        checked, last_page = torch.empty(6, dtype=torch.int32), torch.empty(5, dtype=torch.int32)
        torch_refused = submission._check_kv_lengths_torch(torch.tensor(values, dtype=torch.int32), fallback,
                                                           checked, last_page, 5000)
        assert (checked.tolist(), last_page.tolist()) == want and bool(torch_refused) == refused, name
        checked, last_page, scale = triton_results[name]
        assert (checked, last_page) == want and math.isnan(scale) == refused, name
        assert refused or scale == 0.25, name


def test_each_shape_has_its_own_buffers_and_metadata(monkeypatch):
    fake = install(monkeypatch)
    first, second = harness_input(2, 600, seed=5), harness_input(3, 400, seed=6)
    submission.custom_kernel(first)
    first_state = fake.calls_to("mla_decode_fwd")[-1].metadata
    first_buffers = first_state.buffers["work_metadata_ptrs"]
    fake.clear_calls()
    out = submission.custom_kernel(second)
    assert_matches_reference(second, out)
    assert fake.count("get_mla_metadata_info_v1") == len(CANDIDATES)
    assert {c["batch_size"] for c in fake.calls_to("get_mla_metadata_info_v1")} == {3}
    assert {tuple(state.kv_indptr) for state in fake.metadata.values() if state.batch == 3} == {(0, 400, 800, 1200)}
    second_state = fake.calls_to("mla_decode_fwd")[-1].metadata
    assert second_state.buffers["work_metadata_ptrs"] is not first_buffers and second_state.batch == 3

    fake.clear_calls()  # back to the first shape: its plan, its buffers; the metadata rebuilt there
    again = harness_input(2, 600, seed=7)
    assert_matches_reference(again, submission.custom_kernel(again))
    assert fake.count("get_mla_metadata_info_v1") == 0
    builds, decodes = fake.calls_to("get_mla_metadata_v1"), fake.calls_to("mla_decode_fwd")
    assert len(builds) == len(decodes) == 1
    assert builds[0]["work_metadata_ptrs"] is first_buffers is decodes[0].metadata.buffers["work_metadata_ptrs"]


@pytest.mark.parametrize("lengths", [(600, 600), (700, 260, 1000)])
def test_every_candidate_matches_the_reference(monkeypatch, lengths):
    fake = install(monkeypatch)
    data = ragged_input(lengths, seed=8)
    shape = submission.CallShape(data)
    for kind, splits in CANDIDATES:
        runner = submission.AiterRunner(shape, data, kind == "a8w8", splits)
        out = runner(*data[:4])
        assert_matches_reference(data, out)
        state = fake.calls_to("mla_decode_fwd")[-1].metadata
        # aiter's v1_0 split rule on gfx950: min(len // 196, ceil(256 CUs / batch), splits).
        assert state.splits == [min(n // 196, math.ceil(256 / len(lengths)), splits) for n in lengths]


def test_non_contiguous_q_is_served_by_every_candidate(monkeypatch):
    fake = install(monkeypatch)
    q, *rest = harness_input(2, 600, seed=9)
    wide = torch.zeros(q.shape[0], 16, 640, dtype=q.dtype)
    wide[..., :576] = q
    data = (wide[..., :576], *rest)
    assert not data[0].is_contiguous()
    out = submission.custom_kernel(data)
    assert all(" us ok " in verdict for label, verdict in plan_report(data).items() if label in LABELS)
    assert all(call["q"].is_contiguous() for call in fake.calls_to("mla_decode_fwd"))
    assert_matches_reference(data, out)


# ----------------------------------------------------------------------------- failures


def test_wrong_aiter_output_is_rejected_and_torch_serves(monkeypatch):
    install(monkeypatch, FakeAiter(corrupt_output=True))
    data = harness_input(2, 400, seed=10)
    out = submission.custom_kernel(data)
    report = plan_report(data)
    assert all(report[label].startswith("REJECTED") for label in LABELS), report
    assert submission.describe_route(data).startswith("torch")
    assert_matches_reference(data, out)


def test_aiter_whose_signatures_do_not_bind_is_skipped_and_reported_once(monkeypatch, capsys):
    # The older PyPI wheel's API: our keywords (num_kv_splits, intra_batch_mode, ...) are unknown.
    fake = install(monkeypatch, FakeAiter(api=load_wheel_api()), torch_delay_s=0)
    for data in (harness_input(2, 400, seed=11), harness_input(3, 400, seed=12)):
        out = submission.custom_kernel(data)
        assert submission.describe_route(data).startswith("torch")
        assert_matches_reference(data, out)
        report = submission._plan_for(data).report  # the runner was never built: the route's name
        assert report.count("aiter_fp8: RAISED TypeError") == len(CANDIDATES), report
    err = capsys.readouterr().err
    assert err.count("raised TypeError") == 1, err
    assert "route aiter_fp8 raised TypeError" in err and "num_kv_splits" in err
    assert fake.count("mla_decode_fwd") == 0


def test_on_gfx942_only_split_counts_that_fit_aiters_16_are_offered(monkeypatch):
    # MI300X: v1_0 always plans 16 splits, but the buffers are sized for num_kv_splits:
    # a smaller count would be written out of bounds (the fake raises; a GPU would not).
    fake = install(monkeypatch, FakeAiter(gfx="gfx942", cu_num=304))
    data = ragged_input((600, 600), seed=13, fp8_dtype=torch.float8_e4m3fnuz)
    assert_matches_reference(data, submission.custom_kernel(data))
    report = submission._plan_for(data).report
    offered = [(kind, splits) for kind, splits in CANDIDATES if splits >= 16]
    assert "RAISED" not in " ".join(report), report
    verdicts = plan_report(data)
    for kind, splits in offered:
        assert " us ok " in verdicts[f"aiter_{kind}[splits={splits}]"], report
    assert fake.count("get_mla_metadata_info_v1") == len(offered)
    assert {c["max_split_per_batch"] for c in fake.calls_to("get_mla_metadata_v1")} == {16, 32}


def test_short_sequences_are_not_offered_to_aiter_and_ragged_ones_are(monkeypatch):
    # Under 196 tokens aiter plans 0 splits on gfx950 and divides by it (AITER_MIN_KV_LEN
    # has the rest); ragged lengths are served, as every call rebuilds the metadata.
    install(monkeypatch)
    route = submission.AiterRoute()
    for lengths in ((100, 100), (600, 255)):
        shape = submission.CallShape(ragged_input(lengths, seed=19))
        assert route.variants(shape) == [], lengths
        with pytest.raises(ValueError, match="needs every sequence >= 256 tokens"):
            submission.AiterRunner(shape, ragged_input(lengths, seed=19), True, 8)
    for lengths in ((600, 600), (700, 900), (256, 5000)):
        assert len(route.variants(submission.CallShape(ragged_input(lengths, seed=19)))) == len(CANDIDATES)


# ----------------------------------------------------------------------------- the fake itself


def _metadata(fake, data, q_dtype, splits=8):
    q, kv_data, qo_indptr, kv_indptr, config = data
    fp8 = kv_data["fp8"][0].dtype
    info = fake.get_mla_metadata_info_v1(config["batch_size"], 1, 16, q_dtype, fp8, is_sparse=False,
                                         fast_mode=False, num_kv_splits=splits, intra_batch_mode=True)
    buffers = [torch.empty(shape, dtype=dtype) for shape, dtype in info]
    last_page = (kv_indptr[1:] - kv_indptr[:-1]).to(torch.int32)
    work_meta, work_indptr, work_info, reduce_indptr, final_map, partial_map = buffers
    fake.get_mla_metadata_v1(qo_indptr, kv_indptr, last_page, 16, 1, True, work_meta, work_info, work_indptr,
                             reduce_indptr, final_map, partial_map, page_size=1, kv_granularity=16,
                             max_seqlen_qo=1, uni_seqlen_qo=1, fast_mode=False, max_split_per_batch=splits,
                             intra_batch_mode=True, dtype_q=q_dtype, dtype_kv=fp8)
    return dict(work_meta_data=work_meta, work_indptr=work_indptr, work_info_set=work_info,
                reduce_indptr=reduce_indptr, reduce_final_map=final_map, reduce_partial_map=partial_map), last_page


def valid_decode(fake, data, a8w8=True):
    """The arguments of a correct a8w8 (or a16w8) persistent decode, metadata built."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv, kv_scale = kv_data["fp8"]
    q_in, q_scale = reference.quantize_fp8(q) if a8w8 else (q, None)
    metadata, last_page = _metadata(fake, data, q_in.dtype)
    args = [q_in, kv.view(-1, 1, 1, 576), torch.empty(q.shape[0], 16, 512, dtype=torch.bfloat16), qo_indptr,
            kv_indptr, torch.arange(kv.shape[0], dtype=torch.int32), last_page, 1]
    kwargs = dict(page_size=1, nhead_kv=1, sm_scale=config["sm_scale"], logit_cap=0.0, q_scale=q_scale,
                  kv_scale=kv_scale, intra_batch_mode=True, **metadata)
    return args, kwargs


def test_the_fake_computes_the_reference_a8w8():
    fake = FakeAiter()
    data = ragged_input((500, 900), seed=14)
    args, kwargs = valid_decode(fake, data)
    fake.mla_decode_fwd(*args, **kwargs)
    expected = reference.ref_kernel(data)
    torch.testing.assert_close(args[2].float(), expected.float(), rtol=0.02, atol=0.02)
    call = fake.calls_to("mla_decode_fwd")[0]
    assert call["num_kv_splits"] is None and call["return_lse"] is False  # defaults recorded
    assert call.metadata.splits == [2, 4]


def _swap(name, value):
    return lambda args, kwargs: kwargs.__setitem__(name, value(args, kwargs))


def _arg(index, value):
    return lambda args, kwargs: args.__setitem__(index, value(args, kwargs))


MUTATIONS = {
    "unknown keyword": (lambda args, kwargs: kwargs.__setitem__("num_splits", 4), TypeError),
    "too many positionals": (lambda args, kwargs: args.extend([1] * 30), TypeError),
    "q not contiguous": (_arg(0, lambda a, k: a[0].float().transpose(0, 1).contiguous().transpose(0, 1)
                              .to(a[0].dtype)), FakeAiterError),
    "q fp16": (_arg(0, lambda a, k: a[0].float().half()), FakeAiterError),
    "q on another device": (_arg(0, lambda a, k: torch.empty(a[0].shape, dtype=a[0].dtype, device="meta")),
                            FakeAiterError),
    "kv_buffer 3-D": (_arg(1, lambda a, k: a[1].view(-1, 1, 576)), FakeAiterError),
    "kv_buffer bf16 with fp8 q": (_arg(1, lambda a, k: a[1].float().bfloat16()), FakeAiterError),
    "o float32": (_arg(2, lambda a, k: a[2].float()), FakeAiterError),
    "o with 576 dims": (_arg(2, lambda a, k: torch.empty(a[2].shape[0], 16, 576, dtype=torch.bfloat16)),
                        FakeAiterError),
    "kv_indptr int64": (_arg(4, lambda a, k: a[4].long()), FakeAiterError),
    "kv_indices int64": (_arg(5, lambda a, k: a[5].long()), FakeAiterError),
    "kv_indices short": (_arg(5, lambda a, k: a[5][:-1]), FakeAiterError),
    "kv_indices out of range": (_arg(5, lambda a, k: a[5] + 1), FakeAiterError),
    "kv_last_page_lens batch+1": (_arg(6, lambda a, k: torch.ones(a[6].shape[0] + 1, dtype=torch.int32)),
                                  FakeAiterError),
    "max_seqlen_q 2": (_arg(7, lambda a, k: 2), FakeAiterError),
    "page_size 2": (_swap("page_size", lambda a, k: 2), FakeAiterError),
    "nhead_kv 2": (_swap("nhead_kv", lambda a, k: 2), FakeAiterError),
    "logit_cap > 0": (_swap("logit_cap", lambda a, k: 30.0), AssertionError),
    "q_scale missing": (_swap("q_scale", lambda a, k: None), FakeAiterError),
    "q_scale float64": (_swap("q_scale", lambda a, k: k["q_scale"].double()), FakeAiterError),
    "q_scale a python float": (_swap("q_scale", lambda a, k: k["q_scale"].item()), TypeError),
    "kv_scale missing": (_swap("kv_scale", lambda a, k: None), FakeAiterError),
    "work_info_set copied": (_swap("work_info_set", lambda a, k: k["work_info_set"].clone()), FakeAiterError),
    "work buffers never filled": (lambda args, kwargs: kwargs.update(
        {name: torch.empty_like(kwargs[name]) for name in ("work_meta_data", "work_indptr", "work_info_set",
                                                           "reduce_indptr", "reduce_final_map",
                                                           "reduce_partial_map")}), FakeAiterError),
    "reduce_partial_map missing": (_swap("reduce_partial_map", lambda a, k: None), FakeAiterError),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_fake_rejects_what_aiter_rejects(mutation):
    fake = FakeAiter()
    data = harness_input(2, 400, seed=15)
    args, kwargs = valid_decode(fake, data)
    mutate, error = MUTATIONS[mutation]
    mutate(args, kwargs)
    with pytest.raises(error):
        fake.mla_decode_fwd(*args, **kwargs)


def test_the_fake_rejects_bad_decode_scales_for_a16w8():
    fake = FakeAiter()
    data = harness_input(2, 400, seed=16)
    args, kwargs = valid_decode(fake, data, a8w8=False)
    fake.mla_decode_fwd(*args, **kwargs)  # the valid a16w8 call
    assert_matches_reference(data, args[2])
    with pytest.raises(FakeAiterError, match="non-fp8"):
        fake.mla_decode_fwd(*args, **dict(kwargs, q_scale=torch.ones(1)))
    with pytest.raises(FakeAiterError, match="dtype_q"):  # metadata built for fp8 Q, decode with bf16 Q
        other, _ = _metadata(fake, data, reference.FP8_DTYPE)
        fake.mla_decode_fwd(*args, **dict(kwargs, **other))


def test_the_fake_checks_metadata_buffers_and_signatures():
    fake = FakeAiter()
    data = harness_input(2, 400, seed=17)
    q, kv_data, qo_indptr, kv_indptr, _ = data
    info = fake.get_mla_metadata_info_v1(2, 1, 16, torch.bfloat16, reference.FP8_DTYPE, is_sparse=False,
                                         fast_mode=False, num_kv_splits=8, intra_batch_mode=True)
    assert [dtype for _, dtype in info] == [torch.uint64] + [torch.int32] * 5
    assert [shape for shape, _ in info] == [2, 257, (16, 8), 3, (2, 2), 16]  # cu_num 256, 2 tiles x 8
    work_meta, work_indptr, work_info, reduce_indptr, final_map, partial_map = (
        torch.empty(shape, dtype=dtype) for shape, dtype in info)
    last_page = torch.full((2,), 400, dtype=torch.int32)
    ordered = [work_meta, work_info, work_indptr, reduce_indptr, final_map, partial_map]
    keywords = dict(page_size=1, kv_granularity=16, max_seqlen_qo=1, uni_seqlen_qo=1, fast_mode=False,
                    max_split_per_batch=8, intra_batch_mode=True)
    swapped = [work_meta, work_indptr, work_info, reduce_indptr, final_map, partial_map]  # info's order
    with pytest.raises(FakeAiterError, match="do not match get_mla_metadata_info_v1"):
        fake.get_mla_metadata_v1(qo_indptr, kv_indptr, last_page, 16, 1, True, *swapped, **keywords)
    with pytest.raises(FakeAiterError, match="element type|dtype"):
        fake.get_mla_metadata_v1(qo_indptr, kv_indptr.long(), last_page, 16, 1, True, *ordered, **keywords)
    with pytest.raises(TypeError, match="topk_experts"):
        fake.get_mla_metadata_v1(qo_indptr, kv_indptr, last_page, 16, 1, True, *ordered, topk_experts=1,
                                 **keywords)
    with pytest.raises(FakeAiterError, match="out of bounds"):  # 2 x 10 splits, buffers for 2 x 8
        long = torch.tensor([0, 2000, 4000], dtype=torch.int32)
        fake.get_mla_metadata_v1(qo_indptr, long, last_page, 16, 1, True, *ordered,
                                 **dict(keywords, max_split_per_batch=16))
    with pytest.raises(FakeAiterError, match="divides by it"):  # 40 tokens: 0 splits on gfx950
        short = torch.tensor([0, 40, 80], dtype=torch.int32)
        fake.get_mla_metadata_v1(qo_indptr, short, last_page, 16, 1, True, *ordered, **keywords)
    fake.get_mla_metadata_v1(qo_indptr, kv_indptr, last_page, 16, 1, True, *ordered, **keywords)
    assert work_meta.view(torch.int64).tolist() == [work_indptr.data_ptr(), work_info.data_ptr()]
    assert reduce_indptr.tolist() == [0, 2, 4] and final_map.tolist() == [[0, 1], [1, 2]]
    assert work_info[:4, :6].tolist() == [[0, 0, 0, 1, 0, 208], [0, 1, 0, 1, 208, 400],
                                          [1, 2, 1, 2, 400, 608], [1, 3, 1, 2, 608, 800]]
    # The wheel's older get_mla_metadata_info_v1 has no num_kv_splits / intra_batch_mode.
    wheel = FakeAiter(api=load_wheel_api())
    with pytest.raises(TypeError, match="num_kv_splits"):
        wheel.get_mla_metadata_info_v1(2, 1, 16, torch.bfloat16, reference.FP8_DTYPE, is_sparse=False,
                                       fast_mode=False, num_kv_splits=8, intra_batch_mode=True)


def test_the_fake_like_aiter_reads_kv_ranges_from_metadata_time():
    # The persistent kernel walks work_info_set: KV ranges are fixed when the metadata is
    # built. New lengths with the same shapes need new metadata (fake_aiter's docstring);
    # the fake reproduces that, so a route that reused stale metadata would fail tests.
    fake = FakeAiter()
    built_for, used_with = ragged_input((500, 900), seed=18), ragged_input((900, 500), seed=18)
    args, kwargs = valid_decode(fake, built_for)
    args[4] = used_with[3]  # same shapes, other lengths, metadata not rebuilt
    fake.mla_decode_fwd(*args, **kwargs)
    assert (args[2].float() - exact_over_fp8(used_with)).abs().max().item() > 0.1
    assert_matches_reference(built_for, args[2])
