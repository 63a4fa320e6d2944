"""ELECTRA on packed rows (issue 44): each instance gets exactly the generator's and the
discriminator's logits and the losses it gets alone, on TensorFlow and JAX; no instance sees
another; a tiny packed run trains from the command line, resumes exactly and saves."""

import importlib.util
import json
import os
import subprocess
import sys

import electra_packing_job
import generated_corpus
import keras
import numpy as np
import packing_job
import pytest

import keras_bert
from keras_bert.pretraining import runner
from keras_bert.pretraining.config import PretrainingConfig
from keras_bert.pretraining.static_records import create_pretraining_data

S, P, INSTANCES = 64, 5, 4


def test_packed_row_gives_each_instance_its_electra_outputs_alone():
    electra_packing_job.check_packed_equals_alone()
    electra_packing_job.check_fit()


@pytest.mark.slow  # A JAX process of its own (about 25 s): the default run keeps CI under 20 min.
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_packed_row_gives_each_instance_its_electra_outputs_alone_on_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, electra_packing_job.__file__],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and "ok jax" in done.stdout, done.stderr[-3000:]


def test_packed_electra_saves_and_loads(tmp_path):
    _, model = electra_packing_job.models()
    features = packing_job._instances(np.random.default_rng(0), 40)
    inputs, _, _ = electra_packing_job.packed_inputs(features)
    path = str(tmp_path / "packed_electra.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.packed and "input_instance_ids" in restored.input
    assert "input_mask" not in restored.input and "cls_positions" not in restored.input
    for a, b in zip(model.weights, restored.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    for m in (model, restored):  # The same samples: the generator's most likely tokens.
        m.sampler.sample = lambda logits: keras.ops.argmax(logits, axis=-1)
    for key, value in model(inputs).items():
        np.testing.assert_array_equal(restored(inputs)[key], value, err_msg=key)


def test_config_takes_electra_on_packed_records():
    config = PretrainingConfig(train_files="x", model_dir="y", objective="electra", max_instances=4)
    assert config.max_instances == 4 and not config.next_sentence


def _packed_records(tmp_path):
    """(files, stats) of packed records from the generated corpus."""
    vocab = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(40, seed=3, max_sentences=3)
    )
    out = tmp_path / "packed"
    files = create_pretraining_data(
        corpus,
        str(out),
        vocab,
        max_seq_length=S,
        max_predictions_per_seq=P,
        dupe_factor=2,
        short_seq_prob=0.5,
        seed=5,
        pack=True,
        max_instances=INSTANCES,
    )
    return files, json.loads((out / "pretraining-stats.json").read_text())


def _cli_run(settings):
    """`keras-bert-pretrain` with the flags of `settings` (those of `_run`)."""
    from absl import flags

    from keras_bert.pretraining import pretrain

    pretrain.define_flags()
    flags.FLAGS.unparse_flags()
    argv = ["pretrain", "--model=tiny", "--noverbose", "--noplot", "--objective=electra"]
    argv += [f"--{k}={v}" for k, v in settings.items()]
    flags.FLAGS(argv)
    try:
        pretrain.main([])
    finally:
        flags.FLAGS.unparse_flags()


def test_packed_electra_trains_from_the_command_line_and_resumes_exactly(tmp_path, capsys):
    files, stats = _packed_records(tmp_path)
    assert stats["rows"] < stats["examples"]  # Several instances per row.
    settings = dict(
        vocab_size=len(generated_corpus.VOCABULARY),
        train_files=",".join(files),
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=stats["settings"]["packed_predictions"],
        max_instances=INSTANCES,
        num_warmup_steps=1,
        learning_rate=1e-3,
        checkpoint_every=2,
    )
    python = dict(settings, model="tiny", objective="electra", verbose=False, plot=False)
    whole = runner.run_pretraining(num_train_steps=4, model_dir=str(tmp_path / "whole"), **python)
    assert whole["model"].packed and whole["steps"] == 4
    losses = [h["loss"] for h in whole["history"]]
    assert len(losses) == 2 and np.isfinite(losses).all() and losses[1] < losses[0], losses
    assert {"rtd_loss", "rtd_accuracy", "mlm_loss"} <= set(whole["final"])
    assert "nsp_loss" not in whole["final"]
    # The first half from the command line, the rest resumed from its checkpoint (warmup 1 of
    # 2 or 4 steps: the same learning rates in the first two).
    cli = dict(settings, num_train_steps=2, model_dir=tmp_path / "parts")
    _cli_run(cli)
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{\n") :])["steps"] == 2
    resumed = runner.run_pretraining(num_train_steps=4, model_dir=str(tmp_path / "parts"), **python)
    assert resumed["start_step"] == 2 and resumed["steps"] == 4
    for a, b in zip(whole["model"].weights, resumed["model"].weights):  # Generator included.
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)
    encoder = keras_bert.BertEncoder.from_preset(str(tmp_path / "whole"))
    for a, b in zip(encoder.weights, whole["model"].encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
