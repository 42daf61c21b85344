"""eval.py speaks the leaderboard's protocol: result lines on POPCORN_FD, seed mixing,
modes, exit codes; and its human mode prints a table. Small cases, run as subprocesses
that see no GPU (the protocol is host logic; conftest.run_eval); on a GPU, eval.py also
runs this project's submission there, in test and leaderboard mode."""
import base64
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import eval as harness
from conftest import NO_GPU_ENV, REPO_ROOT, cpu_only, needs_gpu
from reference import generate_input
from utils import describe_platform

SMALL_CASES = ["batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 11",
               "batchsize: 3; qseqlen: 1; kvseqlen: 31; seed: 12"]
STATS_FIELDS = ("runs", "mean", "std", "err", "best", "worst")


def as_dict(lines):
    return dict(lines)


def test_cantor_seed_mixing():
    assert harness.combine_seeds(4220, 0) == 4220 + 4220 * 4221 // 2
    assert harness.combine_seeds(3, 5) == 3 + 8 * 9 // 2
    # A large secret makes every combined seed large, whatever the public seed.
    assert harness.combine_seeds(1, 10**12) > 10**23


def test_parse_cases_reads_upstream_lines_and_mixes_seed():
    cases = harness.parse_cases("batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217\n"
                                "batchsize: 32; qseqlen: 1; kvseqlen: 8192; seed: 5415", 99)
    assert [c.args for c in cases] == [
        {"batchsize": 4, "qseqlen": 1, "kvseqlen": 1024, "seed": harness.combine_seeds(4217, 99)},
        {"batchsize": 32, "qseqlen": 1, "kvseqlen": 8192, "seed": harness.combine_seeds(5415, 99)}]
    assert cases[0].spec == "batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217"
    with pytest.raises(ValueError):
        harness.parse_cases("batchsize = 4")


def test_case_lines_are_the_upstream_tests():
    assert harness.case_lines("tests") == [
        "batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4220",
        "batchsize: 32; qseqlen: 1; kvseqlen: 1024; seed: 5412",
        "batchsize: 64; qseqlen: 1; kvseqlen: 8192; seed: 1360",
        "batchsize: 256; qseqlen: 1; kvseqlen: 8192; seed: 9826"]
    assert len(harness.case_lines("benchmarks")) == 8


def test_calculate_stats():
    stats = harness.calculate_stats([1.0, 2.0, 3.0, 6.0])
    assert (stats.runs, stats.mean, stats.best, stats.worst) == (4, 3.0, 1.0, 6.0)
    assert stats.std == pytest.approx(2.160247, rel=1e-6)
    assert stats.err == pytest.approx(stats.std / 2)


@pytest.mark.fast
def test_test_mode_passes_a_correct_submission(run_eval, submission_file, cases_file):
    rc, lines, _, err = run_eval(["test", str(cases_file(SMALL_CASES))],
                                 submission_file("correct"))
    assert rc == 0, err
    assert lines == [("test-count", "2"),
                     ("test.0.spec", SMALL_CASES[0]), ("test.0.status", "pass"),
                     ("test.0.message", "Maximum error: 0"),
                     ("test.1.spec", SMALL_CASES[1]), ("test.1.status", "pass"),
                     ("test.1.message", "Maximum error: 0"),
                     ("check", "pass")]


@pytest.mark.parametrize("wrong", ["zeros", "perturbed"])
def test_test_mode_fails_a_wrong_submission(run_eval, submission_file, cases_file, wrong):
    rc, lines, _, err = run_eval(["test", str(cases_file(SMALL_CASES))], submission_file(wrong))
    assert rc == 112, err
    results = as_dict(lines)
    assert results["test.0.status"] == "fail"
    assert "mismatch" in results["test.0.error"]
    assert "\n" not in results["test.0.error"]
    assert lines[-1] == ("check", "fail")


def test_benchmark_mode_reports_stats(run_eval, submission_file, cases_file):
    rc, lines, _, err = run_eval(["benchmark", str(cases_file(SMALL_CASES[:1]))],
                                 submission_file("correct"))
    assert rc == 0, err
    results = as_dict(lines)
    assert results["benchmark-count"] == "1"
    assert results["benchmark.0.spec"] == SMALL_CASES[0]
    values = {field: float(results[f"benchmark.0.{field}"]) for field in STATS_FIELDS}
    assert 3 <= values["runs"] <= 1000
    assert 0 < values["best"] <= values["mean"] <= values["worst"]
    assert lines[-1] == ("check", "pass")


