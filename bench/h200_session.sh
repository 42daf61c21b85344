#!/usr/bin/env bash
# The GPU runs behind results/<date>-h200/, one device call each (under 10 minutes):
#   OUT=dir bash bench/h200_session.sh harness   # eval.py test (autopick), MLA_DEBUG
#                                                # benchmark, roofline report
#   OUT=dir bash bench/h200_session.sh compare   # eval.py leaderboard with this project's
#       # harness files and with upstream's eval.py + utils.py beside the same submission.py,
#       # reference.py and task.py, same POPCORN_SEED; the per-shape comparison
#       # (bench/compare_protocol.py); the autopick's clock against the leaderboard's
#       # (bench/clock_check.py). Needs dev_scratch/upstream_harness: run
#       # `bash tools/copy_upstream_harness.sh MIRROR_GIT_DIR` first and carry that folder with the call.
#   OUT=dir bash bench/h200_session.sh routes    # each route forced, leaderboard mode;
#                                                # GPU robustness cases
#   OUT=dir bash bench/h200_session.sh forms     # the gfx950 wave forms forced (the H200 can
#       # run fp8 e4m3_waves and mxfp4 waves), leaderboard mode; robustness of the automatic route and of
#       # those forms; every Triton launch candidate's device time and error
#   OUT=dir bash bench/h200_session.sh gluon     # the fp8 Gluon form's twin: forced, leaderboard
#       # mode; its candidates verified and timed (MLA_DEBUG); the automatic choice; its
#       # GPU robustness cases and tests
#   OUT=dir bash bench/h200_session.sh gluon-mxfp4  # the same for the MXFP4 Gluon form's twin,
#       # then the NaN-fenced memory-safety run of every offered launch (its twin included)
#   OUT=dir bash bench/h200_session.sh hopper    # the Hopper forms' safety (bench/hopper_safety.py,
#       # under 4 minutes): each forced on the GPU robustness cases, the NaN-fenced memory-safety
#       # run of every offered launch, compute-sanitizer memcheck where found (carry NVIDIA's
#       # nvidia-cuda-sanitizer-api wheel in dev_scratch/sanitizer/ where the machine has none);
#       # JSON and a summary line a form under $OUT/hopper_safety
#   OUT=dir bash bench/h200_session.sh gluon-robustness  # each Gluon form forced in turn (its
#       # twin here): the GPU robustness cases, each one it does not pass run again with its
#       # route unforced, the odd-input cases under compute-sanitizer memcheck where found
#       # (tools/external_programs.py); $OUT/gluon_forms.json and gluon_forms.txt, a line a form (~2 min)
#   OUT=dir bash bench/h200_session.sh suite     # tools/setup.sh, then the README's test
#       # command's files in two groups: the timing-sensitive ones (the clocks, the autopick's
#       # timed choices) alone, the rest over SUITE_WORKERS (default 15) pytest-xdist workers
#       # test by test (--dist load: file by file, tests/test_eval_protocol.py alone kept one
#       # worker busy past a device call's limit), where pytest-xdist imports (else alone too),
#       # stopped by SIGINT after SUITE_LIMIT_S (default 480) so that pytest still prints its
#       # summary line, which the step prints; a test that fails among the workers is run again alone
#   OUT=dir bash bench/h200_session.sh floor     # a call at its floor: the GPU tests of the
#       # launches kept between calls and of the call captured in a CUDA graph and replayed
#       # (every route and form that serves here, forced), each candidate's time and error
#       # (MLA_DEBUG benchmark), then bench/report.py measure (leaderboard
#       # clock, graph-replayed device time, host time in a caller's loop, bandwidth and one-launch
#       # floor in the same run) under $OUT/report
#   OUT=dir bash bench/h200_session.sh verify    # errors against exact attention on the 8
#       # benchmark inputs (bench/verify_errors.py); the Q quantizer's bit-exactness and
#       # device time (bench/q_quant_time.py); the set-up's view of this GPU stack
# Protocol lines (POPCORN_FD) go to $OUT/protocol_*.txt, everything else to $OUT/*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p "${OUT:?set OUT to a folder for the results}"
out=$(cd "$OUT" && pwd)
export PYTHONUNBUFFERED=1
status=0

