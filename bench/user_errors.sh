#!/usr/bin/env bash
# Each newcomer mistake eval.py names (and an output a report cannot write), run as a user would
# from the repository's folder; the log shows the command, what it printed (stdout and stderr)
# and its exit status.
#   bash bench/user_errors.sh > results/2026-12-04-cpu-hygiene/user_errors.log 2>&1
cd "$(dirname "$0")/.."
export CUDA_VISIBLE_DEVICES=-1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
case1="batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4220"
printf '# my cases\n\n%s;\n' "$case1" > "$scratch/commented.txt"
echo "batchsize: 4.0; qseqlen: 1; kvseqlen: 1024; seed: 1" > "$scratch/float.txt"
echo "batchsize: 4; qseqlen: 1; kvseqlen: 0; seed: 1" > "$scratch/zero.txt"
echo "batchsize: 0; qseqlen: 1; kvseqlen: 1024; seed: 1" > "$scratch/zero_batch.txt"
echo "batchsize: 4; qseqlen: 1; kvseqlen: -5; seed: 1" > "$scratch/negative.txt"
echo "batchsize: 4; qseqlen: 0; kvseqlen: 1024; seed: 1" > "$scratch/zero_q.txt"
echo "batchsize: 300000; qseqlen: 1; kvseqlen: 8192; seed: 1" > "$scratch/int32.txt"
echo "batchsize: 100000; qseqlen: 1; kvseqlen: 8192; seed: 1" > "$scratch/huge.txt"
echo "def kernel(data): return data" > "$scratch/no_kernel.py"
run() {
    echo "\$ $*"
    ( eval "$@" ); echo "exit $?"; echo
}
run python3 eval.py
run python3 eval.py cases tests
run "python3 eval.py test $scratch/commented.txt | tail -n 2"
for f in float zero zero_batch negative zero_q int32 huge; do run python3 eval.py test "$scratch/$f.txt"; done
run MLA_SUBMISSION="$scratch/no_kernel.py" python3 eval.py test "$scratch/commented.txt"
run POPCORN_FD=9 python3 eval.py test "$scratch/commented.txt"
run POPCORN_FD=abc python3 eval.py test "$scratch/commented.txt"
run POPCORN_SEED=abc python3 eval.py test "$scratch/commented.txt"
run MLA_CHECK_INDPTR=maybe python3 eval.py test "$scratch/commented.txt"
run TRITON_INTERPRET=true MLA_ROUTE=triton_fp8 python3 eval.py test "$scratch/commented.txt"
run TRITON_INTERPRET=1 MLA_ROUTE=triton_fp8 python3 eval.py test
# A Python without torch, triton or pyyaml (a fresh venv before set-up, or not the venv set-up
# installed into), the help, a route spelled wrong
python3 -m venv --without-pip "$scratch/bare"
run "$scratch/bare/bin/python3" eval.py
run "$scratch/bare/bin/python3" eval.py benchmark
run "python3 eval.py --help | head -n 5"
run MLA_ROUTE=tirton_fp8 python3 eval.py benchmark
# Results that cannot be written (/dev/full refuses every write, as a full disk does), and a
# report's output path under a file: one line each, before any long work where it can be known
run "python3 eval.py cases tests > /dev/full"
run "python3 eval.py test $scratch/commented.txt > /dev/full"
run "POPCORN_FD=3 python3 eval.py test $scratch/commented.txt 3>/dev/full"
run python3 -m bench.gfx950_report --json /etc/passwd/report.json
# Ctrl-C while a full-size case runs: SIGINT to eval.py's process group, as a terminal sends it
echo "\$ python3 eval.py test   # Ctrl-C after 20 s"
setsid python3 eval.py test > "$scratch/ctrl_c.out" 2> "$scratch/ctrl_c.err" &
leader=$!
sleep 20
kill -INT -- -"$leader"
wait "$leader"; echo "exit $?"
cat "$scratch/ctrl_c.out" "$scratch/ctrl_c.err"
sleep 2
echo "processes left in its group: $(ps -o pid= -g "$leader" | wc -l)"
