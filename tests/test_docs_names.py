"""What the README, docs/ and bench/README.md name exists in the tree.

- `submission.NAME`: a top-level name of submission.py (read with ast, as it stands now).
- A repository path (results/..., bench/..., tools/..., docs/..., tests/...), in backticks, in
  prose or as a markdown link's target (relative to the page): a file or folder. A glob must
  match something; a placeholder (`results/<run>/`) must have its fixed part; URLs and paths of
  other repositories (after a `/`) are not the tree's.
- `python3 -m MODULE` (or `PY -m`, a venv's python): a module of the tree (bench.*, tools.*,
  tests.*, the root's files), or one of the outside modules the docs run (OUTSIDE_MODULES). The
  bench.* and tools.* commands that bench/ and tools/ sources name are held to the same rule.
And results/ holds no program: what ran is in bench/ or tools/, or its README says why not.

Host logic: reads text files; submission.py is parsed, not imported."""
import ast
import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.fast

# The folders of the tree a path in the docs starts with.
ROOTS = ("results", "bench", "tools", "docs", "tests")
# Modules from outside the tree that the docs run with `python3 -m`.
OUTSIDE_MODULES = {"pip", "pytest", "venv", "kernelguard"}

# A path of the tree: a root folder, then path characters (globs and <placeholders> included).
# Not after a word character, `.`, `/`, `$` or `-`: that is a URL, another repository's path
# (`ROCm/aiter aiter/ops/...` starts at `aiter`), `$PWD/tests/...` or a longer name.
BARE_PATH = re.compile(r"(?<![\w./$-])((?:%s)/[\w./*?<>-]*)" % "|".join(ROOTS))
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)   # where `f[grid](...)` is code, not a link
URL = re.compile(r"^[a-z][a-z0-9+.-]*:")
SUBMISSION_ATTRIBUTE = re.compile(r"(?<![\w.])submission\.([A-Za-z_]\w*)")
MODULE_RUN = re.compile(r"(?:\bpython3?(?:\.\d+)?|\bPY)[\"']?\s+-m\s+([A-Za-z_][\w.]*)")  # "$venv/bin/python" -m too
PLACEHOLDER = re.compile(r"<[^>]*>|^[A-Z][A-Z0-9_]*$")   # `<run>`, or a name in capitals: NAME, DIR
GLOB = re.compile(r"[*?]")


def documents(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "bench" / "README.md"]


def top_level_names(source: str) -> set[str]:
    """The names a module defines at its top level: functions, classes, assignments and
    imports, including those under a top-level if / try / with."""
    names = set()

    def targets(node):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                targets(element)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    targets(target)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets(node.target)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(ast.parse(source).body)
    return names


def path_problem(path: str, base: Path) -> str | None:
    """Why `path` (relative to base) names nothing in the tree; None where it names something.
    A glob must match; a placeholder's fixed part before it must exist."""
    path = path.rstrip(".,:;")
    if not path:
        return None
    parts = Path(path).parts
    fixed = next((i for i, part in enumerate(parts) if PLACEHOLDER.search(part)), len(parts))
    if fixed < len(parts):
        target = base.joinpath(*parts[:fixed])
        return None if target.exists() else f"{path} (before its placeholder)"
    if GLOB.search(path):
        return None if list(base.glob(path)) else f"{path} (a glob that matches nothing)"
    return None if (base / path).exists() else path


def module_problem(module: str, root: Path) -> str | None:
    """Why `python3 -m module` would not find it: not a module of the tree, nor one of
    OUTSIDE_MODULES. A placeholder part (bench.NAME) needs only its package."""
    parts = module.split(".")
    if parts[0] in OUTSIDE_MODULES:
        return None
    fixed = next((i for i, part in enumerate(parts) if PLACEHOLDER.search(part)), len(parts))
    base = root.joinpath(*parts[:fixed])
    if fixed < len(parts):
        return None if base.is_dir() else module
    if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() or (base / "__main__.py").is_file():
        return None
    return module


def document_problems(document: Path, text: str, root: Path, submission_names: set[str]) -> list[str]:
    """Every name in a document's text that does not exist: submission attributes, paths
    (bare ones from the root, link targets from the document's folder) and modules."""
    problems = [f"submission.{name}" for name in SUBMISSION_ATTRIBUTE.findall(text)
                if name != "py" and name not in submission_names]
    problems += [problem for path in BARE_PATH.findall(text) if (problem := path_problem(path, root))]
    for target in LINK.findall(CODE.sub("", text)):
        target = target.split("#")[0]
        if target and not URL.match(target) and (problem := path_problem(target, document.parent)):
            problems.append(f"link {problem}")
    problems += [f"python3 -m {problem}" for module in MODULE_RUN.findall(text)
                 if (problem := module_problem(module, root))]
    return sorted(set(problems))


