"""bench/pretraining_budget.py: its configurations, equal-time step counts and tables, and (slow)
the whole benchmark at a tiny size on the demo's docstrings alone (no real data folder)."""

import json
import os
import subprocess
import sys

import numpy as np
import pretraining_budget
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_configurations_name_an_objective_and_a_row_format():
    assert pretraining_budget.split_config("mlm_sop+packed") == ("mlm_sop", True)
    assert pretraining_budget.split_config("electra") == ("electra", False)
    with pytest.raises(ValueError, match="'\\+packed' or nothing"):
        pretraining_budget.split_config("mlm+unpadded")
    # ELECTRA reads contiguous text (full-sentence rows) as its paper's data, packed the pairs
    # the writer packs; mlm reads RoBERTa's full-sentence rows.
    kinds = {
        o: pretraining_budget.records_kind(o) for o in ("mlm_nsp", "mlm", "mlm_sop", "electra")
    }
    assert kinds == {"mlm_nsp": "mlm_nsp", "mlm": "mlm", "mlm_sop": "mlm_sop", "electra": "mlm"}
    assert pretraining_budget.records_kind("electra", packed=True) == "mlm_nsp"


def test_equal_time_gives_each_configuration_the_steps_of_its_own_step_time():
    args = pretraining_budget.parse_args(["--out", "x", "--seconds", "120", "--loop", "25"])
    assert pretraining_budget.budget_steps(args, 0.1) == 1200  # 120 s / 0.1 s, in units of 100.
    assert pretraining_budget.budget_steps(args, 0.13) == 900  # 923 rounded down to a unit.
    assert pretraining_budget.budget_steps(args, 10.0) == 100  # At least four logging loops.


def test_configurations_added_later_are_timed_against_a_stored_one(monkeypatch):
    args = pretraining_budget.parse_args(["--out", "x"])
    runs = {"none": {}, "mlm_nsp": {"r": 1}, "electra": {"r": 2}}
    rounds = []

    def time_configs(args, made, config, timed, seq, batch):
        rounds.append(sorted(timed))  # The machine is now 1.5x slower: mlm_nsp 0.15 -> 0.225.
        return {"mlm_nsp": [0.25, 0.225], "electra": [0.3, 0.33]}

    monkeypatch.setattr(pretraining_budget, "time_configs", time_configs)
    timing = {"mlm_nsp": [0.15, 0.16]}
    got = pretraining_budget.time_new_configs(
        args, None, None, runs, {"electra": runs["electra"]}, timing
    )
    assert rounds == [["electra", "mlm_nsp"]] and list(got) == ["electra"]
    assert got["electra"] == pytest.approx([0.2, 0.22])  # Scaled by 0.15 / 0.225.
    assert timing == {"mlm_nsp": [0.15, 0.16]}  # The stored reference is kept.


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
    assert pretraining_budget.spread([-0.2, 0.4], "{:.1f}") == "0.1 (-0.2 to 0.4)"


def test_the_loss_curves_at_512_are_compared_at_equal_real_tokens():
    args = pretraining_budget.parse_args(["--out", "x"])

    def run(steps, per_step, shift, every, evaluated):  # Loss 10 - tokens / 1000 (+ shift).
        curve = [
            {"step": s, "mlm_loss": 10 - s * per_step / 1000 + shift}
            for s in range(every, steps + 1, every)
        ]
        return {
            "steps": steps,
            "real_tokens_per_step": per_step,
            "curve": curve,
            "eval": {"mlm_loss": evaluated, "mlm_accuracy": 0.1},
        }

    results = {
        "long_curves": {  # Packed rows: twice the real tokens a step, half the steps.
            "mlm_nsp/seed0": run(40, 100, 0.0, 10, 6.0),
            "mlm_nsp+packed/seed0": run(20, 200, 0.0, 5, 6.1),
            "mlm_nsp/seed1": run(40, 100, 0.0, 8, 6.0),
            "mlm_nsp+packed/seed1": run(20, 200, 0.5, 4, 6.3),
            "mlm_nsp/seed2": run(40, 100, 0.0, 10, 6.0),  # No packed run: left out.
        }
    }
    run0 = results["long_curves"]["mlm_nsp+packed/seed0"]
    assert pretraining_budget.loss_by_tokens(run0, 2500) == pytest.approx(7.5)  # Interpolated.
    table = pretraining_budget.long_curve_table(args, results)
    # 4,000 real tokens in each pass; a quarter is 1,000: loss 9.
    assert table["rows"][0][0] == "0.00M (25% of the pass)"
    assert table["rows"][0][1:] == [
        "9.000 (9.000-9.000)",
        "9.250 (9.000-9.500)",
        "+0.250 (+0.000 to +0.500)",
    ]
    assert table["rows"][3][1:3] == ["6.000 (6.000-6.000)", "6.250 (6.000-6.500)"]
    assert table["rows"][4][1:] == [
        "6.000 (6.000-6.000)",
        "6.200 (6.100-6.300)",
        "+0.200 (+0.100 to +0.300)",
    ]
    assert table["rows"][-1] == ["steps for the pass", "40", "20", "-"]
    assert pretraining_budget.long_curve_table(args, {})["rows"] == []
    # Packed rows a step: as many instances as --long_batch (8) original rows hold.
    packed = {"max_instances": 4, "rows": 5096, "instances": 7012}
    assert pretraining_budget.long_batch(args, packed) == 6  # 8 x 5,096 / 7,012 = 5.8.
    assert pretraining_budget.long_batch(args, dict(packed, max_instances=None)) == 8


