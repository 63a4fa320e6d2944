"""BertPreprocessor: ids equal the original run_classifier features; save/load and SavedModel round
trips."""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from official.nlp.data import classifier_data_lib
from official.nlp.tools import tokenization

import keras_bert
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.text.vocab import write_vocabulary
from keras_bert.text.vocab_builder import build_vocabulary

KEYS = ("input_word_ids", "input_mask", "input_type_ids")
WORDS = (
    "the quick brown fox jumps over lazy dog café naïve Zürich Straße über señor "
    "transformer attention bidirectional pre-training 北京 大学 東京 ½ don't 3.14 e-mail"
).split()


def _lines(n, seed):
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 25))) + rng.choice(["", ".", "?!"])
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    vocab = build_vocabulary(tf.data.Dataset.from_tensor_slices(_lines(300, 0)), 120)
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    write_vocabulary(vocab, path)
    return path


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return BertTokenizer(vocab_file, lower_case=True)


def _original_features(vocab_file, texts_a, texts_b, seq_length):
    """The original run_classifier features for each (text_a, text_b) example."""
    full = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    rows = {k: [] for k in KEYS}
    for i, a in enumerate(texts_a):
        example = classifier_data_lib.InputExample(
            str(i), a, None if texts_b is None else texts_b[i], label=0
        )
        f = classifier_data_lib.convert_single_example(10, example, None, seq_length, full)
        for key, value in zip(KEYS, (f.input_ids, f.input_mask, f.segment_ids)):
            rows[key].append(value)
    return {k: np.array(v) for k, v in rows.items()}


def _assert_same(got, expected):
    for key in KEYS:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected[key]), err_msg=key)


@pytest.mark.parametrize("seq_length", [3, 16, 64])
def test_pairs_match_original_features(vocab_file, tokenizer, seq_length):
    texts_a, texts_b = _lines(48, 1), _lines(48, 2)
    texts_a[0] = "Ωmega " + texts_a[0]  # Ω is not in the vocabulary: [UNK]
    texts_b[1] = ""  # an empty B packs as a single text, as in the original
    pre = BertPreprocessor(tokenizer, seq_length=seq_length)
    got = pre((tf.constant(texts_a), tf.constant(texts_b)))
    _assert_same(got, _original_features(vocab_file, texts_a, texts_b, seq_length))
    assert got["input_word_ids"][0, 1] == (tokenizer.unk_id if seq_length > 3 else tokenizer.sep_id)


def test_single_text_dict_and_tf_data(vocab_file, tokenizer):
    texts = _lines(40, 3)
    expected = _original_features(vocab_file, texts, None, 24)
    pre = BertPreprocessor(tokenizer, seq_length=24)
    _assert_same(pre(tf.constant(texts)), expected)
    _assert_same(pre({"text_a": tf.constant(texts)}), expected)
    batched = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(pre)
    _assert_same({k: np.concatenate([b[k] for b in batched]) for k in KEYS}, expected)
    unbatched = tf.data.Dataset.from_tensor_slices(texts).map(pre).batch(40)
    _assert_same(next(iter(unbatched)), expected)


def test_dynamic_length_pads_to_longest(vocab_file, tokenizer):
    texts_a, texts_b = _lines(8, 4), _lines(8, 5)
    got = BertPreprocessor(tokenizer, seq_length=None)(
        {"text_a": tf.constant(texts_a), "text_b": tf.constant(texts_b)}
    )
    longest = int(got["input_mask"].numpy().sum(axis=1).max())
    assert got["input_word_ids"].shape[1] == longest
    _assert_same(got, _original_features(vocab_file, texts_a, texts_b, longest))


def _text_to_encoder_model(tokenizer, pair):
    text_inputs = [
        keras.Input(shape=(), dtype="string", name=f"text_{n}") for n in ("a", "b")[: 1 + pair]
    ]
    encoder_inputs = BertPreprocessor(tokenizer, seq_length=32)(text_inputs)
    config = keras_bert.BertConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, num_hidden_layers=1
    )
    outputs = keras_bert.BertEncoder(config)(encoder_inputs)
    return keras.Model(
        text_inputs,
        {
            "pooled_output": outputs["pooled_output"],
            "sequence_output": outputs["sequence_output"],
            **encoder_inputs,
        },
    )


