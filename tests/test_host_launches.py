"""What a call does on the host after a plan's first call (submission.BoundLaunches): the
launches' arguments are built once and launched again through the compiled kernel Triton's
JIT returned, as long as the call's tensors sit at the same addresses with the same shapes
and strides; a tensor that moved, or other strides, builds them anew, so a TMA descriptor
never describes the tensor of an earlier call. Host logic on the CPU: the launches are
recorded instead of run, in this process by a stand-in for KernelCall.launch (what the JIT
returns records the later launches), and in a worker process by Triton's own JIT with a
recording driver (tools/launch_recorder.py: its binding, specialization and compile for
sm_90 or gfx950, the compiled kernel's launch path, a launcher that records).

Also here: a call under CUDA graph capture that cannot be captured (a plan's first call,
a route that reads on the host) raises GraphCaptureError saying what to do, and no
fallback serves past it. The capture itself is tests/test_graph_capture.py's, on a GPU."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import reference
import submission as sub

pytestmark = [pytest.mark.fast, pytest.mark.usefixtures("fresh_plans")]

ROOT = Path(__file__).resolve().parent.parent
CUS = {"sm_90": 132, "gfx950": 256}
needs_hopper_gluon = pytest.mark.skipif(bool(sub.gluon_problem("hopper")),
                                        reason=f"this Triton builds no Hopper form: {sub.gluon_problem('hopper')}")


class Recorded:
    """What the stand-in JIT returns for a call: compiled[grid](*args) records a launch."""

    def __init__(self, log: list, call):
        self.log, self.call = log, call

    def __getitem__(self, grid):
        def launcher(*args):
            self.log.append(("compiled", self.call.kernel, grid, dict(zip(self.call.kernel.arg_names, args,
                                                                          strict=True))))
        return launcher


@pytest.fixture
def launches(monkeypatch):
    """The launches of KernelCalls, recorded: ("jit", kernel, grid, arguments) where the JIT
    launched, ("compiled", ...) where what it returned did."""
    log = []

    def jit_launch(call):
        log.append(("jit", call.kernel, call.grid, dict(call.arguments)))
        return Recorded(log, call)
    monkeypatch.setattr(sub.KernelCall, "launch", jit_launch)
    return log


@pytest.fixture
def on_sm_90(monkeypatch):
    """CPU tensors taken for an H200's, its kernels compiled rather than interpreted."""
    monkeypatch.setattr(sub, "_INTERPRETED", False)
    monkeypatch.setattr(sub, "device_arch", lambda device: (132, sub.arch_record("sm_90")))


def _runner(kv_format: str, form: str, two_launches: bool = False, batch: int = 2, kv_len: int = 256):
    data = reference.generate_input(batch, 1, kv_len, 1, device="cpu")
    offered = sub.launch_candidates(kv_format, batch, kv_len, 132, "sm_90", form)
    launch = next(launch for launch in offered if (launch.num_splits > 1 and not launch.combine_in_kernel)
                  == two_launches)
    return data, sub.KernelRunner(sub.CallShape.of(data), kv_format, launch)


def _kinds(log) -> list[str]:
    return [entry[0] for entry in log]


def _decode(log) -> dict:
    return log[0][3]


FORMS = [("fp8", "hopper_one_term", False), ("fp8", "hopper_two_term", True), ("mxfp4", "hopper", False),
         ("fp8", "f16", True), ("mxfp4", "bf16", False)]


@needs_hopper_gluon
@pytest.mark.usefixtures("on_sm_90")
@pytest.mark.parametrize("kv_format,form,two_launches", FORMS)
def test_a_runner_builds_its_launches_on_the_first_call_and_launches_them_again(launches, kv_format, form,
                                                                                two_launches):
    data, runner = _runner(kv_format, form, two_launches)
    kernels = 2 if two_launches else 1
    first = runner(*data[:4])
    assert _kinds(launches) == ["jit"] * kernels
    built = _decode(launches)
    for _ in range(2):
        launches.clear()
        out = runner(*data[:4])
        assert _kinds(launches) == ["compiled"] * kernels and out is not first
        again = _decode(launches)
        # every argument as built, but the output: the one of this call
        assert set(again) == set(built) and again["out_ptr"] is out and built["out_ptr"] is first
        # (the call's own tensors are this call's: the MXFP4 bytes a new uint8 view of the same buffer)
        assert all(again[name] is built[name] or again[name].data_ptr() == built[name].data_ptr()
                   for name in built if name != "out_ptr")
        if two_launches:
            assert launches[1][3]["out_ptr"] is out
        assert len(launches[0][2]) == 3  # the compiled kernel's launcher takes a 3-D grid


