"""The ROCm (aiter) route of submission.py, end to end on the CPU.

aiter cannot run here, so `submission.aiter_ops` is replaced by tools/fake_aiter.py: a
recording fake that binds every call against aiter's real (March 2026) signatures,
checks every tensor as aiter's kernels would, and computes the attention the way the
persistent kernel does (split plan from the metadata, LSE merge). The device check
`submission._aiter_device` is patched so that CPU tensors count as an aiter device.

What is proven: the route table holds every aiter candidate (a8w8 and a16w8 for each
kv-split count, each with its metadata cached per plan or rebuilt per call); the autopick
verifies and times them all against reference.ref_kernel and reports its choice; work
buffers are the plan's. The per-call variant rebuilds aiter's metadata into them from each
call's own lengths, after a length check on the device, so that calls of the same shapes
with other lengths are right and calls with sequences aiter would mis-plan come out NaN
(refused), never silently wrong. The cached variant builds the metadata once, with the
plan, and each call compares its kv_indptr with the plan's on the device: the plan's
lengths are right, any other lengths come out NaN in every element. Whichever variant the
autopick keeps, a same-shape call with other lengths is never answered with a finite wrong
output. Q is quantized per call, as the reference quantizes it; per call the device runs
the guard (fused into the quantizer's first launch for a8w8), aiter's metadata build
(per-call variant only) and aiter's decode and nothing else (run under the Triton
interpreter, every launch and torch operation recorded); each shape has its own buffers;
outputs are right; a wrong or non-binding aiter loses to torch and is reported once; the
loader never mistakes another `aiter`; MLA_ROUTE=aiter_fp8:<variant> offers that variant
alone.

Host logic: every input is pinned to the CPU, where the fake computes, on any machine.
"""
from __future__ import annotations

import dataclasses
import math
import re
import sys
import time
import types

import pytest
import torch

import reference
import submission
from tools.robustness import format_read_by, scaled_output_problem
from tools.fake_aiter import FP8_DTYPES, FakeAiter, FakeAiterError, load_wheel_api
from interpreter_worker import DeviceWorkRecorder, InterpreterWorker, recording_triton_launches

KINDS_AND_SPLITS = [(kind, splits) for kind in ("a8w8", "a16w8") for splits in submission.AITER_KV_SPLIT_CANDIDATES]
VARIANTS = tuple(submission.AITER_RUNNERS)  # the metadata variants: cached, per_call
CANDIDATES = [(kind, splits, metadata) for kind, splits in KINDS_AND_SPLITS for metadata in VARIANTS]


def label(kind: str, splits: int, metadata: str) -> str:
    return f"aiter_{kind}[splits={splits},metadata={metadata}]"


LABELS = {label(*candidate) for candidate in CANDIDATES}
CALLS_PER_CANDIDATE_AT_PLAN_TIME = 2 + submission.AUTOPICK_WARMUP + submission.AUTOPICK_REPEATS  # verified twice
# The CPU fake is slower than the CPU torch route; on the GPU it is the other way round.
# Routing tests slow the torch route down so that an aiter candidate can win.
TORCH_DELAY_S = 0.06
# Max abs error allowed against exact attention over the fp8 KV (a8w8 measures ~0.013).
TIGHT_ATOL = 0.04
# Time added to a non-preferred aiter candidate's measured time, when a test steers the
# choice: far above any measured difference, so a loaded CPU cannot flip it.
PENALTY_US = 1e6
AITER_LABEL = re.compile(r"aiter_(a8w8|a16w8)\[splits=(\d+),metadata=(\w+)\]")


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
        self.label, self.kv_format, self.form, self.bound = runner.label, runner.kv_format, runner.form, runner.bound

    def __call__(self, *args):
        time.sleep(self.delay_s)
        return self.runner(*args)


