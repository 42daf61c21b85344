"""What the in-kernel combine costs after the loop, per specialization: from the first partial
store to the end, the instructions, vmcnt waits, barriers, atomics, buffer_wbl2 and
buffer_inv of each listing in BEFORE_DIR and AFTER_DIR (bench/combine_release.py --asm-dir).

    python3 tail_counts.py BEFORE_DIR AFTER_DIR
"""
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import combine_release  # noqa: E402

KEYS = ("instructions", "s_waitcnt vmcnt", "s_barrier", "atomics", "buffer_wbl2", "buffer_inv")


def tail(path: Path) -> tuple:
    kernel = combine_release.Kernel(path.read_text())
    counts = collections.Counter()
    for mnemonic, operands in kernel.instructions[min(kernel.partial_stores):]:
        counts["instructions"] += 1
        counts["s_waitcnt vmcnt"] += mnemonic == "s_waitcnt" and "vmcnt" in operands
        counts["s_barrier"] += mnemonic == "s_barrier"
        counts["atomics"] += bool(re.fullmatch(r"(buffer|global|flat)_atomic_\w+", mnemonic))
        counts["buffer_wbl2"] += mnemonic == "buffer_wbl2"
        counts["buffer_inv"] += mnemonic == "buffer_inv"
    return counts, len(kernel.instructions)


before_dir, after_dir = map(Path, sys.argv[1:3])
print("from the first partial store to the end (before -> after): " + ", ".join(KEYS))
for after_path in sorted(after_dir.glob("*.amdgcn")):
    (before, whole_before), (after, whole_after) = tail(before_dir / after_path.name), tail(after_path)
    print(f"{after_path.stem:44s} " + ", ".join(f"{before[k]}->{after[k]}" for k in KEYS)
          + f"   (whole kernel {whole_before}->{whole_after})")
