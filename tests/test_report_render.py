"""bench/report.py: rows on the leaderboard's clock, the served output's error, and the
README's table and chart (host logic: CPU tensors)."""
import json
import statistics

import pytest
import torch

from bench import report

pytestmark = pytest.mark.fast

FLOOR = {"events_only_us": 2.0, "one_triton_launch_us": 5.0}
BANDWIDTH = 4.0e12


def row(index, batch, kv_len):
    leaderboard = [20.0 + index, 24.0 + index, 22.0 + index]
    device = None if index == 3 else 18.0 + index  # a route whose call cannot be graph-captured
    errors = {"rel_rms": 0.03 + index / 1000, "max_over_rms": 0.2, "nonfinite": 0}
    return report.summarize_shape(batch, kv_len, f"triton_fp8[splits={index + 1}]", "pass", "", leaderboard,
                                  40.0, device, BANDWIDTH, FLOOR, errors)


def synthetic_report():
    rows = [row(i, batch, kv_len) for i, (batch, kv_len) in enumerate(report.BENCHMARK_SHAPES)]
    return {"date": "2026-12-01", "machine": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0",
            "runs_per_shape": 3, "hbm_read_tbps": BANDWIDTH / 1e12, "floor": FLOOR, "rows": rows,
            "geomean_leaderboard_us": report.geomean([r["leaderboard_us"] for r in rows]),
            "geomean_device_us": report.geomean([r["device_us"] for r in rows if r["device_us"]]),
            "geomean_host_us": report.geomean([r["host_us"] for r in rows]),
            "command": "python3 -m bench.report measure --out /out"}


def test_row_roofline_comes_from_the_leaderboard_clock():
    r = row(0, 256, 8192)
    assert r["leaderboard_us"] == 22.0 and r["leaderboard_best_us"] == 20.0
    assert r["leaderboard_err_us"] == pytest.approx(statistics.stdev([20.0, 24.0, 22.0]) / 3 ** 0.5)
    assert r["host_us"] == 40.0 and r["device_us"] == 18.0  # host: as measured
    assert r["bytes"] == 256 * 8192 * 576 + 256 * 16 * (576 + 512) * 2
    assert r["pct_roofline"] == pytest.approx(100 * r["bytes"] / BANDWIDTH * 1e6 / 22.0)
    assert r["achieved_gbps"] == pytest.approx(r["bytes"] / 22e-6 / 1e9)
    assert r["x_floor"] == pytest.approx(22.0 / 5.0)
    assert r["ideal_us"] == pytest.approx(5.0 + r["bytes"] / BANDWIDTH * 1e6)  # one-launch floor + bytes / bandwidth
    assert r["x_ideal"] == pytest.approx(22.0 / r["ideal_us"])
    assert r["flashmla_us"] == 585.0  # FlashMLA's recorded figure for 256 x 8192


def test_output_errors_are_relative_to_the_exact_outputs_rms():
    exact = torch.randn(4, 16, 512, generator=torch.Generator().manual_seed(0))
    assert report.output_errors(exact, exact) == {"rel_rms": 0.0, "max_over_rms": 0.0, "nonfinite": 0}
    rms = exact.double().pow(2).mean().sqrt().item()
    halved = report.output_errors(exact * 0.5, exact)
    assert halved["rel_rms"] == pytest.approx(0.5)
    assert halved["max_over_rms"] == pytest.approx(0.5 * exact.abs().max().item() / rms)
    assert report.output_errors(torch.zeros_like(exact), exact)["rel_rms"] == pytest.approx(1.0)
    poisoned = exact.clone()
    poisoned[0, 0, 0] = float("nan")
    assert report.output_errors(poisoned, exact)["nonfinite"] == 1


def test_render_writes_table_and_chart_between_the_markers(tmp_path):
    folder = tmp_path / "results" / "run"
    folder.mkdir(parents=True)
    data = synthetic_report()
    (folder / "report.json").write_text(json.dumps(data))
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{report.README_BEGIN}\nold table\n{report.README_END}\nafter\n")

    report.render(folder / "report.json", readme)

    text = readme.read_text()
    inside = text[text.index(report.README_BEGIN):text.index(report.README_END)]
    assert text.startswith("before\n") and text.endswith(f"{report.README_END}\nafter\n")
    assert "old table" not in inside
    assert "From `results/run/report.json`:" in inside
    page = tmp_path / "docs" / "results.md"   # a page in a folder of its own links up to results/
    page.parent.mkdir()
    page.write_text(f"{report.README_BEGIN}\n{report.README_END}\n")
    report.render(folder / "report.json", page)
    assert "From `../results/run/report.json`:" in page.read_text()
    assert "![% of roofline per shape](../results/run/roofline.png)" in page.read_text()
    assert "| leaderboard clock mean ± err (us) |" in inside and "| device (us) | host (us) |" in inside
    assert f"| {report.FLASHMLA_LABEL} (us) |" in inside and "graph-replayed, 2026-11-29" in report.FLASHMLA_LABEL
    for r in data["rows"]:  # every shape: route, the three times, x ideal, the roofline share, error, FlashMLA
        device = f"{r['device_us']:.1f}" if r["device_us"] else "n/a"
        assert (f"| {r['batch']} | {r['kv_len']} | `{r['route']}` | pass | {r['leaderboard_us']:.1f} ± "
                f"{r['leaderboard_err_us']:.1f} | {r['leaderboard_best_us']:.1f} | {r['x_ideal']:.2f} | {device} | "
                f"{r['host_us']:.1f} |") in inside
        assert (f"| {r['pct_roofline']:.0f}% | {100 * r['error_vs_bf16']['rel_rms']:.2f}% | 20.0% | "
                f"{report.FLASHMLA_US[(r['batch'], r['kv_len'])]:g} |") in inside
    assert f"leaderboard clock {data['geomean_leaderboard_us']:.1f} us" in inside
    assert f"{report.FLASHMLA_LABEL} 68.1 us" in inside  # FlashMLA's recorded geomean, 68 us
    assert f"host {data['geomean_host_us']:.1f} us" in inside
    assert "![% of roofline per shape](results/run/roofline.png)" in inside
    assert (folder / "roofline.png").stat().st_size > 1000
    assert (folder / "report.md").read_text().strip() in inside


def test_a_report_measured_before_the_error_column_still_renders():
    data = synthetic_report()
    for r in data["rows"]:
        del r["error_vs_bf16"], r["x_ideal"]
    text = report.table(data)
    for r in data["rows"]:
        assert f"% | n/a | n/a | {report.FLASHMLA_US[(r['batch'], r['kv_len'])]:g} |" in text
