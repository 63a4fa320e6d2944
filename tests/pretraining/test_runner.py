"""run_pretraining end to end on TFRecords the test writes: the tiny model learns, the run
leaves TensorBoard scalars, a plot, a summary and checkpoints; precisions, XLA,
steps_per_execution, gradient accumulation, init_checkpoint and the CLI."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from pretraining_data import write_records

import keras_bert
from keras_bert import checkpoints
from keras_bert.pretraining import pretrain, records, runner

S, P = 32, 5


def _data(tmp_path, vocab_size, n_train=2000, n_eval=256):
    train, _ = write_records(
        str(tmp_path),
        n_train,
        vocab_size=vocab_size,
        seq_length=S,
        max_predictions_per_seq=P,
        num_shards=2,
    )
    evals, _ = write_records(
        str(tmp_path),
        n_eval,
        vocab_size=vocab_size,
        seq_length=S,
        max_predictions_per_seq=P,
        seed=99,
        prefix="eval",
    )
    return train, evals


def _tiny(vocab_size, **overrides):
    return keras_bert.BertConfig.preset(
        "tiny",
        vocab_size=vocab_size,
        intermediate_size=256,
        max_position_embeddings=64,
        **overrides,
    )


def _event_tags(directory):
    tags = set()
    for root, _, files in os.walk(directory):
        for name in files:
            for event in tf.compat.v1.train.summary_iterator(os.path.join(root, name)):
                tags.update(v.tag for v in event.summary.value)
    return tags


def _reference_accuracy(model, pattern):
    """MLM (token-weighted) and NSP accuracy computed here with NumPy from the model's logits."""
    correct = total = nsp_correct = nsp_total = 0.0
    for inputs, labels in records.make_dataset(
        pattern, 64, S, P, is_training=False, drop_remainder=False
    ):
        out = model(inputs, training=False)
        w = labels["masked_lm_weights"].numpy()
        correct += (
            (out["mlm_logits"].numpy().argmax(-1) == labels["masked_lm_ids"].numpy()) * w
        ).sum()
        total += w.sum()
        nsp = out["nsp_logits"].numpy().argmax(-1) == labels["next_sentence_labels"].numpy()[:, 0]
        nsp_correct, nsp_total = nsp_correct + nsp.sum(), nsp_total + len(nsp)
    return correct / total, nsp_correct / nsp_total


