"""Shared helpers for the aiter contract tests (no aiter code here, only our checks).

* Signature data: tools/aiter_api/*.json, written by tools/extract_aiter_api.py from
  aiter's source (the March 2026 commit the leaderboard's call pattern matches, and the
  older PyPI wheel).
* Call-site finder and binder: parse our source with `ast`, find calls to the recorded
  aiter functions and check that each call would bind to the recorded parameter list,
  by the same rules Python uses (positional count, keyword names, duplicates,
  required parameters).
* Wheel quantizer runner: runs the PyPI wheel's Triton `dynamic_mxfp4_quant` under the
  Triton interpreter in a subprocess (see run_wheel_quantizer).
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
API_DIR = REPO_ROOT / "tools" / "aiter_api"
# The leaderboard's call pattern (its reference.py) matches aiter of March 2026.
MARCH_API_FILE = API_DIR / "aiter_2ee06ca214.json"
WHEEL_VERSION = "0.1.7.post2.dev18"
WHEEL_API_FILE = API_DIR / f"aiter_pypi_{WHEEL_VERSION}.json"

# Our files whose aiter calls must bind.
OUR_SOURCES = ("submission.py", "reference.py")

POSITIONAL_KINDS = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
KEYWORD_KINDS = ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")


# ---------------------------------------------------------------- signature data


def load_api(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def recorded_functions(api: dict) -> set[str]:
    return {name for name, entry in api["functions"].items() if entry.get("found")}


def signatures(api: dict, name: str) -> list[tuple[str, list[dict]]]:
    """Every parameter list a call must satisfy.

    For a compile_ops stub the arguments pass through the Python stub (aiter checks the
    call against it once) and then reach the pybind11 op, so a call must fit both.
    """
    entry = api["functions"][name]
    result = [("python", entry["params"])]
    if entry.get("pybind"):
        result.append(("pybind", entry["pybind"]["params"]))
    return result


def keyword_names(params: list[dict]) -> set[str]:
    return {p["name"] for p in params if p["kind"] in KEYWORD_KINDS}


# ---------------------------------------------------------------- call sites


@dataclass
class CallSite:
    filename: str
    line: int
    name: str  # the final name: mla_decode_fwd for aiter_ops.mla_decode_fwd(...)
    spelled: str  # how the callee is written
    n_positional: int
    keywords: list[str] = field(default_factory=list)
    star_args: bool = False  # f(*xs)
    star_kwargs: bool = False  # f(**kw)

    def where(self) -> str:
        return f"{self.filename}:{self.line} {self.spelled}(...)"


def _callee_name(func: ast.AST) -> str | None:
    """`name(...)`, `x.name(...)`, `x.y.name(...)` -> "name"."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _locally_defined(tree: ast.Module) -> set[str]:
    """Top-level functions/classes of the module: a bare call to one is OUR function."""
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def find_call_sites(source_text: str, filename: str, names: set[str]) -> list[CallSite]:
    tree = ast.parse(source_text, filename=filename)
    ours = _locally_defined(tree)
    sites = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _callee_name(node.func)
        if name not in names:
            continue
        if isinstance(node.func, ast.Name) and name in ours:
            continue  # our own emulation with the same name, not an aiter call
        sites.append(
            CallSite(
                filename=filename,
                line=node.lineno,
                name=name,
                spelled=ast.unparse(node.func),
                n_positional=sum(not isinstance(a, ast.Starred) for a in node.args),
                keywords=[k.arg for k in node.keywords if k.arg is not None],
                star_args=any(isinstance(a, ast.Starred) for a in node.args),
                star_kwargs=any(k.arg is None for k in node.keywords),
            )
        )
    return sorted(sites, key=lambda s: s.line)


def dtype_uses(source_text: str) -> list[tuple[int, str]]:
    """(line, name) of every `<aiter dtypes module>.name` in the source: the module
    imported as `from aiter import dtypes [as x]`, `from aiter.utility import dtypes`,
    or spelled `aiter.dtypes`."""
    tree = ast.parse(source_text)
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("aiter", "aiter.utility")
        for alias in node.names
        if alias.name == "dtypes"
    }
    uses = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = ast.unparse(node.value)
        if owner in aliases or owner == "aiter.dtypes":
            uses.append((node.lineno, node.attr))
    return sorted(uses)