class SlowTorchRoute(submission.TorchRoute):
    """submission's torch route, every call delayed."""

    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def variants(self, shape, form=""):
        return [dataclasses.replace(candidate, build=lambda data, build=candidate.build:
                                    _DelayedRunner(build(data), self.delay_s))
                for candidate in super().variants(shape, form)]


def install(monkeypatch, fake: FakeAiter | None = None, torch_delay_s: float = TORCH_DELAY_S) -> FakeAiter:
    """Makes submission see `fake` as aiter and the CPU as an aiter device."""
    fake = fake if fake is not None else FakeAiter()
    monkeypatch.setattr(submission, "aiter_ops", fake)
    monkeypatch.setattr(submission, "_aiter_device", lambda device: True)
    monkeypatch.setattr(submission, "device_arch", lambda device: (1, submission.arch_record(fake.gfx)))
    if torch_delay_s:
        monkeypatch.setitem(submission.ROUTES, "torch", SlowTorchRoute(torch_delay_s))
    return fake


def prefer(monkeypatch, kind: str | None = None, splits: int | None = None, metadata: str | None = None):
    """Steers the autopick: every aiter candidate whose kind ("a8w8", "a16w8"), split count
    or metadata variant differs from those given gets PENALTY_US added to its measured
    time (its calls still run, verified and timed as ever)."""
    measured = submission.time_call_us
    wanted = (kind, splits, metadata)

    def time_call_us(runner, args, clock):
        elapsed = measured(runner, args, clock)
        found = AITER_LABEL.fullmatch(runner.label)
        if found and any(w is not None and str(w) != f for w, f in zip(wanted, found.groups())):
            elapsed += PENALTY_US
        return elapsed
    monkeypatch.setattr(submission, "time_call_us", time_call_us)


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
    route = submission.AiterRoute()
    monkeypatch.setattr(submission, "aiter_ops", FakeAiter())
    assert route.variants(submission.CallShape.of(data)) == []  # CPU: not an aiter device
    monkeypatch.setattr(submission, "_aiter_device", lambda device: True)
    monkeypatch.setattr(submission, "device_arch", lambda device: (1, submission.arch_record("gfx950")))
    assert len(route.variants(submission.CallShape.of(data))) == len(CANDIDATES)
    no_fp8 = (data[0], {"bf16": data[1]["bf16"]}, *data[2:])
    assert route.variants(submission.CallShape.of(no_fp8)) == []
    monkeypatch.setattr(submission, "aiter_ops", None)
    assert route.variants(submission.CallShape.of(data)) == []


def _calls_per_buffers(fake) -> dict:
    """id(work_metadata_ptrs) -> (get_mla_metadata_v1 and mla_decode_fwd calls on those
    buffers, in order)."""
    grouped = {}
    for call in fake.calls:
        if call.name != "get_mla_metadata_info_v1":
            buffers = call["work_metadata_ptrs" if call.name == "get_mla_metadata_v1" else "work_meta_data"]
            grouped.setdefault(id(buffers), []).append(call)
    return grouped


def test_every_aiter_candidate_is_built_verified_and_timed(monkeypatch, capsys):
    fake = install(monkeypatch)
    monkeypatch.setenv("MLA_DEBUG", "1")
    data = harness_input(2, 600, seed=2)
    out = submission.custom_kernel(data)
    report = plan_report(data)
    assert LABELS <= set(report), report
    assert all(report[label].endswith(")") and " us ok " in report[label] for label in LABELS), report
    debug = capsys.readouterr().err
    assert "chose aiter_" in debug and all(f"| {label}: " in debug for label in LABELS), debug
    # One metadata size query per candidate, with its own split count.
    info = fake.calls_to("get_mla_metadata_info_v1")
    assert sorted((c["q_dtype"] in FP8_DTYPES, c["num_kv_splits"]) for c in info) == \
        sorted((kind == "a8w8", splits) for kind, splits, _ in CANDIDATES)
    # On each candidate's buffers: per call, a metadata build right before every decode;
    # cached, one build when the runner is built and none after.
    patterns = {"per_call": [], "cached": []}
    for calls in _calls_per_buffers(fake).values():
        names = [call.name for call in calls]
        decodes = names.count("mla_decode_fwd")
        assert decodes >= CALLS_PER_CANDIDATE_AT_PLAN_TIME, names
        variant = "cached" if names.count("get_mla_metadata_v1") == 1 else "per_call"
        expected = (["get_mla_metadata_v1"] + ["mla_decode_fwd"] * decodes if variant == "cached"
                    else ["get_mla_metadata_v1", "mla_decode_fwd"] * decodes)
        assert names == expected, names
        patterns[variant].append((calls[0]["dtype_q"] in FP8_DTYPES, calls[0]["max_split_per_batch"]))
    for variant in VARIANTS:
        assert sorted(patterns[variant]) == sorted((kind == "a8w8", splits) for kind, splits in KINDS_AND_SPLITS)
    assert submission.describe_route(data).startswith("aiter_")
    assert_matches_reference(data, out)


