"""Pre-training objectives (`PretrainingConfig.objective`): the losses against NumPy, ALBERT's
sentence-order pairs, ELECTRA's token replacement, and a tiny run of each objective that resumes
exactly and leaves an encoder that `from_preset` loads."""

import json
import os
import random
import subprocess
import sys

import generated_corpus
import keras
import numpy as np
import pytest
from pretraining_data import write_records

import keras_bert
from keras_bert.models.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraPretrainer,
    electra_loss,
    generator_shape,
    replace_tokens,
)
from keras_bert.models.pretrainer import BertPretrainer, pretraining_loss
from keras_bert.pretraining import examples, runner
from keras_bert.pretraining.config import PretrainingConfig
from keras_bert.pretraining.create_pretraining_data import ExampleFactory
from keras_bert.pretraining.static_records import create_pretraining_data
from keras_bert.text.tokenizer import BertTokenizer

S, P, V = 32, 5, 48


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _batch(seed=0, B=3):
    rng = np.random.default_rng(seed)
    lengths = np.array([S, 20, 9])[:B]
    mask = (np.arange(S)[None] < lengths[:, None]).astype("int32")
    ids = rng.integers(5, V, (B, S)).astype("int32") * mask
    positions = np.stack([np.sort(rng.choice(np.arange(1, n), P, replace=False)) for n in lengths])
    weights = np.ones((B, P), "float32")
    weights[2, 3:] = 0.0
    positions[2, 3:] = 0
    inputs = {
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": np.zeros((B, S), "int32"),
        "masked_lm_positions": positions.astype("int32"),
    }
    labels = {
        "masked_lm_ids": rng.integers(5, V, (B, P)).astype("int32"),
        "masked_lm_weights": weights,
        "next_sentence_labels": np.array([[0], [1], [1]], "int32")[:B],
    }
    return inputs, labels


def _mlm_reference(labels, logits):
    nll = -np.take_along_axis(_log_softmax(logits), labels["masked_lm_ids"][..., None], -1)[..., 0]
    w = labels["masked_lm_weights"]
    return (nll * w).sum() / (w.sum() + 1e-5)


@pytest.mark.parametrize("objective", ["mlm_nsp", "mlm", "mlm_sop"])
def test_bert_objective_losses_match_numpy(objective):
    config = PretrainingConfig(train_files="x", model_dir="y", objective=objective)
    assert config.next_sentence == (objective != "mlm")
    inputs, labels = _batch()
    model = BertPretrainer(
        keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny", vocab_size=V)),
        next_sentence=config.next_sentence,
    )
    out = {k: np.asarray(v) for k, v in model(inputs).items()}
    assert ("nsp_logits" in out) == config.next_sentence
    losses = pretraining_loss(labels, out)
    mlm = _mlm_reference(labels, out["mlm_logits"])
    np.testing.assert_allclose(float(losses["mlm_loss"]), mlm, rtol=1e-5)
    expected = mlm
    if config.next_sentence:  # NSP and SOP: the same head, labels 1 = random next / swapped.
        nsp = -np.take_along_axis(
            _log_softmax(out["nsp_logits"]), labels["next_sentence_labels"], -1
        ).mean()
        np.testing.assert_allclose(float(losses["nsp_loss"]), nsp, rtol=1e-5)
        expected = mlm + nsp
    np.testing.assert_allclose(float(losses["loss"]), expected, rtol=1e-5)


def test_next_sentence_false_is_the_mlm_objective_and_bad_settings_fail():
    config = PretrainingConfig(train_files="x", model_dir="y", next_sentence=False)
    assert config.objective == "mlm"
    with pytest.raises(ValueError, match="objective must be one of"):
        PretrainingConfig(train_files="x", model_dir="y", objective="nsp")
    with pytest.raises(ValueError, match="generator_size"):
        PretrainingConfig(train_files="x", model_dir="y", objective="electra", generator_size=0)