def submission_top_level_names() -> set[str]:
    return top_level_names((REPO_ROOT / "submission.py").read_text())


@pytest.mark.parametrize("document", documents(REPO_ROOT), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_name_in_the_docs_exists(document):
    problems = document_problems(document, document.read_text(), REPO_ROOT, submission_top_level_names())
    assert not problems, f"{document.relative_to(REPO_ROOT)} names what does not exist: {problems}"


def test_every_command_in_the_bench_and_tools_sources_exists():
    """`python3 -m bench.NAME` / `tools.NAME` in bench/ and tools/ (their docstrings, usage
    lines, messages; there `python3 -m module` may stand for any module)."""
    sources = sorted(p for folder in ("bench", "tools") for pattern in ("*.py", "*.sh")
                     for p in (REPO_ROOT / folder).rglob(pattern) if "__pycache__" not in p.parts)
    named = {(source.relative_to(REPO_ROOT), module) for source in sources
             for module in MODULE_RUN.findall(source.read_text()) if module.startswith(("bench.", "tools."))}
    assert any(module.startswith("bench.") for _, module in named), "no command found: the pattern is out of date"
    missing = sorted(f"{source}: python3 -m {module}" for source, module in named if module_problem(module, REPO_ROOT))
    assert not missing, missing


def test_the_checks_find_a_wrong_name_and_pass_the_right_ones():
    """The helpers on a page of deliberate mistakes beside names that are right, placeholders,
    globs and URLs, against this tree and a small stand-in for submission.py."""
    names = top_level_names("import torch as th\nfrom x import y\nA, (B, C) = 1, (2, 3)\nD: int = 4\n"
                            "def offered_forms(): pass\nclass Plan: pass\n"
                            "try:\n    import gluon\nexcept ImportError:\n    HAS_GLUON = False\n"
                            "if HAS_GLUON:\n    def gluon_kernel(): pass\n"
                            "def outer():\n    inner = 1\n")
    assert names == {"th", "y", "A", "B", "C", "D", "offered_forms", "Plan", "gluon", "HAS_GLUON",
                     "gluon_kernel", "outer"}
    page = REPO_ROOT / "docs" / "example.md"
    text = """
Right: `submission.offered_forms`, submission.py, `submission.Plan.key`, `bench/README.md`,
results/2026-12-03-h200-hopper-bounds/run2/report/report.json, [setup](setup.md#optional-programs),
[tools](../tools), `results/<run>/README.md`, `DIR/report.json`, `tests/test_*.py`,
https://github.com/gpu-mode/popcorn-cli/tree/main/docs/profiling.md, ROCm/aiter aiter/ops/triton,
`PYTHONPATH=$PWD/tests/simulated_rocm`, `python3 -m bench.report measure`, `python3 -m pytest -q -m fast tests`,
`python3 -m bench.NAME`, `PY -m tools.compile_target gfx950`, `"$venv/bin/python" -m tools.mutants list`, [popcorn-cli](https://github.com/gpu-mode/popcorn-cli),
code that looks like a link: `kernel[grid](...)`, `a[i](no-such-page.md)`.
Wrong: `submission._offered_forms`, `results/2026-12-03-h200-hopper-bounds/scripts/exp_sweep.py`,
see bench/no_such_command.py. [a page](no-such-page.md), `tests/test_nothing_*.py`,
`results/1999-01-01-nowhere/<run>/`, `python3 -m dev_scratch.exp_compile`, `"$venv/bin/python" -m bench.no_such`.
"""
    assert document_problems(page, text, REPO_ROOT, names) == sorted([
        "submission._offered_forms",
        "results/2026-12-03-h200-hopper-bounds/scripts/exp_sweep.py",
        "bench/no_such_command.py",
        "link no-such-page.md",
        "tests/test_nothing_*.py (a glob that matches nothing)",
        "results/1999-01-01-nowhere/<run>/ (before its placeholder)",
        "python3 -m dev_scratch.exp_compile",
        "python3 -m bench.no_such"])


def test_results_hold_no_program():
    """A program that produced a result lives in bench/ or tools/; results/ keeps what it wrote."""
    programs = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "results").rglob("*")
                      if p.suffix in (".py", ".sh") and p.is_file())
    assert not programs, programs
