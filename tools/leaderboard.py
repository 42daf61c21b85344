"""What the leaderboard runs and how it times it: the 8 benchmark shapes and their seeds
(task.yml's benchmarks), the leaderboard's clock (synchronize, utils.clear_l2_cache_large,
which is the harness's 64 GB randn and keeps the GPU busy for milliseconds, then CUDA events
around the Python call: device time including the gaps between kernels), the device time of a
call replayed from a CUDA graph, the host time in a caller's own loop, the HBM read
bandwidth, and the fewest bytes a route must read. The GPU measurements need CUDA (or
ROCm's torch.cuda); the shapes and byte counts are host logic."""
from __future__ import annotations

import math
import statistics
import time

BENCHMARK_SHAPES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192),
                    (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
SEEDS = [4217, 4220, 5412, 5415, 1357, 1360, 9823, 9826]


def _events():
    import torch
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def event_us(work) -> float:
    """Microseconds between two CUDA events recorded around work(), the host waiting for
    the end event (what the work queued runs between them, no synchronize before it)."""
    start, end = _events()
    start.record()
    work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3


def measure_read_bandwidth(gib: float = 4.0, repeats: int = 20) -> float:
    """Bytes per second of a full read of a large bf16 tensor (a sum)."""
    import torch
    x = torch.randn(int(gib * (1 << 30)) // 2, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        x.sum()
    samples = []
    for _ in range(repeats):
        samples.append(event_us(x.sum) / 1e6)
    return x.numel() * 2 / statistics.median(samples)


def leaderboard_clock_us(call, runs: int) -> tuple[list[float], list[float]]:
    """(event times, host times) in us of `runs` calls timed as the leaderboard's harness
    times them: synchronize, utils.clear_l2_cache_large, start event, call, end event,
    synchronize. The host time is the Python call's own wall time."""
    import torch
    import utils
    events, hosts = [], []
    for _ in range(runs):
        torch.cuda.synchronize()
        utils.clear_l2_cache_large()
        start, end = _events()
        start.record()
        began = time.perf_counter()
        call()
        hosts.append((time.perf_counter() - began) * 1e6)
        end.record()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end) * 1e3)
    return events, hosts


def host_loop_us(call, runs: int) -> float:
    """The host time of one call as a caller's own loop sees it: `runs` calls back to back
    (none synchronizes), the wall time divided by runs. Right after a synchronize the
    host is slower (results/2026-11-29-h200-host-cold), which leaderboard_clock_us's
    host times show."""
    import torch
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(runs):
        call()
    elapsed = time.perf_counter() - began
    torch.cuda.synchronize()
    return elapsed * 1e6 / runs


def device_us(call, runs: int) -> float | None:
    """Median replay time of the call captured in a CUDA graph, each replay queued behind
    the leaderboard's flush (the replay's launch is hidden too)."""
    import torch
    import utils
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()  # warm: compile and allocate outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            call()
    except Exception:  # a route that syncs (the torch fallback) cannot be captured
        return None
    samples = []
    for _ in range(runs):
        utils.clear_l2_cache_large()
        samples.append(event_us(graph.replay))
    return statistics.median(samples)


def trivial_launch_floor(runs: int) -> dict:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _touch(ptr):
        tl.store(ptr, tl.load(ptr) + 1)

    cell = torch.zeros(1, device="cuda")
    _touch[(1,)](cell)
    empty, _ = leaderboard_clock_us(lambda: None, runs)
    one, _ = leaderboard_clock_us(lambda: _touch[(1,)](cell), runs)
    return {"events_only_us": statistics.median(empty), "one_triton_launch_us": statistics.median(one)}


def route_bytes(label: str, batch: int, kv_len: int) -> int:
    """Fewest bytes the route must move: its KV format, q read once, out written once."""
    per_row = {"mxfp4": 288 + 18, "fp8": 576, "bf16": 1152}
    fmt = next((f for f in per_row if f in label), "bf16")
    if label.startswith("aiter"):
        fmt = "fp8"
    return batch * kv_len * per_row[fmt] + batch * 16 * (576 + 512) * 2


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None