def test_the_control_fine_tunes_each_seeds_fresh_encoder(tmp_path, monkeypatch):
    import keras

    import keras_bert

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    config = keras_bert.BertConfig.preset("tiny", vocab_size=7, num_hidden_layers=1)
    args = pretraining_budget.parse_args(["--out", str(tmp_path)])
    made = {"vocab": str(vocab), "tasks": {"packages": "task"}}
    tuned = []
    monkeypatch.setattr(
        pretraining_budget, "finetune", lambda a, init, *rest: tuned.append(init) or 0.25
    )
    monkeypatch.setattr(pretraining_budget, "representation", lambda *a: {"token_cosine": 0.5})
    result = pretraining_budget.control_run(args, made, config, str(tmp_path / "none"), 1)
    assert result["steps"] == 0 and result["finetuned"] == [
        {"step": 0, "packages": 0.25, "seconds": 0.0}
    ]
    loaded = keras_bert.checkpoints.load_encoder(tuned[0])
    keras.utils.set_random_seed(1)
    fresh = keras_bert.BertEncoder(config)
    for a, b in zip(fresh.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_representation_tells_a_collapsed_encoder_from_a_fresh_one(tmp_path):
    import keras

    import keras_bert

    words = ["open", "read", "write", "socket", "file", "thread", "lock", "the", "a", "of"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    task = tmp_path / "task"
    task.mkdir()
    rng = np.random.default_rng(0)
    lines = [f"{i % 3}\t" + " ".join(rng.choice(words, 12)) for i in range(16)]
    (task / "dev.tsv").write_text("\n".join(lines) + "\n")
    made = {"vocab": str(vocab), "tasks": {"packages": str(task)}}
    args = pretraining_budget.parse_args(["--out", str(tmp_path), "--seq", "16"])
    config = keras_bert.BertConfig.preset("tiny", vocab_size=15, num_hidden_layers=1)
    keras.utils.set_random_seed(0)
    encoder = keras_bert.BertEncoder(config)
    keras_bert.checkpoints.save(encoder, tmp_path / "fresh", vocab=str(vocab))
    fresh = pretraining_budget.representation(args, made, str(tmp_path / "fresh"))
    norm = encoder.transformer_layers[-1].output_layer_norm
    norm.gamma.assign(np.full(norm.gamma.shape, 1e-4, "float32"))  # Every token ~ beta.
    norm.beta.assign(np.linspace(-1, 1, norm.beta.shape[0]).astype("float32"))
    keras_bert.checkpoints.save(encoder, tmp_path / "collapsed", vocab=str(vocab))
    collapsed = pretraining_budget.representation(args, made, str(tmp_path / "collapsed"))
    assert fresh["token_cosine"] < 0.8 and fresh["effective_rank"] > 8, fresh
    assert collapsed["token_cosine"] > 0.999, collapsed


@pytest.mark.slow  # Every stage at a tiny size: about 4 minutes on 2 cores.
def test_the_benchmark_runs_every_stage_and_resumes(tmp_path):
    command = [sys.executable, os.path.join(ROOT, "bench", "pretraining_budget.py")]
    command += ["--out", str(tmp_path), "--quick", "--seconds", "2", "--seeds", "0"]
    command += ["--configs", "none,mlm_nsp+packed,mlm,electra+packed"]
    env = dict(os.environ, KERAS_BERT_REAL_DATA=str(tmp_path / "absent"))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "record.json").read_text())
    throughput, corpora, curves, objectives = record["tables"]
    names = [r[0].split(" ")[0] for r in objectives["rows"]]
    assert names == ["none", "mlm_nsp+packed", "mlm", "electra+packed"]
    assert len(corpora["rows"]) == 1  # The docstrings alone without the real data folder.
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["runs"]["none/seed0"]["steps"] == 0 and "none" not in results["timing"]
    for run in results["runs"].values():
        assert [f["step"] for f in run["finetuned"]][-1] == run["steps"]
        assert 0 <= run["finetuned"][-1]["packages"] <= 1 and "sst2" not in run["finetuned"][-1]
    for key in ("mlm_nsp/seed0", "mlm_nsp+packed/seed0"):  # One pass of each format at 64.
        run = results["long_curves"][key]
        assert run["steps"] > 0 and run["curve"][-1]["step"] == run["steps"]
    long = results["long_curves"]  # Packed: as many instances a step as 4 original rows.
    stats = json.loads(
        (tmp_path / "data/mlm_nsp-64-packed/train/pretraining-stats.json").read_text()
    )
    assert long["mlm_nsp/seed0"]["batch"] == 4
    assert long["mlm_nsp+packed/seed0"]["batch"] == max(
        1, round(4 * stats["rows"] / stats["examples"])
    )
    assert curves["rows"][-1][0] == "steps for the pass" and len(curves["rows"]) == 7
    assert (tmp_path / "budget.png").stat().st_size > 0
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "Pre-training for" in again.stdout
    assert "timing " not in again.stdout  # Every finished stage is kept.
