"""submission.py passes what gpu-mode's kernelbot checks before it runs a submission.

Upload checks (kernelbot: src/kernelbot/api/api_utils.py, the Discord cog, and
src/libkernelbot/submission.py's _get_popcorn_directives): the file decodes as UTF-8, is at
most 1 MB (1 000 000 bytes), its lowercased text does not contain "stream" anywhere, and
the #!POPCORN directives of its first comment block name the leaderboard and the GPU.
KernelGuard (PyPI `kernelguard`, pinned in requirements.txt), which kernelbot runs on
benchmark and ranked submissions when enabled: its CLI in --api-mode, with the default and
the strict profile, matches no pattern in submission.py.
"""
import json
import subprocess
from pathlib import Path

import pytest

from tools import external_programs

pytestmark = pytest.mark.fast

SUBMISSION = Path(__file__).resolve().parent.parent / "submission.py"
MAX_BYTES = 1_000_000
FORBIDDEN_WORD = "stream"
EXPECTED_DIRECTIVES = {"leaderboard": "amd-mixed-mla", "gpus": ["MI355X"]}


class DirectiveError(ValueError):
    pass


def popcorn_directives(text: str) -> dict:
    """kernelbot's rule: only the leading lines that start with '#' or '//' are read; a
    line whose first word is '#!POPCORN' or '//!POPCORN' sets `gpu`/`gpus` (every later
    word) or `leaderboard` (the next word), each at most once."""
    info = {"gpus": None, "leaderboard": None}
    for line in text.splitlines():
        if not (line.startswith("//") or line.startswith("#")):
            break
        words = line.split()
        if words[0] not in ("//!POPCORN", "#!POPCORN"):
            continue
        if len(words) < 3:
            raise DirectiveError(f"!POPCORN directive missing argument: {line}")
        key = words[1].strip().lower()
        key = "gpus" if key == "gpu" else key
        if key not in info:
            raise DirectiveError(f"Invalid !POPCORN directive: {key}")
        if info[key] is not None:
            raise DirectiveError(f"Found multiple values for !POPCORN directive {key}")
        info[key] = words[2:] if key == "gpus" else words[2]
    return info


def upload_problems(content: bytes) -> list[str]:
    """What kernelbot would refuse the file for (empty when it accepts it)."""
    if len(content) > MAX_BYTES:
        return [f"{len(content)} bytes, over the {MAX_BYTES}-byte limit"]
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:
        return [f"not UTF-8: {error}"]
    problems = []
    at = text.lower().find(FORBIDDEN_WORD)
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        problems.append(f"contains {FORBIDDEN_WORD!r} (case-insensitive) on line {line}")
    try:
        directives = popcorn_directives(text)
    except DirectiveError as error:
        return problems + [str(error)]
    if directives != EXPECTED_DIRECTIVES:
        problems.append(f"directives {directives}, expected {EXPECTED_DIRECTIVES}")
    return problems


def test_submission_passes_the_upload_checks():
    assert upload_problems(SUBMISSION.read_bytes()) == []


HEADER = "#!POPCORN leaderboard amd-mixed-mla\n#!POPCORN gpu MI355X\n"


@pytest.mark.parametrize("content, fragment", [
    ((HEADER + "# the Upstream harness\nx = 1\n").encode(), "contains 'stream'"),
    ((HEADER + "x = torch.cuda.Stream()\n").encode(), "contains 'stream'"),
    (HEADER.encode() + b"x = '\xff'\n", "not UTF-8"),
    ((HEADER + "#" * MAX_BYTES).encode(), "limit"),
    (("import torch\n" + HEADER).encode(), "directives"),            # not the first block
    (("#!POPCORN leaderboard amd-mixed-mla\n").encode(), "directives"),  # no GPU named
    (("#!POPCORN gpus MI300\n#!POPCORN leaderboard amd-mixed-mla\n").encode(), "directives"),
    ((HEADER + "#!POPCORN gpu H100\n").encode(), "multiple values"),
    (("#!POPCORN leaderboard\n").encode(), "missing argument"),
])
def test_the_checks_refuse_what_kernelbot_refuses(content, fragment):
    problems = upload_problems(content)
    assert any(fragment in p for p in problems), problems


def test_directives_are_read_as_kernelbot_reads_them():
    text = "#!/usr/bin/env python\n// note\n#!POPCORN GPU MI355X MI300\n#!POPCORN leaderboard x\n"
    assert popcorn_directives(text) == {"gpus": ["MI355X", "MI300"], "leaderboard": "x"}
    assert popcorn_directives("\n#!POPCORN leaderboard x\n") == {"gpus": None, "leaderboard": None}


def kernelguard(profile: str | None) -> dict:
    if (problem := external_programs.problem("kernelguard")) is not None:
        pytest.skip(problem)
    command = external_programs.command("kernelguard") + (["--profile", profile] if profile else []) + ["--api-mode"]
    proc = subprocess.run(command, input=SUBMISSION.read_text(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads([line for line in proc.stdout.splitlines() if line.strip()][-1])


@pytest.mark.parametrize("profile", [None, "strict"], ids=["default", "strict"])
def test_kernelguard_matches_no_pattern(profile):
    result = kernelguard(profile)
    assert result["matched_patterns"] == [], result["matched_patterns"]
    assert result["classification"] == "valid" and not result["should_filter"], result