def test_leaderboard_mode_rechecks_fresh_inputs(run_eval, submission_file, cases_file):
    """A submission replaying its first output passes the benchmark mode's single check but
    fails the leaderboard's, which feeds new inputs (seed + 13) every timed run."""
    cases = str(cases_file(SMALL_CASES[:1]))
    rc, lines, _, err = run_eval(["benchmark", cases], submission_file("stale_cache"))
    assert (rc, lines[-1]) == (0, ("check", "pass")), err
    rc, lines, _, err = run_eval(["leaderboard", cases], submission_file("stale_cache"))
    assert rc == 112, err
    assert as_dict(lines)["benchmark.0.status"] == "fail"
    assert lines[-1] == ("check", "fail")


def test_leaderboard_mode_passes_a_correct_submission(run_eval, submission_file, cases_file):
    rc, lines, _, err = run_eval(["leaderboard", str(cases_file(SMALL_CASES))],
                                 submission_file("correct"))
    assert rc == 0, err
    results = as_dict(lines)
    assert results["benchmark-count"] == "2"
    assert all(f"benchmark.{i}.{f}" in results for i in range(2) for f in STATS_FIELDS)
    assert int(results["benchmark.0.runs"]) <= 100
    assert lines[-1] == ("check", "pass")


def test_profile_mode_reports_a_table(run_eval, submission_file, cases_file):
    rc, lines, _, err = run_eval(["profile", str(cases_file(SMALL_CASES[:1]))],
                                 submission_file("correct"))
    assert rc == 0, err
    report = base64.b64decode(as_dict(lines)["benchmark.0.report"], b"+*").decode()
    assert "Name" in report and "CPU" in report


def test_secret_seed_is_mixed_into_case_seeds(run_eval, tmp_path, cases_file):
    """The submission sees the input of seed combine(public, secret), not of the public seed."""
    spy = tmp_path / "spy.py"
    seen = tmp_path / "seen.txt"
    spy.write_text("from reference import ref_kernel\n"
                   "def custom_kernel(data):\n"
                   f"    open({str(seen)!r}, 'w').write(repr(float(data[0][0, 0, 0])))\n"
                   "    return ref_kernel(data)\n")
    case = "batchsize: 1; qseqlen: 1; kvseqlen: 8; seed: 5"
    rc, _, _, err = run_eval(["test", str(cases_file([case]))], spy, env={"POPCORN_SEED": "777"})
    assert rc == 0, err
    mixed = generate_input(1, 1, 8, harness.combine_seeds(5, 777), device="cpu")[0][0, 0, 0]
    plain = generate_input(1, 1, 8, 5, device="cpu")[0][0, 0, 0]
    assert float(seen.read_text()) == float(mixed) != float(plain)


def test_exit_codes_for_bad_invocations(run_eval, submission_file, cases_file, tmp_path):
    correct = submission_file("correct")
    assert run_eval(["test"], correct)[0] == 2
    assert run_eval(["nonsense", str(cases_file(SMALL_CASES))], correct)[0] == 2
    bad_cases = tmp_path / "bad.txt"
    bad_cases.write_text("batchsize = 4\n")
    assert run_eval(["test", str(bad_cases)], correct)[0] == 113


def test_human_mode_prints_a_table_with_routes(run_eval, submission_file, cases_file):
    rc, _, out, err = run_eval(["test", str(cases_file(SMALL_CASES))],
                               submission_file("correct"), protocol=False)
    assert rc == 0, err
    first, what, *rows = out.splitlines()
    versions = describe_platform().split("; device ")[0]   # this process may see a GPU
    assert first == f"eval.py: {versions}; device CPU (no GPU)"
    assert what.startswith(f"test: 2 cases from {cases_file(SMALL_CASES)}; one call a case, checked")
    case_rows = [row for row in rows if row.startswith("batchsize")]
    assert len(case_rows) == 2
    assert all(" pass " in row and "route-of-test-submission" in row for row in case_rows)
    assert rows[-1] == "check: pass"
    assert "[2/2]" in err


def test_human_mode_benchmark_prints_geomean(run_eval, submission_file, cases_file):
    rc, _, out, err = run_eval(["benchmark", str(cases_file(SMALL_CASES))],
                               submission_file("correct"), protocol=False)
    assert rc == 0, err
    assert any(line.startswith("geomean of 2 means:") for line in out.splitlines())


def test_human_mode_fails_a_wrong_submission(run_eval, submission_file, cases_file):
    rc, _, out, _ = run_eval(["test", str(cases_file(SMALL_CASES[:1]))],
                             submission_file("zeros"), protocol=False)
    assert rc == 112
    assert " FAIL " in out and out.splitlines()[-1] == "check: fail"


