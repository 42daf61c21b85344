"""What each GPU architecture has is one record (submission.GpuArch, ARCHITECTURES), which the
host reads instead of comparing architecture names; the autopick's candidates for a shape
on an architecture are answerable on any machine (bench/candidates.py), and the README's
table of them is that command's output. Host logic: no tensor is made."""
import ast
import os
import subprocess
import sys

import pytest
import torch

import submission as sub
from conftest import REPO_ROOT

pytestmark = pytest.mark.fast


def test_each_architecture_record_says_what_the_host_relies_on():
    gfx950, gfx942, sm_90 = (sub.arch_record(name) for name in ("gfx950", "gfx942", "sm_90"))
    assert (gfx950.warp_size, gfx950.gluon_arch, gfx950.wave_fences, gfx950.gfx950_convert) == (64, "cdna4", True, True)
    assert gfx950.split_rule is sub.fill_each_cu_splits and gfx950.amd_options and gfx950.in_kernel_combine
    assert gfx942.aiter_fp8_dtype == torch.float8_e4m3fnuz and gfx942.aiter_min_splits == 16 and gfx942.wave_fences
    assert not gfx942.gluon_arch and not gfx942.gfx950_convert
    assert (sm_90.warp_size, sm_90.gluon_arch, sm_90.exclusive_gluon_archs) == (32, "ampere", ("hopper",))
    assert not sm_90.wave_fences and sm_90.in_kernel_combine and sm_90.split_rule is sub.fill_twice_splits
    # the vendors' records for architectures not named
    assert sub.arch_record("sm_80").gluon_arch == "ampere" and not sub.arch_record("sm_80").exclusive_gluon_archs
    assert sub.arch_record("sm_100").gluon_arch == "ampere" and sub.arch_record("sm_75").gluon_arch == ""
    other_amd = sub.arch_record("gfx90a")
    assert other_amd.warp_size == 64 and not other_amd.in_kernel_combine and not other_amd.wave_fences
    assert sub.arch_record("").in_kernel_combine and sub.arch_record("").gluon_arch == ""  # the interpreter
    with pytest.raises(ValueError, match="unknown GPU architecture 'tpu'"):
        sub.arch_record("tpu")


def test_a_tile_launches_its_warps_on_each_architecture():
    """A Triton form's num_warps is Triton's (the GPU's own warps); a Gluon form's threads
    are fixed by its layouts: 4 gfx950 waves or 8 NVIDIA warps for the same 256 threads."""
    triton_tile, gluon_tile = sub.Tile(32, num_stages=3, num_warps=4), sub.Tile(128, num_stages=2, threads=256)
    assert [triton_tile.launch_warps(sub.arch_record(a)) for a in ("gfx950", "sm_90")] == [4, 4]
    assert [gluon_tile.launch_warps(sub.arch_record(a)) for a in ("gfx950", "sm_90")] == [4, 8]
    for form in sub.KERNEL_FORMS:
        for tile in form.tiles:
            assert bool(tile.num_warps) != bool(tile.threads), (form.name, tile)  # one measure, not both
            assert bool(tile.threads) == (form.language == "gluon"), (form.name, tile)


# The host functions allowed to compare architecture names: the vendors' rule.
COMPARING_ARCHS = {"arch_record"}


def _is_arch_name(node) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("gfx", "sm_"))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_arch_name(element) for element in node.elts)
    return False


def _compares_architecture_names(node) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.Compare) and any(_is_arch_name(side) for side in [part.left, *part.comparators]):
            return True
        if (isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute)
                and part.func.attr in ("startswith", "endswith") and any(map(_is_arch_name, part.args))):
            return True
    return False


def test_no_host_function_compares_architecture_names():
    """After `# 3. Host`, no function or class compares an architecture's name (== "gfx950",
    in ("gfx942", ...), .startswith("sm_")) but the vendors' rule: every choice reads a
    record. (ARCHITECTURES and the form records' places name architectures: data.)"""
    source = (REPO_ROOT / "submission.py").read_text()
    host_starts = source[:source.index("# 3. Host")].count("\n")
    found = [node.name for node in ast.parse(source).body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.lineno > host_starts
             and node.name not in COMPARING_ARCHS and _compares_architecture_names(node)]
    assert not found, f"host code comparing architecture names: {found}"
    assert _compares_architecture_names(ast.parse('if arch == "gfx950": pass'))  # what it looks for
    assert _compares_architecture_names(ast.parse('arch.startswith("sm_")'))


def test_the_candidates_command_lists_the_autopicks_order_without_a_gpu():
    from bench import candidates
    mi355x = candidates.candidates("gfx950", 4, 1024)
    assert [c.route for c in mi355x][:1] == ["aiter_fp8"] and mi355x[-1].label == "torch[bf16]"
    kernel_forms = list(dict.fromkeys(f"{c.route}:{c.form}" for c in mi355x if c.route.startswith("triton_")))
    gluon = ["triton_mxfp4:gluon", "triton_fp8:gluon"] if sub.gluon_forms_here("gfx950") else []
    assert [f for f in kernel_forms if f.endswith(":gluon")] == gluon
    assert kernel_forms.index("triton_mxfp4:waves") < kernel_forms.index("triton_fp8:e4m3_waves")
    no_aiter = candidates.candidates("gfx950", 4, 1024, aiter=False)
    assert [c.label for c in no_aiter] == [c.label for c in mi355x if c.route != "aiter_fp8"]
    h200 = candidates.candidates("sm_90", 256, 8192)
    assert not any(c.route == "aiter_fp8" for c in h200)
    kernels = [c.label for c in h200 if c.route.startswith("triton_")]
    assert kernels == [sub.launch_label(fmt, launch) for fmt in ("mxfp4", "fp8")
                       for launch in sub.launch_candidates(fmt, 256, 8192, 132, "sm_90")]
    assert h200[-1].label == "torch[bf16]" and len(h200) == len(kernels) + 1


def test_the_readme_table_is_the_commands_output():
    from bench import candidates
    readme = (REPO_ROOT / "README.md").read_text()
    begin, end = "<!-- bench.candidates --markdown -->\n", "\n<!-- end of bench.candidates --markdown -->"
    assert begin in readme and end in readme
    assert readme[readme.index(begin) + len(begin):readme.index(end)] == candidates.markdown()


def test_the_command_names_a_shape_it_cannot_read():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "bench.candidates", "--arch", "gfx950", "--shape", "4by1024"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "a shape is BATCHxKV_LEN" in run.stderr, run.stderr
    run = subprocess.run([sys.executable, "-m", "bench.candidates", "--arch", "sm_80", "--shape", "4x1024"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "give --sms for sm_80" in run.stderr, run.stderr