def test_replace_tokens_writes_samples_at_real_masked_positions():
    ids = np.array([[2, 9, 9, 9, 3, 0]], "int32")
    positions = np.array([[1, 3, 0]], "int32")  # The last is padding (position 0 = [CLS]).
    original = np.array([[7, 8, 0]], "int32")
    sampled = np.array([[7, 5, 6]], "int32")  # Right at 1, wrong at 3, padding ignored.
    corrupted, replaced = replace_tokens(ids, positions, original, sampled)
    np.testing.assert_array_equal(np.asarray(corrupted), [[2, 7, 9, 5, 3, 0]])
    np.testing.assert_array_equal(np.asarray(replaced), [[0, 0, 0, 1, 0, 0]])


def test_electra_loss_matches_numpy_and_generator_is_smaller():
    inputs, labels = _batch()
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny", vocab_size=V))
    model = ElectraPretrainer(encoder, generator_size=0.5, seed=3)
    assert generator_shape(encoder.config, 0.5) == {
        "hidden_size": 64,
        "num_attention_heads": 1,
        "intermediate_size": 256,
    }
    inputs["masked_lm_ids"] = labels["masked_lm_ids"]
    out = {k: np.asarray(v) for k, v in model(inputs).items()}
    # The generator shares the discriminator's embeddings (no word table of its own).
    tables = [w for w in model.weights if w.path.endswith("word_embeddings")]
    assert len(tables) == 1
    # Replaced tokens only at real masked positions.
    allowed = np.zeros((3, S), bool)
    for b in range(3):
        allowed[b, inputs["masked_lm_positions"][b][labels["masked_lm_weights"][b] > 0]] = True
    assert out["rtd_labels"][~allowed].sum() == 0
    losses = electra_loss(labels, out, inputs["input_mask"])
    mask = inputs["input_mask"].astype(bool)
    z, t = out["rtd_logits"][mask].astype(np.float64), out["rtd_labels"][mask]
    bce = np.mean(np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z))))
    mlm = _mlm_reference(labels, out["mlm_logits"])
    np.testing.assert_allclose(float(losses["rtd_loss"]), bce, rtol=1e-5)
    np.testing.assert_allclose(float(losses["mlm_loss"]), mlm, rtol=1e-5)
    np.testing.assert_allclose(float(losses["loss"]), mlm + DISCRIMINATOR_WEIGHT * bce, rtol=1e-5)


def test_sentence_order_pairs_are_swapped_next_segments():
    tokenizer = BertTokenizer(generated_corpus.VOCABULARY)
    settings = dict(max_seq_length=64, whole_word_masking=False)
    chunk = ExampleFactory(tokenizer, settings).tokenize(generated_corpus.documents(200, seed=1))
    pairs = examples.create_pairs(chunk, 64, 0.1, random.Random(5), sentence_order=True)
    doc = lambda starts: np.searchsorted(chunk.document_starts, starts, side="right")  # noqa: E731
    doc_of_token = lambda pos: doc(np.searchsorted(chunk.sentence_starts, pos, side="right") - 1)  # noqa: E731
    same_doc = doc_of_token(pairs.a_start) == doc_of_token(pairs.b_start)
    label = pairs.is_random_next
    kept, swapped = ~label, label & same_doc
    # 0: B follows A; 1: A follows B (swapped), or a single sentence with a random next.
    np.testing.assert_array_equal(pairs.b_start[kept], (pairs.a_start + pairs.a_length)[kept])
    np.testing.assert_array_equal(pairs.a_start[swapped], (pairs.b_start + pairs.b_length)[swapped])
    assert same_doc[kept].all()
    assert 0.4 < swapped.sum() / (kept.sum() + swapped.sum()) < 0.6
    # A random next segment only after a single sentence (nothing to swap), as ALBERT's writer.
    first = np.searchsorted(chunk.sentence_starts, pairs.a_start)
    one_sentence = chunk.sentence_starts[first + 1] - pairs.a_start == pairs.a_length
    assert one_sentence[label & ~same_doc].all() and not one_sentence[kept].all()


