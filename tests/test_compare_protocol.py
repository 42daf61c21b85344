"""bench/compare_protocol.py: our eval.py's leaderboard means against upstream's, per case."""
from pathlib import Path

import pytest

from bench import compare_protocol

pytestmark = pytest.mark.fast

SPECS = ["batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217",
         "batchsize: 256; qseqlen: 1; kvseqlen: 8192; seed: 9826"]


def protocol(path: Path, means_ns, check="pass", spec_after_stats=False) -> Path:
    """A leaderboard protocol file; upstream logs each spec after its stats, ours before."""
    lines = ["benchmark-count: 2"]
    for index, (spec, mean) in enumerate(zip(SPECS, means_ns)):
        stats = [f"benchmark.{index}.runs: 100", f"benchmark.{index}.mean: {mean}",
                 f"benchmark.{index}.err: 10.0"]
        spec_line = [f"benchmark.{index}.spec: {spec}"]
        lines += stats + spec_line if spec_after_stats else spec_line + stats
    path.write_text("\n".join(lines + [f"check: {check}"]) + "\n")
    return path


def test_within_tolerance_passes_and_prints_each_case(tmp_path, capsys):
    ours = protocol(tmp_path / "ours.txt", [16000.0, 630000.0])
    upstream = protocol(tmp_path / "up.txt", [15500.0, 620000.0], spec_after_stats=True)
    assert compare_protocol.main([str(ours), str(upstream)]) == 0
    out = capsys.readouterr().out
    assert f"{SPECS[0]:<52} {16.0:>10.1f} {15.5:>14.1f} {16 / 15.5:>7.3f}  yes" in out
    assert "check: ours pass, upstream pass" in out


def test_a_case_off_by_more_than_5_percent_fails(tmp_path, capsys):
    ours = protocol(tmp_path / "ours.txt", [16000.0, 700000.0])
    upstream = protocol(tmp_path / "up.txt", [16000.0, 620000.0])
    assert compare_protocol.main([str(ours), str(upstream)]) == 1
    assert "NO" in capsys.readouterr().out


def test_a_failed_check_or_missing_case_fails(tmp_path):
    upstream = protocol(tmp_path / "up.txt", [16000.0, 620000.0])
    failed = protocol(tmp_path / "failed.txt", [16000.0, 620000.0], check="fail")
    assert compare_protocol.main([str(failed), str(upstream)]) == 1
    partial = tmp_path / "partial.txt"
    partial.write_text(f"benchmark-count: 2\nbenchmark.0.spec: {SPECS[0]}\nbenchmark.0.mean: 16000.0\n"
                       "benchmark.1.status: fail\ncheck: fail\n")
    assert compare_protocol.main([str(partial), str(upstream)]) == 1
