"""Export takes a task model in memory as well as a directory, and reads fine-tuned Hugging Face
directories: SavedModels whose `predict_ids` logits equal transformers' (the fixtures of
tests/checkpoints/hf_tasks, written by transformers) and whose `preprocess` ids equal its
tokenizer's."""

import os

import numpy as np
import pytest
import tensorflow as tf
from hf_task_cases import FIXTURES, SEQ_LENGTH, ids
from hf_task_cases import expected as _expected

from keras_bert import export
from keras_bert.checkpoints import task_model
from keras_bert.models.task_models import BertClassifier


def _ids(answers):
    return {k: tf.constant(v) for k, v in ids(answers).items()}


def _assert_same_ids(ours, theirs):
    """Equal ids, ours possibly padded to another width."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    width = max(ours.shape[-1], theirs.shape[-1])
    pad = lambda a: np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, width - a.shape[-1])])  # noqa: E731
    np.testing.assert_array_equal(pad(ours), pad(theirs))


def _check(version, expected, texts, outputs=("logits",)):
    loaded = tf.saved_model.load(version)
    got = loaded.signatures["predict_ids"](**_ids(expected))
    for key in outputs:
        np.testing.assert_allclose(got[key].numpy(), expected[key], atol=1e-4)
    packed = loaded.signatures["preprocess"](**{k: tf.constant(v) for k, v in texts.items()})
    _assert_same_ids(packed["input_word_ids"], expected["input_ids"])
    _assert_same_ids(packed["input_type_ids"], expected["token_type_ids"])
    return loaded


@pytest.mark.slow
def test_hf_token_classifier_directory(tmp_path):
    expected = _expected("tokens")
    version = export.export_saved_model(
        os.path.join(FIXTURES, "tokens"), str(tmp_path), seq_length=SEQ_LENGTH
    )
    _check(version, expected, {"text": expected["texts"]})


@pytest.mark.slow
def test_hf_question_answering_directory(tmp_path):
    expected = _expected("qa")
    version = export.export_saved_model(
        os.path.join(FIXTURES, "qa"), str(tmp_path), seq_length=SEQ_LENGTH
    )
    texts = {"question": expected["texts"], "context": expected["pairs"]}
    _check(version, expected, texts, outputs=("start_logits", "end_logits"))


def _signature_inputs(loaded, name="serving_default"):
    return sorted(loaded.signatures[name].structured_input_signature[1])


def test_hf_pairs_directory_on_the_command_line_with_text_pair(tmp_path):
    """keras-bert-export --model_dir=<BertForSequenceClassification fine-tuned on pairs>
    --text_pair: a (text, text_b) signature whose ids and logits are transformers'."""
    from absl import flags

    from keras_bert.export import __main__ as cli

    expected = _expected("pairs")
    cli.define_flags()
    argv = [f"--model_dir={FIXTURES}/pairs", f"--export_dir={tmp_path}", "--text_pair"]
    flags.FLAGS(["keras-bert-export", f"--seq_length={SEQ_LENGTH}", "--nowarmup_requests", *argv])
    try:
        cli.main([])
    finally:
        flags.FLAGS.unparse_flags()
    texts = {"text": expected["texts"], "text_b": expected["pairs"]}
    loaded = _check(str(tmp_path / "1"), expected, texts)
    assert _signature_inputs(loaded) == ["text", "text_b"]
    answer = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in texts.items()})
    labels = np.array(["contradiction", "entailment", "neutral"])
    want = labels[np.asarray(expected["logits"]).argmax(-1)]
    assert [x.decode() for x in answer["label"].numpy()] == list(want)