def test_human_mode_says_what_it_runs_by_default(monkeypatch):
    monkeypatch.setattr(harness, "on_gpu", lambda: False)
    tests = harness.parse_cases("\n".join(harness.default_cases("test")))
    assert harness.run_line("test", tests, None).startswith(
        "test: the task's 4 cases (task.yml tests), at full size; ")
    cpu = harness.parse_cases("\n".join(harness.default_cases("benchmark")))
    assert harness.run_line("benchmark", cpu, None) == (
        "benchmark: the task's reduced 2 cases for a CPU (task.yml cpu_benchmarks); checked once, "
        "then up to 10 timed runs or 10 s a case; time: wall time of each call (perf_counter)")


# A submission whose every call takes 1.5 s; with progress lines every 0.5 s (a stand-in
# for the 5 s of eval.PROGRESS_INTERVAL_S, set through the module in this process).
SLOW_SUBMISSION = ("import time\n"
                   "from reference import ref_kernel\n"
                   "def custom_kernel(data):\n"
                   "    time.sleep(1.5)\n"
                   "    return ref_kernel(data)\n")


def test_human_mode_shows_progress_inside_a_long_case(monkeypatch, tmp_path, capsys):
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW_SUBMISSION)
    cases = tmp_path / "cases.txt"
    cases.write_text(SMALL_CASES[0] + "\n")
    monkeypatch.setenv("MLA_SUBMISSION", str(slow))
    for name, value in NO_GPU_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(harness, "PROGRESS_INTERVAL_S", 0.5)
    assert harness.human_main(["eval.py", "test", str(cases)], None) == 0
    out, err = capsys.readouterr()
    progress = [line for line in err.splitlines() if line.startswith("[1/1] ") and " s: " in line]
    assert any(line.endswith(" s: running the submission (its first call on a shape plans and "
                             "picks a route)") for line in progress), err
    assert out.splitlines()[-1] == "check: pass"


@pytest.mark.parametrize("lines, message", [
    (["batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 11",
      "batchsize: 2; qseqlen: 1; kvseqlen: 64; sede: 11"],
     "line 2: unknown key 'sede'; the keys are batchsize, qseqlen, kvseqlen, seed"),
    (["batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 11; seed: 12"], "line 1: key 'seed' given twice"),
    (["batchsize: 2; qseqlen: 1; kvseqlen: 64"], "line 1: missing key seed"),
    (["batchsize: 2; qseqlen: 1; kvseqlen: many; seed: 11"],
     "line 1: key 'kvseqlen' needs an integer, got 'many'"),
    ([], "no cases"),
])
def test_unreadable_cases_exit_113_naming_file_line_and_key(tmp_path, capsys, lines, message):
    path = tmp_path / "my_cases.txt"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(SystemExit) as exited:
        harness.read_cases(str(path), None)
    assert exited.value.code == 113
    assert capsys.readouterr().err.startswith(
        f"eval.py: cannot read test cases from `{path}`: {message}")


def test_eval_py_exits_113_on_unreadable_cases_without_a_traceback(run_eval, submission_file,
                                                                    cases_file):
    path = cases_file(["batchsize: 2; qseqlen: 1; kvseqlen: 64; sede: 11"])
    for protocol in (True, False):
        rc, results, out, err = run_eval(["test", str(path)], submission_file("correct"),
                                         protocol=protocol)
        assert (rc, results, out) == (113, [], ""), err
        assert err == (f"eval.py: cannot read test cases from `{path}`: line 1: unknown key "
                       f"'sede'; the keys are batchsize, qseqlen, kvseqlen, seed: "
                       f"'batchsize: 2; qseqlen: 1; kvseqlen: 64; sede: 11'\n")


def test_cases_command_names_the_known_sets(run_eval, submission_file):
    rc, _, out, err = run_eval(["cases", "bogus"], submission_file("correct"), protocol=False)
    assert (rc, out) == (2, "")
    assert err.startswith("eval.py: cases: no case set 'bogus' in task.yml; the sets are "
                          "tests, benchmarks, cpu_benchmarks\nusage: "), err


