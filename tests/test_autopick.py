"""The autopick keeps the fastest route that passes verification, and nothing else."""
import math
import time

import pytest
import torch

import submission
from reference import generate_input


def small_input(batch=2, kv_len=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, 16, 576, generator=gen).bfloat16()
    kv = torch.randn(batch * kv_len, 1, 576, generator=gen).bfloat16()
    scale = (kv.abs().amax().float() / 448).reshape(1)
    fp8 = (kv.float() / scale).to(torch.float8_e4m3fn)
    config = dict(batch_size=batch, num_heads=16, num_kv_heads=1, qk_head_dim=576, kv_lora_rank=512,
                  qk_rope_head_dim=64, v_head_dim=512, q_seq_len=1, kv_seq_len=kv_len,
                  sm_scale=1 / math.sqrt(576))
    indptr = torch.arange(batch + 1, dtype=torch.int32)
    return q, {"bf16": kv, "fp8": (fp8, scale)}, indptr, indptr * kv_len, config


class FakeRunner:
    kv_format = "bf16"  # judged against exact attention over the bf16 KV
    form = "bf16"
    bound = submission.error_bound("bf16", "torch")  # and by the torch route's bound

    def __init__(self, label, compute):
        self.label = label
        self.compute = compute

    def __call__(self, q, kv_data, qo_indptr, kv_indptr):
        return self.compute(q, kv_data, qo_indptr, kv_indptr)


class FakeRoute:
    forms = ()

    def __init__(self, name, compute):
        self.name = name
        self.compute = compute

    def unavailable_reason(self, device, form=""):
        return None

    def variants(self, shape, form=""):
        return [submission.Candidate(self.name, "", self.name, lambda data: FakeRunner(self.name, self.compute))]


def exact(q, kv_data, qo_indptr, kv_indptr):
    shape = submission.CallShape.of((q, kv_data, qo_indptr, kv_indptr, small_input()[4]))
    return submission.TorchRunner(shape, "bf16")(q, kv_data, qo_indptr, kv_indptr)


def raising(*args):
    raise RuntimeError("boom")


def wrong_but_fast(q, *args):
    return torch.zeros(q.shape[0], 16, 512, dtype=torch.bfloat16)


def slow_exact(*args):
    time.sleep(0.05)
    return exact(*args)


pytestmark = [pytest.mark.usefixtures("fresh_plans"), pytest.mark.fast]


