"""eval.py speaks the leaderboard's protocol: result lines on POPCORN_FD, seed mixing,
modes, exit codes; and its human mode prints a table. Small cases, run as subprocesses
that see no GPU (the protocol is host logic; conftest.run_eval); on a GPU, eval.py also
runs this project's submission there, in test and leaderboard mode."""
import base64

import pytest

import eval as harness
from conftest import REPO_ROOT, needs_gpu
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
    first, *rows = out.splitlines()
    versions = describe_platform().split("; device ")[0]   # this process may see a GPU
    assert first.startswith(f"eval.py: {versions}; device CPU (no GPU): ")
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