def test_a_bad_mode_is_named(run_eval, submission_file, cases_file):
    for protocol, modes in ((False, "test, benchmark, leaderboard (and profile, in protocol mode), "
                                    "or cases NAME"),
                            (True, "test, benchmark, leaderboard, profile")):
        rc, _, _, err = run_eval(["nonsense", str(cases_file(SMALL_CASES))],
                                 submission_file("correct"), protocol=protocol)
        assert rc == 2 and "Traceback" not in err
        assert err.startswith(f"eval.py: unknown mode 'nonsense'; the modes are {modes}\nusage: "), err


@cpu_only("without a GPU (and without TRITON_INTERPRET=1) the Triton routes cannot serve")
@pytest.mark.parametrize("route", ["triton_mxfp4:waves", "aiter_fp8"])
def test_a_forced_route_this_machine_cannot_serve_stops_before_any_case(run_eval, cases_file, route):
    rc, _, out, err = run_eval(["test", str(cases_file(SMALL_CASES))], REPO_ROOT / "submission.py",
                               protocol=False, env={"MLA_ROUTE": route, "TRITON_INTERPRET": "0"})
    assert rc == 2 and "Traceback" not in err, err
    assert f"eval.py: MLA_ROUTE='{route}' cannot serve on this machine (no GPU): " in err
    assert ("TRITON_INTERPRET=1" if route.startswith("triton") else "AMD GPU") in err
    assert "[1/2]" not in err and out == ""   # refused before the versions line


@cpu_only("on a CPU no Gluon form can run, interpreted or not")
@pytest.mark.parametrize("interpret,reason", [("0", "the Gluon forms run on gfx950 or NVIDIA sm_80+ GPUs"),
                                              ("1", "Gluon kernels do not run under TRITON_INTERPRET=1")])
def test_a_forced_gluon_form_stops_before_any_case_on_a_cpu(run_eval, cases_file, interpret, reason):
    """TRITON_INTERPRET=1 serves the Triton forms on a CPU, never a Gluon one: eval.py says
    so before any case instead of failing the first."""
    rc, _, out, err = run_eval(["test", str(cases_file(SMALL_CASES))], REPO_ROOT / "submission.py",
                               protocol=False, env={"MLA_ROUTE": "triton_fp8:gluon", "TRITON_INTERPRET": interpret})
    assert rc == 2 and "Traceback" not in err, err
    assert "eval.py: MLA_ROUTE='triton_fp8:gluon' cannot serve on this machine (no GPU): " in err and reason in err, err
    assert "[1/2]" not in err and out == ""   # refused before the versions line


@pytest.mark.parametrize("name, allowed", [("MLA_CHECK_RULE", "['1e-2', '2e-2', 'current']"),
                                           ("MLA_MXFP4_GENERATION", "['current', 'legacy']")])
def test_a_bad_reference_setting_is_named(run_eval, submission_file, cases_file, name, allowed):
    rc, _, _, err = run_eval(["test", str(cases_file(SMALL_CASES))], submission_file("correct"),
                             protocol=False, env={name: "loose"})
    assert (rc, err) == (2, f"eval.py: {name} must be one of {allowed}\n")


def test_a_submission_that_fails_to_import_is_named(run_eval, tmp_path, cases_file):
    broken = tmp_path / "broken.py"
    broken.write_text("def custom_kernel(data):\n    return data[0\n")
    rc, _, _, err = run_eval(["test", str(cases_file(SMALL_CASES))], broken, protocol=False)
    assert rc == 2, err
    assert f"eval.py: cannot import the submission {broken}: " in err and "SyntaxError" in err


def test_cases_command_prints_a_cases_file(run_eval, submission_file):
    rc, _, out, _ = run_eval(["cases", "benchmarks"], submission_file("correct"), protocol=False)
    assert rc == 0
    assert harness.parse_cases(out.strip())[7].args == {
        "batchsize": 256, "qseqlen": 1, "kvseqlen": 8192, "seed": 9826}


def test_without_a_gpu_human_mode_uses_the_reduced_benchmark_set(monkeypatch):
    monkeypatch.setattr(harness, "on_gpu", lambda: False)
    assert harness.default_cases("test") == harness.case_lines("tests")
    assert harness.default_cases("benchmark") == harness.default_cases("leaderboard") == [
        "batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217",
        "batchsize: 32; qseqlen: 1; kvseqlen: 1024; seed: 5412"]
    limits = harness.human_limits("leaderboard")
    assert (limits.max_runs, limits.max_time_ns) == (10, 10e9)


def test_on_a_gpu_human_mode_uses_the_leaderboard_sets_and_limits(monkeypatch):
    monkeypatch.setattr(harness, "on_gpu", lambda: True)
    assert harness.default_cases("test") == harness.case_lines("tests")
    assert harness.default_cases("benchmark") == harness.case_lines("benchmarks")
    assert harness.human_limits("leaderboard") == harness.MODE_LIMITS["leaderboard"]