def _tiny_run(tmp_path, objective, steps, name):
    train, _ = write_records(
        str(tmp_path), 64, vocab_size=V, seq_length=S, max_predictions_per_seq=P
    )
    return runner.run_pretraining(
        bert_config=keras_bert.BertConfig.preset(
            "tiny", vocab_size=V, num_hidden_layers=1, intermediate_size=64
        ),
        objective=objective,
        train_files=train,
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=steps,
        num_warmup_steps=1,
        checkpoint_every=2,
        model_dir=str(tmp_path / name),
        verbose=False,
        plot=False,
    )


@pytest.mark.parametrize("objective", ["mlm", "mlm_sop", "electra"])
def test_each_objective_trains_resumes_exactly_and_leaves_an_encoder(tmp_path, objective):
    whole = _tiny_run(tmp_path, objective, 4, "whole")
    _tiny_run(tmp_path, objective, 2, "parts")
    resumed = _tiny_run(tmp_path, objective, 4, "parts")
    assert resumed["start_step"] == 2 and resumed["steps"] == 4
    assert ("rtd_loss" in resumed["final"]) == (objective == "electra")
    assert ("nsp_loss" in resumed["final"]) == (objective == "mlm_sop")
    for a, b in zip(whole["model"].weights, resumed["model"].weights):  # Generator included.
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)
    encoder = keras_bert.BertEncoder.from_preset(str(tmp_path / "whole"))
    for a, b in zip(encoder.weights, whole["model"].encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


@pytest.mark.parametrize("objective", ["mlm_sop", "mlm"])
def test_sentence_order_records_and_packed_rows_train(tmp_path, objective):
    vocab = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(40, seed=3, max_sentences=4)
    )
    kwargs = dict(max_seq_length=S, max_predictions_per_seq=P, dupe_factor=2, seed=5)
    files = create_pretraining_data(
        corpus, str(tmp_path / "sop"), vocab, objective="mlm_sop", pack=True, **kwargs
    )
    stats = json.loads((tmp_path / "sop" / "pretraining-stats.json").read_text())
    assert stats["settings"]["objective"] == "mlm_sop"
    assert 0 < stats["random_next"] < stats["examples"]  # Swapped (and single-sentence) pairs.
    with pytest.raises(ValueError, match="objective must be"):
        create_pretraining_data(corpus, str(tmp_path / "x"), vocab, objective="nsp", **kwargs)
    summary = runner.run_pretraining(
        bert_config=keras_bert.BertConfig.preset(
            "tiny", vocab_size=len(generated_corpus.VOCABULARY), num_hidden_layers=1
        ),
        objective=objective,
        train_files=",".join(files),
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=stats["settings"]["packed_predictions"],
        max_instances=4,
        num_train_steps=2,
        num_warmup_steps=1,
        checkpoint_every=2,
        model_dir=str(tmp_path / "run"),
        verbose=False,
        plot=False,
    )
    assert summary["model"].packed and summary["steps"] == 2
    assert ("nsp_loss" in summary["final"]) == (objective == "mlm_sop")


def test_raw_text_sentence_order_pairs_are_swapped_and_labelled():
    import tensorflow as tf

    from keras_bert.pretraining.dynamic import dynamic_masking, pack_texts, sentence_order_texts

    tokenizer = BertTokenizer(generated_corpus.VOCABULARY)
    docs = [d for d in generated_corpus.documents(80, seed=6) if len(d) >= 2]
    first, second = [d[0] for d in docs], [d[1] for d in docs]
    pairs = tf.data.Dataset.from_tensor_slices((first, second)).batch(len(docs))
    ordered = sentence_order_texts(pairs, seed=4)
    (a, b), labels = next(iter(ordered))
    a, b, labels = a.numpy().astype(str), b.numpy().astype(str), labels.numpy()
    np.testing.assert_array_equal(np.where(labels == 1, b, a), first)  # Swapped: label 1.
    np.testing.assert_array_equal(np.where(labels == 1, a, b), second)
    assert 0.3 < labels.mean() < 0.7
    # Another iteration draws other pairs: there the row's first segment follows its label too.
    inputs, out = next(iter(dynamic_masking(pack_texts(ordered, tokenizer, 48), tokenizer, 5)))
    labels = out["next_sentence_labels"].numpy()[:, 0]
    starts = lambda texts: np.array([ids[:2] for ids in tokenizer(texts).to_list()])  # noqa: E731
    expected = np.where(labels[:, None] == 1, starts(second), starts(first))
    ids, masked = inputs["input_word_ids"].numpy()[:, 1:3], inputs["masked_lm_positions"].numpy()
    unmasked = ~(masked[:, :, None] == np.arange(1, 3)).any(1)  # Masked ones may have changed.
    np.testing.assert_array_equal(ids[unmasked], expected[unmasked])
    assert 0.3 < labels.mean() < 0.7


