"""Probe (not product code): two fp8 main-loop orders, on submission.py patched by
pipelined_qk.patch (run from the repo root; undo with `git checkout submission.py`):
  PIPE_QK   the next tile's QK is issued before this tile's softmax and PV, so a warp has
            two independent MMA streams;
  QK_CHAINS 2: QK as two independent MMA chains (columns 0-255 and 256-575) summed.
    git apply results/2026-11-30-h200/probe/pipelined_qk.patch
    OUT=dir python3 results/2026-11-30-h200/probe/pipelined_qk_probe.py   # GPU; CPU: tiny interpreter smoke
Device time per call and max abs error against fp32 attention (bench/kernel_sweep.py's
run_config), at each shape's measured-best launch (and 64-token tiles at 256 x 8192)."""
import json, math, os, sys
import torch
sys.path.insert(0, "bench"); sys.path.insert(0, ".")
import submission as sub_p
import kernel_sweep as ks
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
SMOKE = dev.type == "cpu"
SHAPES = [(256, 8192), (64, 8192), (256, 1024), (32, 8192), (64, 1024), (32, 1024), (4, 8192), (4, 1024)]
BEST = {(4, 1024): (16, 64, 8), (4, 8192): (64, 32, 4), (32, 1024): (8, 32, 4), (32, 8192): (8, 32, 4),
        (64, 1024): (4, 32, 4), (64, 8192): (4, 32, 4), (256, 1024): (1, 32, 4), (256, 8192): (1, 32, 4)}
if SMOKE:
    SHAPES = [(2, 100)]; BEST = {(2, 100): (2, 32, 4)}
VARIANTS = [(False, 1), (True, 1), (False, 2), (True, 2)]
rows = []
for batch, length in SHAPES:
    copies = 1 if SMOKE else max(1, math.ceil(3 * ks.L2_BYTES / (batch * length * 576)))
    prob = ks.Problem(batch, length, dev, copies)
    s, bn, w = BEST[(batch, length)]
    for extra in ([(s, bn, w)] + ([(s, 64, 8)] if (batch, length) == (256, 8192) and not SMOKE else [])):
        launch = sub_p.TritonLaunch(extra[0], extra[1], extra[2], 3)
        for pipe, chains in VARIANTS:
            sub_p.VARIANT.update(PIPE_QK=pipe, QK_CHAINS=chains)
            r = ks.run_config(prob, "fp8", launch, dev, timed=not SMOKE)
            r.update(pipe=pipe, chains=chains)
            print({k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
            rows.append(r)
    del prob
    if not SMOKE: torch.cuda.empty_cache()
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "pipe_probe.json"), "w"), indent=1)
