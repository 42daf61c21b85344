"""What the MXFP4 Gluon form's choices buy, measured on the committed tree: each variant is
one of tools/mutants.py's edits of submission.py (kind "variant"), applied to a copy of the
tree in a temporary folder (the repository is not touched), compiled for gfx950 at
256x8192 by bench/gluon_isa.py (the launch offered first: 2 splits, 4 waves, waves_per_eu
2). Static bounds of compiled code, not times.

    python3 -m bench.mxfp4_variants > results/2026-12-01-gfx950-mxfp4-v2/variants.txt
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.mutants import MUTANTS, copy_tree

# The committed code, then each variant
VARIANTS = [None] + [name for name, mutant in MUTANTS.items() if mutant.kind == "variant"]


def run(name: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tree = copy_tree(Path(tmp) / "tree", name)
        out = subprocess.run([sys.executable, "-m", "bench.gluon_isa", "--format", "mxfp4", "256,8192"], cwd=tree,
                             capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin",
                                                                              "TRITON_CACHE_DIR": str(tree / "cache"),
                                                                              "HOME": tmp})
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    for name in VARIANTS:
        r = run(name)
        loop = r["loop_per_wave_iteration"]
        label = "as committed" if name is None else f"{name} ({MUTANTS[name].purpose})"
        print(f"{label}: VGPR {r['vgpr']}+{r['agpr']}, spills {r['vgpr_spill']}, loop VALU {loop['valu']} / total "
              f"{loop['total']} a wave-iteration; issue {r['issue_x_hbm']:.3f}, VALU x4 {r['valu_x_hbm']:.3f}, "
              f"MFMA {r['mfma_x_hbm']:.3f}; fewest bytes in flight a wave at an MFMA "
              f"{r['in_flight_bytes_per_wave_min']} (a CU at 2 programs: "
              f"{r['in_flight_bytes_per_cu_at_occupancy'] / 1024:.1f} KiB)", flush=True)


if __name__ == "__main__":
    main()
