"""Host (Python) time of one aiter-route call, on any machine: what this project's code
adds per call, with aiter and Triton's launcher replaced by no-ops.

    python3 bench/aiter_call_host_time.py [--runs 2000]

The runner is submission.AiterRunner on the CPU, on its GPU path (launches_triton set):
KernelCall.launch does nothing and aiter's get_mla_metadata_v1 and mla_decode_fwd are
no-op functions (get_mla_metadata_info_v1 is the test fake's, to size the buffers). So
the times are the runner's own Python: argument tuples, KernelCall objects, the calls
into aiter's Python entry points; not Triton's launcher, not aiter's wrappers (compile_ops,
pybind11, hipGetDeviceProperties in the metadata build) and not the device, none of which
exists here. Printed per form (a8w8, a16w8) and batch: the whole call, and the two parts
the per-call metadata rebuild added: the length check's host work (a16w8: building and
launching its KernelCall; a8w8: the quantizer's first launch carries its arguments) and
the get_mla_metadata_v1 call. Medians of --runs calls.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import reference  # noqa: E402
import submission  # noqa: E402
from fake_aiter import FakeAiter  # noqa: E402


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
    no_op = lambda *a, **k: None  # noqa: E731
    submission.aiter_ops = SimpleNamespace(get_mla_metadata_info_v1=FakeAiter().get_mla_metadata_info_v1,
                                           get_mla_metadata_v1=no_op, mla_decode_fwd=no_op)
    submission.KernelCall.launch = lambda self: None
    print("| form | batch | whole call (us) | length check (us) | get_mla_metadata_v1 call (us) |")
    print("|---|---|---|---|---|")
    for q_in_fp8 in (True, False):
        for batch in (4, 256):
            data = reference.generate_input(batch, 1, 1024, 4217)
            runner = submission.AiterRunner(submission.CallShape(data), data, q_in_fp8, 16)
            runner.launches_triton = True  # the GPU path's Python
            q, kv_data, qo_indptr, kv_indptr = data[:4]
            call = lambda: runner(q, kv_data, qo_indptr, kv_indptr)  # noqa: E731
            if q_in_fp8:
                check = "in the quantizer's launch"
            else:
                check = f"{median_us(lambda: runner._check_lengths(kv_indptr, kv_data['fp8'][1]), args.runs):.1f}"
            metadata = lambda: submission.aiter_ops.get_mla_metadata_v1(  # noqa: E731
                qo_indptr, runner.checked_kv_indptr, runner.kv_last_page_len, submission.NUM_HEADS, 1, True,
                runner.work_meta_data, runner.work_info_set, runner.work_indptr, runner.reduce_indptr,
                runner.reduce_final_map, runner.reduce_partial_map, page_size=1, kv_granularity=16,
                max_seqlen_qo=1, uni_seqlen_qo=1, fast_mode=False, max_split_per_batch=16,
                intra_batch_mode=True, dtype_q=runner.q_dtype, dtype_kv=runner.kv_dtype)
            print(f"| {'a8w8' if q_in_fp8 else 'a16w8'} | {batch} | {median_us(call, args.runs):.1f} | {check} | "
                  f"{median_us(metadata, args.runs):.1f} |")


if __name__ == "__main__":
    main()
