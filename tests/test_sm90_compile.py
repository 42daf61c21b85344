"""Every launch the autopick offers for the 8 benchmark shapes on the H200 compiles on a CPU
for sm_90, no GPU needed: the Triton forms, and the Gluon twins (their ampere copies and
mma_v2) where this Triton's Gluon builds them. Their gfx950 (MI355X) compile is
tests/test_gfx950_report.py's: the static report compiles every launch offered there.

One subprocess (Triton decides interpret-or-compile when a kernel is decorated, so
TRITON_INTERPRET is unset there) compiles each distinct specialization once, into an
empty Triton cache.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import submission

ROOT = Path(__file__).resolve().parent.parent
LAST_LINE = re.compile(r"^(\d+) all specializations compiled for sm_90 in ([\d.]+) s$")


@pytest.mark.fast
def test_every_launch_offered_on_the_h200_compiles_for_sm_90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-m", "tools.compile_target", "sm_90"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    *compiled, last = proc.stdout.strip().splitlines()
    assert int(LAST_LINE.match(last).group(1)) == len(compiled)
    languages = [line.split(" ")[0] for line in compiled]
    assert set(languages) <= {"triton", "gluon"} and "triton" in languages, proc.stdout
    # Gluon forms are offered on sm_90 wherever this Triton's Gluon builds the NVIDIA twin
    # (submission.gluon_problem): the test must compile some there
    assert ("gluon" in languages) == (not submission.gluon_problem("ampere")), \
        proc.stdout + submission.gluon_problem("ampere")