python3 eval.py cases tests > /tmp/tests.txt
python3 eval.py cases benchmarks > /tmp/benchmarks.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } \
  > "$out/machine.txt"

step() {
    echo "== $* ($(date -u +%T))" | tee -a "$out/session.log"
}

# protocol MODE CASES TAG [VAR=VALUE ...]: eval.py as the leaderboard runs it, from the
# folder EVAL_DIR (default: this repository).
protocol() {
    local mode=$1 cases=$2 tag=$3; shift 3
    local dir=${EVAL_DIR:-.}
    step "$dir/eval.py $mode $*"
    (cd "$dir" && env "$@" POPCORN_FD=3 python3 eval.py "$mode" "$cases" 3>"$out/protocol_$tag.txt" \
        >>"$out/session.log" 2>&1)
    local rc=$?
    echo "   exit $rc; $(grep -c ': pass' "$out/protocol_$tag.txt") pass lines;" \
         "$(grep '^check' "$out/protocol_$tag.txt")" | tee -a "$out/session.log"
    [ $rc -eq 0 ] || status=1
}

case "${1:-}" in
harness)
    protocol test /tmp/tests.txt test
    step "MLA_DEBUG=1 eval.py benchmark"
    MLA_DEBUG=1 python3 eval.py benchmark 2>&1 | tee "$out/debug_benchmark.log" | tail -n 14 || status=1
    step "bench/report.py measure"
    python3 -m bench.report measure --out "$out" 2>&1 | tail -n 20 || status=1
    ;;
compare)
    upstream=dev_scratch/upstream_harness
    if [ ! -f $upstream/eval.py ] || [ ! -f $upstream/utils.py ]; then
        echo "no $upstream: run tools/copy_upstream_harness.sh MIRROR_GIT_DIR and carry that folder" >&2
        exit 2
    fi
    seed=${POPCORN_SEED:-20261201}
    cp $upstream/COMMIT "$out/upstream_commit.txt"
    run_dir=$(mktemp -d)
    cp $upstream/eval.py $upstream/utils.py submission.py reference.py task.py "$run_dir"/
    protocol leaderboard /tmp/benchmarks.txt leaderboard_ours POPCORN_SEED=$seed
    EVAL_DIR=$run_dir protocol leaderboard /tmp/benchmarks.txt leaderboard_upstream POPCORN_SEED=$seed
    step "bench/compare_protocol.py (seed $seed)"
    python3 -m bench.compare_protocol "$out/protocol_leaderboard_ours.txt" "$out/protocol_leaderboard_upstream.txt" \
        | tee "$out/compare.txt" || status=1
    step "bench/clock_check.py"
    python3 -m bench.clock_check --out "$out" || status=1
    step "done"
    ;;
routes)
    for route in triton_mxfp4 triton_fp8 torch; do
        protocol leaderboard /tmp/benchmarks.txt "leaderboard_$route" MLA_ROUTE=$route
    done
    python3 -m bench.robustness_gpu --out "$out" 2>&1 | tee "$out/robustness.log" | tail -n 30 || status=1
    ;;
forms)
    for route in triton_fp8:e4m3_waves triton_mxfp4:waves; do
        protocol leaderboard /tmp/benchmarks.txt "leaderboard_${route/:/_}" MLA_ROUTE=$route
    done
    step "bench/robustness_gpu.py (auto and the forced forms)"
    python3 -m bench.robustness_gpu --out "$out" --routes triton_fp8:e4m3_waves,triton_mxfp4:waves 2>&1 \
        | tee "$out/robustness.log" | tail -n 30 || status=1
    step "bench/kernel_sweep.py --candidates"
    python3 -m bench.kernel_sweep --candidates --out "$out" 2>&1 | grep -v '^{' > "$out/kernel_candidates.txt" || status=1
    step "done"
    ;;