@pytest.mark.parametrize("kind, splits, metadata", [("a16w8", 16, "per_call"), ("a8w8", 4, "cached")])
def test_autopick_keeps_the_fastest_aiter_candidate(monkeypatch, kind, splits, metadata):
    install(monkeypatch)
    prefer(monkeypatch, kind, splits, metadata)
    data = harness_input(2, 600, seed=3)
    out = submission.custom_kernel(data)
    assert submission.describe_route(data) == label(kind, splits, metadata)
    assert_matches_reference(data, out)


@pytest.mark.parametrize("variant", VARIANTS)
def test_mla_route_forces_one_metadata_variant(monkeypatch, variant):
    fake = install(monkeypatch, torch_delay_s=0)
    monkeypatch.setenv("MLA_ROUTE", f"aiter_fp8:{variant}")
    assert submission.forced_route() == ("aiter_fp8", variant)
    data = harness_input(2, 400, seed=4)
    out = submission.custom_kernel(data)
    assert set(plan_report(data)) == {label(*c) for c in CANDIDATES if c[2] == variant}
    assert submission.describe_route(data).endswith(f"metadata={variant}]")
    assert_matches_reference(data, out)
    builds = fake.count("get_mla_metadata_v1")
    assert builds == (len(KINDS_AND_SPLITS) if variant == "cached" else fake.count("mla_decode_fwd"))


def test_mla_route_refuses_an_unknown_variant_listing_every_spelling(monkeypatch):
    monkeypatch.setenv("MLA_ROUTE", "aiter_fp8:stale")
    with pytest.raises(ValueError, match="unknown form") as raised:
        submission.forced_route()
    for spelling in ("aiter_fp8:cached", "aiter_fp8:per_call", "triton_fp8:e4m3_waves", "triton_mxfp4:waves"):
        assert repr(spelling) in str(raised.value), raised.value


# ----------------------------------------------------------------------------- per plan, per call


