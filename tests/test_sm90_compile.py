"""Every Gluon launch the autopick offers for the 8 benchmark shapes compiles on a CPU for
the H200 (sm_90: the Gluon twin's ampere copies and mma_v2), no GPU needed. Its gfx950 (MI355X) compile is tests/test_gfx950_report.py's: the static report
compiles every launch offered there, Gluon and Triton.

One subprocess (Triton decides interpret-or-compile when a kernel is decorated, so
TRITON_INTERPRET is unset there) compiles each distinct specialization once, into an
empty Triton cache.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import submission

ROOT = Path(__file__).resolve().parent.parent
LAST_LINE = re.compile(r"^(\d+) gluon specializations compiled for sm_90 in ([\d.]+) s$")


def test_every_gluon_launch_offered_on_the_h200_compiles_for_sm_90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-m", "tools.compile_target", "sm_90", "--language", "gluon"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    *compiled, last = proc.stdout.strip().splitlines()
    count = int(LAST_LINE.match(last).group(1))
    assert count == len(compiled) and all(line.startswith("gluon ") for line in compiled)
    # Gluon forms are offered on sm_90 wherever this Triton's Gluon builds the NVIDIA twin
    # (submission.gluon_problem): the test must compile some there
    assert (count > 0) == (not submission.gluon_problem("ampere")), proc.stdout + submission.gluon_problem("ampere")