def _descriptor_rows(arguments: dict) -> int:
    """The address the call's KV is read at: its TMA descriptors' base, or its pointer."""
    if "nope_desc" in arguments:
        assert arguments["nope_desc"].base.data_ptr() == arguments["rope_desc"].base.data_ptr()
        return arguments["nope_desc"].base.data_ptr()
    return arguments["kv_ptr"].data_ptr()


@needs_hopper_gluon
@pytest.mark.usefixtures("on_sm_90")
@pytest.mark.parametrize("kv_format,form,two_launches", FORMS)
def test_a_tensor_that_moved_or_changed_strides_builds_the_launches_anew(launches, kv_format, form, two_launches):
    data, runner = _runner(kv_format, form, two_launches)
    q, kv_data, qo_indptr, kv_indptr = data[:4]
    buffer, scales = kv_data[kv_format]
    runner(q, kv_data, qo_indptr, kv_indptr)
    assert _descriptor_rows(_decode(launches)) == buffer.data_ptr()
    # refilled in place (what a serving loop and a CUDA graph's replay do): nothing rebuilt
    fresh = reference.generate_input(2, 1, 256, 2, device="cpu")
    q.copy_(fresh[0])
    buffer.copy_(fresh[1][kv_format][0])
    launches.clear()
    runner(q, kv_data, qo_indptr, kv_indptr)
    assert _kinds(launches)[0] == "compiled" and _descriptor_rows(_decode(launches)) == buffer.data_ptr()
    # the KV at another address: its descriptors (or pointer) are of the new buffer, not the old one
    moved = buffer.clone()
    launches.clear()
    runner(q, {kv_format: (moved, scales)}, qo_indptr, kv_indptr)
    assert _kinds(launches)[0] == "jit" and _descriptor_rows(_decode(launches)) == moved.data_ptr()
    launches.clear()
    runner(q, {kv_format: (moved, scales)}, qo_indptr, kv_indptr)
    assert _kinds(launches)[0] == "compiled" and _descriptor_rows(_decode(launches)) == moved.data_ptr()
    # every other tensor of the call, moved in turn: rebuilt on it
    call = dict(q=q, scales=scales, qo_indptr=qo_indptr, kv_indptr=kv_indptr)
    for name in call:
        call[name] = call[name].clone()
        launches.clear()
        runner(call["q"], {kv_format: (moved, call["scales"])}, call["qo_indptr"], call["kv_indptr"])
        assert _kinds(launches)[0] == "jit"
        argument = _decode(launches)[dict(scales="kv_scale_ptr").get(name, name + "_ptr")]
        assert argument.data_ptr() == call[name].data_ptr(), name
    # Q at the same address with other strides: rebuilt, and the kernel reads them
    wide = torch.empty((2, 2, 16, 576), dtype=torch.bfloat16)
    contiguous, strided = wide.view(-1)[:2 * 16 * 576].view(2, 16, 576), wide[:, 0]
    assert contiguous.data_ptr() == strided.data_ptr() and strided.stride(0) == 2 * 16 * 576
    rest = ({kv_format: (moved, call["scales"])}, call["qo_indptr"], call["kv_indptr"])
    runner(contiguous, *rest)
    launches.clear()
    runner(strided, *rest)
    assert _kinds(launches)[0] == "jit" and _decode(launches)["stride_q_tok"] == 2 * 16 * 576


@needs_hopper_gluon
@pytest.mark.usefixtures("on_sm_90")
def test_an_output_of_another_alignment_builds_the_launches_anew(launches):
    data, runner = _runner("fp8", "hopper_one_term")
    runner(*data[:4])
    storage = torch.empty(2 * 16 * 512 + 1, dtype=torch.bfloat16)
    shifted = storage[1:].view(2, 16, 512)
    assert shifted.data_ptr() % 16
    launches.clear()
    runner(*data[:4], out=shifted)
    assert _kinds(launches) == ["jit"] and _decode(launches)["out_ptr"] is shifted


