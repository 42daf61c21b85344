"""What ptxas makes of the Hopper forms (submission.py section 2.4), on any machine.

    python3 -m bench.hopper_sm90 [--opcodes]

Every distinct specialization of the Hopper forms that the autopick offers for the 8
benchmark shapes on the H200 (tools/compile_target.py's offered_launches for sm_90: their
decode kernels) is compiled for sm_90 into an empty Triton cache and read: one line each
with its registers, spilled bytes and shared memory (the bundled ptxas -v on its PTX), its
warpgroup MMAs in the SASS (QGMMA fp8, HGMMA bf16), the main loop's instructions a warp a
64-token tile (with --opcodes, also that loop's instructions by opcode), and whether ptxas
serialized the wgmmas (its advisory C7514: every wgmma then waits for the one before, a
measured slowdown on the H200). Exit status 1 when a specialization has no wgmma or has them
serialized.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

if os.environ.get("TRITON_INTERPRET") == "1":
    raise RuntimeError("hopper_sm90 compiles kernels: run it with TRITON_INTERPRET unset")

import triton  # noqa: E402

import submission as sub  # noqa: E402
from bench.sass_loop import disassemble, main_loop  # noqa: E402
from tools import compile_target, external_programs  # noqa: E402


def hopper_specializations() -> dict:
    """identity -> (label, Specialization) of every Hopper decode kernel offered on sm_90."""
    found = {}
    for offered in compile_target.offered_launches("sm_90", with_aiter=False):
        if sub.kernel_form(offered.kv_format, offered.launch.form).gluon_arch != "hopper":
            continue
        spec = compile_target.specialize(offered.calls[0], compile_target.TARGETS["sm_90"])
        label = (f"{sub.launch_label(offered.kv_format, offered.launch)} "
                 f"(first offered for {offered.batch} x {offered.kv_len})")
        found.setdefault(spec.identity, (label, spec))
    return found


def ptxas_report(ptx: str) -> str:
    ptxas = Path(external_programs.command("nvdisasm")[0]).with_name("ptxas")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.ptx")
        Path(path).write_text(ptx)
        return subprocess.run([str(ptxas), "-arch=sm_90a", "-v", path, "-o", os.path.join(tmp, "k.cubin")],
                              capture_output=True, text=True).stderr


def opcode_counts(opcodes: list) -> str:
    """"LOP3 309, IMAD 224, ...": the opcodes (modifiers dropped) by count, most first."""
    counts = collections.Counter(op.split(".")[0] for op in opcodes)
    return ", ".join(f"{op} {n}" for op, n in counts.most_common())


def main() -> int:
    parser = argparse.ArgumentParser(description="What ptxas makes of the Hopper forms (sm_90).")
    parser.add_argument("--opcodes", action="store_true",
                        help="after each specialization's line, its tile loop's instructions by opcode")
    show_opcodes = parser.parse_args().opcodes
    failed = False
    specializations = hopper_specializations()
    with tempfile.TemporaryDirectory() as cache:
        triton.knobs.cache.dir = cache
        for label, spec in specializations.values():
            compiled = spec.compile()
            report = ptxas_report(compiled.asm["ptx"])
            registers = re.search(r"Used (\d+) registers", report).group(1)
            spilled = re.search(r"(\d+) bytes spill stores", report).group(1)
            sass = disassemble(compiled.asm["cubin"])
            loop = main_loop(sass, "GMMA")  # the tile loop: the one holding the warpgroup MMAs
            mmas = collections.Counter(m.group(1) for m in re.finditer(r"\b([QH]GMMA)\.", sass))
            serialized = "C7514" in report
            failed |= serialized or not mmas
            print(f"{label}: {registers} registers, {spilled} bytes spilled, {compiled.metadata.shared} bytes of "
                  f"shared memory, {dict(mmas)}, main loop {len(loop)} instructions a warp"
                  + (", wgmma SERIALIZED (ptxas C7514)" if serialized else ""), flush=True)
            if show_opcodes:
                print(f"    loop by opcode: {opcode_counts(loop)}", flush=True)
    print(f"{len(specializations)} Hopper specializations compiled for sm_90")
    return 1 if failed or not specializations else 0


if __name__ == "__main__":
    sys.exit(main())
