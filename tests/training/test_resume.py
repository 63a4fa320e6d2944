"""Checkpoint/resume: a run killed (SIGKILL) right after a checkpoint resumes with the same
step, optimizer state, learning rate, data position and dropout masks, so its next losses
equal an uninterrupted run's; broken checkpoints are reported and never half-loaded."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from train_job import JOB, pretraining_job, resume_state, run_config, weights_of

from keras_bert.checkpoints.training import TrainingCheckpoint
from keras_bert.errors import CheckpointError


def test_killed_run_resumes_exactly(tmp_path):
    config = pretraining_job(tmp_path, "full")
    full = run_config(config)

    killed = dict(config, model_dir=str(tmp_path / "killed"))
    spec = dict(configs=[killed], out=str(tmp_path / "never.json"), kill_after_checkpoint=4)
    proc = subprocess.run(
        [sys.executable, JOB, json.dumps(spec)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not (tmp_path / "never.json").exists()
    ckpts = sorted(p for p in os.listdir(tmp_path / "killed") if p.endswith(".index"))
    assert ckpts == ["ckpt-2.index", "ckpt-4.index"]

    resumed = run_config(killed)
    assert resumed["start_step"] == 4 and resumed["steps"] == 6
    by_step = {h["step"]: h for h in full["history"]}
    assert [h["step"] for h in resumed["history"]] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]  # history.json kept across the kill
    for record in resumed["history"][4:]:
        expected = by_step[record["step"]]
        for key in ("loss", "mlm_loss", "nsp_loss", "learning_rate"):
            np.testing.assert_allclose(
                record[key], expected[key], rtol=1e-6, err_msg=f"{key} @ {record['step']}"
            )
    # The losses do change from step to step, so equality above is not of constants.
    assert abs(by_step[5]["loss"] - by_step[6]["loss"]) > 1e-4
    for a, b in zip(resumed["model"].weights, full["model"].weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7, err_msg=a.path)
    # Optimizer state (Adam moments) equal too.
    for a, b in zip(resumed["model"].optimizer.variables, full["model"].optimizer.variables):
        np.testing.assert_allclose(
            np.asarray(a.numpy(), float),
            np.asarray(b.numpy(), float),
            rtol=1e-5,
            atol=1e-8,
            err_msg=a.path,
        )
    # max_to_keep=2: only the newest two are left.
    assert sorted(p for p in os.listdir(tmp_path / "killed") if p.endswith(".index")) == [
        "ckpt-4.index",
        "ckpt-6.index",
    ]
    # A finished run given more time to run does nothing but report.
    again = run_config(killed)
    assert again["start_step"] == 6 and again["steps"] == 6


def test_restore_round_trip_and_corrupt_checkpoint(tmp_path):
    model, optimizer = resume_state()
    optimizer.iterations.assign(3)
    saved = weights_of(model, optimizer)
    path = TrainingCheckpoint(str(tmp_path), model, optimizer).save(3)

    other_model, other_opt = resume_state()
    ckpt = TrainingCheckpoint(str(tmp_path), other_model, other_opt)
    assert ckpt.latest == path
    assert ckpt.restore_latest() == 3
    for a, b in zip(weights_of(other_model, other_opt), saved):
        np.testing.assert_array_equal(a, b)

    # Corrupt the data file: the restore fails with a clear error and loads nothing.
    data = [f for f in os.listdir(tmp_path) if f.startswith("ckpt-3.data")][0]
    with open(tmp_path / data, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 64)
    _assert_restore_fails_cleanly(tmp_path, *resume_state(), match="corrupt or incomplete")


def _assert_restore_fails_cleanly(directory, model, optimizer, match):
    """Restoring the latest checkpoint in `directory` raises and leaves every variable as it was."""
    before = weights_of(model, optimizer)
    with pytest.raises(CheckpointError, match=match):
        TrainingCheckpoint(str(directory), model, optimizer).restore_latest()
    for a, b in zip(weights_of(model, optimizer), before):
        np.testing.assert_array_equal(a, b)


def test_checkpoint_of_another_model_is_rolled_back(tmp_path):
    model, optimizer = resume_state(vocab_size=48)
    TrainingCheckpoint(str(tmp_path), model, optimizer).save(1)
    _assert_restore_fails_cleanly(
        tmp_path, *resume_state(vocab_size=52), match="does not match this model"
    )


def test_missing_checkpoint_file_is_reported(tmp_path):
    model, optimizer = resume_state()
    with pytest.raises(CheckpointError, match="corrupt or incomplete"):
        TrainingCheckpoint(str(tmp_path), model, optimizer).restore(str(tmp_path / "ckpt-9"))


def test_a_save_cut_short_leaves_the_previous_checkpoint_in_use(tmp_path):
    model, optimizer = resume_state()
    ckpt = TrainingCheckpoint(str(tmp_path), model, optimizer)
    path = ckpt.save(2)
    # A kill while writing ckpt-4: its files exist partly, the 'checkpoint' state file was not
    # updated.
    (tmp_path / "ckpt-4.index").write_bytes(b"\x00" * 10)
    (tmp_path / "ckpt-4.data-00000-of-00001").write_bytes(b"\x00" * 100)
    other_model, other_opt = resume_state()
    resumed = TrainingCheckpoint(str(tmp_path), other_model, other_opt)
    assert resumed.latest == path
    resumed.restore_latest()
    for a, b in zip(weights_of(other_model, other_opt), weights_of(model, optimizer)):
        np.testing.assert_array_equal(a, b)