gluon)
    # The fp8 Gluon form (its NVIDIA twin here): its GPU tests first (nothing else runs if
    # they fail); forced through eval.py leaderboard mode; every Gluon launch candidate
    # verified and timed by the autopick on the 8 benchmark shapes (MLA_DEBUG prints each
    # candidate's time and error); the automatic choice with the Gluon form among its
    # candidates; the GPU robustness cases of the forced form; the automatic choice in
    # leaderboard mode.
    step "pytest tests/test_gluon_kernels.py"
    if ! timeout 150 python3 -m pytest -q -x tests/test_gluon_kernels.py > "$out/pytest_gluon.log" 2>&1; then
        tail -n 40 "$out/pytest_gluon.log"
        exit 1
    fi
    tail -n 3 "$out/pytest_gluon.log"
    protocol leaderboard /tmp/benchmarks.txt leaderboard_triton_fp8_gluon MLA_ROUTE=triton_fp8:gluon
    step "MLA_DEBUG=1 MLA_ROUTE=triton_fp8:gluon eval.py benchmark"
    MLA_DEBUG=1 MLA_ROUTE=triton_fp8:gluon timeout 150 python3 eval.py benchmark > "$out/debug_benchmark_gluon.log" 2>&1 \
        || status=1
    step "MLA_DEBUG=1 eval.py benchmark (automatic)"
    MLA_DEBUG=1 timeout 200 python3 eval.py benchmark > "$out/debug_benchmark_auto.log" 2>&1 || status=1
    step "bench/robustness_gpu.py --routes triton_fp8:gluon"
    timeout 150 python3 -m bench.robustness_gpu --out "$out" --routes triton_fp8:gluon > "$out/robustness.log" 2>&1 \
        || status=1
    tail -n 8 "$out/robustness.log"
    protocol leaderboard /tmp/benchmarks.txt leaderboard_auto
    step "done"
    ;;
gluon-mxfp4)
    # The MXFP4 Gluon form (its NVIDIA twin here), as `gluon` does for fp8: its
    # GPU tests first (nothing else runs if they fail); forced through eval.py leaderboard
    # mode (every candidate verified on the 8 benchmark inputs first; MLA_DEBUG prints each
    # one's time and errors); the GPU robustness cases of the forced form; the NaN-fenced
    # memory-safety run; the automatic choice in leaderboard mode.
    step "pytest tests/test_gluon_kernels.py -k mxfp4"
    if ! timeout 200 python3 -m pytest -q -x tests/test_gluon_kernels.py -k mxfp4 > "$out/pytest_gluon_mxfp4.log" 2>&1; then
        tail -n 40 "$out/pytest_gluon_mxfp4.log"
        exit 1
    fi
    tail -n 3 "$out/pytest_gluon_mxfp4.log"
    protocol leaderboard /tmp/benchmarks.txt leaderboard_triton_mxfp4_gluon MLA_ROUTE=triton_mxfp4:gluon MLA_DEBUG=1
    step "bench/robustness_gpu.py --routes triton_mxfp4:gluon"
    timeout 200 python3 -m bench.robustness_gpu --out "$out" --routes triton_mxfp4:gluon > "$out/robustness.log" 2>&1 \
        || status=1
    tail -n 8 "$out/robustness.log"
    step "pytest tests/test_memory_safety_gpu.py"
    timeout 150 python3 -m pytest -q tests/test_memory_safety_gpu.py > "$out/pytest_memory_safety_gpu.log" 2>&1 || status=1
    tail -n 3 "$out/pytest_memory_safety_gpu.log"
    protocol leaderboard /tmp/benchmarks.txt leaderboard_auto
    step "done"
    ;;
hopper)
    step "bench/hopper_safety.py"
    timeout 235 python3 -m bench.hopper_safety --out "$out/hopper_safety" --limit-s 220 > "$out/hopper_safety.log" 2>&1 \
        || status=1
    cat "$out/hopper_safety/summary.txt" 2>/dev/null || tail -n 20 "$out/hopper_safety.log"
    step "done"
    ;;
