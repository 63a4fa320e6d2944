"""bench/pretraining_budget.py: its configurations, equal-time step counts and tables, and (slow)
the whole benchmark at a tiny size on the demo's docstrings alone (no real data folder)."""

import json
import os
import subprocess
import sys

import pretraining_budget
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_configurations_name_an_objective_and_a_row_format():
    assert pretraining_budget.split_config("mlm_sop+packed") == ("mlm_sop", True)
    assert pretraining_budget.split_config("electra") == ("electra", False)
    with pytest.raises(ValueError, match="'\\+packed' or nothing"):
        pretraining_budget.split_config("mlm+unpadded")
    # ELECTRA reads the paper's pairs; mlm RoBERTa's full-sentence rows.
    kinds = {
        o: pretraining_budget.records_kind(o) for o in ("mlm_nsp", "mlm", "mlm_sop", "electra")
    }
    assert kinds == {"mlm_nsp": "mlm_nsp", "mlm": "mlm", "mlm_sop": "mlm_sop", "electra": "mlm_nsp"}


def test_equal_time_gives_each_configuration_the_steps_of_its_own_step_time():
    args = pretraining_budget.parse_args(["--out", "x", "--seconds", "120", "--loop", "25"])
    assert pretraining_budget.budget_steps(args, 0.1) == 1200  # 120 s / 0.1 s, in units of 100.
    assert pretraining_budget.budget_steps(args, 0.13) == 900  # 923 rounded down to a unit.
    assert pretraining_budget.budget_steps(args, 10.0) == 100  # At least four logging loops.


def test_step_seconds_leave_out_the_first_loop():
    summary = {
        "start_step": 0,
        "history": [
            {"step": 10, "seconds": 9.0},  # Tracing.
            {"step": 20, "seconds": 1.0},
            {"step": 30, "seconds": 1.2},
            {"step": 40, "seconds": 3.0},
        ],
    }
    assert pretraining_budget.step_seconds(summary) == pytest.approx(0.12)


def test_tables_compare_real_tokens_per_second_and_spread_over_seeds():
    args = pretraining_budget.parse_args(["--out", "x"])
    results = {
        "throughput": {
            "mlm_nsp": {"step_seconds": [0.5, 0.4, 0.6], "real_share": 0.5},
            "mlm_nsp+packed": {"step_seconds": [0.44, 0.5], "real_share": 0.99},
        },
        "corpora": {"docs": [0.6, 0.96]},
    }
    rows = pretraining_budget.throughput_table(args, results)["rows"]
    # Fastest rounds 0.4 and 0.44 s: 1.1x the step time, 1.98x the real tokens: 1.8x.
    assert rows[1][-1] == "1.80x" and rows[0][1] == "50.0%"
    corpus = pretraining_budget.corpora_table(args, results)["rows"][0]
    assert corpus[1:] == ["60.0%", "96.0%", f"{0.96 / 0.6 * 0.4 / 0.44:.2f}x"]
    assert pretraining_budget.spread([0.5, 0.7, 0.6]) == "60.0% (50.0%-70.0%)"
    assert pretraining_budget.spread([]) == "-"


@pytest.mark.slow  # Every stage at a tiny size: about 4 minutes on 2 cores.
def test_the_benchmark_runs_every_stage_and_resumes(tmp_path):
    command = [sys.executable, os.path.join(ROOT, "bench", "pretraining_budget.py")]
    command += ["--out", str(tmp_path), "--quick", "--seconds", "2", "--seeds", "0"]
    command += ["--configs", "mlm_nsp+packed,mlm,electra+packed"]
    env = dict(os.environ, KERAS_BERT_REAL_DATA=str(tmp_path / "absent"))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "record.json").read_text())
    throughput, corpora, objectives = record["tables"]
    assert [r[0] for r in objectives["rows"]] == ["mlm_nsp+packed", "mlm", "electra+packed"]
    assert len(corpora["rows"]) == 1  # The docstrings alone without the real data folder.
    results = json.loads((tmp_path / "results.json").read_text())
    for run in results["runs"].values():
        assert [f["step"] for f in run["finetuned"]][-1] == run["steps"]
        assert 0 <= run["finetuned"][-1]["packages"] <= 1 and "sst2" not in run["finetuned"][-1]
    assert (tmp_path / "budget.png").stat().st_size > 0
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "Pre-training for" in again.stdout
    assert "timing " not in again.stdout  # Every finished stage is kept.
