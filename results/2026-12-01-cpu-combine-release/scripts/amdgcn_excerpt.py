"""The in-kernel combine's tail of an AMDGCN listing: from the partial stores before the
counter's first atomic to the buffer_inv after its last (.loc lines, implicit-def comments
and .Ltmp labels left out), with the listing's line numbers.

    python3 amdgcn_excerpt.py LISTING.amdgcn OUT.txt [LISTING OUT ...]
"""
import re
import sys


def excerpt(path: str, out: str) -> None:
    lines = open(path).read().splitlines()
    atomics = [i for i, line in enumerate(lines) if re.match(r"\t(buffer|global)_atomic_", line)]
    stores = [i for i, line in enumerate(lines[:atomics[0]]) if re.match(r"\t(buffer|global)_store_", line)]
    start = min(i for i in stores if i > atomics[0] - 200)  # the run of stores before the first atomic
    end = atomics[-1]
    while end < len(lines) and not lines[end].startswith("\tbuffer_inv"):
        end += 1
    keep = [f"{n + 1:6d}  {line}" for n, line in enumerate(lines[start:end + 3], start)
            if line.strip() and not line.lstrip().startswith((".loc", "; implicit-def"))
            and not re.match(r"^\.Ltmp\d+:", line)]
    header = (f"; {path.split('/')[-1]}: lines {start + 1}-{end + 3} "
              "(.loc lines, implicit-def comments and .Ltmp labels left out)\n")
    open(out, "w").write(header + "\n".join(keep) + "\n")


for source, destination in zip(sys.argv[1::2], sys.argv[2::2]):
    excerpt(source, destination)