gluon-robustness)
    step "bench/robustness_gpu.py --gluon-forms"
    timeout 230 python3 -m bench.robustness_gpu --out "$out" --gluon-forms \
        > "$out/gluon_forms.log" 2>&1 || status=1
    cat "$out/gluon_forms.txt" 2>/dev/null || tail -n 30 "$out/gluon_forms.log"
    step "done"
    ;;
suite)
    step "tools/setup.sh"
    bash tools/setup.sh > "$out/setup.log" 2>&1 || { tail -n 20 "$out/setup.log"; exit 1; }
    alone=(tests/test_clock.py tests/test_autopick.py)
    step "pytest ${alone[*]}"
    python3 -m pytest -q "${alone[@]}" > "$out/pytest_alone.log" 2>&1 || status=1
    echo "   pytest's summary line: $(tail -n 1 "$out/pytest_alone.log")" | tee -a "$out/session.log"
    workers=()
    python3 -c "import xdist" 2>/dev/null && workers=(-n "${SUITE_WORKERS:-15}" --dist load)
    step "pytest ${workers[*]} tests (but those), at most ${SUITE_LIMIT_S:-480} s"
    timeout --signal=INT --kill-after=30 "${SUITE_LIMIT_S:-480}" \
        python3 -m pytest -q "${workers[@]}" --durations=25 "${alone[@]/#/--ignore=}" tests \
        > "$out/pytest_rest.log" 2>&1
    rest=$?   # 1: tests failed; 124: stopped at SUITE_LIMIT_S
    [ $rest -eq 0 ] || status=1
    if [ $rest -eq 1 ] && [ ${#workers[@]} -gt 0 ]; then
        step "pytest --last-failed (alone)"
        python3 -m pytest -q --last-failed --last-failed-no-failures none "${alone[@]/#/--ignore=}" tests \
            > "$out/pytest_rerun.log" 2>&1 && echo "   the tests that failed among the workers pass alone"
        tail -n 5 "$out/pytest_rerun.log"
    fi
    echo "   pytest's summary line (exit $rest): $(tail -n 1 "$out/pytest_rest.log")" | tee -a "$out/session.log"
    step "done"
    ;;
floor)
    step "pytest tests/test_graph_capture.py tests/test_host_launches.py"
    timeout 240 python3 -m pytest -q tests/test_graph_capture.py tests/test_host_launches.py \
        > "$out/pytest_floor.log" 2>&1 || status=1
    echo "   pytest's summary line: $(tail -n 1 "$out/pytest_floor.log")" | tee -a "$out/session.log"
    step "MLA_DEBUG=1 eval.py benchmark (every candidate's time and error, the choice)"
    MLA_DEBUG=1 timeout 200 python3 eval.py benchmark > "$out/debug_benchmark.log" 2>&1 || status=1
    step "bench/report.py measure"
    timeout 300 python3 -m bench.report measure --out "$out/report" > "$out/report.log" 2>&1 || status=1
    tail -n 14 "$out/report.log"
    step "done"
    ;;
verify)
    step "bench/verify_errors.py"
    python3 -m bench.verify_errors --out "$out" > "$out/verify_errors.log" 2>&1 || status=1
    tail -n 40 "$out/verify_errors.log"
    step "bench/q_quant_time.py"
    python3 -m bench.q_quant_time --out "$out" > "$out/q_quant_time.log" 2>&1 || status=1
    tail -n 30 "$out/q_quant_time.log"
    step "tools/gpu_stack.py and eval.py's first line"
    { python3 tools/gpu_stack.py; echo "rc=$?"; python3 eval.py cases tests | head -n 1 > /tmp/one_case.txt
      python3 eval.py test /tmp/one_case.txt | head -n 1; } > "$out/gpu_stack.txt" 2>&1
    cat "$out/gpu_stack.txt"
    step "done"
    ;;
*)
    echo "usage: OUT=dir $0 harness|compare|routes|forms|gluon|gluon-mxfp4|hopper|gluon-robustness|suite|floor|verify" >&2
    exit 2
    ;;
esac
exit $status