def test_under_the_interpreter_every_call_launches_through_the_jit_with_its_own_tensors(monkeypatch):
    log = []

    def jit_launch(call):  # as the interpreter: launched, no compiled kernel returned
        log.append(dict(call.arguments))
    monkeypatch.setattr(sub.KernelCall, "launch", jit_launch)
    data, runner = _runner("fp8", "f16", two_launches=True)
    outs = [runner(*data[:4]) for _ in range(3)]
    assert len(log) == 6
    assert [arguments["out_ptr"] for arguments in log] == [out for out in outs for _ in range(2)]
    assert all(arguments["q_ptr"] is data[0] for arguments in log[::2])


def _held(value) -> list:
    """Every object `value` holds through tuples, lists, dicts and dataclasses' fields."""
    if isinstance(value, (tuple, list)):
        return [value] + [held for each in value for held in _held(each)]
    if isinstance(value, dict):
        return [value] + [held for each in value.values() for held in _held(each)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [value] + [held for field in dataclasses.fields(value) for held in _held(getattr(value, field.name))]
    return [value]


@pytest.mark.parametrize("two_launches", [False, True])
def test_the_launches_keep_no_tensor_of_the_call_between_calls(launches, two_launches):
    data, runner = _runner("fp8", "f16", two_launches=two_launches)
    out = runner(*data[:4])
    held = _held(runner.launches.__dict__)
    assert any(value is runner.scratch.part_lse for value in held)  # the search reaches the tensors held
    call_tensors = [data[0], data[1]["fp8"][0], data[1]["fp8"][1], data[2], data[3], out]
    assert not any(value is tensor for value in held for tensor in call_tensors)


def _strided_q(data):
    """data with its Q at every other row of a wider tensor: not contiguous, the same values."""
    wide = torch.zeros((data[0].shape[0], 2, 16, 576), dtype=torch.bfloat16)
    wide[:, 1] = data[0]
    return (wide[:, 1], *data[1:])


def test_a_q_that_is_not_contiguous_is_copied_into_a_buffer_the_runner_holds(launches):
    data = _strided_q(reference.generate_input(2, 1, 256, 1, device="cpu"))
    launch = sub.launch_candidates("fp8", 2, 256, 132, "sm_90", "f16")[0]
    runner = sub.KernelRunner(sub.CallShape.of(data), "fp8", launch)
    runner(*data[:4])
    data[0].mul_(2)  # refilled in place: the next call copies the new values
    launches.clear()
    runner(*data[:4])
    assert _kinds(launches)[0] == "compiled" and _decode(launches)["q_ptr"] is runner.q_copy
    assert runner.q_copy.is_contiguous() and torch.equal(runner.q_copy, data[0])


# ---------------------------------------------------------------- the aiter route's launches
def _aiter_runner(metadata: str, q_in_fp8: bool):
    data = reference.generate_input(2, 1, 256, 1, device="cpu")
    runner = sub.AITER_RUNNERS[metadata](sub.CallShape.of(data), data, q_in_fp8, 16)
    runner.launches_triton = True  # the GPU path
    return data, runner


@pytest.mark.parametrize("metadata", sorted(sub.AITER_RUNNERS))
@pytest.mark.parametrize("q_in_fp8", [True, False])
def test_the_aiter_route_builds_its_guard_launches_once_and_again_where_a_tensor_moved(launches, monkeypatch,
                                                                                      metadata, q_in_fp8):
    from types import SimpleNamespace
    from tools.fake_aiter import FakeAiter
    decodes = []
    monkeypatch.setattr(sub, "aiter_ops", SimpleNamespace(
        get_mla_metadata_info_v1=FakeAiter().get_mla_metadata_info_v1, get_mla_metadata_v1=lambda *a, **k: None,
        mla_decode_fwd=lambda *a, **k: decodes.append(a)))
    data, runner = _aiter_runner(metadata, q_in_fp8)
    q, kv_data, qo_indptr, kv_indptr = data[:4]
    kernels = 2 if q_in_fp8 else 1
    runner(q, kv_data, qo_indptr, kv_indptr)
    assert _kinds(launches) == ["jit"] * kernels
    built = _decode(launches)
    launches.clear()
    runner(q, kv_data, qo_indptr, kv_indptr)
    assert _kinds(launches) == ["compiled"] * kernels
    assert all(_decode(launches)[name] is value for name, value in built.items())
    moved = kv_indptr.clone()
    launches.clear()
    runner(q, kv_data, qo_indptr, moved)
    assert _kinds(launches) == ["jit"] * kernels and _decode(launches)["kv_indptr_ptr"] is moved
    moved_q = q.clone()
    launches.clear()
    runner(moved_q, kv_data, qo_indptr, moved)
    assert _kinds(launches)[0] == ("jit" if q_in_fp8 else "compiled")
    if q_in_fp8:
        assert _decode(launches)["q_ptr"] is moved_q and launches[1][3]["q_ptr"] is moved_q
    assert decodes[-1][0] is (runner.q_scratch.q_fp8 if q_in_fp8 else moved_q)


def test_the_aiter_route_copies_a_q_that_is_not_contiguous_into_its_own_buffer(launches, monkeypatch):
    from types import SimpleNamespace
    from tools.fake_aiter import FakeAiter
    monkeypatch.setattr(sub, "aiter_ops", SimpleNamespace(
        get_mla_metadata_info_v1=FakeAiter().get_mla_metadata_info_v1, get_mla_metadata_v1=lambda *a, **k: None,
        mla_decode_fwd=lambda *a, **k: None))
    data = _strided_q(reference.generate_input(2, 1, 256, 1, device="cpu"))
    runner = sub.AITER_RUNNERS["cached"](sub.CallShape.of(data), data, True, 16)
    runner.launches_triton = True
    for _ in range(2):
        launches.clear()
        runner(*data[:4])
    assert _kinds(launches) == ["compiled"] * 2 and _decode(launches)["q_ptr"] is runner.q_copy
    assert torch.equal(runner.q_copy, data[0])


@pytest.mark.parametrize("metadata", sorted(sub.AITER_RUNNERS))
def test_an_aiter_call_allocates_its_output_alone(launches, monkeypatch, metadata):
    from types import SimpleNamespace
    from torch.utils._python_dispatch import TorchDispatchMode
    from tools.fake_aiter import FakeAiter
    monkeypatch.setattr(sub, "aiter_ops", SimpleNamespace(
        get_mla_metadata_info_v1=FakeAiter().get_mla_metadata_info_v1, get_mla_metadata_v1=lambda *a, **k: None,
        mla_decode_fwd=lambda *a, **k: None))
    data, runner = _aiter_runner(metadata, True)
    runner(*data[:4])

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))
    with Ops() as ops:
        runner(*data[:4])
    assert [name for name in ops.names if name.startswith(("empty", "zeros", "clone", "_to_copy", "new_"))] == \
        ["empty"], ops.names


