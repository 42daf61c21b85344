"""Every launch the autopick offers for the 8 benchmark shapes on the H200 compiles on a CPU
for sm_90, no GPU needed: the Triton forms, the Gluon twins (their ampere copies and mma_v2)
and the Hopper forms (TMA, warpgroup MMAs) where this Triton's Gluon builds them; and ptxas
keeps the Hopper forms' warpgroup MMAs in flight (bench/hopper_sm90.py: no C7514). Their gfx950 (MI355X) compile is
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
    hopper = [line for line in compiled if "_hopper_" in line]
    assert bool(hopper) == (not submission.gluon_problem("hopper")), proc.stdout + submission.gluon_problem("hopper")
    assert {line.split(" ")[1] for line in hopper} <= {"_hopper_fp8_kernel", "_hopper_mxfp4_kernel"}


@pytest.mark.skipif(bool(submission.gluon_problem("hopper")),
                    reason=f"this Triton's Gluon cannot build the Hopper forms: {submission.gluon_problem('hopper')}")
def test_ptxas_keeps_every_hopper_specializations_warpgroup_mmas_pipelined(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-m", "bench.hopper_sm90"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    *lines, last = proc.stdout.strip().splitlines()
    assert last == f"{len(lines)} Hopper specializations compiled for sm_90" and lines, proc.stdout
    assert all("GMMA" in line and "SERIALIZED" not in line for line in lines), proc.stdout
    for form, mma in (("form=hopper_two_term", "QGMMA"), ("form=hopper_one_term", "QGMMA"), ("form=hopper,", "HGMMA")):
        assert any(form in line and mma in line for line in lines), (form, proc.stdout)