@pytest.mark.parametrize("variant", VARIANTS)
def test_metadata_is_built_into_the_plans_buffers_and_q_is_quantized_per_call(monkeypatch, variant):
    """per_call: every call rebuilds the metadata; cached: never after the plan's."""
    fake = install(monkeypatch)
    prefer(monkeypatch, "a8w8", 8)
    monkeypatch.setenv("MLA_ROUTE", f"aiter_fp8:{variant}")
    batch, kv_len = 2, 600
    submission.custom_kernel(harness_input(batch, kv_len, seed=100))
    assert fake.count("get_mla_metadata_info_v1") == len(KINDS_AND_SPLITS)
    assert fake.count("mla_decode_fwd") >= len(KINDS_AND_SPLITS) * CALLS_PER_CANDIDATE_AT_PLAN_TIME
    runner = submission._plan_for(harness_input(batch, kv_len, seed=100)).run
    assert runner.label == label("a8w8", 8, variant)
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
    assert len(decodes) == 20 and len(builds) == (20 if variant == "per_call" else 0)
    # Shape-only state is the plan's, the very same objects every call; per call, the
    # metadata is rebuilt into it by every call, from the kv_indptr the call's length
    # check wrote; cached, every call reads what the plan built.
    buffers = decode_buffers(decodes[0])
    assert all(a is getattr(runner, name) for a, name in zip(buffers, (
        "work_meta_data", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map",
        "reduce_partial_map")))
    for build in builds:
        assert build["work_metadata_ptrs"] is runner.work_meta_data
        assert build["seqlens_kv_indptr"] is runner.aiter_kv_indptr
        assert build["kv_last_page_lens"] is runner.kv_last_page_len
    for call in decodes:
        assert all(a is b for a, b in zip(decode_buffers(call), buffers))
        assert call["kv_indptr"] is runner.aiter_kv_indptr and call["kv_last_page_lens"] is runner.kv_last_page_len
        assert call["kv_indices"] is runner.kv_indices
        assert call.metadata.kv_indptr == [0, kv_len, 2 * kv_len]
    assert len({id(call.metadata) for call in decodes}) == (20 if variant == "per_call" else 1)
    assert len(set(scales)) == 20
    assert all(call["q"].dtype == reference.FP8_DTYPE for call in decodes)
    # The quantized Q and its scale live in the plan's buffers, the same every call.
    assert all(call["q"] is runner.q_scratch.q_fp8 and call["q_scale"] is runner.q_scratch.scale
               for call in decodes)


@pytest.mark.parametrize("kind, splits", KINDS_AND_SPLITS)
def test_same_shapes_and_config_with_other_lengths_are_right_per_call(monkeypatch, kind, splits):
    """The plan key holds shapes and config, not lengths: one plan serves calls whose
    lengths differ (here non-uniform, with the same total and the same config). With the
    per-call variant each is right, against exact attention over the fp8 KV, with metadata
    for its own lengths."""
    install(monkeypatch)
    prefer(monkeypatch, kind, splits)
    monkeypatch.setenv("MLA_ROUTE", "aiter_fp8:per_call")
    first = ragged_input((800, 800, 800), seed=40)
    assert_matches_reference(first, submission.custom_kernel(first))
    assert submission.describe_route(first) == label(kind, splits, "per_call")
    for seed, lengths in enumerate(((300, 1700, 400), (1600, 256, 544), (256, 256, 1888)), start=41):
        data = ragged_input(lengths, seed=seed)
        data[4]["kv_seq_len"] = 800  # the first call's config: the same plan key
        assert submission.plan_key(data) == submission.plan_key(first)
        out = submission.custom_kernel(data)
        assert submission._plan_for(data).run.label == label(kind, splits, "per_call")
        assert_matches_reference(data, out)


@pytest.mark.parametrize("kind", ["a8w8", "a16w8"])
@pytest.mark.parametrize("gfx", ["gfx950", "gfx942"])
def test_a_later_call_aiter_would_mis_plan_is_refused_as_nan_never_wrong(monkeypatch, kind, gfx):
    """Lengths the plan-time check refuses (a sequence under AITER_MIN_KV_LEN tokens, or
    indptrs past the KV rows) can reach a plan's later calls. Reading them on the host
    would synchronise, so the per-call variant's device check refuses them: aiter's
    metadata is built from the plan's own valid kv_indptr instead (it never sees a length
    it mis-plans: the fake raises where aiter divides by zero) and the output is NaN in
    every element. The next valid call is right again."""
    fp8_dtype = torch.float8_e4m3fnuz if gfx == "gfx942" else reference.FP8_DTYPE
    fake = install(monkeypatch, FakeAiter(gfx=gfx, cu_num=304 if gfx == "gfx942" else 256))
    prefer(monkeypatch, kind, 16)
    monkeypatch.setenv("MLA_ROUTE", "aiter_fp8:per_call")
    first = ragged_input((700, 700), seed=50, fp8_dtype=fp8_dtype)
    assert_matches_reference(first, submission.custom_kernel(first))
    assert submission.describe_route(first) == label(kind, 16, "per_call")
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
    assert submission._plan_for(again).run.label == label(kind, 16, "per_call")