# ---------------------------------------------------------------- Triton's own JIT, recorded
def _worker(target: str) -> dict:
    """In a process of its own: runners on CPU stand-ins under tools/launch_recorder's driver
    for `target` (Triton's JIT binding, specializing and compiling as on that GPU). Per runner,
    the launcher's arguments from the JIT's launch and from the compiled kernel's, and where a
    moved KV buffer was read."""
    from tools.launch_recorder import recording_driver
    sub.device_arch = lambda device: (CUS[target], sub.arch_record(target))
    findings = {}
    with recording_driver(target) as recorder:
        data = reference.generate_input(2, 1, 256, 1, device="cpu")
        shape = sub.CallShape.of(data)
        q, kv_data, qo_indptr, kv_indptr = data[:4]
        for kv_format in ("fp8", "mxfp4"):
            for launch in sub.launch_candidates(kv_format, 2, 256, CUS[target], target)[:3]:
                runner = sub.KernelRunner(shape, kv_format, launch)
                recorder.launches.clear()
                outs = [runner(*data[:4]) for _ in range(2)]
                half = len(recorder.launches) // 2
                pairs = []
                for jit, compiled in zip(recorder.launches[:half], recorder.launches[half:]):
                    differ = [index for index, (a, b) in enumerate(zip(jit.args, compiled.args)) if not (
                        a is b or (a.data_ptr() == b.data_ptr() if isinstance(a, torch.Tensor) else a == b))]
                    out_at = [index for index, arg in enumerate(compiled.args) if arg is outs[1]]
                    pairs.append(dict(kernel=jit.kernel, same_grid=jit.grid == compiled.grid,
                                      same_count=len(jit.args) == len(compiled.args), differ=differ, out_at=out_at))
                buffer, scales = kv_data[kv_format]
                moved = buffer.clone()
                recorder.launches.clear()
                runner(q, {kv_format: (moved, scales)}, qo_indptr, kv_indptr)
                runner(q, {kv_format: (moved, scales)}, qo_indptr, kv_indptr)
                read_at = set()
                for each in recorder.launches[:1] + recorder.launches[half:half + 1]:
                    for arg in each.args:
                        base = getattr(arg, "base", arg)
                        if isinstance(base, torch.Tensor) and base.data_ptr() in (buffer.data_ptr(), moved.data_ptr()):
                            read_at.add("moved" if base.data_ptr() == moved.data_ptr() else "old")
                findings[sub.launch_label(kv_format, launch)] = dict(pairs=pairs, read_at=sorted(read_at))
    return findings


