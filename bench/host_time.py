"""Host time of one custom_kernel call in a caller's loop, measured on a CPU: a PROXY for the
host time on the H200 and the MI355X, which this machine does not have.

    python3 -m bench.host_time [--at COMMIT] [--rounds 3] [--runs 2000] [--targets sm_90,gfx950]
                               [--json FILE]

What is timed: custom_kernel(data) called back to back on the same input (a caller's loop,
as tools/leaderboard.host_loop_us times it on a GPU), the plan already made, for each
benchmark shape and each runner below, on CPU stand-ins of the contract's tensors (real
addresses, uninitialized values). Triton's JIT runs as on the target (tools/launch_recorder:
the arguments bound and specialized, the kernels compiled for sm_90 or gfx950, the compiled
kernel's launch path), and each launch ends in a launcher that receives the arguments and
does nothing. So a figure is this project's Python plus Triton's Python up to the launcher;
NOT the launcher itself (its C code, the TMA descriptors it encodes for the Hopper forms),
not the CUDA / HIP driver, not torch's CUDA allocator (torch.empty here is the CPU's), not
aiter's wrappers (replaced by no-ops), not the device. Those are paid on the GPU's host on top.
The H200's and the MI355X's host times are not measured here.

Runners, per target and shape, each in a plan of its own (the autopick does not run: nothing
is computed): per KV format, the form a plan offers first on the target (sm_90: the Hopper
forms; gfx950: the Gluon forms), its first launch of one kernel (one split, or the in-kernel
combine) and its first of two (the combine kernel); on gfx950 also the aiter route (the
leaderboard's GPU), each metadata variant, a8w8 and a16w8 at 16 splits, aiter's own calls
replaced by no-ops (no_op_aiter, which bench/aiter_call_host_time.py shares).

Per row: the median over --rounds of the per-call time of --runs calls in a loop; the
Triton launches and the calls into aiter a call makes; and, from one call under a torch
dispatch mode, the torch operations the call runs on the host and those that allocate
(torch.empty and the like).

With --at COMMIT the same measurement runs on that commit's tree (its submission.py, with this
file and tools/launch_recorder.py copied in), alternating with this tree's round by round, so
that both see the same machine load; the table shows both.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEVICE_CUS = {"gfx950": 256, "sm_90": 132}  # MI355X CUs, H200 SMs
ALLOCATING = ("empty", "zeros", "ones", "full", "clone", "_to_copy", "new_", "arange", "randn", "rand")


def _inputs(batch: int, kv_len: int):
    import torch
    from tools import compile_target
    data = compile_target.contract_inputs(batch, kv_len, device="cpu")
    data[2].copy_(torch.arange(batch + 1, dtype=torch.int32))
    data[3].copy_(torch.arange(batch + 1, dtype=torch.int32) * kv_len)
    data[4].update(num_heads=16, num_kv_heads=1, qk_head_dim=576, kv_lora_rank=512, qk_rope_head_dim=64,
                   v_head_dim=512)  # the contract's config (reference.generate_input's)
    return data


def _kernel_runners(sub, target: str, shape):
    """(label, runner) of the leading form's one-launch and two-launch calls, per format."""
    for kv_format in ("fp8", "mxfp4"):
        launches = sub.launch_candidates(kv_format, shape.batch, shape.max_kv_len, shape.num_sms, target)
        lead = launches[0].form
        seen = set()
        for launch in launches:
            two = launch.num_splits > 1 and not launch.combine_in_kernel
            if launch.form != lead or two in seen:
                continue
            seen.add(two)
            yield sub.launch_label(kv_format, launch), sub.KernelRunner(shape, kv_format, launch)


AITER_CALLS = [0]  # calls into aiter's entry points (the no-ops below)


def _aiter_call(*args, **kwargs) -> None:
    AITER_CALLS[0] += 1


def no_op_aiter(entry_point=lambda *args, **kwargs: None):
    """A stand-in for aiter's ops on the host: the test fake's get_mla_metadata_info_v1 (to
    size the buffers), `entry_point` (a no-op) as get_mla_metadata_v1 and mla_decode_fwd."""
    from types import SimpleNamespace

    from tools.fake_aiter import FakeAiter
    return SimpleNamespace(get_mla_metadata_info_v1=FakeAiter().get_mla_metadata_info_v1,
                           get_mla_metadata_v1=entry_point, mla_decode_fwd=entry_point)


def _aiter_runners(sub, shape, data):
    sub.aiter_ops = no_op_aiter(_aiter_call)
    for metadata, runner_class in sub.AITER_RUNNERS.items():
        for q_in_fp8 in (True, False):
            runner = runner_class(shape, data, q_in_fp8, 16)
            runner.launches_triton = True  # the GPU path's Python
            yield runner.label, runner


