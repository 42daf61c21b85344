"""Compile experiment launches for sm_90 on the CPU: registers, spills, smem, loop size, C7514."""
import collections, re, sys, tempfile
import triton
import submission as sub
import dev_scratch.exp_mxfp4  # noqa: F401  registers the variant forms
from bench import hopper_sm90 as hs
from bench.sass_loop import disassemble
from tools import compile_target as ct

def report(kv_format, launch, batch=256, kv_len=1024):
    data = ct.contract_inputs(batch, kv_len)
    call = ct.decode_kernel_calls(data, kv_format, launch)[0]
    spec = ct.specialize(call, ct.TARGETS["sm_90"])
    c = spec.compile()
    rep = hs.ptxas_report(c.asm["ptx"])
    regs = re.search(r"Used (\d+) registers", rep).group(1)
    spill = re.search(r"(\d+) bytes spill stores", rep).group(1)
    sass = disassemble(c.asm["cubin"])
    mm = collections.Counter(m.group(1) for m in re.finditer(r"\b([QH]GMMA)\.", sass))
    print(f"{sub.launch_label(kv_format, launch)}: {regs} regs, {spill} spilled, {c.metadata.shared} smem, {dict(mm)}, "
          f"loop {hs.main_loop_size(sass)}" + (" SERIALIZED C7514" if "C7514" in rep else ""), flush=True)

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as cache:
        triton.knobs.cache.dir = cache
        L = sub.TritonLaunch
        for form in sys.argv[1:]:
            fmt, name, stages = form.split(":")
            report(fmt, L(1, 64, 4, int(stages), form=name, gluon_arch="hopper"))
