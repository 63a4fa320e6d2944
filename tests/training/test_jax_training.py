"""Training on the JAX backend: the runners under `keras.distribution` (two XLA host devices
give the losses and weights of one device), the backend-neutral training checkpoint (a killed
JAX run resumes with identical next losses; broken checkpoints are reported, never half-loaded)
and the flag of the other backend as one clear error. The JAX runs go to a subprocess
(`train_job.py`): this process runs on TensorFlow."""

import json
import os
import re
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest
from train_job import (
    JOB,
    RESUME_BERT,
    finetune_job,
    pretraining_job,
    resume_state,
    weights_of,
)

from keras_bert.checkpoints import variables_checkpoint
from keras_bert.checkpoints.variables_checkpoint import VariablesCheckpoint
from keras_bert.errors import CheckpointError
from keras_bert.training import distribution

JAX_ENV = {
    "KERAS_BACKEND": "jax",
    "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
    "JAX_PLATFORMS": "cpu",
}
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def run_jax(tmp_path, name, configs, timeout=900, **extra):
    """Runs `configs` through `train_job.py` on JAX with two CPU devices; returns (return code,
    results or None, output)."""
    out = tmp_path / f"{name}.json"
    spec = dict(configs=configs, out=str(out), **extra)
    proc = subprocess.run(
        [sys.executable, JOB, json.dumps(spec)],
        env={**os.environ, **JAX_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    results = json.loads(out.read_text()) if out.exists() else None
    return proc.returncode, results, proc.stdout[-3000:] + proc.stderr[-3000:]


def _ok(tmp_path, name, configs, **extra):
    code, results, output = run_jax(tmp_path, name, configs, **extra)
    assert code == 0, output
    return results


def _losses(result, key="loss"):
    return np.array([h[key] for h in result["history"]])


def _assert_same_weights(a, b, atol=2e-6):
    assert len(a["weights"]) == len(b["weights"])
    for (path, x), (_, y) in zip(a["weights"], b["weights"]):
        np.testing.assert_allclose(np.array(x), np.array(y), rtol=2e-5, atol=atol, err_msg=path)


@pytest.mark.slow
def test_two_jax_devices_match_one_device(tmp_path):
    """Pre-training and fine-tuning, dropout off: data_parallel and model_parallel over two
    host devices follow the one-device run step for step, to the same weights."""
    from test_distributed import BERT, _config

    pretrain = dict(_config(tmp_path, "one"), bert_config=BERT)
    finetune = finetune_job(tmp_path, "ft_one", bert=NO_DROPOUT, dropout=0.0)
    one, two, sharded, ft_one, ft_two = _ok(
        tmp_path,
        "devices",
        [
            pretrain,
            dict(pretrain, distribution="data_parallel", model_dir=str(tmp_path / "two")),
            dict(pretrain, distribution="model_parallel", model_dir=str(tmp_path / "mp")),
            finetune,
            dict(finetune, distribution="data_parallel", model_dir=str(tmp_path / "ft_two")),
        ],
        weights=True,
    )
    assert [r["replicas"] for r in (one, two, sharded, ft_one, ft_two)] == [1, 2, 1, 1, 2]
    assert np.ptp(_losses(one)) > 1e-3 and np.ptp(_losses(ft_one)) > 1e-3  # Not constants.
    for other in (two, sharded):
        for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
            np.testing.assert_allclose(
                _losses(other, key), _losses(one, key), rtol=2e-5, atol=2e-6, err_msg=key
            )
        _assert_same_weights(other, one)
    np.testing.assert_allclose(_losses(ft_two), _losses(ft_one), rtol=2e-5, atol=2e-6)
    _assert_same_weights(ft_two, ft_one)
    assert ft_two["eval"] == ft_one["eval"]


@pytest.mark.parametrize(
    "pooling", ["logsumexp", pytest.param("attention", marks=pytest.mark.slow)]
)
def test_a_document_batch_over_two_jax_devices_steps_as_on_one(pooling):
    """Document-level training's global batch (two packs side by side, windows pooled per
    document in the model): one SGD step over two JAX devices gives one device's loss and
    weights (`jax_document_step.py`, in a subprocess with two CPU devices)."""
    script = os.path.join(os.path.dirname(__file__), "jax_document_step.py")
    proc = subprocess.run(
        [sys.executable, script, pooling],
        env={**os.environ, **JAX_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["devices"] == 2 and result["documents"] > 2
    np.testing.assert_allclose(*result["losses"], rtol=1e-6)
    assert result["max_update"] > 1e-3  # The step moved the weights ...
    assert result["max_difference"] < 1e-5 * result["max_update"]  # ... the same on both.


@pytest.mark.slow
def test_document_level_finetuning_runs_on_two_jax_devices(tmp_path):
    """The runner's document-level training (`--window_training=document`) over two JAX
    devices: every step's global batch is two packs of whole documents; it trains, keeps its
    best epoch and evaluates documents, like the one-device run on the same data."""
    windows = dict(
        long_text="windows",
        max_windows=4,
        doc_stride=4,
        window_training="document",
        window_pooling="logsumexp",
    )
    config = finetune_job(tmp_path, "doc_one", bert=NO_DROPOUT, dropout=0.0, task_options=windows)
    config["seq_length"] = 8  # Windows of 6 tokens: the tiny SST-2's sentences take 1-4.
    one, two = _ok(
        tmp_path,
        "documents",
        [config, dict(config, distribution="data_parallel", model_dir=str(tmp_path / "doc_two"))],
    )
    assert [r["replicas"] for r in (one, two)] == [1, 2]
    assert np.ptp(_losses(two)) > 1e-3 and np.isfinite(_losses(two)).all()
    assert len(_losses(two)) * 2 >= len(_losses(one))  # Global batches of two packs each.
    assert set(two["eval"]) == set(one["eval"]) and 0.0 <= two["eval"]["accuracy"] <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["pretrain", "finetune"])
def test_killed_jax_run_resumes_exactly(tmp_path, runner):
    """Killed (SIGKILL) right after the checkpoint of step 4, a JAX run resumes with the next
    losses and the final weights of an uninterrupted run; dropout on."""
    config = (
        pretraining_job(tmp_path, "full")
        if runner == "pretrain"
        else finetune_job(tmp_path, "full")
    )
    killed = dict(config, model_dir=str(tmp_path / "killed"))
    code, _, output = run_jax(tmp_path, "dies", [killed], kill_after_checkpoint=4)
    assert code == -signal.SIGKILL, output
    state = json.loads((tmp_path / "killed" / _checkpoints(runner) / "checkpoint.json").read_text())
    assert state["latest"] == "ckpt-4"
    full, resumed = _ok(tmp_path, "runs", [config, killed], weights=True)
    assert resumed["start_step"] == 4 and resumed["steps"] == full["steps"] == 6
    by_step = {h["step"]: h for h in full["history"]}
    assert [h["step"] for h in resumed["history"]] == [1, 2, 3, 4, 5, 6]
    for record in resumed["history"][4:]:
        for key in ("loss", "learning_rate"):
            np.testing.assert_allclose(
                record[key], by_step[record["step"]][key], rtol=1e-6, err_msg=key
            )
    assert abs(by_step[5]["loss"] - by_step[6]["loss"]) > 1e-4
    _assert_same_weights(resumed, full, atol=1e-7)


def _checkpoints(runner):
    return "." if runner == "pretrain" else "checkpoints"


def test_the_other_backends_flag_is_one_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="KERAS_BACKEND=jax.*--strategy=mirrored"):
        distribution.check_backend("default", "data_parallel")  # This process: TensorFlow.
    monkeypatch.setattr(keras.config, "backend", lambda: "jax")
    with pytest.raises(ValueError, match="tf.distribute.*--distribution=data_parallel"):
        distribution.check_backend("mirrored", "none")
    with pytest.raises(ValueError, match="distribution must be one of"):
        distribution.check_backend("default", "pipeline")
    distribution.check_backend("default", "model_parallel")  # The right flag passes.


def test_run_refuses_a_distribution_on_tensorflow(tmp_path):
    from keras_bert.tasks.finetuning import run_finetuning

    with pytest.raises(ValueError, match="for the JAX backend"):
        config = finetune_job(tmp_path, "tf", distribution="data_parallel")
        del config["runner"]
        run_finetuning(**config)


def test_layout_map_splits_the_encoder_kernels():
    import keras_bert

    encoder = keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny"))
    split = {}
    for v in encoder.weights:
        matched = [a for p, a in distribution.ENCODER_LAYOUT.items() if re.search(p, v.path)]
        assert len(matched) <= 1, v.path
        if matched:
            split[v.path] = matched[0]
    assert split["layer_0/query/kernel"] == (None, "model")
    assert split["layer_0/attention_output_dense/kernel"] == ("model", None)
    assert split["layer_1/output_dense/kernel"] == ("model", None)
    assert split["embeddings/word_embeddings"] == (None, "model")
    assert "layer_0/output_LayerNorm/gamma" not in split and "pooler_dense/kernel" not in split


def test_variables_checkpoint_round_trip(tmp_path):
    model, optimizer = resume_state()
    optimizer.iterations.assign(3)
    saved = weights_of(model, optimizer)
    ckpt = VariablesCheckpoint(str(tmp_path), model, optimizer, max_to_keep=2)
    for step in (1, 2, 3):
        path = ckpt.save(step)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.json", "ckpt-2", "ckpt-3"]
    other_model, other_opt = resume_state()
    resumed = VariablesCheckpoint(str(tmp_path), other_model, other_opt)
    assert resumed.latest == path and resumed.restore_latest() == 3
    for a, b in zip(weights_of(other_model, other_opt), saved):
        np.testing.assert_array_equal(a, b)


def _assert_restore_fails_cleanly(directory, match, vocab_size=48):
    model, optimizer = resume_state(vocab_size)
    before = weights_of(model, optimizer)
    with pytest.raises(CheckpointError, match=match):
        VariablesCheckpoint(str(directory), model, optimizer).restore_latest()
    for a, b in zip(weights_of(model, optimizer), before):
        np.testing.assert_array_equal(a, b)


def test_variables_checkpoint_corrupt_foreign_or_cut_short(tmp_path):
    model, optimizer = resume_state()
    ckpt = VariablesCheckpoint(str(tmp_path), model, optimizer)
    ckpt.save(2)
    _assert_restore_fails_cleanly(tmp_path, "does not match this model", vocab_size=52)
    # A kill while writing ckpt-4: its temporary directory exists, the state file still names 2.
    (tmp_path / ".ckpt-4.tmp-dead").mkdir()
    (tmp_path / ".ckpt-4.tmp-dead" / variables_checkpoint.ARRAYS).write_bytes(b"\x00" * 10)
    assert VariablesCheckpoint(str(tmp_path), *resume_state()).latest == str(tmp_path / "ckpt-2")
    # Corrupt the archive: a clear error, nothing loaded.
    arrays = tmp_path / "ckpt-2" / variables_checkpoint.ARRAYS
    data = bytearray(arrays.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    arrays.write_bytes(bytes(data))
    _assert_restore_fails_cleanly(tmp_path, "corrupt or incomplete")
    arrays.write_bytes(bytes(data[: len(data) // 3]))  # Truncated.
    _assert_restore_fails_cleanly(tmp_path, "corrupt or incomplete")


def test_jax_out_of_memory_names_the_batch():
    import jax

    from keras_bert.training.memory import OutOfMemoryError, out_of_memory_hint

    with pytest.raises(OutOfMemoryError, match="batch size 64 and sequence length 512: smaller"):
        with out_of_memory_hint("training", 64, 512, "smaller"):
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 8GB")
    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL"):  # Other errors pass.
        with out_of_memory_hint("training", 64, 512, "smaller"):
            raise jax.errors.JaxRuntimeError("INTERNAL: something else")


def _assert_weights_equal(model, saved, prefix=""):
    checked = 0
    for w in model.weights:
        if "seed_generator" not in w.path and w.path.startswith(prefix):
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(w), saved[w.path], w.path)
            checked += 1
    assert checked


def test_a_variables_checkpoint_run_loads_as_an_encoder_or_pretrainer(tmp_path):
    """A pre-training run directory whose checkpoints are `ckpt-<step>/` archives (as runs on
    JAX or PyTorch write them) reads as an init checkpoint: encoder or pretrainer, newest or by
    directory; a checkpoint of another architecture is one clear error."""
    import keras_bert
    from keras_bert import checkpoints
    from keras_bert.checkpoints import pretraining_run

    model, optimizer = resume_state()  # A BertPretrainer with its NSP head, and its optimizer.
    ckpt = VariablesCheckpoint(str(tmp_path), model, optimizer)
    ckpt.save(1)
    first = {w.path: keras.ops.convert_to_numpy(w) for w in model.weights}
    for w in model.trainable_weights:
        w.assign(w + 0.5)
    ckpt.save(2)
    newest = {w.path: keras.ops.convert_to_numpy(w) for w in model.weights}
    pretraining_run.write_run_files(str(tmp_path), model.encoder.config)
    assert checkpoints.detect_format(tmp_path) == "pretraining_run"
    _assert_weights_equal(checkpoints.load_encoder(tmp_path), newest)
    pretrainer = checkpoints.load_pretrainer(tmp_path / "ckpt-1")
    assert pretrainer.next_sentence
    _assert_weights_equal(pretrainer, first, prefix="cls_")
    _assert_weights_equal(pretrainer.encoder, first)
    # Another architecture's run: named, nothing half-read.
    keras_bert.BertConfig(**dict(RESUME_BERT, intermediate_size=48)).to_json_file(
        str(tmp_path / pretraining_run.CONFIG_NAME)
    )
    with pytest.raises(CheckpointError, match=r"intermediate_dense/kernel: saved \[32, 64\]"):
        checkpoints.load_encoder(tmp_path)


@pytest.mark.slow
def test_a_jax_pretraining_run_initializes_tensorflow(tmp_path):
    """The model_dir of `keras-bert-pretrain` on JAX is an init checkpoint on TensorFlow: the
    encoder and heads it reads are the JAX run's final weights."""
    from keras_bert import checkpoints

    result = _ok(tmp_path, "pretrain", [pretraining_job(tmp_path, "run")], weights=True)[0]
    saved = {path: np.array(value, np.float32) for path, value in result["weights"]}
    _assert_weights_equal(checkpoints.load_pretrainer(tmp_path / "run"), saved)