def test_text_to_encoder_model_keras_save_load(tokenizer, tmp_path):
    model = _text_to_encoder_model(tokenizer, pair=True)
    texts = [tf.constant(_lines(5, 6)), tf.constant(_lines(5, 7))]
    expected = model(texts)
    path = str(tmp_path / "text_encoder.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    got = reloaded(texts)
    for key in expected:
        np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())
    pre = [layer for layer in reloaded.layers if isinstance(layer, BertPreprocessor)][0]
    assert pre.tokenizer.vocabulary == tokenizer.vocabulary and pre.seq_length == 32


def test_saved_model_serving_signature_takes_raw_strings(vocab_file, tokenizer, tmp_path):
    model = _text_to_encoder_model(tokenizer, pair=False)
    module = tf.Module()
    module.model = model
    module.serve = tf.function(
        lambda text: model([text]), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    path = str(tmp_path / "saved_model")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    texts = [t.encode("utf-8") for t in _lines(6, 8)] + [
        b"",
        b"\xff\xfe invalid UTF-8 bytes are dropped",
    ]
    expected = model([tf.constant(texts)])
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(texts))
    for key in expected:  # a graph may fuse float ops differently from eager: ulp-level tolerance
        np.testing.assert_allclose(served[key].numpy(), expected[key].numpy(), rtol=1e-5, atol=1e-6)
    clean = _lines(6, 8) + [
        "",
        " invalid UTF-8 bytes are dropped",
    ]  # as the original's decode("utf-8", "ignore")
    _assert_same(served, _original_features(vocab_file, clean, None, 32))


def test_config_round_trip(tokenizer):
    pre = BertPreprocessor(tokenizer, seq_length=None, truncation="waterfall", name="pre")
    clone = BertPreprocessor.from_config(pre.get_config())
    assert clone.get_config() == pre.get_config()
    assert clone.packer.cls_id == tokenizer.cls_id and clone.packer.sep_id == tokenizer.sep_id


def test_bad_input(tokenizer):
    with pytest.raises(TypeError, match="tf.string"):
        BertPreprocessor(tokenizer)(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="pairs need seq_length >= 3"):
        BertPreprocessor(tokenizer, seq_length=2)((tf.constant(["a"]), tf.constant(["b"])))
    with pytest.raises(ValueError, match="text_a"):
        BertPreprocessor(tokenizer)({"question": tf.constant(["a"])})
    with pytest.raises(ValueError, match="one text or a pair"):
        BertPreprocessor(tokenizer)([tf.constant(["a"])] * 3)
    with pytest.raises(ValueError, match="shape"):
        BertPreprocessor(tokenizer)(tf.constant([["a"]]))
    with pytest.raises(ValueError, match="different batch sizes"):
        BertPreprocessor(tokenizer)((tf.constant(["a", "b"]), tf.constant(["c"])))
    with pytest.raises(TypeError, match="BertTokenizer"):
        BertPreprocessor("vocab.txt")


@pytest.mark.slow  # about a minute to convert the tokenizer's graph on 2 cores
def test_tflite_conversion_with_tensorflow_text_kernels(vocab_file, tokenizer):
    """Tokenizer + packer convert to TFLite builtins plus tensorflow-text's registered kernels."""
    import tensorflow_text as tf_text
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    pre = BertPreprocessor(tokenizer, seq_length=24)
    spec = tf.TensorSpec([None], tf.string)
    serve = tf.function(lambda a, b: pre((a, b)), input_signature=[spec, spec])
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serve.get_concrete_function()], pre
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS
    ]  # no Flex (select TF) ops
    converter.allow_custom_ops = True
    interpreter = InterpreterWithCustomOps(
        model_content=converter.convert(),
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
    )
    texts_a, texts_b = _lines(6, 9), _lines(6, 10)
    texts_b[2] = ""
    got = interpreter.get_signature_runner()(
        a=np.array(texts_a, dtype=object), b=np.array(texts_b, dtype=object)
    )
    _assert_same(got, _original_features(vocab_file, texts_a, texts_b, 24))