@needs_gpu
def test_this_projects_submission_passes_on_the_gpu(run_eval, cases_file):
    """eval.py on the GPU with submission.py (the autopick, its routes compiled): test mode
    on two small cases, leaderboard mode (fresh inputs every timed run, each checked)."""
    submission = REPO_ROOT / "submission.py"
    rc, lines, _, err = run_eval(["test", str(cases_file(SMALL_CASES))], submission, gpu=True)
    assert (rc, lines[-1]) == (0, ("check", "pass")), err[-3000:]
    rc, lines, _, err = run_eval(["leaderboard", str(cases_file(SMALL_CASES[:1]))], submission, gpu=True)
    assert (rc, lines[-1]) == (0, ("check", "pass")), err[-3000:]


# ---------------------------------------------------------------------------
# A newcomer's mistakes: each named in one line, with its exit status
# ---------------------------------------------------------------------------

CASE = "batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 11"


def test_cases_files_may_hold_blank_lines_comments_and_a_trailing_semicolon():
    text = f"# my cases\n\n{CASE};\n   \n  # another comment\n{CASE.replace('11', '12')}\n\n"
    cases = harness.parse_cases(text)
    assert [case.args["seed"] for case in cases] == [11, 12]
    assert cases[0].spec == f"{CASE};"
    with pytest.raises(ValueError, match="no cases"):
        harness.parse_cases("# only a comment\n\n")


@pytest.mark.parametrize("line, message", [
    ("batchsize: 4.0; qseqlen: 1; kvseqlen: 64; seed: 1", "key 'batchsize' needs an integer, got '4.0'"),
    ("batchsize: 0; qseqlen: 1; kvseqlen: 64; seed: 1", "key 'batchsize' must be at least 1, got 0"),
    ("batchsize: 2; qseqlen: 0; kvseqlen: 64; seed: 1", "key 'qseqlen' must be at least 1, got 0"),
    ("batchsize: 2; qseqlen: 1; kvseqlen: 0; seed: 1", "key 'kvseqlen' must be at least 1, got 0"),
    ("batchsize: 2; qseqlen: 1; kvseqlen: -5; seed: 1", "key 'kvseqlen' must be at least 1, got -5"),
    ("batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 18446744073709551616",
     "key 'seed' must be from -9223372036854775808 to 18446744073709551615, got 18446744073709551616"),
    ("batchsize: 300000; qseqlen: 1; kvseqlen: 8192; seed: 1",
     "batchsize x kvseqlen = 2457600000 exceeds 2147483647 (2**31 - 1), the range of the int32 kv_indptr"),
    ("batchsize: 2; qseqlen: 1; kvseqlen: 64; seed: 1;;", "'' is not `key: value`"),
])
def test_a_value_out_of_bounds_names_its_key_and_the_bound(tmp_path, capsys, line, message):
    path = tmp_path / "my_cases.txt"
    path.write_text(f"# header\n{line}\n")
    with pytest.raises(SystemExit) as exited:
        harness.read_cases(str(path), None)
    assert exited.value.code == 113
    assert capsys.readouterr().err.startswith(
        f"eval.py: cannot read test cases from `{path}`: line 2: {message}")


def test_a_seed_that_popcorn_seed_mixes_out_of_range_is_named():
    with pytest.raises(ValueError, match=r"line 1: seed 11 mixed with POPCORN_SEED gives \d+, "
                                         r"outside torch's seed range"):
        harness.parse_cases(CASE, secret_seed=2**40)


def test_memory_need_follows_the_inputs_each_mode_holds():
    small = {"batchsize": 2, "qseqlen": 1, "kvseqlen": 64, "seed": 1}
    largest = {"batchsize": 256, "qseqlen": 1, "kvseqlen": 8192, "seed": 1}
    kv_bytes = 256 * 8192 * harness.KV_ROW_BYTES
    assert harness.KV_ROW_BYTES == 576 * 2 + 576 + 288 + 24   # bf16, fp8, MXFP4 and its scales
    assert harness.case_memory_need(largest, "test") > 2 * kv_bytes
    assert harness.case_memory_need(largest, "profile") < harness.case_memory_need(largest, "test")
    assert harness.case_memory_need(largest, "leaderboard") == harness.case_memory_need(largest, "test")
    assert harness.case_memory_need(small, "test") < 2**30
    cases = harness.parse_cases(f"{CASE}\nbatchsize: 256; qseqlen: 1; kvseqlen: 8192; seed: 9826")
    need = harness.case_memory_need(cases[1].args, "test")
    assert harness.memory_problem(cases, "test", need, "available (MemAvailable)") is None
    assert harness.memory_problem(cases, "test", None, "unknown") is None
    problem = harness.memory_problem(cases, "test", need - 1, "available (MemAvailable)")
    assert problem == (f"the case `batchsize: 256; qseqlen: 1; kvseqlen: 8192; seed: 9826` needs "
                       f"about {need / 2**30:.1f} GiB of memory in test mode (its inputs 2 times, "
                       f"and the reference's work), and {(need - 1) / 2**30:.1f} GiB is available "
                       f"(MemAvailable): give a cases file of smaller cases (docs/commands.md gives each "
                       f"mode's peak)")


