"""The leaderboard's clock, in utils (the harness's flush) and in submission (the autopick).

Upstream's harness flushes with a 64 GB fp32 randn right before its start event; the GPU
is busy for milliseconds while the host queues the timed call, so the events read device
time. utils.clear_l2_cache_large does the same on a GPU (or, short of memory, writes the
largest randn that fits as many times as make 64 GB), and a small buffer on the CPU. The
autopick keeps the GPU busy with a spin kernel instead, then flushes the L2.
"""
import statistics
import time

import pytest
import torch

import submission
import utils
from conftest import needs_gpu

pytestmark = pytest.mark.fast

GPU = needs_gpu
FULL = 16000 * 1024 * 1024  # elements of the leaderboard's randn


def test_cpu_flush_is_modest():
    utils.clear_l2_cache_large(torch.device("cpu"))
    buffer = utils._cpu_flush_buffer[0]
    assert buffer.numel() * buffer.element_size() <= 8 * 1024 * 1024
    assert bool((buffer == 0x5A5A5A5A).all())


class FakeGpuMemory:
    """torch.empty / torch.randn for a pretend GPU with room for `limit` fp32 elements."""

    def __init__(self, limit: int):
        self.limit, self.allocated, self.filled = limit, [], []

    def empty(self, elements, device):
        if elements > self.limit:
            raise torch.OutOfMemoryError(f"fake: {elements} elements do not fit")
        self.allocated.append(elements)
        return ("buffer", elements)

    def randn(self, elements, device, out):
        assert out == ("buffer", elements)
        self.filled.append(elements)


@pytest.mark.parametrize("limit, size, repeats", [(2 * FULL, FULL, 1),        # the leaderboard's flush
                                                  (FULL // 3, FULL // 4, 4),  # 21 GB free: 16 GB, 4 times
                                                  (FULL // 2, FULL // 2, 2)])
def test_gpu_flush_writes_64_gb_of_randn_in_the_largest_buffer_that_fits(monkeypatch, limit, size, repeats):
    memory = FakeGpuMemory(limit)
    monkeypatch.setattr(torch, "empty", memory.empty)
    monkeypatch.setattr(torch, "randn", memory.randn)
    monkeypatch.setattr(utils, "_gpu_flush_elements", {})
    for _ in range(2):  # the second flush starts from the size that fitted
        memory.allocated.clear()
        memory.filled.clear()
        utils.clear_l2_cache_large(torch.device("cuda"))
        assert memory.filled == [size] * repeats
        assert memory.allocated[-1] == size
    assert memory.allocated == [size]


def test_gpu_flush_refuses_when_not_even_1_gib_fits(monkeypatch):
    memory = FakeGpuMemory(1 << 27)
    monkeypatch.setattr(torch, "empty", memory.empty)
    monkeypatch.setattr(utils, "_gpu_flush_elements", {})
    with pytest.raises(torch.OutOfMemoryError):
        utils.clear_l2_cache_large(torch.device("cuda"))


class ScriptedClock:
    """A clock whose readings are given: it runs the call, then returns the next one."""

    def __init__(self, readings):
        self.readings = iter(readings)

    def time_us(self, call):
        call()
        return next(self.readings)


def test_autopick_time_is_the_median_of_the_repeats_after_untimed_warmup(monkeypatch):
    monkeypatch.setattr(submission, "AUTOPICK_REPEATS", 5)
    calls = []
    us = submission.time_call_us(lambda *args: calls.append(args), ("a",), ScriptedClock([40, 10, 30, 20, 50]))
    assert us == 30
    assert calls == [("a",)] * (submission.AUTOPICK_WARMUP + 5)


def test_cpu_clock_reads_wall_time():
    assert submission.clock_for(torch.device("cpu")).time_us(lambda: time.sleep(2e-3)) >= 2000


def host_slow_call(cell):
    """0.5 ms of host time, then one tiny kernel: on the leaderboard's clock only the
    kernel counts."""
    time.sleep(5e-4)
    cell.add_(1)


@GPU
def test_leaderboard_flush_keeps_the_gpu_busy_and_hides_host_time():
    cell = torch.zeros(1, device="cuda")
    samples = []
    for _ in range(5):
        torch.cuda.synchronize()
        utils.clear_l2_cache_large()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        host_slow_call(cell)
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    assert statistics.median(samples) < 200, samples


@GPU
def test_autopick_clock_hides_host_time_like_the_leaderboard():
    cell = torch.zeros(1, device="cuda")
    clock = submission.LeaderboardClock(torch.device("cuda"))
    us = statistics.median(clock.time_us(lambda: host_slow_call(cell)) for _ in range(5))
    assert us < 200, us
    assert submission.HostClock.time_us(lambda: host_slow_call(cell)) > 500
