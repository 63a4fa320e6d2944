"""Pre-training objectives (`PretrainingConfig.objective`): the losses against NumPy, ALBERT's
sentence-order pairs, ELECTRA's token replacement, and a tiny run of each objective that resumes
exactly and leaves an encoder that `from_preset` loads."""

import random

import generated_corpus
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
    with pytest.raises(ValueError, match="unpacked"):
        PretrainingConfig(train_files="x", model_dir="y", objective="electra", max_instances=2)


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
