#!/bin/bash
# One device call: the sweep, then ncu on the MXFP4 forms at 256 x 8192.
set -x
F=$OUT/exp; mkdir -p $F
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $F/machine.txt 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $F/machine.txt
timeout 360 python3 -m dev_scratch.exp_sweep --out $F/sweep.json > $F/sweep.log 2>&1; echo "sweep rc=$?" >> $F/sweep.log
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for form in hopper hopper_async; do
  timeout 100 $NCU --clock-control none -k regex:mxfp4 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
    python3 -m dev_scratch.exp_one mxfp4 $form 1 1 0 256 8192 > $F/ncu_$form.txt 2>&1; echo "rc=$?" >> $F/ncu_$form.txt
done
cd $OUT && tar czf exp.tgz exp && ls -la exp
