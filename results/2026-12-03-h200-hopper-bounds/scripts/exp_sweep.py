"""Experiment sweep on the H200: Hopper fp8 ring depths / splits and the MXFP4 async-S variant,
each launch checked against exact attention and timed on the leaderboard's clock."""
import argparse, json, statistics, sys, time, traceback
import torch
import reference
import submission as sub
import dev_scratch.exp_mxfp4  # noqa: F401
from tools.leaderboard import (BENCHMARK_SHAPES, SEEDS, leaderboard_clock_us, measure_read_bandwidth,
                               trivial_launch_floor, route_bytes)
from bench.report import output_errors

NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count
L = sub.TritonLaunch


def pow2_floor(n):
    return 1 << (max(n, 1).bit_length() - 1)


def fp8_launches(batch, kv_len):
    form = sub.kernel_form("fp8", "hopper_one_term")
    launches = list(form.own_launches(form, batch, kv_len, NUM_SMS, "sm_90"))
    one_per_sm = pow2_floor(min(NUM_SMS // batch, 64, max(kv_len // 64, 1))) if batch <= NUM_SMS else 1
    for stages in (3, 4):
        for splits in sorted({one_per_sm, max(one_per_sm // 2, 1)}):
            if kv_len // splits < 64 * stages:
                continue
            launches.append(L(splits, 64, 4, stages, combine_in_kernel=splits > 1, form="hopper_one_term",
                              gluon_arch="hopper"))
            if splits > 1:
                launches.append(L(splits, 64, 4, stages, form="hopper_one_term", gluon_arch="hopper"))
    return launches


def mxfp4_launches(batch, kv_len, name):
    form = sub.kernel_form("mxfp4", name)
    return list(form.own_launches(form, batch, kv_len, NUM_SMS, "sm_90"))


def run(fmt, launch, data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv, kv_scale = sub.triton_kv_operands(kv_data, fmt, launch)
    out = sub._new_output(q)
    scratch = sub.make_triton_scratch(config["batch_size"], launch, q.device)
    call = lambda: sub.triton_decode(fmt, q, kv, kv_scale, qo_indptr, kv_indptr, config["sm_scale"], out, scratch,
                                     launch)
    return call, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--shapes", default="")
    ap.add_argument("--skip", default="")
    args = ap.parse_args()
    bandwidth = measure_read_bandwidth(gib=2.0)
    floor = trivial_launch_floor(args.runs)
    result = {"bandwidth_tbps": bandwidth / 1e12, "floor": floor, "num_sms": NUM_SMS, "rows": []}
    print(f"bandwidth {bandwidth/1e12:.2f} TB/s floor {floor}", flush=True)
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",") if s] or BENCHMARK_SHAPES
    for (batch, kv_len), seed in zip(BENCHMARK_SHAPES, SEEDS):
        if (batch, kv_len) not in shapes:
            continue
        data = reference.generate_input(batch, 1, kv_len, seed)
        exact = sub.TorchRunner(sub.CallShape(data), "bf16").exact(*data[:4])
        jobs = [("fp8", l) for l in fp8_launches(batch, kv_len)]
        if "mxfp4" not in args.skip:
            jobs += [("mxfp4", l) for name in ("hopper", "hopper_async") for l in mxfp4_launches(batch, kv_len, name)]
        for fmt, launch in jobs:
            label = sub.launch_label(fmt, launch)
            row = dict(batch=batch, kv_len=kv_len, label=label)
            try:
                call, out = run(fmt, launch, data)
                out.fill_(float("nan"))
                call()
                torch.cuda.synchronize()
                good, message = reference.check_implementation(data, out)
                row.update(check=bool(good), errors=output_errors(out, exact))
                times, _ = leaderboard_clock_us(call, args.runs)
                row["us"] = statistics.mean(times)
                row["best_us"] = min(times)
                nbytes = route_bytes("triton_" + fmt, batch, kv_len)
                row["pct_bw"] = 100 * nbytes / bandwidth * 1e6 / row["us"] / 1e6 * 1e6 / 1e6 * 1e6 if False else \
                    100 * (nbytes / bandwidth * 1e6) / row["us"]
                print(f"{batch:>4} x {kv_len:<5} {label:<90} {row['us']:8.1f} us {row['pct_bw']:5.1f}% "
                      f"err {row['errors']['rel_rms']:.2%} check {good}", flush=True)
            except Exception as error:
                row["error"] = traceback.format_exc()[-2000:]
                print(f"{batch} x {kv_len} {label}: {type(error).__name__}: {error}", flush=True)
            result["rows"].append(row)
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        del data, exact
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
