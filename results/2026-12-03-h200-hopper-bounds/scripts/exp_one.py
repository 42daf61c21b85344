"""One launch on one benchmark input, run 3 times (for ncu): FMT FORM SPLITS STAGES IN_KERNEL BATCH KV_LEN."""
import sys
import torch
import reference
import submission as sub
import dev_scratch.exp_mxfp4  # noqa: F401
from dev_scratch.exp_sweep import run

fmt, form, splits, stages, in_kernel, batch, kv_len = sys.argv[1:8]
launch = sub.TritonLaunch(int(splits), 64, 4, int(stages), combine_in_kernel=in_kernel == "1", form=form,
                          gluon_arch="hopper")
data = reference.generate_input(int(batch), 1, int(kv_len), 9826)
call, out = run(fmt, launch, data)
for _ in range(3):
    call()
torch.cuda.synchronize()
print("ok", sub.launch_label(fmt, launch))
