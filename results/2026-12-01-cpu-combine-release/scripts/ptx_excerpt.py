"""The sm_90 PTX of the in-kernel combine, from the last partial store to the counter's last
atomic, for the Triton fp8 f16 form as offered on the H200 (4 x 1024) and the Gluon fp8 form
with the in-kernel combine forced; from the copy of submission.py given.

    python3 ptx_excerpt.py SUBMISSION.py OUT_PREFIX
"""
import dataclasses
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
path, out = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("submission", path)
sub = importlib.util.module_from_spec(spec)
sys.modules["submission"] = sub
spec.loader.exec_module(sub)
import compile_target as ct  # noqa: E402

launches = {"triton_f16": next(launch for launch in sub.triton_launch_candidates("fp8", 4, 1024, 132, "sm_90")
                               if launch.combine_in_kernel)}
gluon = sub._launch(8, sub._FORM_TILES[("fp8", "gluon")][0], "gluon", "sm_90")
launches["gluon_ampere"] = dataclasses.replace(gluon, combine_in_kernel=True)
for name, launch in launches.items():
    call = ct.decode_kernel_calls(ct.contract_inputs(4, 1024), "fp8", launch)[0]
    ptx = ct.specialize(call, ct.TARGETS["sm_90"]).compile().asm["ptx"].splitlines()
    atoms = [i for i, line in enumerate(ptx) if "atom." in line]
    stores = [i for i in range(atoms[0]) if "st.global" in ptx[i]]
    start, end = stores[-1] - 2, atoms[-1] + 8
    keep = [f"{n + 1:6d}  {line}" for n, line in enumerate(ptx[start:end], start)
            if not line.lstrip().startswith((".loc", "//", "$L__tmp"))]
    Path(f"{out}-{name}.ptx.txt").write_text(
        f"; {name}: {launch}\n; PTX lines {start + 1}-{end} (.loc lines, comments, $L__tmp labels left out)\n"
        + "\n".join(keep) + "\n")
    print(name, "atomics at PTX lines", [a + 1 for a in atoms])