def test_electra_pretrainer_saves_and_loads(tmp_path):
    inputs, labels = _batch()
    inputs["masked_lm_ids"] = labels["masked_lm_ids"]
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny", vocab_size=V))
    model = ElectraPretrainer(encoder, generator_size=0.5, seed=3)
    model.save(str(tmp_path / "electra.keras"))
    restored = keras.saving.load_model(str(tmp_path / "electra.keras"))
    assert restored.generator_size == 0.5 and len(restored.weights) == len(model.weights)
    np.testing.assert_array_equal(restored(inputs)["mlm_logits"], model(inputs)["mlm_logits"])


_JAX_JOB = """
import numpy as np, keras, keras_bert
from keras_bert.models.electra import ElectraPretrainer
rng = np.random.default_rng(0)
ids = rng.integers(5, 48, (4, 16)).astype("int32")
x = dict(input_word_ids=ids, input_mask=np.ones_like(ids), input_type_ids=np.zeros_like(ids),
         masked_lm_positions=np.tile(np.arange(1, 4, dtype="int32"), (4, 1)),
         masked_lm_ids=rng.integers(5, 48, (4, 3)).astype("int32"))
y = dict(masked_lm_ids=x["masked_lm_ids"], masked_lm_weights=np.ones((4, 3), "float32"))
model = ElectraPretrainer(keras_bert.BertEncoder(keras_bert.BertConfig.preset(
    "tiny", vocab_size=48, num_hidden_layers=1)), seed=1)
model.compile(optimizer="adam")
history = model.fit(x, y, epochs=3, verbose=0).history
assert np.isfinite(history["loss"]).all() and history["rtd_loss"][-1] > 0, history
print("ok", keras.backend.backend())
"""


def test_electra_trains_on_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-c", _JAX_JOB], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "ok jax" in done.stdout, done.stderr[-3000:]


def test_electra_from_the_command_line_then_its_encoder_starts_an_mlm_nsp_run(tmp_path, capsys):
    from absl import flags

    from keras_bert.pretraining import pretrain

    train, _ = write_records(
        str(tmp_path), 32, vocab_size=V, seq_length=S, max_predictions_per_seq=P
    )
    pretrain.define_flags()
    flags.FLAGS.unparse_flags()
    flags.FLAGS(
        [
            "pretrain",
            "--model=tiny",
            f"--vocab_size={V}",
            f"--train_files={train}",
            "--batch_size=4",
            f"--seq_length={S}",
            f"--max_predictions_per_seq={P}",
            "--num_train_steps=2",
            "--num_warmup_steps=1",
            "--checkpoint_every=2",
            f"--model_dir={tmp_path / 'electra'}",
            "--objective=electra",
            "--generator_size=0.5",
            "--noverbose",
            "--noplot",
        ]
    )
    try:
        pretrain.main([])
    finally:
        flags.FLAGS.unparse_flags()
    out = capsys.readouterr().out
    final = json.loads(out[out.index("{\n") :])["final"]
    assert {"rtd_loss", "rtd_accuracy", "mlm_loss"} <= set(final) and "nsp_loss" not in final
    # Phase 2 (one step at learning rate 0) with the paper's heads on the discriminator.
    two = runner.run_pretraining(
        init_checkpoint=str(tmp_path / "electra"),
        train_files=train,
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=1,
        num_warmup_steps=1,
        checkpoint_every=1,
        model_dir=str(tmp_path / "phase2"),
        verbose=False,
        plot=False,
    )
    assert two["model"].next_sentence
    encoder = keras_bert.BertEncoder.from_preset(str(tmp_path / "electra"))
    for a, b in zip(encoder.weights, two["model"].encoder.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)
