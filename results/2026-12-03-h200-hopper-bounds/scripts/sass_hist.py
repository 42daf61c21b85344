"""Opcode histogram of the Hopper MXFP4 kernel's tile loop (sm_90, compiled on the CPU)."""
import collections, re, sys, tempfile
import triton
import submission as sub
from bench import hopper_sm90 as hs
from bench.sass_loop import disassemble

def loop_body(sass):
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*\.(L_x_\d+):", line))}
    ins = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
    best = None
    for i, line in enumerate(lines):
        br = re.search(r"BRA `\(\.(L_x_\d+)\)", line)
        if br and labels.get(br.group(1), i) < i:
            body = [m.group(1) for b in lines[labels[br.group(1)]:i + 1] if (m := ins.match(b))]
            if any("GMMA" in op for op in body) and (best is None or len(body) < len(best)):
                best = body
    return best or []

def main(match):
    specs = hs.hopper_specializations()
    with tempfile.TemporaryDirectory() as cache:
        triton.knobs.cache.dir = cache
        for label, spec in specs.values():
            if match not in label:
                continue
            c = spec.compile()
            body = loop_body(disassemble(c.asm["cubin"]))
            h = collections.Counter(op.split(".")[0] for op in body)
            print(label, len(body))
            print(sorted(h.items(), key=lambda kv: -kv[1]))
            return
main(sys.argv[1])
