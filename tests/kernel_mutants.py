"""Deliberately wrong copies of submission.py, to show that the memory-safety checks
(tests/test_memory_safety_interpreter.py, tests/test_memory_safety_gpu.py) and the
in-kernel combine's release check (tests/test_combine_release.py) catch what they look for. Each mutation is a text replacement that must occur as often as stated,
so a change to submission.py that removes its target breaks the mutant loudly instead
of leaving a check that can no longer fail."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SUBMISSION = Path(__file__).resolve().parent.parent / "submission.py"

# Every form's row clamp cut by one row: the tile rows past a split's end read row `hi`
# (one past the split's last row) instead of repeating row hi - 1. Where a split ends
# at the KV buffer's last row, that is one row past the buffer. (original, mutated, count)
ROW_CLAMP_REMOVED = (
    # fp8 f16 (_fp8_tile_rows)
    ("rows = tl.minimum(tl.arange(0, BLOCK_N), hi - 1 - start)",
     "rows = tl.minimum(tl.arange(0, BLOCK_N), hi - start)", 1),
    # fp8 e4m3_waves (_group_tile_rows)
    ("last_row = tl.minimum(hi - 1 - start, GROUPS * TOKENS - 1)",
     "last_row = tl.minimum(hi - start, GROUPS * TOKENS - 1)", 1),
    # mxfp4 waves (_attend_mxfp4_waves)
    ("rows = tl.minimum(start + tl.arange(0, BLOCK_N), hi - 1).to(tl.int64)",
     "rows = tl.minimum(start + tl.arange(0, BLOCK_N), hi).to(tl.int64)", 1),
    # mxfp4 bf16 (_attend_mxfp4_bf16): its loads are masked by row, not clamped
    ("= _load_mxfp4_blocks(kv_ptr, sc_ptr, rows, row_ok, stride_kv",
     "= _load_mxfp4_blocks(kv_ptr, sc_ptr, rows, rows <= hi, stride_kv", 2),
    # Gluon fp8 and MXFP4 (_gluon_copy_tile): the ring's copies
    ("last_row = gl.maximum(hi - 1 - first, 0) * stride_kv",
     "last_row = gl.maximum(hi - first, 0) * stride_kv", 1),
    # Gluon MXFP4 (_gluon_mxfp4_load_codes, _gluon_mxfp4_load_rest): a tile's loads one row
    # further on than its rows' validity says, so its last valid row reads row hi, one past
    # the buffer where the split ends at its last row (codes and scale bytes alike). (Moving
    # the tile's base itself would move the validity with it: the row past the split would
    # be read but weigh nothing.)
    ("base = _gluon_mxfp4_tile_base(start, hi, BLOCK_N)\n",
     "base = _gluon_mxfp4_tile_base(start, hi, BLOCK_N) + 1\n", 2),
)


# Every store of the output one row further on: the last sequence's row lands one row
# past the output tensor (and every sequence's row on the next one's).
OUTPUT_ROW_SHIFTED = (
    # the decode kernel, one split or the in-kernel combine
    (" _store_rows(out_ptr, q_row, stride_o_tok", " _store_rows(out_ptr, q_row + 1, stride_o_tok", 2),
    # the combine kernel
    ("tl.store(out_ptr + q_row.to(tl.int64) * stride_o_tok",
     "tl.store(out_ptr + (q_row + 1).to(tl.int64) * stride_o_tok", 1),
    # the Gluon decode kernel, one split or the in-kernel combine
    ("_gluon_store_rows(out_ptr, q_row, stride_o_tok", "_gluon_store_rows(out_ptr, q_row + 1, stride_o_tok", 2),
)

MUTATIONS = {"row_clamp_cut_by_one_row": ROW_CLAMP_REMOVED, "output_row_shifted_by_one": OUTPUT_ROW_SHIFTED}


# For the in-kernel combine's release check (bench/combine_release.py, tests/test_combine_release.py):
# the count taken by one thread after a barrier on every GPU, as NVIDIA's launches take it
# (and every launch did before): on gfx950 the other waves' partial stores may still be in
# flight at that thread's release, and only its wave acquires.
COMBINE_COUNTED_BY_ONE_THREAD = (
    ("return launch.num_warps * 64 if launch.each_thread_releases else 1", "return 1", 1),
)
# The merging program's acquire dropped (a relaxed decrement): its waves read the partials unordered.
COMBINE_ACQUIRE_DROPPED = (
    ('recorded = gl.atomic_add(counter, -num_splits * arrival, sem="acquire", scope="gpu")',
     'recorded = gl.atomic_add(counter, -num_splits * arrival, sem="relaxed", scope="gpu")', 1),
    ('recorded = tl.atomic_add(counter, -num_splits * arrival, sem="acq_rel", scope="gpu")',
     'recorded = tl.atomic_add(counter, -num_splits * arrival, sem="relaxed", scope="gpu")', 1),
)


def mutant_source(mutations) -> str:
    text = SUBMISSION.read_text()
    for original, mutated, count in mutations:
        found = text.count(original)
        if found != count:
            raise AssertionError(f"mutation target found {found} times, expected {count}: {original!r}")
        text = text.replace(original, mutated)
    return text


def load_mutant(directory: Path, name: str, mutations):
    """The mutated submission imported as module `name` from a file in `directory`
    (Triton reads a kernel's source from its file)."""
    path = Path(directory) / f"{name}.py"
    path.write_text(mutant_source(mutations))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
