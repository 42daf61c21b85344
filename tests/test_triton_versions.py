"""A Triton other than the pinned one: the submission keeps serving, and says what it lost.

- Every Triton launch raising (a Triton that cannot compile or launch anything on the
  runner): custom_kernel still answers, from the torch route, with the a8w8 yardstick in
  torch math; each reason is said once. Host logic: CPU tensors, in an interpreter worker
  (where the Q quantizer and the Triton routes launch through the interpreter).
- The Gluon API check: a Triton whose Gluon lacks a name the kernels use, or one refused by
  version, offers no Gluon form for that architecture, says why once under MLA_DEBUG, and
  refuses a forced one by a ValueError; the list of names covers every Gluon name the
  kernels use.
- eval.py's versions line names a Triton outside the tested lines.
The per-version runs themselves: bench/triton_versions.py, results/2026-12-02-cpu-triton-versions.
"""
import ast
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import submission as sub
import utils
from interpreter_worker import InterpreterWorker

ROOT = Path(__file__).resolve().parent.parent
REFUSAL = "this Triton cannot launch anything (the test's stand-in)"

_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


# ------------------------------------------------------------------ every launch raises
def _serve_while_every_triton_launch_raises(cases):
    """In the interpreter worker: custom_kernel on each case with every Triton launch
    raising, the Triton routes made candidates beside torch on this CPU (as on a GPU).
    Returns (outputs, the torch route's exact outputs, chosen routes, stderr)."""
    from triton.runtime import interpreter, jit

    from reference import generate_input
    inputs = [generate_input(**case, device="cpu") for case in cases]

    def refuse(*args, **kwargs):
        raise RuntimeError(REFUSAL)

    saved = (interpreter.GridExecutor.__call__, jit.JITFunction.run, sub._kernels_run_here)
    interpreter.GridExecutor.__call__ = refuse  # every interpreted launch
    jit.JITFunction.run = refuse                # every compiled one (Gluon's JIT is a subclass)
    sub._kernels_run_here = lambda device: True
    sub.reset_plans()
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            outputs = [sub.custom_kernel(data) for data in inputs]
            routes = [sub.describe_route(data) for data in inputs]
    finally:
        interpreter.GridExecutor.__call__, jit.JITFunction.run, sub._kernels_run_here = saved
        sub.reset_plans()
    exact = [sub.TorchRunner(sub.CallShape.of(data), "bf16")(*data[:4]) for data in inputs]
    return outputs, exact, routes, said.getvalue()


def test_custom_kernel_serves_while_every_triton_launch_raises():
    cases = [dict(batchsize=2, qseqlen=1, kvseqlen=40, seed=3), dict(batchsize=1, qseqlen=1, kvseqlen=70, seed=4)]
    outputs, exact, routes, said = _worker.run(_serve_while_every_triton_launch_raises, cases)
    assert routes == ["torch[bf16]", "torch[bf16]"], routes
    for out, expected in zip(outputs, exact):
        assert torch.equal(out, expected)
    yardstick = [line for line in said.splitlines() if "a8w8 yardstick" in line]
    assert yardstick == [f"[mla] the a8w8 yardstick's Triton Q quantizer raised RuntimeError: {REFUSAL}; "
                         "the yardstick uses torch math"], said
    for route in ("triton_fp8", "triton_mxfp4"):
        assert [line for line in said.splitlines() if f"route {route} raised" in line] == [
            f"[mla] route {route} raised RuntimeError: {REFUSAL}; skipping it"], said