def _same_key(lengths, seed: int, like, fp8_dtype=reference.FP8_DTYPE):
    """An input of `like`'s plan key (shapes and config) with the given lengths."""
    data = ragged_input(lengths, seed=seed, fp8_dtype=fp8_dtype)
    data[4]["kv_seq_len"] = like[4]["kv_seq_len"]
    assert submission.plan_key(data) == submission.plan_key(like)
    return data


@pytest.mark.parametrize("kind", ["a8w8", "a16w8"])
@pytest.mark.parametrize("gfx", ["gfx950", "gfx942"])
def test_cached_metadata_serves_the_plans_lengths_and_any_other_lengths_come_out_nan(monkeypatch, kind, gfx):
    """The cached variant reads metadata built for the plan's first kv_indptr. Calls with
    the same lengths (fresh values) are right; any other kv_indptr under the same shapes
    and config (other lengths of the same total, a shorter total, one entry one token off,
    lengths aiter would mis-plan, past the KV rows) is refused on the device: NaN in every
    element, never a finite wrong one, and no metadata is built for it."""
    fp8_dtype = torch.float8_e4m3fnuz if gfx == "gfx942" else reference.FP8_DTYPE
    fake = install(monkeypatch, FakeAiter(gfx=gfx, cu_num=304 if gfx == "gfx942" else 256))
    prefer(monkeypatch, kind)
    monkeypatch.setenv("MLA_ROUTE", "aiter_fp8:cached")
    first = ragged_input((700, 500, 900), seed=60, fp8_dtype=fp8_dtype)
    assert_matches_reference(first, submission.custom_kernel(first))
    chosen = submission.describe_route(first)
    assert chosen.startswith(f"aiter_{kind}[") and chosen.endswith(",metadata=cached]"), chosen
    fake.clear_calls()
    other_kv_indptrs = {"same total, other split": [0, 500, 1200, 2100], "one token off": [0, 701, 1200, 2100],
                        "shorter total": [0, 700, 1200, 2000], "one token short at the end": [0, 700, 1200, 2099],
                        "a sequence aiter mis-plans": [0, 1080, 1100, 2100], "empty": [0, 1100, 1100, 2100]}
    for seed, (name, kv_indptr) in enumerate(other_kv_indptrs.items(), start=61):
        data = _same_key((700, 500, 900), seed, first, fp8_dtype)
        data[3].copy_(torch.tensor(kv_indptr, dtype=torch.int32))
        assert submission.custom_kernel(data).isnan().all(), name
    past_the_rows = _same_key((700, 500, 900), 70, first, fp8_dtype)
    past_the_rows[3][3] = 2200
    submission._plan_for(past_the_rows).check_indptr_each_call = False  # the GPU's plan (as above)
    assert submission.custom_kernel(past_the_rows).isnan().all()
    for seed in (71, 72):  # the plan's lengths again, fresh values: right
        again = _same_key((700, 500, 900), seed, first, fp8_dtype)
        assert_matches_reference(again, submission.custom_kernel(again))
    assert fake.count("get_mla_metadata_v1") == 0 and fake.count("mla_decode_fwd") == len(other_kv_indptrs) + 3
    assert submission._plan_for(first).label == chosen