# ---------------------------------------------------------------- binding


def bind_errors(params: list[dict], call: CallSite) -> list[str]:
    """Why `call` would not bind to `params` (empty list: it binds).

    A splatted call (*xs / **kw) cannot be verified statically: that is an error too,
    so our code must spell aiter calls out.
    """
    errors = []
    if call.star_args:
        errors.append("uses *args: the call cannot be verified, spell the arguments out")
    if call.star_kwargs:
        errors.append("uses **kwargs: the call cannot be verified, spell the keywords out")

    positional = [p for p in params if p["kind"] in POSITIONAL_KINDS]
    takes_var_positional = any(p["kind"] == "VAR_POSITIONAL" for p in params)
    takes_var_keyword = any(p["kind"] == "VAR_KEYWORD" for p in params)

    if call.n_positional > len(positional) and not takes_var_positional:
        errors.append(
            f"{call.n_positional} positional arguments, at most {len(positional)} allowed"
        )
    bound = {p["name"] for p in positional[: call.n_positional]}

    by_name = {p["name"]: p for p in params}
    for keyword in call.keywords:
        param = by_name.get(keyword)
        if param is not None and param["kind"] in KEYWORD_KINDS:
            if keyword in bound:
                errors.append(f"'{keyword}' given both by position and by keyword")
            bound.add(keyword)
        elif not takes_var_keyword:
            errors.append(f"unknown keyword '{keyword}'")

    missing = [
        p["name"]
        for p in params
        if p["kind"] in POSITIONAL_KINDS + ("KEYWORD_ONLY",)
        and "default" not in p
        and p["name"] not in bound
    ]
    # With *args / **kwargs in the call we cannot know what is missing.
    if missing and not (call.star_args or call.star_kwargs):
        errors.append("missing required " + ", ".join(missing))
    return errors


def check_call(api: dict, call: CallSite) -> list[str]:
    """Errors of `call` against every signature the api records for its function."""
    errors = []
    for label, params in signatures(api, call.name):
        errors += [f"[{label}] {e}" for e in bind_errors(params, call)]
    return errors


def positional_names(params: list[dict], n: int) -> list[str]:
    return [p["name"] for p in params if p["kind"] in POSITIONAL_KINDS][:n]


def wheel_problems(march: dict, wheel: dict, call: CallSite) -> list[str]:
    """Why a call written for the March API would fail (or silently mean something
    else) on the wheel's API."""
    problems = check_call(wheel, call)
    march_names = positional_names(march["functions"][call.name]["params"], call.n_positional)
    for label, params in signatures(wheel, call.name):
        wheel_names = positional_names(params, call.n_positional)
        shifted = [
            f"#{i} {m}->{w}" for i, (m, w) in enumerate(zip(march_names, wheel_names)) if m != w
        ]
        if shifted:  # name the first shift only: the rest usually follow from it
            problems.append(
                f"[{label}] positional arguments land elsewhere: {shifted[0]}"
                + (f" (+{len(shifted) - 1} more)" if len(shifted) > 1 else ""))
    return problems


def call_sites_in_file(path: Path, names: set[str]) -> list[CallSite]:
    return find_call_sites(path.read_text(), path.name, names)


def existing_sources() -> list[Path]:
    return [REPO_ROOT / name for name in OUR_SOURCES if (REPO_ROOT / name).is_file()]


def wheel_report() -> list[str]:
    """Human-readable list of our call sites that would not bind on the PyPI wheel."""
    march, wheel = load_api(MARCH_API_FILE), load_api(WHEEL_API_FILE)
    lines = []
    for path in existing_sources():
        for call in call_sites_in_file(path, recorded_functions(march)):
            problems = wheel_problems(march, wheel, call)
            if problems:
                lines.append(f"{call.where()}: " + "; ".join(problems))
    return lines


# ---------------------------------------------------------------- wheel quantizer