def test_a_case_too_large_for_this_machine_exits_113_before_any_input(run_eval, submission_file,
                                                                       cases_file):
    # 100000 x 8192 KV rows are within int32 but need ~3 TB: refused on any machine.
    huge = "batchsize: 100000; qseqlen: 1; kvseqlen: 8192; seed: 1"
    rc, lines, out, err = run_eval(["test", str(cases_file([CASE, huge]))],
                                   submission_file("correct"), protocol=True)
    assert (rc, lines) == (113, []), err
    assert err.startswith(f"eval.py: the case `{huge}` needs about "), err
    assert " GiB of memory in test mode" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_without_a_mode_eval_py_names_the_modes_and_runs_nothing(run_eval, submission_file):
    rc, _, out, err = run_eval([], submission_file("correct"), protocol=False)
    assert (rc, out) == (2, "")
    assert err.startswith("eval.py: name a mode: test (the task's 4 test cases at full size), "
                          "benchmark (the benchmark table), leaderboard"), err
    assert "docs/commands.md" in err and "\nusage: " in err


def test_a_submission_without_custom_kernel_is_a_usage_error(run_eval, tmp_path, cases_file):
    empty = tmp_path / "no_kernel.py"
    empty.write_text("def kernel(data):\n    return data\n")
    rc, _, _, err = run_eval(["test", str(cases_file([CASE]))], empty, protocol=False)
    assert (rc, err) == (2, f"eval.py: the submission {empty} defines no custom_kernel(data) function\n")


def test_a_forced_interpreted_route_needs_a_cases_file(run_eval, submission_file):
    rc, _, out, err = run_eval(["test"], submission_file("correct"), protocol=False,
                               env={"TRITON_INTERPRET": "1", "MLA_ROUTE": "triton_mxfp4"})
    assert rc == 2 and "[1/4]" not in err and out == "", err
    assert err.startswith("eval.py: MLA_ROUTE='triton_mxfp4' under TRITON_INTERPRET=1 runs "
                          "Triton's interpreter, which would take hours over the task's full-size "
                          "cases"), err
    assert "python3 eval.py cases tests | head -n 1 > small_cases.txt" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("value, problem", [
    ("abc", "POPCORN_FD='abc' is not a file descriptor number"),
    ("987", "POPCORN_FD='987': file descriptor 987 is not open"),
])
def test_popcorn_fd_problems_are_named(value, problem):
    assert harness.popcorn_fd_problem(value).startswith(problem)


