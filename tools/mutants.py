"""Named edits of submission.py's text, all in this one file: deliberate slips that a check must
catch, and design alternatives measured against the committed code (kind "variant").

Each edit names an anchor, text that occurs in submission.py exactly `count` times (every
occurrence is replaced). When submission.py changes so that an anchor no longer occurs as
often, applying the mutant fails with MutantDoesNotApply, naming the mutant and the anchor:
a check can never silently lose the slip that shows it can fail. Changing submission.py
means updating the anchors here, nowhere else; tests/test_mutants.py applies every one.

    python3 -m tools.mutants list                          every mutant, and whether it applies
    python3 -m tools.mutants check NAME [PYTEST_ARGS ...]  do the tests catch it? (CPU)
    python3 -m tools.mutants check --tests-from COMMIT NAME [PYTEST_ARGS ...]
    python3 -m tools.mutants write NAME DIR                DIR/submission.py with the mutant

`check` copies the tree (tracked and untracked files, .git left out) to a temporary folder
(with --tests-from, its tests/, bench/ and tools/ as of COMMIT: what the same slip met before
a change to the tests), applies the mutant to its submission.py, runs `python3 -m pytest -q
-p no:cacheprovider PYTEST_ARGS` there and prints pytest's summary. Exit status: 0 when the
tests FAILED (the slip was caught), 1 when they passed, 2 when the mutant does not apply.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBMISSION = ROOT / "submission.py"


@dataclasses.dataclass(frozen=True)
class Edit:
    anchor: str        # text of submission.py
    replacement: str
    count: int = 1     # how often the anchor occurs; every occurrence is replaced


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    purpose: str       # what it changes, and for a slip the check that must catch it
    edits: tuple
    kind: str = "slip"


class MutantDoesNotApply(ValueError):
    """An anchor of a mutant does not occur in submission.py as often as its edit says."""


_MUTANTS = (
    # ---- outputs wrong by a factor: the verifier and the tests' own checks must see them
    # (results/2026-12-01-cpu-mutations) ----
    Mutant("torch_route_x0.9", "every output of the torch route scaled by 0.9 (the verifier's torch bound rejects it)",
           (Edit("        return self._attend_into(_new_output(q), q, kv_data, qo_indptr, kv_indptr)\n",
                 "        return self._attend_into(_new_output(q), q, kv_data, qo_indptr, kv_indptr).mul_(0.9)\n"),)),
    Mutant("triton_route_x0.9", "every output of every Triton form scaled by 0.9",
           (Edit("        self.launches.run(key, tensors, lambda: self._calls(*tensors))\n        return out\n",
                 "        self.launches.run(key, tensors, lambda: self._calls(*tensors))\n"
                 "        return out.mul_(0.9)\n"),)),
    Mutant("e4m3_waves_x0.9", "only the fp8 e4m3_waves form scaled by 0.9: within that form's verifier bound (0.11)",
           (Edit("        self.launches.run(key, tensors, lambda: self._calls(*tensors))\n        return out\n",
                 "        self.launches.run(key, tensors, lambda: self._calls(*tensors))\n"
                 "        return out.mul_(0.9) if self.form == 'e4m3_waves' else out\n"),)),
    Mutant("a16w8_x0.9", "aiter's a16w8 form scaled by 0.9: within the fp8 format's bound (0.11) it is judged by",
           (Edit("            reduce_final_map=self.reduce_final_map, reduce_partial_map=self.reduce_partial_map)\n"
                 "        return out\n",
                 "            reduce_final_map=self.reduce_final_map, reduce_partial_map=self.reduce_partial_map)\n"
                 "        return out if self.q_in_fp8 else out.mul_(0.9)\n"),)),
    Mutant("served_output_x0.9", "the served output scaled by 0.9 after the autopick verified the route: only the "
                                 "tests' own check against exact attention can see it",
           (Edit("            return plan.run(q, kv_data, qo_indptr, kv_indptr)\n",
                 "            return plan.run(q, kv_data, qo_indptr, kv_indptr).mul_(0.9)\n"),)),
    Mutant("config_checks_dropped", "validate_shapes without its kv_lora_rank and qk_rope_head_dim checks",
           (Edit('                "kv_lora_rank": V_HEAD_DIM, "qk_rope_head_dim": QK_HEAD_DIM - V_HEAD_DIM,\n', ""),)),
    Mutant("fallback_loosened", "an unmeasured form judged by the loosest bound of all instead of its format's",
           (Edit('    return FORMAT_ERROR_BOUNDS[kv_format], f"{kv_format} format bound',
                 '    return ErrorBound(1.0, 10.0), f"{kv_format} format bound'),)),

    # ---- the launches a runner builds once and launches again (tests/test_host_launches.py) ----
    Mutant("launches_kept_for_moved_tensors",
           "a runner's launches built on its first call and launched again whatever the later calls' tensors: a "
           "KV buffer at another address read through the first call's TMA descriptors (or pointer)",
           (Edit("        if key != self.key:\n            self._bind(",
                 "        if self.key is None:\n            self._bind("),)),
    Mutant("strides_left_out_of_the_launch_key",
           "the launches' key without the tensors' strides: Q at the same address with other strides read with "
           "the first call's",
           (Edit("    return tuple([(t.data_ptr(), t.shape, t.stride()) for t in tensors])",
                 "    return tuple([(t.data_ptr(), t.shape) for t in tensors])"),)),
    Mutant("fallback_past_a_capture_failure",
           "Plan.fall_back serving the next runner after a capture failure that is not worded as a device fault "
           "(Triton's launcher's; tests/test_host_launches.py)",
           (Edit("        if _never_hidden(error) or len(self.runners) < 2:",
                 "        if _is_device_fault(error) or len(self.runners) < 2:"),)),

    # ---- memory safety: the interpreter's address check and the GPU's fences
    # (tests/test_memory_safety_interpreter.py, tests/test_memory_safety_gpu.py) ----
    Mutant("row_clamp_cut_by_one_row",
           "every form's row clamp cut by one row: the tile rows past a split's end read row hi (one past the "
           "split's last row) instead of repeating row hi - 1; where a split ends at the KV buffer's last row, that "
           "is one row past the buffer. The MXFP4 bf16 form masks its loads by row instead of clamping; the fp8 Gluon "
           "form's clamp (_gluon_tile_rows) lets a tile's rows reach row hi",
           (Edit("rows = tl.minimum(tl.arange(0, BLOCK_N), hi - 1 - start)",
                 "rows = tl.minimum(tl.arange(0, BLOCK_N), hi - start)"),
            Edit("last_row = tl.minimum(hi - 1 - start, GROUPS * TOKENS - 1)",
                 "last_row = tl.minimum(hi - start, GROUPS * TOKENS - 1)"),
            Edit("rows = tl.minimum(start + tl.arange(0, BLOCK_N), hi - 1).to(tl.int64)",
                 "rows = tl.minimum(start + tl.arange(0, BLOCK_N), hi).to(tl.int64)"),
            Edit("= _load_mxfp4_blocks(kv_ptr, sc_ptr, rows, row_ok, stride_kv",
                 "= _load_mxfp4_blocks(kv_ptr, sc_ptr, rows, rows <= hi, stride_kv", 2),
            Edit("return first, gl.minimum(gl.maximum(hi - 1 - first, 0), BLOCK_N - 1)",
                 "return first, gl.minimum(gl.maximum(hi - first, 0), BLOCK_N - 1)"))),
    Mutant("output_row_shifted_by_one",
           "every store of the output one row further on: the last sequence's row lands one row past the output "
           "tensor (also the gfx950 emulator's per-access check, on the Gluon form's in-kernel merge)",
           (Edit(" _store_rows(out_ptr, q_row, stride_o_tok", " _store_rows(out_ptr, q_row + 1, stride_o_tok", 2),
            Edit("tl.store(out_ptr + q_row.to(tl.int64) * stride_o_tok",
                 "tl.store(out_ptr + (q_row + 1).to(tl.int64) * stride_o_tok"),
            Edit("out_base = (out_ptr + q_row.to(gl.int64) * stride_o_tok",
                 "out_base = (out_ptr + (q_row + 1).to(gl.int64) * stride_o_tok"),
            Edit("_gluon_store_rows(out_ptr, q_row, stride_o_tok", "_gluon_store_rows(out_ptr, q_row + 1, stride_o_tok",
                 2))),

    Mutant("mxfp4_tile_bound_one_row_too_far",
           "the MXFP4 Gluon form's bound on its tiles one row too far: a tile at the KV buffer's end moved back to "
           "end one row past it, and a buffer shorter than a tile clamped to one row past its end (only the gfx950 "
           "emulator's per-access check sees it: the row read past the end is an invalid row's)",
           (Edit("    return gl.maximum(start - gl.maximum(kv_rows - BLOCK_N, 0), 0)",
                 "    return gl.maximum(start - gl.maximum(kv_rows - BLOCK_N + 1, 0), 0)"),
            Edit("rows = gl.minimum(_gluon_axis2(ROWS, 0, layout), kv_rows - 1)",
                 "rows = gl.minimum(_gluon_axis2(ROWS, 0, layout), kv_rows)"),
            Edit("rows = gl.minimum(_gluon_axis2(BLOCK_N, 1, layout), kv_rows - 1) * stride_sr",
                 "rows = gl.minimum(_gluon_axis2(BLOCK_N, 1, layout), kv_rows) * stride_sr"))),
    Mutant("mxfp4_valid_rows_one_sided",
           "the MXFP4 Gluon form's row validity without the tile's shift: the rows a tile at the buffer's end is "
           "moved back over (those of the tile before it) count twice",
           (Edit("    return (rows - shift).to(gl.uint32) < gl.maximum(hi - start, 0).to(gl.uint32)",
                 "    return rows < hi - start"),)),

    # ---- the in-kernel combine's release and acquire on gfx950
    # (bench/combine_release.py, tests/test_combine_release.py, the gfx950 emulator) ----
    Mutant("combine_released_by_one_thread_a_program",
           "gfx950's in-kernel combine without its per-wave fences, as on NVIDIA: one thread's release after a "
           "barrier, the other waves' partial stores possibly still in flight (the emulator's stale global read; "
           "bench/combine_release.py's outstanding-at-barrier), and only that thread's wave acquires",
           (Edit("each_wave_fences=arch.wave_fences)", "each_wave_fences=False)"),)),
    Mutant("wave_fence_without_its_store_wait",
           "the per-wave release fence without its wait for the wave's stores (s_waitcnt lgkmcnt(0) alone): they "
           "may still be in flight when thread 0 arrives (the emulator's stale global read; the inline-asm tie to "
           "LLVM's fence)",
           (Edit('_WAVE_RELEASE_ASM = tl.constexpr("buffer_wbl2 sc1\\ns_waitcnt vmcnt(0) lgkmcnt(0)")',
                 '_WAVE_RELEASE_ASM = tl.constexpr("buffer_wbl2 sc1\\ns_waitcnt lgkmcnt(0)")'),)),
    Mutant("combine_acquire_dropped",
           "the merging program's per-wave acquire dropped: its waves but the one that took the count back read "
           "the partials unordered",
           (Edit('_WAVE_ACQUIRE_ASM = tl.constexpr("s_waitcnt vmcnt(0) lgkmcnt(0)\\nbuffer_inv sc1")',
                 '_WAVE_ACQUIRE_ASM = tl.constexpr("s_waitcnt vmcnt(0) lgkmcnt(0)")'),)),

    # ---- the Gluon forms' parallel merge (KernelForm.merge "parallel"): the gfx950 emulator
    # (tests/test_gfx950_emulator.py), tests/test_rules.py (the rules) ----
    Mutant("parallel_merge_drops_the_last_split",
           "the parallel merge weighs one split too few (the last split's partial left out)",
           (Edit("used = gl.expand_dims(splits < gl.minimum(recorded, num_splits), 1)",
                 "used = gl.expand_dims(splits < gl.minimum(recorded, num_splits) - 1, 1)"),)),
    Mutant("parallel_merge_weight_written_again",
           "the Gluon parallel merge weighs the splits by its own exp2 instead of the rule (_merge_weight): an "
           "empty sequence's lse are all -inf, its weights NaN",
           (Edit("w = _merge_weight(lse, gl.expand_dims(gl.max(lse, 0), 0))",
                 "w = gl.exp2(lse - gl.expand_dims(gl.max(lse, 0), 0))"),)),
    Mutant("gfx950_forms_merge_in_a_loop",
           "the Gluon forms' last program merges a split at a time (KernelForm.merge \"loop\", the Hopper forms')",
           (Edit("def _merge_splits(form: KernelForm, launch) -> int:\n",
                 "def _merge_splits(form: KernelForm, launch) -> int:\n"
                 "    form = dataclasses.replace(form, merge=\"loop\")\n"),)),

    # ---- what only the gfx950 emulator runs (tests/test_gfx950_emulator.py) ----
    Mutant("gluon_ring_reads_the_stage_being_filled",
           "the Gluon ring's read takes the stage its copies are still filling (an LDS race)",
           (Edit("        k_nope = nope_ring.index(tile % STAGES)\n", "        k_nope = nope_ring.index(ahead)\n"),
            Edit("        s = _gluon_scores(q_nope, q_rope, k_nope, rope_ring.index(tile % STAGES), ARCH",
                 "        s = _gluon_scores(q_nope, q_rope, k_nope, rope_ring.index(ahead), ARCH"))),
    Mutant("subtracted_max_unguarded", "the merges' and the softmax step's -inf guard dropped: an empty part or "
                                       "a head with nothing seen yet subtracts -inf (inf - inf = NaN)",
           (Edit('    return tl.where(m == float("-inf"), 0.0, m)', "    return m"),)),
    Mutant("q_e8m0_scale_one_step_off", "Q's e8m0 block scale for mfma_scaled one step off",
           (Edit("inverse = gl.expand_dims(_e8m0_of(q_inverse), 1)",
                 "inverse = gl.expand_dims(_e8m0_of(q_inverse) + 1, 1)"),)),

    # ---- gfx950's convert (v_cvt_scalef32_pk_bf16_fp4) as inline asm: the LLVM tie of
    # tests/test_gfx950_inline_asm.py, and the emulator for the first ----
    Mutant("convert_op_sel_1_2_swapped",
           "the convert's text (the Triton wave form's and the Gluon MXFP4 form's) with the byte selects (op_sel) of "
           "results 1 and 2 swapped; the interpreter's tests run the bit-operation decode instead and miss it",
           (Edit("$1, $4, $5 op_sel:[1,0,0]", "$1, $4, $5 op_sel:[0,1,0]"),
            Edit("$2, $4, $5 op_sel:[0,1,0]", "$2, $4, $5 op_sel:[1,0,0]"))),
    Mutant("convert_op_sel_0_3_swapped", "the convert's text with the byte selects of results 0 and 3 swapped",
           (Edit('$0, $4, $5\\n"', '$0, $4, $5 op_sel:[1,1,0]\\n"'),
            Edit("$3, $4, $5 op_sel:[1,1,0]", "$3, $4, $5"))),
    Mutant("convert_operands_swapped", "the convert's text with its word and scale operands swapped",
           (Edit("$4, $5", "$5, $4", 4),)),
    Mutant("convert_arguments_swapped", "the Triton convert's word and scale arguments swapped",
           (Edit("[words, scale]", "[scale, words]"),)),
    Mutant("convert_scale_not_in_the_exponent", "the Triton convert's scale not shifted into the fp32 exponent",
           (Edit("<< 23)[:, :, None]", "<< 16)[:, :, None]"),)),
    Mutant("convert_outputs_not_early_clobber", "the convert's outputs without '&' (early clobber)",
           (Edit('"=&v,=&v,=&v,=&v,v,v"', '"=v,=v,=v,=v,v,v"'),)),
    Mutant("convert_line_without_llvm_tie", "an instruction LLVM's convert does not emit added to the convert's text",
           (Edit('op_sel:[1,1,0]")', 'op_sel:[1,1,0]\\nv_lshrrev_b32 $3, 16, $3")'),)),
    Mutant("gluon_convert_wrong_byte", "a Gluon-style inline asm convert of byte 1 where its result says byte 0",
           (Edit("def _e2m1_byte_to_pair(",
                 'def _gluon_pair(w, s):\n    return gl.inline_asm_elementwise("v_cvt_scalef32_pk_bf16_fp4 $0, $1, '
                 '$2 op_sel:[1,0,0]", "=v,v,v", [w, s << 23], dtype=gl.uint32, is_pure=True, pack=1)\n\n\n'
                 "def _e2m1_byte_to_pair("),)),
    Mutant("inline_asm_under_another_name", "the Triton convert called through tl.inline_asm",
           (Edit("pairs = tl.inline_asm_elementwise(", "pairs = tl.inline_asm("),)),
    Mutant("gluon_caller_scale_unshifted", "the Gluon convert's caller passing the scale bytes unshifted",
           (Edit("_gluon_e2m1_scaled_pairs(words, scales.to(gl.uint32) << 23, ARCH)",
                 "_gluon_e2m1_scaled_pairs(words, scales.to(gl.uint32), ARCH)"),)),
    Mutant("gluon_scale_table_unshifted", "the Gluon MXFP4 form's table of V's scales stored unshifted",
           (Edit("values_smem.store(keys.to(gl.uint32) << 23)", "values_smem.store(keys.to(gl.uint32))"),)),

    # ---- what the MXFP4 Gluon form's choices buy (bench/mxfp4_variants.py) ----
    Mutant("mxfp4_loads_unpinned",
           "no barrier pinning the order of a tile's loads (rope codes and scale bytes first, then the nope codes, "
           "so that each group's store waits only for its own loads)",
           (Edit("    _gluon_barrier()  # the loop's order of the loads (its waits count on it)\n", ""),
            Edit("        _gluon_barrier()  # keeps these loads before the codes' (the waits count on that order)\n",
                 "")), "variant"),
    Mutant("mxfp4_nan_propagating_tile_maxima",
           "the tile's row maxima NaN-propagating (v_maximum3_f32, no operand quieting) instead of the softmax "
           "rule's maxNum",
           (Edit("max_smem.store(gl.max(s.reshape([GROUPS, BLOCK_N // GROUPS, 16]), 1))",
                 "max_smem.store(gl.reduce(s.reshape([GROUPS, BLOCK_N // GROUPS, 16]), 1, _nan_max))"),
            Edit("return gl.convert_layout(gl.max(groups, 0), gl.SliceLayout(0, s.type.layout))",
                 "return gl.convert_layout(gl.reduce(groups, 0, _nan_max), gl.SliceLayout(0, s.type.layout))"),
            Edit("@gluon_jit\ndef _gluon_mxfp4_tile_max(",
                 "@gluon_jit\ndef _nan_max(a, b):\n    return gl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)\n\n\n"
                 "@gluon_jit\ndef _gluon_mxfp4_tile_max(")), "variant"),
    Mutant("mxfp4_scale_rows_zeroed_after_load",
           "the scale bytes of the rows outside a tile loaded and then zeroed (one selection a byte), rather than "
           "their row offset moved out of the buffer descriptor's range (one selection a row)",
           (Edit("        return gl_cdna4.buffer_load(base, (gl.where(valid, rows, -2147483648) + lane_blocks) + "
                 "register_blocks)",
                 "        return gl.where(valid, gl_cdna4.buffer_load(base, (rows + lane_blocks) + register_blocks), 0)"),),
           "variant"),
    Mutant("mxfp4_v_scales_shifted_where_read",
           "V's scale bytes shifted into the fp32 exponent by each reading lane (32 a tile) rather than once when "
           "stored (8 a tile)",
           (Edit("values_smem.store(keys.to(gl.uint32) << 23)", "values_smem.store(keys.to(gl.uint32))"),
            Edit("p0, p1, p2, p3 = _gluon_e2m1_scaled_pairs(words, _gluon_word_scales(words, scales), ARCH)",
                 "p0, p1, p2, p3 = _gluon_e2m1_pairs(words, _gluon_word_scales(words, scales), ARCH)")), "variant"),
)
MUTANTS = {mutant.name: mutant for mutant in _MUTANTS}
assert len(MUTANTS) == len(_MUTANTS), "two mutants share a name"


def mutated_source(name: str, text: str | None = None) -> str:
    """submission.py's text (or `text`) with the mutant `name` applied."""
    mutant = MUTANTS[name]
    text = SUBMISSION.read_text() if text is None else text
    for edit in mutant.edits:
        found = text.count(edit.anchor)
        if found != edit.count:
            raise MutantDoesNotApply(f"mutant {name}: its anchor {edit.anchor!r} occurs {found} times in submission.py, "
                                     f"its edit expects {edit.count} (update the anchor in tools/mutants.py)")
        text = text.replace(edit.anchor, edit.replacement)
    return text