@pytest.mark.slow
def test_hf_directory_whose_config_says_pairs(tmp_path):
    """A directory written by run_glue (finetuning_task "stsb") exports pairs untold; a
    text_pair that disagrees with it is refused before anything is written."""
    expected = _expected("stsb")
    stsb = os.path.join(FIXTURES, "stsb")
    version = export.export_saved_model(
        stsb, str(tmp_path / "a"), seq_length=SEQ_LENGTH, warmup_requests=False
    )
    texts = {"text": expected["texts"], "text_b": expected["pairs"]}
    loaded = _check(version, expected, texts)
    score = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in texts.items()})
    np.testing.assert_allclose(score["score"], np.asarray(expected["logits"])[:, 0], atol=1e-4)
    with pytest.raises(ValueError, match="text_pair=False disagrees"):
        export.export(stsb, str(tmp_path / "b"), text_pair=False)
    assert not os.path.exists(tmp_path / "b")


def test_in_memory_pairs_classifier_same_as_its_directory(tmp_path):
    """export_saved_model(model) and export_saved_model(<its saved model/ dir>) write the same
    signatures with the same answers; labels from id2label."""
    expected = _expected("pairs")
    model = BertClassifier.from_preset(
        os.path.join(FIXTURES, "pairs"), seq_length=SEQ_LENGTH, text_pair=True
    )
    texts = {"text": expected["texts"], "text_b": expected["pairs"]}
    loaded = _check(export.export_saved_model(model, str(tmp_path / "a")), expected, texts)
    answer = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in texts.items()})
    labels = np.array(model.task_facts["labels"])
    want = labels[np.asarray(expected["logits"]).argmax(-1)]
    assert [x.decode() for x in answer["label"].numpy()] == list(want)

    info = model.task_info()
    directory = str(tmp_path / "model")
    task_model.save_task_model(
        model,
        directory,
        _Task(info),
        info["seq_length"],
        model.preprocessor.tokenizer.vocabulary,
        info["lower_case"],
    )
    again = BertClassifier.from_preset(directory)
    assert again.task_facts["labels"] == list(labels)
    loaded_dir = _check(export.export_saved_model(directory, str(tmp_path / "b")), expected, texts)
    assert set(loaded_dir.signatures) == set(loaded.signatures)


class _Task:
    """The two things save_task_model asks of a task."""

    def __init__(self, info):
        self.name, self._info = "pairs", info

    def info(self):
        return {k: v for k, v in self._info.items() if k not in ("seq_length", "lower_case")}


def test_in_memory_without_preprocessor_is_refused(tmp_path):
    model = BertClassifier.from_preset(os.path.join(FIXTURES, "pairs"))
    model.preprocessor = None
    with pytest.raises(ValueError, match="has no preprocessor"):
        export.export_saved_model(model, str(tmp_path))
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_tflite_and_hub_take_the_model_in_memory(tmp_path):
    """export_tflite(model, ...) answers as the model; export_hub(model, ...) writes the encoder
    and preprocessor pair of the same weights and vocabulary."""
    from keras_bert.export import hub, tflite

    expected = _expected("tokens")
    model = _token_classifier()
    version = tflite.export_tflite(model, str(tmp_path / "tflite"), quantize="dynamic_range")
    runner = tflite.load_interpreter(os.path.join(version, tflite.MODEL_FILE))
    assert "serving_default" in runner.get_signature_list()
    version = hub.export_hub(model, str(tmp_path / "hub"))
    encoder = tf.saved_model.load(os.path.join(version, "encoder"))
    preprocessor = tf.saved_model.load(os.path.join(version, "preprocessor"))
    packed = preprocessor(tf.constant(expected["texts"]))
    _assert_same_ids(packed["input_word_ids"], expected["input_ids"])
    ids = _ids(expected)
    np.testing.assert_allclose(
        encoder(ids)["sequence_output"].numpy(),
        model.encoder(ids)["sequence_output"].numpy(),
        atol=1e-5,
    )


def _token_classifier():
    from keras_bert.models.task_models import BertTokenClassifier

    return BertTokenClassifier.from_preset(os.path.join(FIXTURES, "tokens"), seq_length=SEQ_LENGTH)
