"""Results rendered from files: `bench/common.py` writes a benchmark's numbers as JSON,
`docs/render_results.py` renders the results pages (tables, plots) from such files."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
import common  # noqa: E402  (bench/common.py: setup.cfg puts bench/ on the tests' path)
import render_results  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def measurement(**changes):
    record = {
        "page": "speed",
        "title": "Encoder forward",
        "command": "python bench/bench_encoder.py --repeat 3",
        "date": "2026-11-21",
        "machine": "2-core CPU",
        "versions": {"keras": "3.15.0"},
        "tables": [
            {
                "columns": ["peer", "ours vs peer"],
                "rows": [["keras-hub", "1.08×"], ["tf-models | official", "1.11×"]],
                "plot": {"label": "peer", "value": "ours vs peer"},
            }
        ],
    }
    record.update(changes)
    return record


def test_a_small_json_renders_its_table_plot_and_provenance(tmp_path):
    (tmp_path / "encoder.json").write_text(json.dumps(measurement()), encoding="utf-8")
    files = render_results.render_all(tmp_path)
    page = files["speed.md"]
    assert "| peer | ours vs peer |\n|---|---|\n| keras-hub | 1.08× |" in page
    assert "| tf-models \\| official | 1.11× |" in page  # A pipe in a cell is escaped.
    assert "- command: `python bench/bench_encoder.py --repeat 3`" in page
    assert "- date: 2026-11-21; machine: 2-core CPU" in page and "keras 3.15.0" in page
    assert "![Encoder forward](encoder-0.png)" in page
    assert files["encoder-0.png"].startswith(PNG)
    assert "[Speed against peers](speed.md): Encoder forward" in files["index.md"]
    assert "tflite.md" not in files  # No data, no page.


def test_bad_files_are_refused_naming_them(tmp_path):
    broken = measurement()
    del broken["command"]
    (tmp_path / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken.json: missing \['command'\]"):
        render_results.load(tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps(measurement(page="nope")), encoding="utf-8")
    with pytest.raises(ValueError, match="unknown page 'nope'"):
        render_results.load(tmp_path)
    with pytest.raises(ValueError, match="has 1 cells, columns 2"):
        render_results.markdown_table({"columns": ["a", "b"], "rows": [["x"]]})


def test_a_benchmark_run_is_recorded_and_renders(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_fake.py", "--repeat", "3"])
    monkeypatch.setattr(common, "TABLES", [])

    def main():
        print(common.format_table(["mode", "x keras-hub"], [["graph", 1.0834], ["xla", 0.98]]))
        return {"ratio": 1.0834}

    assert common.run_and_record(main, str(ROOT / "bench" / "bench_fake.py"), tmp_path) == {
        "ratio": 1.0834
    }
    record = json.loads((tmp_path / "bench_fake.json").read_text(encoding="utf-8"))
    assert record["command"] == "python bench/bench_fake.py --repeat 3"
    assert record["tables"] == [
        {"columns": ["mode", "x keras-hub"], "rows": [["graph", "1.08"], ["xla", "0.98"]]}
    ]
    assert record["returned"] == {"ratio": 1.0834} and "graph" in record["output"][2]
    assert record["versions"]["keras"].startswith("3.") and record["machine"]["logical_cpus"] >= 1
    assert record["date"][:4].isdigit() and record["date"].endswith("+00:00")
    # Kept for the docs: a page and a title, and it renders.
    record.update(page="speed", title="Fake")
    data = tmp_path / "data"
    data.mkdir()
    (data / "fake.json").write_text(json.dumps(record), encoding="utf-8")
    page = render_results.render_all(data)["speed.md"]
    assert "| graph | 1.08 |" in page and "logical_cpus" in page


def test_the_committed_measurements_render():
    files = render_results.render_all()
    assert set(render_results.PAGES) <= {name[:-3] for name in files if name.endswith(".md")}
    records = render_results.load()
    assert len(records) >= 15 and all(r.get("transcribed") or r.get("script") for r in records)