@pytest.mark.parametrize("steer", ["none", "cached", "per_call"])
def test_whichever_variant_the_autopick_keeps_other_lengths_are_never_finite_and_wrong(monkeypatch, steer):
    """A same-shape call with other lengths: right if the plan kept the per-call variant,
    NaN in every element if it kept the cached one. 'none': the autopick's own timing."""
    install(monkeypatch)
    if steer != "none":
        prefer(monkeypatch, metadata=steer)
    first = ragged_input((600, 600), seed=80)
    assert_matches_reference(first, submission.custom_kernel(first))
    chosen = submission.describe_route(first)
    assert chosen.startswith("aiter_"), chosen
    if steer != "none":
        assert chosen.endswith(f",metadata={steer}]"), chosen
    for seed, lengths in enumerate(((900, 300), (500, 700), (256, 944)), start=81):
        data = _same_key(lengths, seed, first)
        out = submission.custom_kernel(data)
        if chosen.endswith(",metadata=cached]"):
            assert out.isnan().all(), lengths
        else:
            assert_matches_reference(data, out)


_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


# Work that launches nothing on a GPU: the output's allocation and the KV buffer's view.
NO_DEVICE_WORK = {"aten.empty.memory_format", "aten.view.default"}


def _record_calls_in_worker(inputs, q_in_fp8, variant):
    """Runs in the interpreter worker: one runner of `variant` for the plan of inputs[0],
    then one call per input, each recorded: the device work in order, what aiter received,
    and the kv_indptr its metadata was built from. Also returns how many metadata builds
    building the runner made."""
    fake = FakeAiter()
    saved, submission.aiter_ops = submission.aiter_ops, fake
    try:
        runner = submission.AITER_RUNNERS[variant](submission.CallShape.of(inputs[0]), inputs[0], q_in_fp8, 8)
        builds_with_the_plan = fake.count("get_mla_metadata_v1")
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
        return builds_with_the_plan, calls
    finally:
        submission.aiter_ops = saved


