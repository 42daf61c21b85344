"""Probe (not product code): the MXFP4 kernel decoding to separate even and odd element
tiles (no interleave; Q's columns and the output split the same way), against commit
95ab042's kernel, on both formats (the patch also moved each format's main loop into its
own function, which must leave fp8 unchanged). GPU, from the repo root:
    git show 95ab042:submission.py > /tmp/sub_old.py
    git apply results/2026-11-30-h200/probe/mxfp4_even_odd.patch
    OUT=dir python3 results/2026-11-30-h200/probe/mxfp4_even_odd_probe.py
Device time a call and max abs error (bench/kernel_sweep.py's run_config)."""
import json, math, os, sys
import torch
sys.path.insert(0, "bench"); sys.path.insert(0, "/tmp"); sys.path.insert(0, ".")
import submission as sub_new
import sub_old
import kernel_sweep as ks
dev = torch.device("cuda")
SHAPES = [(256, 8192, 1), (64, 8192, 4), (256, 1024, 1), (32, 8192, 8), (4, 8192, 64), (4, 1024, 16), (32, 1024, 8), (64, 1024, 4)]
rows = []
for batch, length, splits in SHAPES:
    copies = max(1, math.ceil(3 * ks.L2_BYTES / (batch * length * 306)))
    prob = ks.Problem(batch, length, dev, min(copies, 16))
    for fmt in ("mxfp4", "fp8"):
        for bn, w in ((32, 4), (64, 8)):
            if fmt == "fp8" and bn == 64: continue
            for name, mod in (("old", sub_old), ("new", sub_new)):
                ks.sub = mod
                launch = mod.TritonLaunch(splits, bn, w, 1 if fmt == "mxfp4" else 3)
                r = ks.run_config(prob, fmt, launch, dev)
                r["version"] = name
                rows.append(r)
                print(fmt, batch, length, splits, bn, w, name, round(r.get("device_us", -1), 1), r.get("n_regs"), r.get("n_spills"), r.get("max_abs_err"), r.get("error", ""), flush=True)
    del prob; torch.cuda.empty_cache()
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "mxfp4_even_odd.json"), "w"), indent=1)