# ------------------------------------------------------------------ the Gluon API check
def _gluon_names_in_kernels() -> set:
    """Every dotted name the submission takes from Gluon's modules (gl., gl_cdna4.,
    gl_ampere., gl_hopper., gl_hopper_host.), outside the API table itself, as written in its
    source."""
    tree = ast.parse((ROOT / "submission.py").read_text())
    table = next(node for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", "") == "_GLUON_API" for t in node.targets))
    inside_table = {id(node) for node in ast.walk(table)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inside_table:
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in ("gl", "gl_cdna4", "gl_ampere", "gl_hopper",
                                                            "gl_hopper_host"):
                names.add(".".join([inner.id, *reversed(parts)]))
    # The longest chain only (gl_cdna4.async_copy.commit_group, not gl_cdna4.async_copy).
    return {name for name in names if not any(other.startswith(name + ".") for other in names)}


def test_the_gluon_api_table_names_every_gluon_name_the_kernels_use():
    listed = {spelling for part in sub._GLUON_API.values() for names in part for spelling in names.split("|")}
    used = _gluon_names_in_kernels()
    # A dtype's or layout's own attributes (gl.float32.is_fp8 ...) are not Gluon names.
    missing = {name for name in used if name not in listed and name.rsplit(".", 1)[0] not in listed}
    assert not missing, f"add to submission._GLUON_API: {sorted(missing)}"
    assert {"gl_cdna4.async_copy.commit_group", "gl_ampere.mma_v2", "gl_hopper.warpgroup_mma",
            "gl_hopper_host.TensorDescriptor"} <= used


needs_full_gluon = pytest.mark.skipif(
    any(sub._GLUON_PROBLEMS.values()),
    reason="needs a Triton whose Gluon builds both kernels (3.6 to 3.9 do); this one: "
           + "; ".join(sorted(set(filter(None, sub._GLUON_PROBLEMS.values())))))


@pytest.fixture
def gluon_lacking(monkeypatch):
    """gluon_lacking(name): this Triton's Gluon as if `name` were missing, the check redone."""
    lookup = sub._gluon_lookup

    def make(name: str):
        monkeypatch.setattr(sub, "_gluon_lookup", lambda path: None if path == name else lookup(path))
        problems = sub._check_gluon_api()
        monkeypatch.setattr(sub, "_GLUON_PROBLEMS", problems)
        return problems
    return make


@needs_full_gluon
@pytest.mark.usefixtures("fresh_plans")
def test_a_gluon_lacking_a_name_offers_no_gluon_form_there_and_says_why_once(gluon_lacking, monkeypatch, capsys):
    monkeypatch.setattr(sub, "_INTERPRETED", False)  # as compiled on a GPU
    problems = gluon_lacking("gl_cdna4.async_copy.commit_group")
    assert problems["cdna4"].endswith("Gluon lacks gl_cdna4.async_copy.commit_group") and not problems["ampere"]
    assert not sub.gluon_forms_here("gfx950") and sub.gluon_forms_here("sm_90")
    monkeypatch.setenv("MLA_DEBUG", "1")
    for _ in range(2):
        for kv_format in ("fp8", "mxfp4"):
            assert all(launch.form != "gluon"
                       for launch in sub.launch_candidates(kv_format, 4, 1024, 256, "gfx950"))
        assert any(launch.form == "gluon" for launch in sub.launch_candidates("fp8", 4, 1024, 132, "sm_90"))
    said = [line for line in capsys.readouterr().err.splitlines() if "no Gluon form" in line]
    assert said == [f"[mla] no Gluon form on gfx950: {problems['cdna4']}"]
    with pytest.raises(ValueError, match="lacks gl_cdna4.async_copy.commit_group"):
        sub.launch_candidates("fp8", 4, 1024, 256, "gfx950", form="gluon")


@needs_full_gluon
def test_either_spelling_of_a_renamed_name_is_enough(gluon_lacking):
    for pair in ("gl.barrier|gl.thread_barrier",
                 "gl.shared_memory_descriptor.reinterpret|gl.shared_memory_descriptor._reinterpret",
                 "gl_ampere.async_copy.async_load|gl_ampere.async_copy.async_copy_global_to_shared"):
        present = [name for name in pair.split("|") if sub._gluon_lookup(name) is not None]
        assert present, pair
        if len(present) == 1:  # this Triton has one spelling, and that is enough
            assert pair not in sub._GLUON_PROBLEMS[""] + sub._GLUON_PROBLEMS["ampere"]
            assert pair in "".join(gluon_lacking(present[0]).values())  # without it, the pair is what lacks
    lacking_shared = gluon_lacking("gl.zeros_like")
    assert all("gl.zeros_like" in lacking_shared[part] for part in ("", "cdna4", "ampere"))


def test_triton_3_5_is_refused_for_the_nvidia_twin_by_version(monkeypatch):
    monkeypatch.setattr(sub, "_TRITON_VERSION", (3, 5))
    assert "segfault in memdesc_trans" in sub._gluon_api_problem("ampere")
    assert "segfault" not in sub._gluon_api_problem("cdna4")
    monkeypatch.setattr(sub, "_TRITON_VERSION", (3, 6))
    assert "segfault" not in sub._gluon_api_problem("ampere")


def test_a_gluon_that_does_not_import_is_named(monkeypatch):
    monkeypatch.setattr(sub, "_GLUON_IMPORT_ERROR", "triton.experimental.gluon does not import: OSError: test")
    assert sub._gluon_api_problem("cdna4") == sub._gluon_api_problem("ampere") == sub._GLUON_IMPORT_ERROR


# What a process whose Gluon does not import sees: submission imports, offers no Gluon form,
# refuses a forced one, and its Gluon functions refuse to run, naming the import error.
_WITHOUT_GLUON = r"""
import sys
import triton
sys.modules["triton.experimental.gluon.language.amd"] = None  # submission's Gluon imports fail there
import submission as sub
assert not sub.GLUON_AVAILABLE and "does not import" in sub._GLUON_PROBLEMS[""]
for fmt in ("fp8", "mxfp4"):
    assert all(c.form != "gluon" for c in sub.launch_candidates(fmt, 4, 1024, 256, "gfx950"))
    try:
        sub.launch_candidates(fmt, 4, 1024, 256, "gfx950", form="gluon")
        raise SystemExit("a forced Gluon form was offered")
    except ValueError as error:
        assert "does not import" in str(error), error
for function in (sub._mla_decode_gluon_kernel, sub._gluon_copy_tile, sub._gluon_mma_layout):
    for use in (lambda: function[(1,)](), lambda: function()):
        try:
            use()
            raise SystemExit(f"{function.__name__} ran")
        except RuntimeError as error:
            assert function.__name__ in str(error) and "does not import" in str(error), error
print("refused")
"""


def test_without_gluon_the_gluon_functions_refuse_to_run_and_say_why():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _WITHOUT_GLUON], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "refused", run.stdout + run.stderr[-3000:]


# ------------------------------------------------------------------ eval.py's versions line
@pytest.mark.parametrize("version,outside", [("3.4.1", True), ("3.5.1", False), ("3.9.0", False),
                                             ("3.10.0", True), ("3.6.0+git1a2b3c", False)])
def test_the_versions_line_names_a_triton_outside_the_tested_lines(monkeypatch, version, outside):
    import triton
    monkeypatch.setattr(triton, "__version__", version)
    line = utils.describe_platform()
    assert f"triton {version}" in line
    assert ("(outside the tested Triton 3.5 to 3.9)" in line) == outside, line