def test_a_read_only_popcorn_fd_is_named(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("")
    with open(path) as read_only:
        assert harness.popcorn_fd_problem(str(read_only.fileno())).endswith(
            "is open for reading only (e.g. `POPCORN_FD=3 python3 eval.py test cases.txt 3>results.txt`)")
    with open(path, "w") as writable:
        assert harness.popcorn_fd_problem(str(writable.fileno())) is None


def test_a_bad_popcorn_fd_or_seed_is_one_line_and_exit_2(run_eval, submission_file, cases_file):
    cases = str(cases_file([CASE]))
    for env, line in (({"POPCORN_FD": "987"}, "eval.py: POPCORN_FD='987': file descriptor 987 is not open"),
                      ({"POPCORN_FD": "abc"}, "eval.py: POPCORN_FD='abc' is not a file descriptor number"),
                      ({"POPCORN_SEED": "x"}, "eval.py: POPCORN_SEED='x' is not an integer from 0 to 4294967295")):
        rc, _, out, err = run_eval(["test", cases], submission_file("correct"), protocol=False, env=env)
        assert (rc, out, len(err.splitlines())) == (2, "", 1), err
        assert err.startswith(line), err


def test_ctrl_c_ends_eval_py_and_its_worker_with_one_line(tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the whole process group) while a case runs:
    exit 130, one line, no traceback from the parent or the worker, no process left."""
    import os
    import signal
    import subprocess
    import sys
    import time
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW_SUBMISSION.replace("time.sleep(1.5)", "time.sleep(120)"))
    cases = tmp_path / "cases.txt"
    cases.write_text(CASE + "\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("POPCORN_", "MLA_"))}
    env.update(NO_GPU_ENV, MLA_SUBMISSION=str(slow), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "eval.py"), "test", str(cases)], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    started = proc.stderr.readline()   # "[1/1] <case>": the worker is running the case
    assert started.startswith("[1/1] "), started + proc.stderr.read()
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["eval.py: interrupted (Ctrl-C)"], err
    assert "check:" not in out
    deadline = time.monotonic() + 10
    while True:   # the worker and multiprocessing's helpers end with eval.py
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a process of eval.py's group outlived it"
        time.sleep(0.2)


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("TRUE", True), ("0", False),
                                       ("false", False), ("", False)])
def test_a_switch_takes_its_documented_spellings(monkeypatch, value, on):
    import submission
    monkeypatch.setenv("MLA_CHECK_INDPTR", value)
    assert submission._env_flag("MLA_CHECK_INDPTR") is on


@pytest.mark.parametrize("name, value, allowed", [
    ("MLA_CHECK_INDPTR", "maybe", "a switch is 1 or true (on), 0, false or unset (off)"),
    ("MLA_DEBUG", "yes", "a switch is 1 or true (on), 0, false or unset (off)"),
    ("TRITON_INTERPRET", "true", "set it to 1 (Triton's interpreter) or 0 / unset"),
    ("MLA_ROUTE", "triton", "unknown route; known routes are ['aiter_fp8', 'torch', 'triton_fp8', 'triton_mxfp4']"),
    ("MLA_ROUTE", "triton_fp8:nonsense", "unknown form; known forms are ['"),
])
def test_a_setting_spelled_otherwise_stops_eval_py_before_any_case(monkeypatch, name, value, allowed):
    """A switch, TRITON_INTERPRET or MLA_ROUTE spelled otherwise: submission.cannot_run_here()
    names the variable, its value and what it takes; eval.py prints that line and exits 2
    before any case (as for a forced route that cannot serve: the forced-route tests above)."""
    import submission
    for switch in (*submission.SWITCHES, "TRITON_INTERPRET", "MLA_ROUTE"):
        monkeypatch.delenv(switch, raising=False)
    assert submission.cannot_run_here() is None
    monkeypatch.setenv(name, value)
    assert submission.cannot_run_here().startswith(f"{name}={value!r}: {allowed}")


def run_in(python: str, args: list[str], cwd, env: dict | None = None):
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("POPCORN_", "MLA_"))}
    proc = subprocess.run([python, str(REPO_ROOT / "eval.py"), *args], cwd=cwd, env={**environment, **(env or {})},
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def python_without_packages(tmp_path_factory) -> str:
    """A fresh venv's Python, without pip or the system's site packages: no torch, triton
    or pyyaml, as before set-up (or outside the venv set-up installed into)."""
    venv = tmp_path_factory.mktemp("bare_venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python3")
    assert subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0
    return python


@pytest.mark.parametrize("args", [[], ["benchmark"], ["test", "cases.txt"], ["cases", "tests"]])
def test_without_torch_eval_py_names_what_is_missing_and_the_set_up(python_without_packages, tmp_path, args):
    """Any mode, even none: one line naming the missing packages, this Python and the
    set-up to run, exit 2, before torch's import could raise."""
    rc, out, err = run_in(python_without_packages, args, tmp_path)
    assert (rc, out) == (2, ""), err
    assert err == (f"eval.py: torch, triton and pyyaml are not installed for this Python ({python_without_packages}): "
                   f"run `bash tools/setup.sh` in {REPO_ROOT} (README.md, Start), or, if you set up a venv, "
                   f"activate it first\n")


def test_protocol_mode_without_torch_names_torch_and_triton(python_without_packages, tmp_path):
    """The leaderboard's protocol reads no task.yml: pyyaml is not asked for there."""
    with open(tmp_path / "results.txt", "w") as results:
        proc = subprocess.run([python_without_packages, str(REPO_ROOT / "eval.py"), "test", "cases.txt"], cwd=tmp_path,
                              env={"PATH": os.environ["PATH"], "POPCORN_FD": str(results.fileno())},
                              pass_fds=(results.fileno(),), capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("eval.py: torch and triton are not installed for this Python"), proc.stderr


def test_a_missing_triton_alone_is_named(monkeypatch):
    real_find_spec = harness.importlib.util.find_spec
    monkeypatch.setattr(harness.importlib.util, "find_spec",
                        lambda name, *rest: None if name == "triton" else real_find_spec(name, *rest))
    assert harness.missing_modules(protocol=False) == ["triton"]
    assert harness.missing_modules_line(["triton"]).startswith(
        f"eval.py: triton is not installed for this Python ({sys.executable}): run `bash tools/setup.sh` in ")


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_with_or_without_torch(python_without_packages, tmp_path, flag):
    for python in (sys.executable, python_without_packages):
        rc, out, err = run_in(python, [flag], tmp_path)
        assert (rc, err) == (0, ""), err
        assert out.startswith(harness.USAGE_LINES + "\n\n" + harness.__doc__.strip()), out
        assert out.endswith("More: docs/commands.md\n")
    rc, out, err = run_in(sys.executable, ["benchmark", flag], tmp_path)
    assert (rc, err) == (0, "") and out.startswith("usage: python3 eval.py"), err


def test_help_into_a_pipe_its_reader_closed_is_no_traceback():
    """`python3 eval.py --help | head -n 5`: the reader is gone before eval.py writes."""
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "eval.py"), "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert (proc.wait(timeout=120), err) == (0, "")


def test_a_bad_mla_route_is_refused_before_the_versions_and_header_lines(run_eval, monkeypatch):
    """Whatever spellings submission.py takes, its own check (cannot_run_here, over its
    MLA_ROUTE parser) decides; eval.py prints its one line and nothing else, exit 2."""
    import submission
    monkeypatch.setenv("MLA_ROUTE", "no_such_route")
    refusal = submission.cannot_run_here()
    assert refusal and refusal.startswith("MLA_ROUTE='no_such_route': "), refusal
    for mode in ("benchmark", "test"):
        rc, _, out, err = run_eval([mode], REPO_ROOT / "submission.py", protocol=False,
                                   env={"MLA_ROUTE": "no_such_route"})
        assert (rc, out, err) == (2, "", f"eval.py: {refusal}\n")


# Results that cannot be written: /dev/full takes the open and refuses every write, as a full
# disk does. One line naming the output and the system's reason, exit 2, no traceback.
FULL = "/dev/full"
NO_SPACE = os.strerror(errno.ENOSPC)
needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason=f"needs {FULL} (Linux)")