def write_mutant(name: str, directory: Path, filename: str = "submission.py") -> Path:
    """The mutant's source written to directory/filename (Triton reads a kernel's source from
    its module's file, so a mutant is imported from a file of its own)."""
    path = Path(directory) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(mutated_source(name))
    return path


def import_submission(path: Path, module_name: str = "submission"):
    """The copy of submission.py at `path` imported as `module_name` (into sys.modules, so
    that a later `import submission`, by tools/compile_target.py say, finds that copy)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def import_mutant(name: str, directory: Path, module_name: str):
    """The mutant written to directory/<module_name>.py and imported under that name."""
    return import_submission(write_mutant(name, directory, f"{module_name}.py"), module_name)


def tree_files() -> list[str]:
    """The checkout's files: tracked, and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return [name for name in listed if name and (ROOT / name).is_file()]


def copy_tree(destination: Path, name: str | None = None, tests_from: str | None = None) -> Path:
    """The checkout copied to `destination` with the mutant `name` (if any) applied to its
    submission.py; with tests_from, its tests/, bench/ and tools/ as of that commit."""
    for relative in tree_files():
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, destination / relative)
    if tests_from:
        folders = ("tests", "bench", "tools")
        for folder in folders:
            shutil.rmtree(destination / folder, ignore_errors=True)
        archive = subprocess.run(["git", "archive", tests_from, *folders], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
    if name is not None:
        (destination / "submission.py").write_text(mutated_source(name))
    return destination


def check(name: str, pytest_args: list[str], tests_from: str | None = None) -> int:
    """Whether the tests catch the mutant: 0 caught, 1 not caught."""
    with tempfile.TemporaryDirectory(prefix=f"mutant_{name}_") as folder:
        copy = copy_tree(Path(folder), name, tests_from)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
                              cwd=copy, capture_output=True, text=True)
    lines = proc.stdout.strip().split("\n")
    reasons = [line for line in lines if line.startswith("E   ")][:4]  # the first assertion messages
    summary = [line for line in lines if line.startswith(("FAILED", "ERROR"))] + reasons + lines[-1:]
    print(f"mutant {name}{f' (tests of {tests_from})' if tests_from else ''}: pytest {' '.join(pytest_args)}")
    print("\n".join(summary))
    caught = proc.returncode != 0
    print(f"=> {'CAUGHT' if caught else 'NOT CAUGHT'} (pytest exit status {proc.returncode})")
    return 0 if caught else 1


def main(argv: list[str]) -> int:
    usage = __doc__.split("\n\n")[2]
    if not argv or argv[0] not in ("list", "check", "write"):
        print(usage, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "list":
        for mutant in MUTANTS.values():
            try:
                mutated_source(mutant.name)
                state = "applies"
            except MutantDoesNotApply as error:
                state = f"DOES NOT APPLY: {error}"
            print(f"{mutant.name} ({mutant.kind}): {mutant.purpose}; {state}")
        return 0
    tests_from = None
    if command == "check" and rest[:1] == ["--tests-from"]:
        tests_from, rest = rest[1], rest[2:]
    if not rest or rest[0] not in MUTANTS or (command == "write" and len(rest) != 2):
        print(usage, file=sys.stderr)
        return 2
    try:
        if command == "write":
            print(write_mutant(rest[0], Path(rest[1])))
            return 0
        return check(rest[0], rest[1:], tests_from)
    except MutantDoesNotApply as error:
        print(error, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
