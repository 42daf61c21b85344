#!/usr/bin/env python3
"""Extract API facts (signatures, dtype names) from an aiter source tree into JSON.

aiter only runs on ROCm, so we cannot import it here. Instead we parse its Python
source with `ast` and record, for the functions our code calls, the parameter list
as Python sees it (names, order, kind, default). For functions that are Python stubs
over a compiled op (decorated with `compile_ops`), the C++ pybind11 declaration is what
finally receives the arguments, so its argument list is recorded too when found.

The output is data (facts about aiter's API), never aiter code.

Sources:
  --git-dir D --commit C   a git mirror of ROCm/aiter (read with `git show`, no work tree)
  --wheel FILE.whl         the pure-Python amd-aiter wheel (read from the zip directly)
  --source-dir D           an unpacked tree that contains aiter/

Example:
  python3 -m tools.extract_aiter_api --git-dir AITER_MIRROR.git \
      --commit 2ee06ca214 --out-dir tools/aiter_api
  python3 -m tools.extract_aiter_api --wheel /tmp/aiterwheel/amd_aiter-...whl \
      --out-dir tools/aiter_api
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

# Function name -> the file we expect it in. If it is not there we scan aiter/.
TARGET_FUNCTIONS = {
    "mla_decode_fwd": "aiter/mla.py",
    "get_mla_metadata_info_v1": "aiter/ops/attention.py",
    "get_mla_metadata_v1": "aiter/ops/attention.py",
    "dynamic_mxfp4_quant": "aiter/utility/fp4_utils.py",
    "mxfp4_to_f32": "aiter/utility/fp4_utils.py",
    "e8m0_to_f32": "aiter/utility/fp4_utils.py",
}
DTYPES_PATH = "aiter/utility/dtypes.py"
AITER_INIT_PATH = "aiter/__init__.py"
PYBIND_HEADER_PATH = "aiter_meta/csrc/include/rocm_ops.hpp"  # wheel layout
PYBIND_HEADER_PATH_GIT = "csrc/include/rocm_ops.hpp"  # repository layout

PARAM_KINDS = (
    "POSITIONAL_ONLY",
    "POSITIONAL_OR_KEYWORD",
    "VAR_POSITIONAL",
    "KEYWORD_ONLY",
    "VAR_KEYWORD",
)


# ---------------------------------------------------------------- sources


class GitSource:
    """Files of one commit of a bare git mirror."""

    def __init__(self, git_dir: str, commit: str):
        self.git_dir = git_dir
        self.commit = self._git("rev-parse", "--verify", commit + "^{commit}").strip()

    def _git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", self.git_dir, *args],
            check=True, capture_output=True, text=True,
        ).stdout

    def read(self, path: str) -> str | None:
        try:
            return self._git("show", f"{self.commit}:{path}")
        except subprocess.CalledProcessError:
            return None

    def list_files(self, prefix: str) -> list[str]:
        out = self._git("ls-tree", "-r", "--name-only", self.commit, prefix)
        return [line for line in out.splitlines() if line]

    def describe(self) -> dict:
        fmt = "%H%n%cI%n%aI%n%s"
        full, committed, authored, subject = self._git(
            "show", "-s", f"--format={fmt}", self.commit
        ).splitlines()[:4]
        return {
            "kind": "git",
            "repository": "ROCm/aiter",
            "commit": full,
            "commit_date": committed,
            "author_date": authored,
            "subject": subject,
        }


class WheelSource:
    """Files inside a wheel (a zip), read without unpacking or installing it."""

    def __init__(self, wheel_path: str):
        self.wheel_path = wheel_path
        self.zip = zipfile.ZipFile(wheel_path)
        self.names = set(self.zip.namelist())

    def read(self, path: str) -> str | None:
        if path not in self.names:
            return None
        return self.zip.read(path).decode("utf-8", errors="replace")

    def list_files(self, prefix: str) -> list[str]:
        return sorted(n for n in self.names if n.startswith(prefix))

    def describe(self) -> dict:
        name = os.path.basename(self.wheel_path)
        version = name.split("-")[1] if name.count("-") >= 2 else "unknown"
        digest = hashlib.sha256(Path(self.wheel_path).read_bytes()).hexdigest()
        return {
            "kind": "wheel",
            "package": "amd-aiter",
            "version": version,
            "wheel_file": name,
            "wheel_sha256": digest,
        }


class DirSource:
    """Files of an unpacked tree (for example `pip install --target`)."""

    def __init__(self, root: str):
        self.root = Path(root)

    def read(self, path: str) -> str | None:
        file = self.root / path
        return file.read_text(errors="replace") if file.is_file() else None

    def list_files(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if base.is_file():
            return [prefix]
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())

    def describe(self) -> dict:
        version = None
        text = self.read("aiter/_version.py") or ""
        match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
        if match:
            version = match.group(1)
        return {"kind": "directory", "package": "amd-aiter", "version": version}


# ---------------------------------------------------------------- signatures


def _unparse(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def describe_parameters(args: ast.arguments) -> list[dict]:
    """Parameters in call order, each with its kind and default (as source text)."""
    positional = list(args.posonlyargs) + list(args.args)
    # Defaults align with the END of the positional list.
    first_default = len(positional) - len(args.defaults)
    params = []
    for index, arg in enumerate(positional):
        kind = "POSITIONAL_ONLY" if index < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        default = args.defaults[index - first_default] if index >= first_default else None
        params.append(_param(arg, kind, default))
    if args.vararg is not None:
        params.append(_param(args.vararg, "VAR_POSITIONAL", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(_param(arg, "KEYWORD_ONLY", default))
    if args.kwarg is not None:
        params.append(_param(args.kwarg, "VAR_KEYWORD", None))
    return params


def _param(arg: ast.arg, kind: str, default: ast.AST | None) -> dict:
    entry = {"name": arg.arg, "kind": kind}
    if default is not None:
        entry["default"] = _unparse(default)
    if arg.annotation is not None:
        entry["annotation"] = _unparse(arg.annotation)
    return entry


def top_level_functions(source_text: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source_text)
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def find_definitions(source, name: str, expected_path: str) -> list[str]:
    """Files under aiter/ (not tests) that define `name` at top level; expected first."""
    candidates = [expected_path] + [
        p for p in source.list_files("aiter/")
        if p.endswith(".py") and p != expected_path
    ]
    found = []
    for path in candidates:
        text = source.read(path)
        if text is None or f"def {name}(" not in text:
            continue
        try:
            if name in top_level_functions(text):
                found.append(path)
        except SyntaxError:
            continue
    return found


def extract_function(source, name: str, expected_path: str, pybind_text: str | None) -> dict:
    paths = find_definitions(source, name, expected_path)
    if not paths:
        return {"found": False}
    path = paths[0]
    node = top_level_functions(source.read(path))[name]
    entry = {
        "found": True,
        "path": path,
        "line": node.lineno,
        "module": path[:-3].replace("/", "."),
        "decorators": [_unparse(d) for d in node.decorator_list],
        "params": describe_parameters(node.args),
        "returns": _unparse(node.returns),
        "other_definitions": paths[1:],
    }
    if any("compile_ops" in d for d in entry["decorators"]):
        entry["pybind"] = extract_pybind(pybind_text, name)
    return entry


# pybind11: m.def("name", &fn, "doc", py::arg("a"), py::arg("b") = 1, ...);
_PYARG = re.compile(r'py::arg\(\s*"(\w+)"\s*\)\s*(?:=\s*([^,)\\]+?(?:\([^)]*\))?))?\s*[,)\\]')


def extract_pybind(header_text: str | None, name: str) -> dict | None:
    """Argument names/defaults of the compiled op that a compile_ops stub forwards to."""
    if header_text is None:
        return None
    start = header_text.find(f'm.def("{name}"')
    if start < 0:
        return None
    end = header_text.find(";", start)
    block = header_text[start:end + 1]
    params = []
    for match in _PYARG.finditer(block):
        entry = {"name": match.group(1), "kind": "POSITIONAL_OR_KEYWORD"}
        if match.group(2) is not None:
            entry["default"] = match.group(2).strip()
        params.append(entry)
    return {"params": params}


# ---------------------------------------------------------------- exports


def star_imported_modules(init_text: str | None) -> list[str]:
    """Modules that aiter/__init__.py star-imports (their public names become aiter.X)."""
    if init_text is None:
        return []
    modules = []
    for node in ast.parse(init_text).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            if any(alias.name == "*" for alias in node.names):
                modules.append("aiter." + node.module)
    return modules


def add_export_facts(functions: dict, init_text: str | None) -> None:
    star_modules = set(star_imported_modules(init_text))
    for name, entry in functions.items():
        if not entry.get("found"):
            continue
        paths = [f"{entry['module']}.{name}"]
        if entry["module"] in star_modules:
            paths.insert(0, f"aiter.{name}")
        entry["import_paths"] = paths


# ---------------------------------------------------------------- dtypes


def extract_dtypes(text: str | None) -> dict:
    """What aiter.dtypes.fp8 / fp4x2 / fp8_e8m0 / ... mean, as torch names."""
    if text is None:
        return {"found": False}
    tree = ast.parse(text)
    assigns = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    }
    names = {}
    for name, value in assigns.items():
        if name.startswith("_"):
            continue  # private helpers such as the 8-bit fallback
        means = _resolve_dtype(value, assigns)
        if _is_dtype_fact(means):
            names[name] = {"expr": _unparse(value), "means": means}
    return {"found": True, "path": DTYPES_PATH, "names": names}


def _is_dtype_fact(means) -> bool:
    """Keep torch.<dtype> names and the dicts built from them; drop tables, helpers."""
    if isinstance(means, str):
        return means.startswith("torch.")
    return isinstance(means, dict) and "unresolved" not in means


def _resolve_dtype(node: ast.AST, assigns: dict) -> dict | str:
    """Turn the few patterns dtypes.py uses into plain facts."""
    if isinstance(node, ast.Attribute):
        return _unparse(node)  # torch.bfloat16
    if isinstance(node, ast.Name) and node.id in assigns:
        return _resolve_dtype(assigns[node.id], assigns)
    if isinstance(node, ast.Call) and _unparse(node.func) == "getattr" and len(node.args) == 3:
        module, attr, fallback = node.args
        return {
            "if_present": f"{_unparse(module)}.{ast.literal_eval(attr)}",
            "else": _resolve_dtype(fallback, assigns),
        }
    if isinstance(node, ast.Call) and _unparse(node.func) == "get_dtype_fp8":
        table = assigns.get("defaultDtypes")
        per_gfx = {}
        if isinstance(table, ast.Dict):
            for key, value in zip(table.keys, table.values):
                inner = dict(zip(value.keys, value.values)) if isinstance(value, ast.Dict) else {}
                for inner_key, inner_value in inner.items():
                    if ast.literal_eval(inner_key) == "fp8":
                        per_gfx[ast.literal_eval(key)] = _unparse(inner_value)
        fallback = assigns.get("_8bit_fallback")
        return {"per_gfx": per_gfx, "else": _unparse(fallback)}
    return {"unresolved": _unparse(node)}


# ---------------------------------------------------------------- driver


def extract(source, pybind_paths: tuple[str, ...]) -> dict:
    pybind_text = next(
        (text for text in (source.read(p) for p in pybind_paths) if text is not None), None
    )
    functions = {
        name: extract_function(source, name, path, pybind_text)
        for name, path in TARGET_FUNCTIONS.items()
    }
    add_export_facts(functions, source.read(AITER_INIT_PATH))
    return {
        "schema": 1,
        "generated_by": "tools/extract_aiter_api.py",
        "source": source.describe(),
        "param_kinds": list(PARAM_KINDS),
        "functions": functions,
        "dtypes": extract_dtypes(source.read(DTYPES_PATH)),
    }


def output_name(facts: dict) -> str:
    src = facts["source"]
    if src["kind"] == "git":
        return f"aiter_{src['commit'][:10]}.json"
    return f"aiter_pypi_{src['version']}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--git-dir", help="git directory of a ROCm/aiter mirror")
    group.add_argument("--wheel", help="amd-aiter wheel file")
    group.add_argument("--source-dir", help="unpacked tree containing aiter/")
    parser.add_argument("--commit", help="commit to read (with --git-dir)")
    parser.add_argument("--out-dir", default="tools/aiter_api")
    args = parser.parse_args(argv)

    if args.git_dir:
        if not args.commit:
            parser.error("--git-dir needs --commit")
        source = GitSource(args.git_dir, args.commit)
        pybind_paths = (PYBIND_HEADER_PATH_GIT,)
    elif args.wheel:
        source = WheelSource(args.wheel)
        pybind_paths = (PYBIND_HEADER_PATH,)
    else:
        source = DirSource(args.source_dir)
        pybind_paths = (PYBIND_HEADER_PATH, PYBIND_HEADER_PATH_GIT)

    facts = extract(source, pybind_paths)
    missing = [n for n, f in facts["functions"].items() if not f.get("found")]
    out = Path(args.out_dir) / output_name(facts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(facts, indent=1, sort_keys=False) + "\n")
    print(f"wrote {out}" + (f" (NOT FOUND: {', '.join(missing)})" if missing else ""))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