def run_into_full(args: list[str], tmp_path, submission: Path, popcorn: bool):
    """eval.py with stdout on /dev/full, or with POPCORN_FD naming a descriptor of /dev/full
    (stdout a pipe). Returns (exit status, stdout, stderr, that descriptor)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("POPCORN_", "MLA_"))}
    environment.update(NO_GPU_ENV, MLA_SUBMISSION=str(submission))
    with open(FULL, "w") as full:
        if popcorn:
            environment["POPCORN_FD"] = str(full.fileno())
        proc = subprocess.run([sys.executable, str(REPO_ROOT / "eval.py"), *args], cwd=tmp_path, env=environment,
                              stdout=subprocess.PIPE if popcorn else full, stderr=subprocess.PIPE,
                              pass_fds=(full.fileno(),) if popcorn else (), text=True, timeout=300)
        return proc.returncode, proc.stdout or "", proc.stderr, full.fileno()


@needs_dev_full
@pytest.mark.parametrize("args", [pytest.param(["cases", "tests"], marks=pytest.mark.fast), ["--help"],
                                  ["test", "CASES"]])
def test_results_on_a_full_stdout_end_in_one_line(tmp_path, submission_file, cases_file, args):
    args = [str(cases_file([CASE])) if arg == "CASES" else arg for arg in args]
    rc, _, err, _ = run_into_full(args, tmp_path, submission_file("correct"), popcorn=False)
    assert (rc, err) == (2, f"eval.py: cannot write the results to stdout: {NO_SPACE}\n")


@needs_dev_full
@pytest.mark.fast
def test_result_lines_on_a_full_popcorn_fd_end_in_one_line(tmp_path, submission_file, cases_file):
    rc, out, err, fd = run_into_full(["test", str(cases_file([CASE]))], tmp_path, submission_file("correct"),
                                     popcorn=True)
    assert (rc, out, err) == (2, "", f"eval.py: cannot write the result lines to POPCORN_FD={fd}: {NO_SPACE}\n")
