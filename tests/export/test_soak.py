"""The soak, short: a few minutes of mixed traffic (empty to 1 MB texts, every task kind) on one
process serving every kind of export; zero failed requests, resident memory flat after warmup.
The full hour: `nice -n 10 .venv/bin/python bench/soak_serving.py --minutes=60`."""

import json
import os
import subprocess
import sys

import pytest

from keras_bert.testing.real_data import REAL_DATA as DATA

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_a_few_minutes_of_mixed_traffic_fail_nothing_and_keep_memory_flat(tmp_path):
    if not os.path.isdir(os.path.join(DATA, "squad_v1.1")):
        pytest.skip(f"no real texts at {DATA}")
    out = tmp_path / "soak.json"
    run = subprocess.run(  # Its own process: the memory measured is the serving's alone.
        [
            sys.executable,
            os.path.join(ROOT, "bench", "soak_serving.py"),
            "--minutes=4",
            "--settle=0.25",
            "--no-minilm",
            f"--data={DATA}",
            f"--out={out}",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert out.exists(), run.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["failed"] == 0, summary["failures"]
    assert summary["growth"] < 0.05, summary
    kinds = {"sst2", "mnli", "stsb", "conll2003", "swag", "squad1", "squad2", "encoder"}
    assert set(summary["requests"]) == kinds and min(summary["requests"].values()) > 0
    assert run.returncode == 0
