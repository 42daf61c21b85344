#!/usr/bin/env bash
# The GPU runs behind results/<date>-h200/, in two device calls of under 10 minutes:
#   OUT=dir bash bench/h200_session.sh harness   # eval.py test + leaderboard (autopick),
#                                                # MLA_DEBUG benchmark, roofline report
#   OUT=dir bash bench/h200_session.sh routes    # each route forced, leaderboard mode;
#                                                # GPU robustness cases
# Protocol lines (POPCORN_FD) go to $OUT/protocol_*.txt, everything else to $OUT/*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT to a folder for the results}
export PYTHONUNBUFFERED=1
status=0

python3 eval.py cases tests > /tmp/tests.txt
python3 eval.py cases benchmarks > /tmp/benchmarks.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } \
  > "$out/machine.txt"

# protocol MODE CASES TAG [VAR=VALUE ...]: eval.py as the leaderboard runs it.
protocol() {
    local mode=$1 cases=$2 tag=$3; shift 3
    echo "== eval.py $mode $* ($(date -u +%T))" | tee -a "$out/session.log"
    env "$@" POPCORN_FD=3 python3 eval.py "$mode" "$cases" 3>"$out/protocol_$tag.txt" >>"$out/session.log" 2>&1
    local rc=$?
    echo "   exit $rc; $(grep -c ': pass' "$out/protocol_$tag.txt") pass lines;" \
         "$(grep '^check' "$out/protocol_$tag.txt")" | tee -a "$out/session.log"
    [ $rc -eq 0 ] || status=1
}

case "${1:-}" in
harness)
    protocol test /tmp/tests.txt test
    protocol leaderboard /tmp/benchmarks.txt leaderboard
    echo "== MLA_DEBUG=1 eval.py benchmark" | tee -a "$out/session.log"
    MLA_DEBUG=1 python3 eval.py benchmark 2>&1 | tee "$out/debug_benchmark.log" | tail -n 14 || status=1
    python3 bench/report.py measure --out "$out" 2>&1 | tail -n 20 || status=1
    ;;
routes)
    for route in triton_mxfp4 triton_fp8 torch; do
        protocol leaderboard /tmp/benchmarks.txt "leaderboard_$route" MLA_ROUTE=$route
    done
    python3 bench/robustness_gpu.py --out "$out" 2>&1 | tee "$out/robustness.log" | tail -n 30 || status=1
    ;;
*)
    echo "usage: OUT=dir $0 harness|routes" >&2
    exit 2
    ;;
esac
exit $status
