"""A run killed (SIGKILL) right after a checkpoint resumes with the same next losses as an
uninterrupted run of the same strategy: pre-training and fine-tuning, on one device, mirrored
over two logical CPUs and multi-worker mirrored over two local processes (each killed, as a
preempted cluster would be). Dropout stays on: the resumed runs must draw the same masks."""

import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
from train_job import JOB, finetune_job, pretraining_job

KILL_AT = 4  # Steps 1..4 done and checkpointed, then the process dies; 5 and 6 follow on resume.


def _finetune(tmp_path, name):
    """Two epochs of 3 steps: the kill falls inside the second epoch, after the first's
    evaluation."""
    return finetune_job(tmp_path, name, seed=5)


def _spawn(tmp_path, tag, config, kill_after=None, logical_cpus=None, env=None):
    spec = dict(
        configs=[config],
        out=str(tmp_path / f"{tag}.json"),
        logical_cpus=logical_cpus,
        kill_after_checkpoint=kill_after,
    )
    return subprocess.Popen(
        [sys.executable, JOB, json.dumps(spec)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ), tmp_path / f"{tag}.json"


def _wait(proc, out, killed=False, timeout=300):
    output, _ = proc.communicate(timeout=timeout)
    if killed:
        assert proc.returncode == -signal.SIGKILL, output[-3000:]
        assert not out.exists()
        return None
    assert proc.returncode == 0, output[-3000:]
    with open(out) as f:
        return json.load(f)[0]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workers(tmp_path, tag, config, kill_after=None):
    """The same run in two worker processes of a multi-worker cluster; returns the chief's
    result."""
    hosts = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    procs = [
        _spawn(
            tmp_path,
            f"{tag}-w{i}",
            config,
            kill_after=kill_after,
            env={
                "TF_CONFIG": json.dumps(
                    {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}}
                )
            },
        )
        for i in range(2)
    ]
    results = [_wait(*p, killed=kill_after is not None) for p in procs]
    return results[0]


def _run(tmp_path, tag, config, strategy, kill_after=None):
    config = dict(config, strategy=strategy)
    if strategy == "multi_worker_mirrored":
        return _workers(tmp_path, tag, config, kill_after)
    return _wait(
        *_spawn(
            tmp_path, tag, config, kill_after, logical_cpus=2 if strategy == "mirrored" else None
        ),
        killed=kill_after is not None,
    )


def _assert_resumed_exactly(tmp_path, config, strategy, keys):
    full = _run(tmp_path, "full", dict(config, model_dir=str(tmp_path / "full")), strategy)
    killed = dict(config, model_dir=str(tmp_path / "killed"))
    _run(tmp_path, "killed", killed, strategy, kill_after=KILL_AT)
    resumed = _run(tmp_path, "resumed", killed, strategy)
    assert resumed["start_step"] == KILL_AT and resumed["steps"] == full["steps"] == 6
    by_step = {h["step"]: h for h in full["history"]}
    assert [h["step"] for h in resumed["history"]] == [1, 2, 3, 4, 5, 6]
    for record in resumed["history"][KILL_AT:]:
        for key in keys:
            np.testing.assert_allclose(
                record[key],
                by_step[record["step"]][key],
                rtol=1e-5,
                err_msg=f"{strategy} {key} @ {record['step']}",
            )
    assert abs(by_step[5]["loss"] - by_step[6]["loss"]) > 1e-4  # Not constants.
    return full, resumed


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_fine_tuning_resumes_exactly(tmp_path, strategy):
    full, resumed = _assert_resumed_exactly(
        tmp_path, _finetune(tmp_path, "x"), strategy, ("loss", "learning_rate")
    )
    # The first epoch's evaluation was kept across the kill; the second equals the uninterrupted
    # run's.
    assert [e["epoch"] for e in resumed["eval_history"]] == [1, 2]
    for a, b in zip(resumed["eval_history"], full["eval_history"]):
        assert a["step"] == b["step"]
        np.testing.assert_allclose(a["accuracy"], b["accuracy"])
    assert resumed["eval"] == full["eval"] or np.allclose(
        resumed["eval"]["accuracy"], full["eval"]["accuracy"]
    )


@pytest.mark.slow
def test_pre_training_resumes_exactly_mirrored(tmp_path):
    _assert_resumed_exactly(
        tmp_path, pretraining_job(tmp_path, "x"), "mirrored", ("loss", "mlm_loss", "nsp_loss")
    )


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["pretrain", "finetune"])
def test_multi_worker_resumes_exactly(tmp_path, runner):
    config = pretraining_job(tmp_path, "x") if runner == "pretrain" else _finetune(tmp_path, "x")
    _assert_resumed_exactly(tmp_path, config, "multi_worker_mirrored", ("loss",))
