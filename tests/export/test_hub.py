"""The TF Hub-style pair: TF Hub's preprocessor and encoder API with tf.saved_model.load and with
hub.KerasLayer (tf-keras, in its own process), the round-robin packing against tensorflow-text's,
and the masked-LM sub-object."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as text
from export_cases import TEXTS, TEXTS_B
from finetune_cases import TINY, VOCAB
from pretraining_data import write_records

import keras_bert
from keras_bert.export import export_hub
from keras_bert.export.hub import pack_segments, special_tokens, word_pieces
from keras_bert.export.source import load_source
from keras_bert.pretraining import runner
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL = 1e-5
SPECIAL = special_tokens(BertTokenizer(VOCAB))


def tf_text_pack(segments, seq_length):
    """TF Hub's bert_pack_inputs (tf-models' BertPackInputs): tensorflow-text's RoundRobinTrimmer,
    combine_segments and pad_model_inputs."""
    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    trimmed = text.RoundRobinTrimmer(seq_length - len(segments) - 1).trim(segments)
    ids, types = text.combine_segments(
        trimmed,
        start_of_sequence_id=SPECIAL["start_of_sequence_id"],
        end_of_segment_id=SPECIAL["end_of_segment_id"],
    )
    word_ids, mask = text.pad_model_inputs(ids, seq_length, pad_value=SPECIAL["padding_id"])
    type_ids, _ = text.pad_model_inputs(types, seq_length, pad_value=0)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def random_segment(rng, batch, words=False):
    lengths = rng.integers(0, 16, size=batch)
    rows = [rng.integers(5, len(VOCAB), size=n).tolist() for n in lengths]
    if words:  # [B, (words), (pieces)]
        rows = [[row[i : i + 2] for i in range(0, len(row), 2)] for row in rows]
    return tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=2 if words else 1)


def assert_same_inputs(got, want):
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_round_robin_packing_matches_tensorflow_text():
    rng = np.random.default_rng(0)
    for trial in range(40):
        num_segments, words = 1 + trial % 2, trial % 4 >= 2
        segments = [random_segment(rng, 7, words) for _ in range(num_segments)]
        seq_length = int(rng.integers(num_segments + 1, 40))
        assert_same_inputs(
            pack_segments(segments, seq_length, SPECIAL), tf_text_pack(segments, seq_length)
        )
    with pytest.raises(ValueError, match="one or two segments"):
        pack_segments([random_segment(rng, 2)] * 3, 10, SPECIAL)


def test_tokenize_groups_word_pieces_by_word():
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "un",
        "##aff",
        "##able",
        "hello",
        "!",
        "##",
    ]
    tokenizer = BertTokenizer(vocab)
    is_suffix = tf.constant([t.startswith("##") and t != "##" for t in vocab])
    words = word_pieces(
        tokenizer(tf.constant(["Unaffable hello!", "", "xyz unaff " + "a" * 300])), is_suffix
    )
    assert words.to_list() == [[[5, 6, 7], [8], [9]], [], [[1], [5, 6], [1]]]


def test_hub_pair_with_saved_model_load(pretrained):
    preprocessor = tf.saved_model.load(os.path.join(pretrained["hub"], "preprocessor"))
    encoder = tf.saved_model.load(os.path.join(pretrained["hub"], "encoder"))
    source = load_source(pretrained["checkpoint"])
    texts = tf.constant(TEXTS)

    # tokenize: [B, (words), (pieces)] int32, the tokenizer's ids grouped by word.
    tokens = preprocessor.tokenize(texts)
    assert tokens.shape.rank == 3 and tokens.dtype == tf.int32
    assert tokens.merge_dims(1, 2).to_list() == source.tokenizer(texts).to_list()
    assert {
        k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()
    } == SPECIAL

    # The root call and bert_pack_inputs (default and given seq_length, one or two segments).
    packed = preprocessor(texts)
    assert packed["input_word_ids"].shape == (len(TEXTS), source.seq_length)
    assert_same_inputs(packed, BertPreprocessor(source.tokenizer, source.seq_length)(texts))
    tokens_b = preprocessor.tokenize(tf.constant(TEXTS_B))
    assert_same_inputs(preprocessor.bert_pack_inputs([tokens]), packed)
    for seq_length in (5, 24):
        assert_same_inputs(
            preprocessor.bert_pack_inputs([tokens, tokens_b], seq_length=seq_length),
            tf_text_pack([tokens, tokens_b], seq_length),
        )
        assert_same_inputs(
            preprocessor.bert_pack_inputs(
                [tokens.merge_dims(1, 2)], seq_length=tf.constant(seq_length)
            ),
            tf_text_pack([tokens], seq_length),
        )

    # The encoder: our encoder's outputs; training=True applies dropout.
    ours = pretrained["pretrainer"].encoder(packed)
    out = encoder(packed)
    assert sorted(out) == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
    np.testing.assert_allclose(out["pooled_output"], ours["pooled_output"], atol=ATOL)
    np.testing.assert_allclose(out["default"], ours["pooled_output"], atol=ATOL)
    np.testing.assert_allclose(out["sequence_output"], ours["sequence_output"], atol=ATOL)
    assert len(out["encoder_outputs"]) == TINY["num_hidden_layers"]
    np.testing.assert_allclose(out["encoder_outputs"][-1], ours["sequence_output"], atol=ATOL)
    assert not np.allclose(
        encoder(packed, training=True)["pooled_output"], out["pooled_output"], atol=1e-3
    )
    assert len(encoder.trainable_variables) == len(
        pretrained["pretrainer"].encoder.trainable_variables
    )
    assert list(encoder.regularization_losses) == []

    # mlm: the pre-training head's logits at the masked positions.
    positions = tf.constant([[1, 2, 0]] * len(TEXTS))
    mlm = encoder.mlm(dict(packed, masked_lm_positions=positions))
    want = pretrained["pretrainer"](dict(packed, masked_lm_positions=positions))["mlm_logits"]
    assert mlm["mlm_logits"].shape == (len(TEXTS), 3, len(VOCAB))
    np.testing.assert_allclose(mlm["mlm_logits"], want, atol=ATOL)
    np.testing.assert_allclose(mlm["pooled_output"], ours["pooled_output"], atol=ATOL)
    signature = encoder.signatures["serving_default"](**packed)
    np.testing.assert_allclose(signature["pooled_output"], ours["pooled_output"], atol=ATOL)


def test_hub_keras_layer_classifier_in_tf_keras(pretrained, tmp_path):
    out = str(tmp_path / "out.json")
    texts = [t for t in TEXTS if isinstance(t, str)]
    spec = {
        "preprocessor": os.path.join(pretrained["hub"], "preprocessor"),
        "encoder": os.path.join(pretrained["hub"], "encoder"),
        "texts": texts,
        "labels": [i % 2 for i in range(len(texts))],
        "out": out,
    }
    run = subprocess.run(
        [sys.executable, os.path.join(HERE, "hub_keras_layer.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with open(out) as f:
        result = json.load(f)
    source = load_source(pretrained["checkpoint"])
    ours = pretrained["pretrainer"].encoder(
        BertPreprocessor(source.tokenizer, source.seq_length)(tf.constant(texts))
    )
    np.testing.assert_allclose(result["pooled_output"], ours["pooled_output"], atol=ATOL)
    np.testing.assert_allclose(result["default"], ours["pooled_output"], atol=ATOL)
    np.testing.assert_allclose(result["sequence_output"], ours["sequence_output"], atol=ATOL)
    # trainable=True: the encoder's weights are the layer's and a training step moves them.
    assert result["num_trainable"] == len(pretrained["pretrainer"].encoder.trainable_variables)
    assert result["changed"] == result["num_trainable"]
    assert all(np.isfinite(result["loss"]))


def test_fine_tuned_model_exports_its_encoder_without_mlm(mnli, tmp_path):
    path = export_hub(mnli["model_dir"], str(tmp_path / "hub"), version=3)
    assert path == str(tmp_path / "hub" / "3") and sorted(os.listdir(path)) == [
        "encoder",
        "preprocessor",
    ]
    encoder = tf.saved_model.load(os.path.join(path, "encoder"))
    assert not hasattr(encoder, "mlm") and sorted(encoder.signatures) == ["serving_default"]
    source = load_source(mnli["model_dir"])
    packed = tf.saved_model.load(os.path.join(path, "preprocessor"))(tf.constant(TEXTS))
    assert packed["input_word_ids"].shape[1] == source.seq_length == 32
    np.testing.assert_allclose(
        encoder(packed)["pooled_output"], source.encoder(packed)["pooled_output"], atol=ATOL
    )
    with pytest.raises(ValueError, match="no masked-LM head"):
        export_hub(mnli["model_dir"], str(tmp_path / "hub"), mlm=True)
    assert sorted(os.listdir(tmp_path / "hub")) == ["3"]


def test_pretraining_run_directory_gives_its_mlm_head(tmp_path):
    train, _ = write_records(
        str(tmp_path), 8, vocab_size=len(VOCAB), seq_length=16, max_predictions_per_seq=3
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB))
    model_dir = str(tmp_path / "run")
    summary = runner.run_pretraining(
        bert_config=keras_bert.BertConfig(**TINY),
        train_files=train,
        batch_size=4,
        seq_length=16,
        max_predictions_per_seq=3,
        num_train_steps=1,
        num_warmup_steps=0,
        learning_rate=1e-2,
        model_dir=model_dir,
        checkpoint_every=1,
        steps_per_loop=1,
        vocab_file=str(vocab),
        lower_case=True,
        verbose=False,
        plot=False,
    )
    source = load_source(model_dir)
    assert (source.kind, source.tokenizer.lower_case, source.pretrainer is not None) == (
        "encoder",
        True,
        True,
    )
    inputs = dict(
        BertPreprocessor(source.tokenizer, 16)(tf.constant(TEXTS)),
        masked_lm_positions=tf.constant([[1, 2]] * len(TEXTS)),
    )
    np.testing.assert_allclose(
        source.pretrainer(inputs)["mlm_logits"], summary["model"](inputs)["mlm_logits"], atol=ATOL
    )
    assert load_source(model_dir, mlm=False).pretrainer is None


def test_hub_encoder_trains_its_pooler_whatever_head_it_came_from():
    """An encoder fine-tuned under a head on the tokens has its pooler frozen
    (`BertEncoder.use_pooler`); its hub module still lists every variable as trainable, so a hub
    user's [CLS] classifier trains the pooler."""
    from keras_bert.export.hub import encoder_module
    from keras_bert.models.task_models import BertClassifier

    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    BertClassifier(encoder, 2, pooling="mean")
    assert not encoder.pooler.trainable_weights
    root, _ = encoder_module(encoder)
    trainable = {id(v) for v in root.trainable_variables}
    assert all(id(v) in trainable for v in encoder.pooler.weights)
    fresh = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    assert len(root.trainable_variables) == len(trainable) == len(fresh.trainable_variables)
