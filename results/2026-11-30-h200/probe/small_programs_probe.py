"""Probe (not product code): fp8 launches outside the autopick's candidates: programs of 1 or 2
warps, 16-token tiles, 1-2 stages, at several split counts, beside the kept (32 tokens,
4 warps, 3 stages). Smaller programs issue fewer instructions a token on paper
(bench/sass_loop.py: 103-141 against 128.5) but spill at the 255-register ceiling.
    OUT=dir python3 results/2026-11-30-h200/probe/small_programs_probe.py   (GPU)"""
import json, math, os, sys
import torch
sys.path.insert(0, "bench"); sys.path.insert(0, ".")
import submission as sub
import kernel_sweep as ks
dev = torch.device("cuda")
SHAPES = [(256, 8192, [1, 2, 4, 8]), (64, 8192, [4, 8, 16, 32]), (32, 1024, [8, 16, 32]), (4, 8192, [64, 128])]
CONFIGS = [(32, 4, 3), (32, 2, 2), (32, 2, 1), (16, 2, 3), (32, 1, 1), (32, 1, 2), (16, 1, 1), (16, 1, 2), (16, 1, 3), (64, 4, 2)]
rows = []
for batch, length, split_list in SHAPES:
    copies = max(1, math.ceil(3 * ks.L2_BYTES / (batch * length * 576)))
    prob = ks.Problem(batch, length, dev, min(copies, 16))
    for splits in split_list:
        for bn, w, st in CONFIGS:
            r = ks.run_config(prob, "fp8", sub.TritonLaunch(splits, bn, w, st), dev)
            rows.append(r)
            print(batch, length, splits, bn, w, st, round(r.get("device_us", -1), 1), r.get("n_regs"), r.get("n_spills"),
                  r.get("max_abs_err"), r.get("error", "")[:100], flush=True)
    del prob; torch.cuda.empty_cache()
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "small_programs.json"), "w"), indent=1)