def test_tiny_model_learns_and_leaves_logs_plot_summary(tmp_path):
    vocab = 128
    train, evals = _data(tmp_path, vocab)
    summary = runner.run_pretraining(
        bert_config=_tiny(vocab),
        train_files=train,
        eval_files=evals,
        batch_size=32,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=240,
        num_warmup_steps=24,
        learning_rate=2e-3,
        model_dir=str(tmp_path / "run"),
        checkpoint_every=80,
        keep_checkpoints=2,
        steps_per_loop=40,
        verbose=False,
    )
    history = summary["history"]
    assert [h["step"] for h in history] == [40, 80, 120, 160, 200, 240] and summary["steps"] == 240
    chance = 1.0 / (vocab - 5)
    # MLM loss clearly falls; MLM accuracy ends far above chance, on training and held-out data.
    assert history[-1]["mlm_loss"] < history[0]["mlm_loss"] - 1.0
    assert history[-1]["mlm_accuracy"] > 10 * chance
    assert summary["eval"]["mlm_accuracy"] > 10 * chance
    np.testing.assert_allclose(history[-1]["learning_rate"], 0.0, atol=1e-9)  # Linear decay to 0.
    # The reported evaluation equals an independent computation from the model's logits.
    mlm_acc, nsp_acc = _reference_accuracy(summary["model"], evals)
    np.testing.assert_allclose(summary["eval"]["mlm_accuracy"], mlm_acc, rtol=1e-5)
    np.testing.assert_allclose(summary["eval"]["nsp_accuracy"], nsp_acc, rtol=1e-5)
    np.testing.assert_allclose(
        summary["eval"]["loss"],
        summary["eval"]["mlm_loss"] + summary["eval"]["nsp_loss"],
        rtol=1e-5,
    )

    run = tmp_path / "run"
    assert summary["checkpoint"] == str(run / "ckpt-240")
    assert sorted(p for p in os.listdir(run) if p.endswith(".index")) == [
        "ckpt-160.index",
        "ckpt-240.index",
    ]
    tags = _event_tags(summary["tensorboard_dir"])
    for tag in (
        "loss",
        "mlm_loss",
        "nsp_loss",
        "mlm_accuracy",
        "nsp_accuracy",
        "learning_rate",
        "examples_per_second",
    ):
        assert f"train/{tag}" in tags
    assert {"eval/mlm_accuracy", "eval/nsp_accuracy"} <= tags
    with open(summary["plot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(run / "summary.json") as f:
        saved = json.load(f)
    assert (
        saved["steps"] == 240
        and saved["eval"] == summary["eval"]
        and summary["examples_per_second"] > 0
    )
    assert not [p for p in os.listdir(run) if p.endswith(".tmp")]


@pytest.mark.parametrize(
    "precision, jit_compile, steps_per_execution, accumulation",
    [
        ("mixed_float16", False, 2, 1),
        ("mixed_bfloat16", False, 1, 2),
        pytest.param(
            "mixed_bfloat16", True, 2, 2, marks=pytest.mark.slow
        ),  # XLA compiles for ~30 s on CPU.
    ],
)
def test_mixed_precision_xla_steps_per_execution_and_accumulation(
    tmp_path, precision, jit_compile, steps_per_execution, accumulation
):
    train, _ = _data(tmp_path, 48, n_train=64, n_eval=8)
    summary = runner.run_pretraining(
        bert_config=_tiny(48),
        train_files=train,
        batch_size=8,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=4,
        num_warmup_steps=1,
        learning_rate=1e-3,
        model_dir=str(tmp_path / "run"),
        checkpoint_every=4,
        mixed_precision=precision,
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
        grad_accumulation_steps=accumulation,
        verbose=False,
        plot=False,
    )
    model = summary["model"]
    assert model.encoder.embeddings.compute_dtype == precision.split("_")[1]
    assert model.encoder.embeddings.variable_dtype == "float32"
    assert int(model.optimizer.iterations.numpy()) == 4 and summary["steps"] == 4
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) == (
        precision == "mixed_float16"
    )
    losses = [h["loss"] for h in summary["history"]]
    assert losses and all(np.isfinite(losses))


@pytest.mark.parametrize("saved", ["pretrainer", "encoder"])
def test_init_checkpoint_starts_from_its_weights(tmp_path, saved):
    train, _ = _data(tmp_path, 48, n_train=32, n_eval=8)
    source = keras_bert.BertPretrainer(keras_bert.BertEncoder(_tiny(48, num_hidden_layers=1)))
    checkpoints.save(
        source if saved == "pretrainer" else source.encoder,
        str(tmp_path / "google"),
        format="google",
    )
    # One step at learning rate 0 (the first warmup step) leaves the loaded weights as they are.
    summary = runner.run_pretraining(
        model="base",
        init_checkpoint=str(tmp_path / "google"),
        train_files=train,
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=1,
        num_warmup_steps=1,
        model_dir=str(tmp_path / "run"),
        checkpoint_every=1,
        verbose=False,
        plot=False,
    )
    model = summary["model"]
    assert model.encoder.config.num_hidden_layers == 1
    loaded = model.weights if saved == "pretrainer" else model.encoder.weights
    expected = source.weights if saved == "pretrainer" else source.encoder.weights
    for a, b in zip(loaded, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)


def test_a_run_directory_starts_the_next_phase_with_its_weights_vocabulary_and_casing(tmp_path):
    # The paper's recipe: phase 1 at 128 tokens, phase 2 at 512 from phase 1's weights, in a new
    # model_dir.
    train, _ = _data(tmp_path, 48, n_train=32, n_eval=8)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "".join(
            f"{t}\n"
            for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(43)]
        )
    )
    common = dict(
        train_files=train,
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=P,
        checkpoint_every=2,
        verbose=False,
        plot=False,
    )
    one = runner.run_pretraining(
        bert_config=_tiny(48, num_hidden_layers=1),
        vocab_file=str(vocab),
        lower_case=True,
        num_train_steps=2,
        num_warmup_steps=1,
        model_dir=str(tmp_path / "phase1"),
        **common,
    )
    assert checkpoints.detect_format(tmp_path / "phase1") == "pretraining_run"
    loaded = checkpoints.load_pretrainer(str(tmp_path / "phase1"))
    assert loaded.next_sentence
    for a, b in zip(loaded.weights, one["model"].weights):  # Encoder and both heads, as trained.
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # Phase 2 (one step at learning rate 0) starts from them and keeps vocabulary and casing.
    two = runner.run_pretraining(
        init_checkpoint=str(tmp_path / "phase1"),
        num_train_steps=1,
        num_warmup_steps=1,
        model_dir=str(tmp_path / "phase2"),
        **dict(common, checkpoint_every=1),
    )
    for a, b in zip(two["model"].weights, one["model"].weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)
    assert (tmp_path / "phase2" / "vocab.txt").read_text() == vocab.read_text()
    assert json.loads((tmp_path / "phase2" / "text_config.json").read_text()) == {
        "lower_case": True
    }
    # From a Google checkpoint the casing follows its format's rule (the released directory name).
    google_dir = tmp_path / "cased_L-1_H-32_A-2"
    checkpoints.save(one["model"], google_dir, format="google", vocab=str(vocab))
    runner.run_pretraining(
        init_checkpoint=str(google_dir),
        num_train_steps=1,
        num_warmup_steps=1,
        model_dir=str(tmp_path / "phase2g"),
        **dict(common, checkpoint_every=1),
    )
    assert json.loads((tmp_path / "phase2g" / "text_config.json").read_text()) == {
        "lower_case": False
    }
    with pytest.raises(ValueError, match="own bert_config.json"):
        checkpoints.load_encoder(str(tmp_path / "phase1"), config=_tiny(48))
    # The vocabulary of a run on a remote filesystem (gs:// in production; TensorFlow's ram://
    # here).
    remote = f"ram://{tmp_path.name}/phase1"
    tf.io.gfile.makedirs(remote)
    tf.io.gfile.copy(str(vocab), f"{remote}/vocab.txt")
    assert checkpoints.vocab_path(remote) == f"{remote}/vocab.txt"


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="train_files is required"):
        runner.PretrainingConfig(model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="steps_per_loop 30 must divide"):
        runner.PretrainingConfig(
            train_files="x", model_dir=str(tmp_path), num_train_steps=100, steps_per_loop=30
        )
    with pytest.raises(ValueError, match="num_warmup_steps 100 must be in"):
        runner.PretrainingConfig(
            train_files="x", model_dir=str(tmp_path), num_train_steps=10, steps_per_loop=10
        )
    with pytest.raises(ValueError, match="mixed_precision"):
        runner.PretrainingConfig(train_files="x", model_dir=str(tmp_path), mixed_precision="fp8")
    with pytest.raises(ValueError, match="not divisible by grad_accumulation_steps"):
        runner.PretrainingConfig(
            train_files="x", model_dir=str(tmp_path), batch_size=10, grad_accumulation_steps=3
        )
    assert (
        runner.PretrainingConfig(
            train_files="x", model_dir="d", num_train_steps=1000, checkpoint_every=250
        ).steps_per_loop
        == 50
    )
    with pytest.raises(FileNotFoundError, match="nothing-"):
        runner.run_pretraining(
            train_files=str(tmp_path / "nothing-*"),
            model_dir=str(tmp_path / "r"),
            model="tiny",
            vocab_size=40,
            num_train_steps=1,
            num_warmup_steps=0,
            checkpoint_every=1,
        )


