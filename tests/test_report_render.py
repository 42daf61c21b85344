"""bench/report.py render: the README's table and chart come from a committed report."""
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import report  # noqa: E402

REPORT = ROOT / "results" / "2026-11-30-h200" / "harness-final" / "report.json"


def test_render_writes_table_and_chart_between_the_markers(tmp_path):
    folder = tmp_path / "results" / "run"
    folder.mkdir(parents=True)
    shutil.copy(REPORT, folder / "report.json")
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{report.README_BEGIN}\nold table\n{report.README_END}\nafter\n")

    report.render(folder / "report.json", readme)

    text = readme.read_text()
    inside = text[text.index(report.README_BEGIN):text.index(report.README_END)]
    assert text.startswith("before\n") and text.endswith(f"{report.README_END}\nafter\n")
    assert "old table" not in inside
    assert "From `results/run/report.json`:" in inside
    rows = json.loads(REPORT.read_text())["rows"]
    for row in rows:  # every shape's row, with its route and its device time
        assert f"| {row['batch']} | {row['kv_len']} | `{row['route']}` |" in inside
        assert f"{row['device_us']:.1f}" in inside
    assert "![% of roofline per shape](results/run/roofline.png)" in inside
    assert (folder / "roofline.png").stat().st_size > 1000
    assert (folder / "report.md").read_text().strip() in inside
