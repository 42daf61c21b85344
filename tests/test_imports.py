"""The repository's module graph: no import cycle, and no file that edits the import path.

Every .py file of the checkout (git's tracked and untracked-but-not-ignored files; every file
below the root where the root is not a git checkout's top: no git, or a copy inside another
repository) is parsed with ast, and each import, wherever it stands
(module level or inside a function: a lazy import runs all the same), is resolved to the
repository's module it names. Module names are those the code imports by: the root's files
and the packages bench and tools from the root (pytest.ini's pythonpath, `python3 -m`), the
test files from tests/ (pytest puts that folder first on the path). `aiter` is a third-party
package whatever provides it, ROCm's or the CPU stand-in of tests/simulated_rocm: an import
of it is not an edge, while the stand-in's own imports are.

Host logic: reads source files only."""
import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.fast

# Folders whose files are imported by the names below them, deepest first.
IMPORT_ROOTS = ("tests", "")
NOT_SOURCE = ("results/", "dev_scratch/", ".git/")


def git_listing(root: Path) -> list[str] | None:
    """The .py files git tracks or would add (not ignored) below root, where root is the top of
    a git checkout; None where it is not: no git, or a copy inside another repository, where
    git would answer for that repository (an ignored folder of it lists nothing)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
        if Path(top).resolve() != root.resolve():
            return None
        return subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


def source_files(root: Path) -> list[str]:
    """The checkout's .py files, relative to root: git's listing where root is a checkout's top,
    else every file below root outside hidden folders."""
    listed = git_listing(root)
    if listed is None:
        listed = [str(path.relative_to(root)) for path in root.rglob("*.py")
                  if not any(part.startswith(".") for part in path.relative_to(root).parts)]
    return sorted(name for name in listed
                  if not name.startswith(NOT_SOURCE) and "__pycache__" not in name and (root / name).is_file())


def module_name(relative: str) -> str:
    """The name a file is imported by: its path below the deepest import root, dotted; a
    package's __init__.py is the package."""
    path = Path(relative)
    for root in IMPORT_ROOTS:
        if root and path.parts[0] == root:
            path = path.relative_to(root)
            break
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(tree: ast.AST, name: str, is_package: bool) -> list[tuple[str, tuple]]:
    """(module, names taken from it) of every import in the tree; relative imports resolved
    against the module's own package."""
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[:len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, tuple(alias.name for alias in node.names)))
    return found


def resolve(target: str, names: tuple, modules: set) -> set:
    """The repository's modules an import of `names` from `target` loads: each name that is
    a submodule, else the module itself (its longest prefix that is one of ours)."""
    resolved = {f"{target}.{n}" for n in names if f"{target}.{n}" in modules}
    if len(resolved) < len(names) or not names:
        parts = target.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in modules:
                resolved.add(".".join(parts[:end]))
                break
    return resolved


def import_graph(root: Path) -> dict:
    """module -> the repository's modules it imports."""
    files = {module_name(f): f for f in source_files(root)}
    modules = set(files)
    graph = {}
    for name, relative in files.items():
        tree = ast.parse((root / relative).read_text(), relative)
        edges = set()
        for target, names in imported_names(tree, name, relative.endswith("__init__.py")):
            if target.split(".")[0] == "aiter":
                continue
            edges |= resolve(target, names, modules)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict) -> list[list]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_the_repositorys_modules():
    graph = import_graph(REPO_ROOT)
    assert "tools.gfx950_emu.machine" in graph and "submission" in graph  # the tree was read
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(
        " <-> ".join(component) + ": " + "; ".join(f"{a} -> {sorted(graph[a] & set(component))}" for a in component)
        for component in found)



@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_copy_inside_another_repositorys_ignored_folder_reads_its_own_files(tmp_path):
    """Inside an ignored folder of an outer repository, git answers for the outer one and lists
    nothing: the copy's files are read from its folder instead, and give the checkout's graph.
    Where the copy is a checkout of its own, git's listing still decides (its ignored files
    are left out)."""
    def git(*args, cwd):
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    outer = tmp_path / "outer"
    copy = outer / "scratch" / "tree"
    for name in source_files(REPO_ROOT):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / name, copy / name)
    git("init", "-q", cwd=outer)
    (outer / ".gitignore").write_text("scratch/\n")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=copy,
                            capture_output=True, text=True, check=True).stdout
    assert listed == ""   # the situation: git speaks for the outer repository
    assert git_listing(copy) is None
    assert source_files(copy) == source_files(REPO_ROOT)
    assert import_graph(copy) == import_graph(REPO_ROOT)

    git("init", "-q", cwd=copy)
    (copy / ".gitignore").write_text("submission.py\n")
    assert git_listing(copy) is not None
    assert source_files(copy) == [name for name in source_files(REPO_ROOT) if name != "submission.py"]


def test_the_cycle_check_finds_a_cycle(tmp_path):
    # A package whose state imports its semantics and back, beside a module that is fine.
    (tmp_path / "tools" / "emu").mkdir(parents=True)
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "emu" / "__init__.py").write_text("from .state import Wave\n")
    (tmp_path / "tools" / "emu" / "state.py").write_text("class Wave:\n    def run(self):\n"
                                                         "        from . import semantics\n")
    (tmp_path / "tools" / "emu" / "semantics.py").write_text("from .state import Wave\n")
    (tmp_path / "task.py").write_text("import os\nfrom tools.emu import Wave\n")
    graph = import_graph(tmp_path)
    assert graph["task"] == {"tools.emu"} and graph["tools.emu"] == {"tools.emu.state"}
    assert cycles(graph) == [["tools.emu.semantics", "tools.emu.state"]]


def edits_the_import_path(tree: ast.AST) -> bool:
    """Whether the code changes sys.path (insert, append, extend, an assignment to it or a
    slice of it)."""
    def is_sys_path(node):
        return (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                and node.value.id == "sys")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value) \
                and node.func.attr in ("insert", "append", "extend"):
            return True
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if is_sys_path(target) or (isinstance(target, ast.Subscript) and is_sys_path(target.value)):
                    return True
    return False


def test_no_file_edits_the_import_path():
    # The root is on the path through pytest.ini and `python3 -m`; nothing else sets it.
    editing = [f for f in source_files(REPO_ROOT) if edits_the_import_path(ast.parse((REPO_ROOT / f).read_text()))]
    assert editing == []
    assert edits_the_import_path(ast.parse("import sys\nsys.path[:0] = ['bench']\n"))
    assert edits_the_import_path(ast.parse("import sys\nsys.path.insert(0, 'bench')\n"))
    assert not edits_the_import_path(ast.parse("import sys\nprint(sys.path)\n"))