def test_command_line(tmp_path, capsys):
    train, evals = _data(tmp_path, 40, n_train=32, n_eval=8)
    pretrain.define_flags()
    fields = {f for f in runner.PretrainingConfig.__dataclass_fields__ if f != "bert_config"}
    assert fields <= set(flags.FLAGS)  # Flag names = config field names.
    flags.FLAGS.unparse_flags()
    flags.FLAGS(
        [
            "run_pretraining",
            "--model=tiny",
            "--vocab_size=40",
            f"--train_files={train}",
            f"--eval_files={evals}",
            "--batch_size=4",
            f"--seq_length={S}",
            f"--max_predictions_per_seq={P}",
            "--num_train_steps=2",
            "--num_warmup_steps=1",
            "--checkpoint_every=2",
            "--optimizer=lamb",
            f"--model_dir={tmp_path / 'cli'}",
            "--noverbose",
            "--noplot",
            "--nonext_sentence",
        ]
    )
    try:
        pretrain.main([])
    finally:
        flags.FLAGS.unparse_flags()
    out = capsys.readouterr().out
    printed = json.loads(out[out.index("{\n") :])
    # --nonext_sentence: the MLM-only objective (RoBERTa style), no NSP head or metrics.
    assert (
        printed["steps"] == 2
        and "mlm_accuracy" in printed["eval"]
        and "nsp_accuracy" not in printed["eval"]
    )
    assert set(printed["final"]) == {"loss", "mlm_loss", "mlm_accuracy", "learning_rate"}
    np.testing.assert_allclose(printed["final"]["loss"], printed["final"]["mlm_loss"], rtol=1e-6)
