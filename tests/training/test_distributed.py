"""Strategies from flags; mirrored (two logical CPUs) and multi-worker mirrored (two local
processes) give the same losses as one device for the same global batch."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from logical_cpus import run_on_logical_cpus
from pretraining_data import write_records
from train_job import JOB, run_config

from keras_bert.training import strategies

BERT = dict(
    vocab_size=48,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=32,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def _config(tmp_path, name, steps=4):
    train, _ = write_records(
        str(tmp_path), 256, vocab_size=48, seq_length=24, max_predictions_per_seq=4
    )
    return dict(
        bert_config=BERT,
        train_files=train,
        batch_size=8,
        seq_length=24,
        max_predictions_per_seq=4,
        num_train_steps=steps,
        num_warmup_steps=1,
        learning_rate=1e-3,
        steps_per_loop=1,
        checkpoint_every=steps,
        model_dir=str(tmp_path / name),
        verbose=False,
        plot=False,
        seed=3,
    )


def _start(tmp_path, name, configs, env=None, **extra):
    out = tmp_path / f"{name}.json"
    spec = dict(configs=configs, out=str(out), **extra)
    proc = subprocess.Popen(
        [sys.executable, JOB, json.dumps(spec)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, out


def _finish(proc, out, timeout=240):
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output[-3000:]
    with open(out) as f:
        return json.load(f)


def _run(tmp_path, name, configs, **extra):
    return _finish(*_start(tmp_path, name, configs, **extra))


def _losses(result, key="loss"):
    return np.array([h[key] for h in result["history"]])


def test_unknown_strategy_and_missing_tf_config(monkeypatch):
    with pytest.raises(ValueError, match="Unknown distribution strategy 'gpu'"):
        strategies.get_strategy("gpu")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        strategies.get_strategy("multi_worker_mirrored")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="not a valid cluster"):
        strategies.get_strategy("multi_worker_mirrored")


def test_auto_falls_back_to_the_cpu_and_picks_float32_here():
    # No TPU and no GPU on this machine: the TPU resolver fails and "auto" is the default strategy.
    assert strategies.resolve_auto("auto", None, "auto") == {
        "strategy": "default",
        "tpu": "local",
        "mixed_precision": "none",
    }
    assert strategies.get_strategy("auto") is tf.distribute.get_strategy()
    # Explicit settings pass through untouched.
    assert strategies.resolve_auto("mirrored", None, "mixed_bfloat16") == {
        "strategy": "mirrored",
        "tpu": None,
        "mixed_precision": "mixed_bfloat16",
    }


def test_auto_takes_a_tpu_that_answers_once_and_bfloat16(monkeypatch):
    made = []

    def fake_tpu(name="default", tpu=None):
        assert (name, tpu) == ("tpu", "local")
        made.append(tpu)
        return "a TPUStrategy"

    monkeypatch.setattr(strategies, "get_strategy", fake_tpu)
    assert strategies.resolve_auto("auto", None, "auto") == {
        "strategy": "tpu",
        "tpu": "local",
        "mixed_precision": "mixed_bfloat16",
    }
    assert made == ["local"]


def test_a_tpu_system_is_initialized_once_per_address(monkeypatch):
    calls = []
    monkeypatch.setattr(
        tf.distribute.cluster_resolver, "TPUClusterResolver", lambda tpu: calls.append(tpu) or tpu
    )
    monkeypatch.setattr(
        tf.tpu.experimental, "initialize_tpu_system", lambda resolver: calls.append("init")
    )
    monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda resolver: ("strategy", resolver))
    monkeypatch.setattr(strategies, "_TPU_STRATEGIES", {})
    first = strategies.get_strategy("tpu", "local")
    assert strategies.get_strategy("tpu", "local") is first and calls == ["local", "init"]


def test_default_strategy_is_chief():
    strategy = strategies.get_strategy("default")
    assert strategy.num_replicas_in_sync == 1
    assert strategies.is_chief(strategy) and strategies.worker_id(strategy) == 0


def test_mirrored_two_devices_matches_one_device(tmp_path):
    config = _config(tmp_path, "one")
    one, two = _run(
        tmp_path,
        "runs",
        [config, dict(config, strategy="mirrored", model_dir=str(tmp_path / "two"))],
        logical_cpus=2,
    )
    assert one["replicas"] == 1 and two["replicas"] == 2
    assert len(_losses(one)) == 4
    # The losses change over the steps (the comparison below is not of constants) ...
    assert np.ptp(_losses(one)) > 1e-3
    # ... and the two-replica run follows the one-device run step for step.
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        np.testing.assert_allclose(
            _losses(two, key), _losses(one, key), rtol=2e-5, atol=2e-6, err_msg=key
        )


def _single_process(config):
    """The reference run, in this process (TensorFlow is already started here)."""
    return {"history": run_config(config)["history"]}


@pytest.mark.slow
def test_mirrored_with_dropout_and_mixed_float16_trains(tmp_path):
    config = _config(tmp_path, "mixed", steps=2)
    config.update(
        strategy="mirrored",
        mixed_precision="mixed_float16",
        bert_config=dict(BERT, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
    )
    (result,) = _run(tmp_path, "mixed", [config], logical_cpus=2)
    assert result["replicas"] == 2 and result["steps"] == 2 and np.all(np.isfinite(_losses(result)))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_multi_worker_mirrored_two_processes_match_one_process(tmp_path):
    config = _config(tmp_path, "single", steps=3)
    single = _single_process(config)
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append(
            _start(
                tmp_path,
                f"worker{index}",
                [dict(config, strategy="multi_worker_mirrored", model_dir=str(tmp_path / "multi"))],
                env={"TF_CONFIG": json.dumps(tf_config)},
            )
        )
    results = [_finish(*p)[0] for p in procs]
    assert [r["replicas"] for r in results] == [2, 2]
    for result in results:
        assert result["steps"] == 3
        np.testing.assert_allclose(_losses(result), _losses(single), rtol=2e-5, atol=2e-6)
    # Only the chief keeps checkpoints; the other worker's temporary copy is removed.
    assert (tmp_path / "multi" / "checkpoint").exists()
    assert not [p for p in os.listdir(tmp_path / "multi") if p.startswith(".worker_")]


OVERFLOW_CHECK = """
import tensorflow as tf
import keras
from keras_bert.training import optimizers
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    w = keras.Variable([1.0, 2.0], name="kernel")
    opt = optimizers.create_optimizer(0.1, 10, 0, variables=[w], loss_scale=True)
    opt.build([w])
scale = float(opt.dynamic_scale.numpy())

@tf.function
def step():
    def replica_fn():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        # Only replica 1 overflows (Keras alone would follow replica 0 and apply inf).
        grad = tf.where(
            tf.equal(replica, 1), tf.constant([float("inf"), 1.0]), tf.constant([1.0, 1.0]))
        opt.apply([grad], [w])
    strategy.run(replica_fn)

step()
report([w.numpy().tolist(), float(opt.dynamic_scale.numpy()) / scale])
"""


def test_loss_scaling_skips_the_step_on_every_replica_if_one_overflows():
    weights, scale_ratio = run_on_logical_cpus(OVERFLOW_CHECK)
    assert weights == [1.0, 2.0]  # No replica applied the step ...
    assert scale_ratio == 0.5  # ... and the loss scale was halved once.
