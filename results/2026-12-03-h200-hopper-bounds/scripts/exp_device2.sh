#!/bin/bash
# ncu on the served fp8 Hopper form where it is furthest from the bandwidth, then the report.
set -x
F=$OUT/prof; mkdir -p $F
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats"
# 4 x 1024: the served launch (16 splits, the second kernel merges): both kernels
timeout 90 $NCU --clock-control none -k regex:"hopper_fp8|combine" -c 2 $SECTIONS \
  python3 -m dev_scratch.exp_one fp8 hopper_one_term 16 2 0 4 1024 > $F/ncu_fp8_4x1024.txt 2>&1; echo "rc=$?" >> $F/ncu_fp8_4x1024.txt
# 32 x 8192: 4 splits, in-kernel merge (served)
timeout 90 $NCU --clock-control none -k regex:hopper_fp8 -c 1 $SECTIONS \
  python3 -m dev_scratch.exp_one fp8 hopper_one_term 4 2 1 32 8192 > $F/ncu_fp8_32x8192.txt 2>&1; echo "rc=$?" >> $F/ncu_fp8_32x8192.txt
# 256 x 1024 and 256 x 8192: one split (served)
for L in 1024 8192; do
timeout 90 $NCU --clock-control none -k regex:hopper_fp8 -c 1 $SECTIONS \
  python3 -m dev_scratch.exp_one fp8 hopper_one_term 1 2 0 256 $L > $F/ncu_fp8_256x$L.txt 2>&1; echo "rc=$?" >> $F/ncu_fp8_256x$L.txt
done
timeout 170 python3 -m bench.report measure --out $F/report > $F/report.log 2>&1; echo "rc=$?" >> $F/report.log
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $F/machine.txt 2>&1
cd $OUT && tar czf prof.tgz prof && ls -la prof