# Per call, in order, what each variant's device work is (besides the output's allocation).
CALL_LAUNCHES = {
    ("per_call", True): [("triton", "_q_abs_max_partials_checked_kernel"),  # Q's amax partials + length check
                         ("triton", "_q_fp8_quantize_kernel"),  # Q scale and fp8 bytes
                         ("aiter", "get_mla_metadata_v1"),  # metadata from the checked kv_indptr
                         ("aiter", "mla_decode_fwd")],  # the decode (aiter's split kernel and reduce)
    ("per_call", False): [("triton", "_kv_lengths_check_kernel"),  # length check, KV scale through it
                          ("aiter", "get_mla_metadata_v1"),
                          ("aiter", "mla_decode_fwd")],
    ("cached", True): [("triton", "_q_abs_max_partials_compared_kernel"),  # Q's amax partials + kv_indptr compare
                       ("triton", "_q_fp8_quantize_kernel"),
                       ("aiter", "mla_decode_fwd")],  # on the metadata the plan built
    ("cached", False): [("triton", "_kv_indptr_compare_kernel"),  # kv_indptr compare, KV scale through it
                        ("aiter", "mla_decode_fwd")],
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("q_in_fp8", [True, False])
def test_each_call_makes_exactly_its_variants_launches_and_nothing_else(q_in_fp8, variant):
    """Under the interpreter, as on a GPU, our kernels run as Triton launches. Per call,
    in order, exactly CALL_LAUNCHES: a8w8 the quantizer's two launches (the first also
    guards kv_indptr: the length check per call, the comparison with the plan's cached),
    a16w8 the guard's one launch; per call only, aiter's metadata build from the checked
    kv_indptr; then aiter's decode. No other torch operation runs but the output's
    allocation and a view; the cached variant builds its metadata once, with the plan.
    The calls share their shapes; each input's Q reaches aiter quantized exactly as
    reference.quantize_fp8 quantizes it. Per call: every call with lengths aiter plans is
    right, the one with a short sequence is refused (NaN everywhere, metadata built from
    the plan's first kv_indptr). Cached: calls with the plan's lengths are right, the
    others are NaN everywhere."""
    lengths = [(600, 600, 600), (300, 1000, 500), (1200, 300, 300), (100, 1000, 700), (600, 600, 600)]
    inputs = [ragged_input(lens, seed=31 + i) for i, lens in enumerate(lengths)]
    for i, data in enumerate(inputs):
        data[0][1, 5, 7] = 6.0 + i  # a distinct amax each (randn stays < 6)
    builds_with_the_plan, calls = _worker.run(_record_calls_in_worker, inputs, q_in_fp8, variant)
    assert builds_with_the_plan == (1 if variant == "cached" else 0)
    served = [lens == lengths[0] if variant == "cached" else min(lens) >= submission.AITER_MIN_KV_LEN
              for lens in lengths]
    for data, lens, serve, (events, q_bytes, q_scale, out, built_from) in zip(inputs, lengths, served, calls):
        launches = [event for event in events if event[0] != "torch"]
        assert launches == CALL_LAUNCHES[variant, q_in_fp8], events
        torch_ops = [name for kind, name in events if kind == "torch"]
        assert set(torch_ops) <= NO_DEVICE_WORK and torch_ops.count("aten.empty.memory_format") == 1, events
        if not serve:
            assert out.isnan().all() and built_from == [0, 600, 1200, 1800], lens
            assert not q_in_fp8 or q_scale.isnan().all()
            continue
        assert built_from == data[3].tolist()
        if q_in_fp8:
            want_bytes, want_scale = reference.quantize_fp8(data[0])
            assert torch.equal(q_bytes, want_bytes.view(torch.uint8)) and torch.equal(q_scale, want_scale)
        else:
            assert q_scale is None
        assert_matches_reference(data, out)
    if q_in_fp8:
        assert len({call[2].item() for call, serve in zip(calls, served) if serve}) == served.count(True)


# kv_indptr (batch 5, the plan's) -> kv_indptrs of other lengths, each differing from it
# in one entry, where a comparison a step at a time could miss it.
PLAN_KV_INDPTR = [0, 1000, 2000, 3000, 4000, 5000]
DIFFERING_KV_INDPTRS = {
    "first entry": [1, 1000, 2000, 3000, 4000, 5000],
    "middle entry": [0, 1000, 2001, 3000, 4000, 5000],
    "last entry, alone in the last step": [0, 1000, 2000, 3000, 4000, 4999],
}


def _strided(values) -> torch.Tensor:
    """`values` as int32, read through a stride of 2."""
    strided = torch.zeros(2 * len(values), dtype=torch.int32)
    strided[::2] = torch.tensor(values, dtype=torch.int32)
    return strided[::2]


def _comparison_in_worker(block):
    """Runs in the interpreter worker: a16w8's comparison kernel, `block` entries a step,
    on the plan's kv_indptr and each differing one, read through a stride of 2; the KV
    scale each call passes to aiter."""
    scales = {}
    for name, values in {"the plan's": PLAN_KV_INDPTR, **DIFFERING_KV_INDPTRS}.items():
        scale = torch.empty(1)
        submission.KernelCall(submission._kv_indptr_compare_kernel, (1,), dict(
            kv_scale_ptr=torch.tensor([0.25]), checked_kv_scale_ptr=scale, kv_indptr_ptr=_strided(values),
            kv_indptr_stride=2, plan_kv_indptr_ptr=torch.tensor(PLAN_KV_INDPTR, dtype=torch.int32),
            entries=len(values), CHECK_BLOCK=block, NAN_BITS=submission._FP32_NAN_BITS), dict(num_warps=4)).launch()
        scales[name] = scale.item()
    return scales


@pytest.mark.parametrize("block", [2, submission.KV_LENGTH_CHECK_BLOCK])
def test_the_comparison_refuses_any_kv_indptr_but_the_plans(monkeypatch, block):
    """The cached variant's guard under the interpreter (in steps of `block` entries) and
    its torch twin (CPU): the plan's kv_indptr passes the KV scale; one that differs in
    any single entry makes it NaN."""
    scales = _worker.run(_comparison_in_worker, block)
    assert scales.pop("the plan's") == 0.25
    assert set(scales) == set(DIFFERING_KV_INDPTRS) and all(math.isnan(s) for s in scales.values()), scales
    install(monkeypatch)
    data = ragged_input((1000,) * 5, seed=90)
    assert data[3].tolist() == PLAN_KV_INDPTR
    runner = submission.AiterCachedRunner(submission.CallShape.of(data), data, False, 8)
    assert not bool(runner._refused_torch(_strided(PLAN_KV_INDPTR)))
    assert all(bool(runner._refused_torch(_strided(values))) for values in DIFFERING_KV_INDPTRS.values())


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
        submission.KernelCall(submission._kv_lengths_check_kernel, (1,), dict(
            kv_scale_ptr=torch.tensor([0.25]), checked_kv_scale_ptr=scale, kv_indptr_ptr=kv_indptr,
            kv_indptr_stride=kv_indptr.stride(0), fallback_kv_indptr_ptr=torch.tensor(LENGTH_CHECK_FALLBACK,
                                                                                     dtype=torch.int32),
            checked_kv_indptr_ptr=checked, last_page_lens_ptr=last_page, batch=5, total_kv=5000,
            MIN_KV_LEN=submission.AITER_MIN_KV_LEN, CHECK_BLOCK=block, NAN_BITS=submission._FP32_NAN_BITS),
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

    fake.clear_calls()  # back to the first shape: its plan, its buffers (per call: the metadata rebuilt there)
    again = harness_input(2, 600, seed=7)
    assert_matches_reference(again, submission.custom_kernel(again))
    assert fake.count("get_mla_metadata_info_v1") == 0
    builds, decodes = fake.calls_to("get_mla_metadata_v1"), fake.calls_to("mla_decode_fwd")
    cached = submission.describe_route(again).endswith(",metadata=cached]")
    assert len(decodes) == 1 and len(builds) == (0 if cached else 1)
    assert decodes[0].metadata.buffers["work_metadata_ptrs"] is first_buffers
    assert all(build["work_metadata_ptrs"] is first_buffers for build in builds)
    assert (decodes[0].metadata is first_state) == cached


@pytest.mark.parametrize("lengths", [(600, 600), (700, 260, 1000)])
def test_every_candidate_matches_the_reference(monkeypatch, lengths):
    fake = install(monkeypatch)
    data = ragged_input(lengths, seed=8)
    shape = submission.CallShape.of(data)
    for kind, splits, metadata in CANDIDATES:
        runner = submission.AITER_RUNNERS[metadata](shape, data, kind == "a8w8", splits)
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
    offered = [candidate for candidate in CANDIDATES if candidate[1] >= 16]
    assert "RAISED" not in " ".join(report), report
    verdicts = plan_report(data)
    for candidate in offered:
        assert " us ok " in verdicts[label(*candidate)], report
    assert fake.count("get_mla_metadata_info_v1") == len(offered)
    assert {c["max_split_per_batch"] for c in fake.calls_to("get_mla_metadata_v1")} == {16, 32}


def test_short_sequences_are_not_offered_to_aiter_and_ragged_ones_are(monkeypatch):
    # Under 196 tokens aiter plans 0 splits on gfx950 and divides by it (AITER_MIN_KV_LEN
    # has the rest); ragged lengths are served (the cached variant for the plan's own).
    install(monkeypatch)
    route = submission.AiterRoute()
    for lengths in ((100, 100), (600, 255)):
        shape = submission.CallShape.of(ragged_input(lengths, seed=19))
        assert route.variants(shape) == [], lengths
        for runner in submission.AITER_RUNNERS.values():
            with pytest.raises(ValueError, match="needs every sequence >= 256 tokens"):
                runner(shape, ragged_input(lengths, seed=19), True, 8)
    for lengths in ((600, 600), (700, 900), (256, 5000)):
        assert len(route.variants(submission.CallShape.of(ragged_input(lengths, seed=19)))) == len(CANDIDATES)


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
