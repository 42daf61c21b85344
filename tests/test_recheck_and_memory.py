"""Issue 5: nothing stale across calls (leaderboard recheck), memory bounded, and what the
validation / plan lookup costs per call.

Calls run on the device under test (the automatic route); the plan cache's bound and the
per-call cost of the lookup are host logic, their inputs on the CPU. The GPU halves
(torch.cuda.memory_allocated flat over 1000 calls, 100 rechecks per forced route) are
bench/robustness_gpu.py's, run on a GPU by tests/test_robustness.py.
"""
import time
import tracemalloc

import pytest
import torch

import submission
from tools.robustness import kv_formats, ragged_input, scaled_output_problem
from reference import check_implementation, generate_input

RECHECK_SEED = 5412  # leaderboard mode: seed += 13 before every timed run


pytestmark = pytest.mark.usefixtures("fresh_plans")


def assert_passes(data, out):
    """The leaderboard's rule, and exact attention with a bound the rule lacks: the rule
    passes outputs scaled by 0.5 at these lengths."""
    good, message = check_implementation(data, out)
    assert good, message
    problem = scaled_output_problem(submission, data, out)
    assert problem is None, problem


# ------------------------------------------------------------------------------------
# 3. Leaderboard recheck
# ------------------------------------------------------------------------------------
def test_100_consecutive_calls_with_fresh_inputs_are_each_right():
    outputs = set()
    for i in range(100):
        data = generate_input(4, 1, 64, RECHECK_SEED + 13 * i)
        out = submission.custom_kernel(data)
        assert_passes(data, out)
        outputs.add(out.float().sum().item())
    assert len(submission._PLANS) == 1
    assert len(outputs) == 100, "two different inputs gave the same output"


def test_interleaved_shapes_are_each_right():
    shapes = [(4, 1, 64), (1, 1, 300), (3, 2, 17), (4, 1, 65)]
    for i in range(8):
        for batch, q_seq_len, kv_len in shapes:
            data = generate_input(batch, q_seq_len, kv_len, 100 * i + batch + kv_len)
            assert_passes(data, submission.custom_kernel(data))
    assert len(submission._PLANS) == len(shapes)


def test_two_outputs_kept_alive_stay_distinct():
    first = generate_input(4, 1, 64, 1)
    second = generate_input(4, 1, 64, 2)
    out_first = submission.custom_kernel(first)
    kept = out_first.clone()
    out_second = submission.custom_kernel(second)
    assert out_first.untyped_storage().data_ptr() != out_second.untyped_storage().data_ptr()
    assert torch.equal(out_first, kept), "the second call wrote into the first output"
    assert_passes(first, out_first)
    assert_passes(second, out_second)
    assert not torch.equal(out_first, out_second)


def test_inputs_refilled_in_place_are_read_anew():
    """Upstream's recheck may refill the same tensor objects: nothing may be cached by
    data_ptr or id."""
    data = generate_input(4, 1, 64, 1)
    before = submission.custom_kernel(data)
    fresh = generate_input(4, 1, 64, 2)
    data[0].copy_(fresh[0])
    for old, new in ((data[1]["bf16"], fresh[1]["bf16"]), *zip(data[1]["fp8"], fresh[1]["fp8"]),
                     *zip(data[1]["mxfp4"], fresh[1]["mxfp4"])):
        old.view(torch.uint8).copy_(new.view(torch.uint8))
    after = submission.custom_kernel(data)
    assert_passes(fresh, after)
    assert not torch.equal(before, after)


def test_ragged_inputs_of_one_shape_with_different_lengths_are_read_anew():
    """Same plan key (shapes), different kv_indptr values: the lengths are not cached."""
    first = ragged_input([10, 40, 0, 14], seed=3)
    second = ragged_input([0, 40, 20, 4], seed=4)
    assert submission.plan_key(first) == submission.plan_key(second)
    assert_passes(first, submission.custom_kernel(first))
    assert_passes(second, submission.custom_kernel(second))


# ------------------------------------------------------------------------------------
# 4. Memory
# ------------------------------------------------------------------------------------
def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_memory_flat_over_1000_calls():
    data = generate_input(2, 1, 40, 7)
    tracemalloc.start()
    try:
        for i in range(1000):
            submission.custom_kernel(data)
            if i == 99:
                python_early, rss_early = tracemalloc.get_traced_memory()[0], rss_bytes()
        python_late, rss_late = tracemalloc.get_traced_memory()[0], rss_bytes()
    finally:
        tracemalloc.stop()
    assert len(submission._PLANS) == 1
    assert python_late - python_early < 32 << 10, f"Python heap grew {python_late - python_early} B"
    assert rss_late - rss_early < 16 << 20, f"RSS grew {rss_late - rss_early} B"


def test_plan_cache_stays_at_its_bound_and_evicts_the_least_recently_used():
    bound = submission.PLAN_CACHE_SIZE
    inputs = [ragged_input([n], seed=n, device="cpu") for n in range(1, bound + 4)]  # distinct shapes
    for data in inputs[:bound]:
        submission.custom_kernel(data)
    assert len(submission._PLANS) == bound
    submission.custom_kernel(inputs[0])                     # used again: now the newest
    for data in inputs[bound:]:
        submission.custom_kernel(data)
    assert len(submission._PLANS) == bound
    keys = set(submission._PLANS)
    assert submission.plan_key(inputs[0]) in keys
    assert submission.plan_key(inputs[1]) not in keys      # the least recently used went
    assert_passes(inputs[1], submission.custom_kernel(inputs[1]))  # and is rebuilt on demand


# ------------------------------------------------------------------------------------
# The per-call cost of validation and plan lookup
# ------------------------------------------------------------------------------------
def best_us(function, calls=20000, samples=200) -> float:
    """The cost a call, from the fastest of `samples` short batches: a busy machine (CI's second
    pass runs over workers; other jobs) only adds time, so the fastest batch is the cost."""
    per_batch = calls // samples
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        for _ in range(per_batch):
            function()
        times.append((time.perf_counter() - began) / per_batch * 1e6)
    return min(times)


def test_per_call_cost_of_the_plan_lookup_and_cpu_indptr_check(info_report):
    data = generate_input(4, 1, 1024, 4217, device="cpu")
    plan = submission._plan_for(data)
    q, kv_data, qo_indptr, kv_indptr, _ = data
    lookup = best_us(lambda: submission._plan_for(data))
    indptr_check = best_us(lambda: submission.validate_indptr_values(
        qo_indptr, kv_indptr, plan.shape.total_q, plan.shape.total_kv, plan.shape.q_seq_len))
    info_report(f"\n[cost] _plan_for on a cached key: {lookup:.2f} us/call; "
                f"per-call indptr check (CPU only, batch 4): {indptr_check:.2f} us/call")
    assert lookup < 25, f"plan lookup {lookup:.1f} us per call"


def test_shape_validation_runs_once_per_key(monkeypatch):
    calls = []
    original = submission.validate_shapes
    monkeypatch.setattr(submission, "validate_shapes", lambda data: calls.append(1) or original(data))
    for seed in range(5):
        data = generate_input(2, 1, 40, seed)
        submission.custom_kernel(data)
    assert len(calls) == 1
    # a different key is validated anew
    submission.custom_kernel(with_cache(data, data[1]["bf16"][:-2]))
    assert len(calls) == 2


def with_cache(data, cache):
    q, _, qo_indptr, _, config = data
    kv_indptr = torch.tensor([0, cache.shape[0] // 2, cache.shape[0]], dtype=torch.int32, device=cache.device)
    return q, kv_formats(cache), qo_indptr, kv_indptr, config
