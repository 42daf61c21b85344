"""Host (Python) time of one aiter-route call, on any machine: what this project's code
adds per call, with aiter and Triton's launcher replaced by no-ops.

    python3 -m bench.aiter_call_host_time [--runs 2000]

The runners are submission's aiter runners (both metadata variants) on the CPU, on their
GPU path (launches_triton set):
KernelCall.launch does nothing (and returns a compiled kernel that does nothing, which the
runner's later calls launch) and aiter's get_mla_metadata_v1 and mla_decode_fwd are
no-op functions (get_mla_metadata_info_v1 is the test fake's, to size the buffers). So
the times are the runner's own Python: argument tuples, KernelCall objects, the calls
into aiter's Python entry points; not Triton's launcher, not aiter's wrappers (compile_ops,
pybind11, hipGetDeviceProperties in the metadata build) and not the device, none of which
exists here. Printed per metadata variant, form (a8w8, a16w8) and batch: the whole call,
and two of its parts: the kv_indptr guard's host work (a16w8: building and launching its
KernelCall; a8w8: the quantizer's first launch carries its arguments) and the
get_mla_metadata_v1 call (per call only; cached builds it with the plan). Medians of
--runs calls. bench/host_time.py measures the whole call with Triton's JIT in it.
"""
from __future__ import annotations

import argparse
import statistics
import time

import reference
import submission
from bench.host_time import no_op_aiter


class _NoOpCompiled:
    def __getitem__(self, grid):
        return lambda *args: None


NO_OP_COMPILED = _NoOpCompiled()


def median_us(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    submission.aiter_ops = no_op_aiter()
    # A launch does nothing and returns what a compiled kernel's handle would be: one that does
    # nothing (so the route's later calls take the path they take after Triton's JIT on a GPU)
    submission.KernelCall.launch = lambda self: NO_OP_COMPILED
    print("| metadata | form | batch | whole call (us) | kv_indptr guard (us) | get_mla_metadata_v1 call (us) |")
    print("|---|---|---|---|---|---|")
    for variant, runner_class in submission.AITER_RUNNERS.items():
        for q_in_fp8 in (True, False):
            for batch in (4, 256):
                data = reference.generate_input(batch, 1, 1024, 4217)
                runner = runner_class(submission.CallShape.of(data), data, q_in_fp8, 16)
                runner.launches_triton = True  # the GPU path's Python
                q, kv_data, qo_indptr, kv_indptr = data[:4]
                call = lambda: runner(q, kv_data, qo_indptr, kv_indptr)  # noqa: E731
                if q_in_fp8:
                    guard = "in the quantizer's launch"
                else:
                    guard = f"{median_us(lambda: runner._guard_kv_scale(kv_indptr, kv_data['fp8'][1]), args.runs):.1f}"
                metadata = f"{median_us(lambda: runner._build_metadata(qo_indptr), args.runs):.1f}" \
                    if variant == "per_call" else "none (built with the plan)"
                print(f"| {variant} | {'a8w8' if q_in_fp8 else 'a16w8'} | {batch} | {median_us(call, args.runs):.1f} "
                      f"| {guard} | {metadata} |")


if __name__ == "__main__":
    main()
