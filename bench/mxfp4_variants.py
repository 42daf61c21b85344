"""What the MXFP4 Gluon form's choices buy, measured on the committed tree: each variant is
one text edit of submission.py (a copy in a temporary tree; the repository is not touched),
compiled for gfx950 at 256x8192 by bench/gluon_isa.py (the launch offered first: 2 splits,
4 waves, waves_per_eu 2). Static bounds of compiled code, not times.

    python3 bench/mxfp4_variants.py > results/2026-12-01-gfx950-mxfp4-v2/variants.txt
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "as committed": [],
    # The loads of a tile in two groups, rope codes + scale bytes first, then the nope codes,
    # so that each group's store waits only for its own loads; the barrier keeps the
    # scheduler from reordering them (the loop's waits are counted on that order).
    "no barrier pinning the loads' order": [
        ("    _gluon_barrier()  # the loop's order of the loads (its waits count on it)\n", ""),
        ("        _gluon_barrier()  # keeps these loads before the codes' (the waits count on that order)\n",
         "")],
    # The tile's row maxima by maxnum (Triton's default max): LLVM quiets each operand first.
    "maxnum maxima (gl.max, gl.maximum)": [
        ("max_smem.store(gl.reduce(s.reshape([GROUPS, BLOCK_N // GROUPS, 16]), 1, _gluon_max_with_nan))",
         "max_smem.store(gl.max(s.reshape([GROUPS, BLOCK_N // GROUPS, 16]), 1))"),
        ("gl.convert_layout(gl.reduce(groups, 0, _gluon_max_with_nan), gl.SliceLayout(0, s.type.layout))",
         "gl.convert_layout(gl.max(groups, 0), gl.SliceLayout(0, s.type.layout))"),
        ("m_new = _gluon_max_with_nan(m_i, _gluon_mxfp4_tile_max(s, max_smem, ARCH, GROUPS) * qk_scale)",
         "m_new = gl.maximum(m_i, _gluon_mxfp4_tile_max(s, max_smem, ARCH, GROUPS) * qk_scale)")],
    # V's scale bytes shifted into the fp32 exponent by each reading lane (32 a tile) rather
    # than once when stored (8 a tile).
    "V's scales shifted where read": [
        ("values_smem.store(keys.to(gl.uint32) << 23)", "values_smem.store(keys.to(gl.uint32))"),
        ("p0, p1, p2, p3 = _gluon_e2m1_scaled_pairs(words, _gluon_word_scales(words, scales), ARCH)",
         "p0, p1, p2, p3 = _gluon_e2m1_pairs(words, _gluon_word_scales(words, scales), ARCH)")],
}


def run(edits) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        for name in ("submission.py", "task.py", "utils.py", "reference.py"):
            shutil.copy(ROOT / name, tree / name)
        shutil.copytree(ROOT / "bench", tree / "bench")
        source = (tree / "submission.py").read_text()
        for old, new in edits:
            if source.count(old) != 1:
                raise SystemExit(f"edit target found {source.count(old)} times: {old!r}")
            source = source.replace(old, new)
        (tree / "submission.py").write_text(source)
        out = subprocess.run([sys.executable, "bench/gluon_isa.py", "--format", "mxfp4", "256,8192"], cwd=tree,
                             capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin",
                                                                              "TRITON_CACHE_DIR": str(tree / "cache"),
                                                                              "HOME": tmp})
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    for name, edits in VARIANTS.items():
        r = run(edits)
        loop = r["loop_per_wave_iteration"]
        print(f"{name}: VGPR {r['vgpr']}+{r['agpr']}, spills {r['vgpr_spill']}, loop VALU {loop['valu']} / total "
              f"{loop['total']} a wave-iteration; issue {r['issue_x_hbm']:.3f}, VALU x4 {r['valu_x_hbm']:.3f}, "
              f"MFMA {r['mfma_x_hbm']:.3f}; fewest bytes in flight a wave at an MFMA "
              f"{r['in_flight_bytes_per_wave_min']} (a CU at 2 programs: "
              f"{r['in_flight_bytes_per_cu_at_occupancy'] / 1024:.1f} KiB)", flush=True)


if __name__ == "__main__":
    main()