# The unpacked wheel: .ci/run fills it with
#   python -m pip install --no-deps --target .ci/aiter_wheel amd-aiter==0.1.7.post2.dev18
WHEEL_DIR_ENV = "AITER_WHEEL_DIR"
DEFAULT_WHEEL_DIR = REPO_ROOT / ".ci" / "aiter_wheel"
FP4_UTILS_RELPATH = Path("aiter") / "utility" / "fp4_utils.py"


def wheel_dir() -> Path:
    return Path(os.environ.get(WHEEL_DIR_ENV, DEFAULT_WHEEL_DIR))


def wheel_fp4_utils_path() -> Path:
    return wheel_dir() / FP4_UTILS_RELPATH


def load_wheel_fp4_utils(path: Path):
    """Load the wheel's fp4_utils.py by path, without importing the aiter package
    (that needs ROCm). Its only package-relative import is `from . import dtypes`;
    we provide a tiny stand-in package that has just the dtype names it uses.

    Must run with TRITON_INTERPRET=1 set before triton is first imported.
    """
    import importlib.util
    import types

    import torch

    package = "_aiter_wheel_stub"
    stub_pkg = types.ModuleType(package)
    stub_pkg.__path__ = []  # a package, so `from . import dtypes` resolves here
    dtypes = types.ModuleType(package + ".dtypes")
    dtypes.fp4x2 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    dtypes.fp8_e8m0 = getattr(torch, "float8_e8m0fnu", torch.uint8)
    dtypes.fp32 = torch.float32
    stub_pkg.dtypes = dtypes
    sys.modules[package] = stub_pkg
    sys.modules[dtypes.__name__] = dtypes

    spec = importlib.util.spec_from_file_location(package + ".fp4_utils", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_wheel_quantizer(inputs: list, workdir: Path) -> list[tuple]:
    """Run the wheel's dynamic_mxfp4_quant on each 2D CPU tensor in `inputs`.

    Runs in a fresh Python process so that TRITON_INTERPRET=1 is set before Triton is
    imported, whatever this process has imported already. Returns, per input,
    (data as uint8, scales as uint8) exactly as the wheel returned them (padded).
    """
    import torch

    in_file, out_file = workdir / "wheel_in.pt", workdir / "wheel_out.pt"
    torch.save([t.contiguous() for t in inputs], in_file)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, __file__, "quantize", str(wheel_fp4_utils_path()), str(in_file), str(out_file)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"wheel quantizer failed:\n{proc.stdout}\n{proc.stderr}")
    return torch.load(out_file)


def _let_interpreter_run_math_methods() -> None:
    """Triton 3.6's interpreter injects its semantic into builtin functions such as
    tl.floor(x), but not into the method spelling x.floor() (the method wrapper is not
    marked builtin), which the wheel's kernel uses: it then fails with
    "'NoneType' object has no attribute 'to_tensor'". Point those methods at the
    builtin free functions, which the interpreter does patch. The compiled (GPU) path
    handles the method spelling itself; this only affects the interpreter run here.
    """
    import triton.language as tl
    from triton.language.core import is_builtin

    for name in dir(tl.core.tensor):
        method, free = getattr(tl.core.tensor, name, None), getattr(tl.math, name, None)
        if callable(method) and not is_builtin(method) and is_builtin(free):
            setattr(tl.core.tensor, name, free)


def _quantize_main(fp4_utils_path: str, in_file: str, out_file: str) -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1", "set TRITON_INTERPRET=1 first"
    import torch

    _let_interpreter_run_math_methods()
    fp4_utils = load_wheel_fp4_utils(Path(fp4_utils_path))
    results = []
    for x in torch.load(in_file):
        data, scales = fp4_utils.dynamic_mxfp4_quant(x)
        results.append((data.view(torch.uint8).clone(), scales.view(torch.uint8).clone()))
    torch.save(results, out_file)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "quantize":
        _quantize_main(*sys.argv[2:])
    elif len(sys.argv) == 2 and sys.argv[1] == "wheel-report":
        print("\n".join(wheel_report()) or "every call site binds on the wheel too")
    else:
        sys.exit("usage: aiter_contract.py quantize FP4_UTILS IN OUT | wheel-report")
