"""tools/external_programs.py: each optional program is probed for what its callers need
(LLVM 22 with the amdgcn target for gfx950 code, the pinned kernelguard for this Python),
and one that cannot serve is named with the version it needs and what the machine has.
The LLVM cases run with stand-ins first on PATH (tests/unusable_llvm: Debian 12's LLVM 14
`llvm-objdump`, a broken `llvm-objdump-22` exiting 127), whatever LLVM this machine has.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import external_programs

ROOT = Path(__file__).resolve().parent.parent
UNUSABLE_LLVM = ROOT / "tests" / "unusable_llvm"
LLVM_PROGRAMS = [name for name, program in external_programs.PROGRAMS.items()
                 if isinstance(program, external_programs.LLVMTool)]


def fake_llvm(folder: Path, name: str, version: str, targets: list[str]) -> Path:
    """A program that answers `--version` as an LLVM `version` build with `targets`."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    listed = "".join(f"    {target:<10} - a target\\n" for target in targets)
    path.write_text(f"#!/bin/sh\nprintf 'LLVM (http://llvm.org/):\\n  LLVM version {version}\\n\\n"
                    f"  Registered Targets:\\n{listed}'\n")
    path.chmod(0o755)
    return path


def test_an_llvm_14_objdump_and_a_broken_llvm_22_are_refused_by_name(monkeypatch):
    monkeypatch.setenv("PATH", f"{UNUSABLE_LLVM}{os.pathsep}{os.environ['PATH']}")
    problem = external_programs.problem("llvm-objdump")
    assert problem.startswith("llvm-objdump: needs LLVM 22 or newer with the AMDGPU (amdgcn) target"), problem
    assert (f"here llvm-objdump-22 ({UNUSABLE_LLVM / 'llvm-objdump-22'}) exits 127 on `--version`: "
            "llvm-objdump-22: error while loading shared libraries") in problem, problem
    assert f"llvm-objdump ({UNUSABLE_LLVM / 'llvm-objdump'}) is LLVM 14.0.6" in problem, problem
    assert "apt-get install llvm-22" in problem
    with pytest.raises(external_programs.Unusable) as raised:
        external_programs.command("llvm-objdump")
    assert str(raised.value) == problem


def test_no_llvm_at_all_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in LLVM_PROGRAMS:
        candidates = external_programs.PROGRAMS[name].candidates
        assert external_programs.problem(name).endswith(
            "; here " + "; ".join(f"{c} is not on PATH" for c in candidates)
            + f". To get it: {external_programs.LLVM_DEBIAN}")


@pytest.mark.parametrize("targets, usable", [(["amdgcn", "x86-64"], True), (["x86-64"], False)])
def test_llvm_22_serves_only_with_the_amdgcn_target(monkeypatch, tmp_path, targets, usable):
    fake = fake_llvm(tmp_path / "bin", "llvm-objdump-22", "22.1.8", targets)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{UNUSABLE_LLVM}")
    if usable:
        assert external_programs.problem("llvm-objdump") is None
        assert external_programs.command("llvm-objdump") == [str(fake)]
    else:
        assert f"llvm-objdump-22 ({fake}) is LLVM 22.1.8 without the amdgcn target" \
            in external_programs.problem("llvm-objdump")


def test_each_candidate_is_tried_in_turn(monkeypatch, tmp_path):
    """A broken llvm-readelf-22 first on PATH: the LLVM 14 llvm-readelf behind it serves (it
    reads the AMDGPU metadata note, which is all that is asked of it)."""
    fake = fake_llvm(tmp_path / "bin", "llvm-readelf", "14.0.6", [])
    monkeypatch.setenv("PATH", f"{UNUSABLE_LLVM}{os.pathsep}{tmp_path / 'bin'}")
    assert external_programs.command("llvm-readelf") == [str(fake)]
    fake_llvm(tmp_path / "bin", "llvm-readelf", "13.0.1", [])
    monkeypatch.setenv("PATH", f"{UNUSABLE_LLVM}{os.pathsep}{tmp_path / 'bin'}{os.pathsep}")  # a new PATH: probed again
    assert f"llvm-readelf ({fake}) is LLVM 13.0.1" in external_programs.problem("llvm-readelf")


def test_kernelguard_missing_for_this_python_is_named():
    """A Python without the site packages (-S) has no kernelguard: named with the
    interpreter and the set-up that installs it, not a traceback."""
    code = "from tools import external_programs as e; print(e.problem('kernelguard'))"
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pin = external_programs.PROGRAMS["kernelguard"].pinned_version()
    assert proc.stdout.strip() == (f"kernelguard: needs the version requirements.txt pins, for the Python that runs "
                                   f"the tests; here kernelguard is not installed for {sys.executable}. To get it: "
                                   f"`bash tools/setup.sh` (it installs requirements.txt)"), proc.stdout
    assert re.fullmatch(r"\d+\.\d+\.\d+", pin)


def test_ci_reruns_every_test_file_that_reads_llvm_with_an_unusable_llvm():
    """.ci/run's step with tests/unusable_llvm first on PATH runs every test file that reads
    LLVM's output (through bench/aiter_asm.py or by naming an LLVM program), so that an LLVM
    installed by hand on the CI machine cannot hide a fresh machine's failure."""
    ci = (ROOT / ".ci" / "run").read_text()
    listed = re.search(r"^llvm_tests=\(([^)]*)\)", ci, flags=re.MULTILINE)
    assert listed, "no llvm_tests=(...) in .ci/run"
    reading = {f"tests/{path.name}" for path in (ROOT / "tests").glob("test_*.py")
               if re.search(r"\baiter_asm\b|\"llvm-(objdump|readelf)\"", path.read_text())}
    assert set(listed.group(1).split()) == reading
    assert 'PATH="$PWD/tests/unusable_llvm:$PATH" python3 -m pytest' in ci