def _torch_ops(call) -> list[str]:
    """The torch operations one call of `call` dispatches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))

    with Ops() as ops:
        call()
    return ops.names


def worker(target: str, runs: int) -> list[dict]:
    """The rows of one target, measured in this process (this tree's submission.py)."""
    import submission as sub
    from tools.launch_recorder import recording_driver
    from tools.leaderboard import BENCHMARK_SHAPES

    sub.device_arch = lambda device: (DEVICE_CUS[target], sub.arch_record(target))  # the stand-ins' GPU
    rows = []
    with recording_driver(target, record=False) as recorder:
        for batch, kv_len in BENCHMARK_SHAPES:
            data = _inputs(batch, kv_len)
            shape = sub.CallShape.of(data)
            runners = list(_kernel_runners(sub, target, shape))
            if target.startswith("gfx"):
                runners += list(_aiter_runners(sub, shape, data))
            for label, runner in runners:
                sub.reset_plans()
                plan = sub.Plan(shape, [runner], [])
                plan.check_indptr_each_call = False  # a GPU plan's (the CPU's reads the indptrs)
                sub._PLANS[sub.plan_key(data)] = plan
                for _ in range(3):  # the first compiles (or finds the Triton cache's)
                    sub.custom_kernel(data)
                recorder.count = AITER_CALLS[0] = 0
                began = time.perf_counter()
                for _ in range(runs):
                    sub.custom_kernel(data)
                host_us = (time.perf_counter() - began) * 1e6 / runs
                launches, aiter_calls = recorder.count / runs, AITER_CALLS[0] / runs
                ops = _torch_ops(lambda: sub.custom_kernel(data))
                rows.append(dict(target=target, batch=batch, kv_len=kv_len, runner=label, host_us=host_us,
                                 launches=launches, aiter_calls=aiter_calls, torch_ops=len(ops),
                                 allocations=sorted(name for name in ops if name.startswith(ALLOCATING))))
            del data
    return rows


def _tree_at(commit: str, folder: Path) -> Path:
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    for relative in ("bench/host_time.py", "tools/launch_recorder.py"):
        shutil.copy2(ROOT / relative, folder / relative)
    return folder


def _measure(tree: Path, target: str, runs: int) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MLA_ROUTE", "MLA_CHECK_INDPTR")}
    proc = subprocess.run([sys.executable, "-m", "bench.host_time", "--worker", target, "--runs", str(runs)],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=7200)
    if proc.returncode != 0:
        raise SystemExit(f"measuring {tree} for {target} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", help="also measure this commit's tree, alternating with this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--targets", default="sm_90,gfx950")
    parser.add_argument("--json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        json.dump(worker(args.worker, args.runs), sys.stdout)
        return
    targets = args.targets.split(",")
    with tempfile.TemporaryDirectory() as folder:
        trees = {"this tree": ROOT}
        if args.at:
            trees = {args.at: _tree_at(args.at, Path(folder)), **trees}
        rounds = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                rounds[name].append([row for target in targets for row in _measure(tree, target, args.runs)])
    results = {}
    for name, measured in rounds.items():
        rows = measured[0]
        for index, row in enumerate(rows):
            row["host_us_rounds"] = [each[index]["host_us"] for each in measured]
            row["host_us"] = statistics.median(row["host_us_rounds"])
        results[name] = rows
    names = list(results)
    print("| target | batch x kv | runner | Triton launches | aiter calls | " +
          " | ".join(f"host us ({n})" for n in names) + " | torch ops (" + " / ".join(names) + ") | allocations ("
          + names[-1] + ") |")
    print("|---|---|---|---|---|" + "---|" * len(names) + "---|---|")
    for index, row in enumerate(results[names[-1]]):
        each = [results[n][index] for n in names]
        assert all((r["target"], r["batch"], r["kv_len"], r["runner"]) == (row["target"], row["batch"], row["kv_len"],
                                                                        row["runner"]) for r in each)
        print(f"| {row['target']} | {row['batch']} x {row['kv_len']} | {row['runner']} | {row['launches']:g} | "
              f"{row['aiter_calls']:g} | "
              + " | ".join(f"{r['host_us']:.1f}" for r in each) + " | "
              + " / ".join(str(r["torch_ops"]) for r in each) + f" | {', '.join(row['allocations']) or '-'} |")
    for name in names:
        for target in targets:
            values = [r["host_us"] for r in results[name] if r["target"] == target]
            geomean = statistics.geometric_mean(values)
            print(f"{name}, {target}: host us a call, geomean {geomean:.1f}, range {min(values):.1f}-{max(values):.1f}")
    if args.json:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        edited = subprocess.run(["git", "status", "--porcelain", "submission.py"], cwd=ROOT, capture_output=True,
                                text=True)
        tree = head.stdout.strip() + (" with submission.py edited" if edited.stdout.strip() else "")
        Path(args.json).write_text(json.dumps({"command": "python3 -m bench.host_time " + " ".join(sys.argv[1:]),
                                               "this_tree": tree, "results": results}, indent=1))


if __name__ == "__main__":
    main()