@pytest.fixture(autouse=True)
def one_intra_op_thread():
    """The choices here rest on `exact` staying well under slow_exact's 50 ms sleep; on a
    shared CPU, spinning intra-op threads can make its small ops 100x slower (seen once in a
    whole-suite run: slow_exact won, and the fault test saw no fault). One thread, restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def use_routes(monkeypatch, *routes):
    monkeypatch.setattr(submission, "ROUTES", {route.name: route for route in routes})


def test_wrong_and_raising_routes_lose_to_a_slower_correct_one(monkeypatch, capsys):
    use_routes(monkeypatch, FakeRoute("raises", raising), FakeRoute("wrong", wrong_but_fast),
               FakeRoute("slow_exact", slow_exact))
    data = small_input()
    out = submission.custom_kernel(data)
    assert submission.describe_route(data) == "slow_exact"
    torch.testing.assert_close(out, exact(*data[:4]))
    assert capsys.readouterr().err.count("route raises raised RuntimeError") == 1


def test_a_route_right_on_its_first_call_alone_is_rejected(monkeypatch):
    """What serves is what was verified: a candidate whose later calls (launched as every
    later call of a plan is) go wrong is rejected, though its first call was right."""
    calls = []

    def right_once(q, *args):
        calls.append(1)
        return exact(q, *args) if len(calls) == 1 else wrong_but_fast(q)

    use_routes(monkeypatch, FakeRoute("right_once", right_once), FakeRoute("slow_exact", slow_exact))
    data = small_input()
    submission.custom_kernel(data)
    assert submission.describe_route(data) == "slow_exact"
    verdict = dict(line.split(": ", 1) for line in submission._plan_for(data).report)["right_once"]
    assert verdict.startswith("REJECTED (a call after its first:"), verdict


def test_fastest_passing_route_wins(monkeypatch):
    use_routes(monkeypatch, FakeRoute("slow_exact", slow_exact), FakeRoute("exact", exact))
    data = small_input()
    submission.custom_kernel(data)
    assert submission.describe_route(data) == "exact"


def test_no_passing_route_is_an_error(monkeypatch):
    use_routes(monkeypatch, FakeRoute("wrong", wrong_but_fast), FakeRoute("raises", raising))
    with pytest.raises(RuntimeError, match="no route passed verification"):
        submission.custom_kernel(small_input())


def test_forced_route_and_unknown_name(monkeypatch):
    use_routes(monkeypatch, FakeRoute("exact", exact), FakeRoute("slow_exact", slow_exact))
    monkeypatch.setenv("MLA_ROUTE", "slow_exact")
    data = small_input()
    submission.custom_kernel(data)
    assert submission.describe_route(data) == "slow_exact"
    submission.reset_plans()
    monkeypatch.setenv("MLA_ROUTE", "no_such_route")
    with pytest.raises(ValueError, match="unknown route"):
        submission.custom_kernel(data)


@pytest.mark.parametrize("kv_format", ["bf16", "fp8", "mxfp4"])
def test_the_torch_route_reads_the_format_its_form_names(monkeypatch, kv_format):
    """MLA_ROUTE=torch:<format>: exact attention over that format's cache, judged by its bound;
    a format the input lacks is refused with the route's reason."""
    monkeypatch.setenv("MLA_ROUTE", f"torch:{kv_format}")
    data = generate_input(2, 1, 40, 3, device="cpu")  # all three formats
    out = submission.custom_kernel(data)
    assert submission.describe_route(data) == f"torch[{kv_format}]"
    runner = submission._plan_for(data).run
    assert (runner.kv_format, runner.form) == (kv_format, kv_format)
    assert runner.bound == submission.error_bound(kv_format, "torch")
    torch.testing.assert_close(out, submission.TorchRunner(submission.CallShape.of(data), kv_format)(*data[:4]))
    submission.reset_plans()
    missing = (data[0], {k: v for k, v in data[1].items() if k != kv_format}, *data[2:])
    with pytest.raises(ValueError, match=f"MLA_ROUTE='torch:{kv_format}' cannot serve"):
        submission.custom_kernel(missing)


def test_debug_line_names_every_candidate_and_the_choice(monkeypatch, capsys):
    use_routes(monkeypatch, FakeRoute("wrong", wrong_but_fast), FakeRoute("exact", exact))
    monkeypatch.setenv("MLA_DEBUG", "1")
    submission.custom_kernel(small_input())
    err = capsys.readouterr().err
    assert "chose exact" in err and "wrong: REJECTED" in err and "exact: " in err


def test_route_that_faults_mid_run_falls_back_once(monkeypatch, capsys):
    calls = {"n": 0}

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] > 2 + submission.AUTOPICK_WARMUP + submission.AUTOPICK_REPEATS + 2:  # verified twice
            raise RuntimeError("flaky route gave up")
        return exact(*args)

    use_routes(monkeypatch, FakeRoute("flaky", flaky), FakeRoute("slow_exact", slow_exact))
    data = small_input()
    for _ in range(6):
        out = submission.custom_kernel(data)
        torch.testing.assert_close(out, exact(*data[:4]))
    assert submission.describe_route(data) == "slow_exact"
    err = capsys.readouterr().err
    assert err.count("falling back from flaky to slow_exact") == 1


def test_device_faults_are_not_swallowed(monkeypatch):
    calls = {"n": 0}

    def faulting(*args):
        calls["n"] += 1
        verify_and_time = 2 + submission.AUTOPICK_WARMUP + submission.AUTOPICK_REPEATS  # verified twice
        if calls["n"] > verify_and_time + 1:  # the first real call succeeds, the second faults
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return exact(*args)

    use_routes(monkeypatch, FakeRoute("faulting", faulting), FakeRoute("slow_exact", slow_exact))
    data = small_input()
    submission.custom_kernel(data)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        submission.custom_kernel(data)