@pytest.mark.parametrize("target", ["sm_90", "gfx950"])
def test_the_compiled_kernel_gets_what_the_jit_gave_it_and_a_moved_kv_buffer(target, tmp_path):
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MLA_ROUTE")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    worker = ("import json, sys; sys.path[:0] = ['.', 'tests']; import test_host_launches; "
              "print(json.dumps(test_host_launches._worker(sys.argv[1])))")
    proc = subprocess.run([sys.executable, "-c", worker, target], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    findings = json.loads(proc.stdout)
    assert len(findings) >= 4 and any(len(found["pairs"]) == 2 for found in findings.values())
    for label, found in findings.items():
        for pair in found["pairs"]:
            # the same launch but for its output, the call's own
            assert pair["same_grid"] and pair["same_count"] and pair["out_at"], (label, pair)
            assert pair["differ"] == pair["out_at"], (label, pair)
        assert found["read_at"] == ["moved"], (label, found)

# ---------------------------------------------------------------- under CUDA graph capture
# How CUDA, HIP and Triton's launcher word a host read or synchronization during a capture
# (the stand-ins' errors): torch's carries "CUDA error", which _is_device_fault also knows;
# Triton's does not.
CAPTURE_FAILURES = {"torch": "CUDA error: operation not permitted when stream is capturing",
                    "hip": "HIP error: operation not permitted when stream is capturing",
                    "triton": "Triton Error [CUDA]: operation not permitted when stream is capturing",
                    "invalidated": "CUDA error: operation failed due to a previous error during capture"}


class StandInRunner:
    """A plan's runner that raises `error` on every call, or serves zeros."""

    def __init__(self, label: str, error: Exception | None = None):
        self.label, self.error, self.calls = label, error, 0
        self.kv_format, self.form, self.bound = "fp8", "stand-in", sub.FORMAT_ERROR_BOUNDS["fp8"]

    def __call__(self, q, kv_data, qo_indptr, kv_indptr):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return torch.zeros((q.shape[0], 16, 512), dtype=torch.bfloat16)


def _planned(data, runners: list, check_indptr: bool = False) -> sub.Plan:
    plan = sub.Plan(sub.CallShape.of(data), runners, [])
    plan.check_indptr_each_call = check_indptr
    sub._PLANS[sub.plan_key(data)] = plan
    return plan


@pytest.mark.parametrize("wording", list(CAPTURE_FAILURES))
def test_a_first_call_under_capture_says_to_call_the_shape_once_before_capturing(monkeypatch, wording):
    data = reference.generate_input(2, 1, 64, 1, device="cpu")

    def host_read(*_):  # the plan's read of kv_indptr on the host, under capture
        raise RuntimeError(CAPTURE_FAILURES[wording])
    monkeypatch.setattr(sub.CallShape, "of", host_read)
    with pytest.raises(sub.GraphCaptureError, match=r"first call of a shape \(batch 2, kv_seq_len 64\).*"
                                                    r"Call custom_kernel once on an input of this shape before "
                                                    r"capturing") as raised:
        sub.custom_kernel(data)
    assert str(raised.value.__cause__) == CAPTURE_FAILURES[wording] and not sub._PLANS
    monkeypatch.undo()
    assert sub.custom_kernel(data).shape == (2, 16, 512)  # called outside a capture, it plans and serves


def test_a_first_call_that_fails_otherwise_raises_its_own_error(monkeypatch):
    data = reference.generate_input(2, 1, 64, 1, device="cpu")

    def refused(*_):
        raise ValueError("a refused input")
    monkeypatch.setattr(sub.CallShape, "of", refused)
    with pytest.raises(ValueError, match="a refused input"):
        sub.custom_kernel(data)


@pytest.mark.parametrize("wording", list(CAPTURE_FAILURES))
def test_a_runner_failing_under_capture_is_reported_and_no_fallback_serves(wording):
    data = reference.generate_input(2, 1, 64, 1, device="cpu")
    failing = StandInRunner("torch[bf16]", RuntimeError(CAPTURE_FAILURES[wording]))
    fallback = StandInRunner("triton_fp8[form=f16]")
    plan = _planned(data, [failing, fallback])
    with pytest.raises(sub.GraphCaptureError, match=r"cannot be captured in a CUDA graph with torch\[bf16\] serving "
                                                    r"batch=2 .*The torch route reads the indptrs on the host"):
        sub.custom_kernel(data)
    assert plan.runners == [failing, fallback] and plan.run is failing and fallback.calls == 0


def test_an_ordinary_error_still_falls_back():
    data = reference.generate_input(2, 1, 64, 1, device="cpu")
    failing, fallback = StandInRunner("first", ValueError("a launch refused")), StandInRunner("second")
    plan = _planned(data, [failing, fallback])
    assert sub.custom_kernel(data).shape == (2, 16, 512)
    assert plan.runners == [fallback] and fallback.calls == 1


@pytest.mark.parametrize("wording", list(CAPTURE_FAILURES))
def test_fall_back_reraises_a_capture_failure_and_keeps_its_runners(wording):
    data = reference.generate_input(2, 1, 64, 1, device="cpu")
    runners = [StandInRunner("first"), StandInRunner("second")]
    plan = sub.Plan(sub.CallShape.of(data), list(runners), [])
    error = RuntimeError(CAPTURE_FAILURES[wording])
    with pytest.raises(RuntimeError) as raised:
        plan.fall_back(error)
    assert raised.value is error and plan.runners == runners and plan.run is runners[0]


def test_the_autopick_stops_at_a_capture_failure_instead_of_skipping_the_candidate():
    data = reference.generate_input(2, 1, 64, 1, device="cpu")
    shape = sub.CallShape.of(data)
    error = RuntimeError(CAPTURE_FAILURES["triton"])
    capturing = sub.Candidate("triton_fp8", "stand-in", "capturing", lambda data: StandInRunner("capturing", error))
    serving = sub.Candidate("torch", "bf16", "torch[bf16]", lambda data: sub.TorchRunner(shape, "bf16"))
    with pytest.raises(RuntimeError) as raised:
        sub.autopick(data, shape, [capturing, serving])
    assert raised.value is error
    runners, report = sub.autopick(data, shape, [sub.Candidate(
        "triton_fp8", "stand-in", "refusing", lambda data: StandInRunner("refusing", ValueError("no"))), serving])
    assert [runner.label for runner in runners] == ["torch[bf16]"] and "refusing: RAISED ValueError" in report


def test_the_per_call_indptr_check_under_capture_says_to_unset_it(monkeypatch):
    data = reference.generate_input(2, 1, 64, 1, device="cpu")
    _planned(data, [StandInRunner("served")], check_indptr=True)

    def host_read(*_):
        raise RuntimeError(CAPTURE_FAILURES["torch"])
    monkeypatch.setattr(sub, "validate_indptr_values", host_read)
    with pytest.raises(sub.GraphCaptureError, match="MLA_CHECK_INDPTR=1: it reads the indptrs on the host"):
        sub.custom_kernel(data)
