"""BertTokenizer: exact ids of the original FullTokenizer, shapes, offsets, bad input, export.

The reference is `official.nlp.tools.tokenization.FullTokenizer` (tf-models-official, a
copy of google-research/bert's tokenization.py). The vocabularies are built in the test
from the generated corpus with the original's own basic tokenizer.
"""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from official.nlp.tools import tokenization

from keras_bert.testing.corpus import build_test_vocabulary, generate_corpus
from keras_bert.text import normalize
from keras_bert.text.tokenizer import BertTokenizer

NUM_LINES = 3000


@pytest.fixture(scope="module")
def lines():
    return generate_corpus(NUM_LINES, seed=0)


def _setup(lines, lower_case, tmp_path_factory, max_chars=200):
    vocab = build_test_vocabulary(lines, tokenization.BasicTokenizer(do_lower_case=lower_case))
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    reference = tokenization.FullTokenizer(str(path), do_lower_case=lower_case)
    # google-research/bert uses 200 characters per word; tf-models-official's copy 400.
    reference.wordpiece_tokenizer.max_input_chars_per_word = max_chars
    return vocab, reference, BertTokenizer(str(path), lower_case=lower_case)


@pytest.fixture(scope="module")
def uncased(lines, tmp_path_factory):
    return _setup(lines, True, tmp_path_factory)


@pytest.fixture(scope="module")
def cased(lines, tmp_path_factory):
    return _setup(lines, False, tmp_path_factory)


def _ref_ids(reference, text):
    return reference.convert_tokens_to_ids(reference.tokenize(text))


def _ours(tokenizer, texts):
    return tokenizer(
        tf.constant([t.encode("utf-8") if isinstance(t, str) else t for t in texts])
    ).to_list()


# === Exact ids against the original ===


def test_corpus_is_broad(lines, uncased):
    vocab, _, _ = uncased
    text = "".join(lines)
    for sample in [
        "½",
        "ﬁ",
        "ＡＢＣ",
        "²",
        "℃",
        "Ⅻ",
        "İ",
        "ß",
        "ς",
        "\u0301",
        "\u200d",
        "\x00",
        "\x07",
        "\ufffd",
        "\t",
        "\r",
        "中",
        "😀",
        "ש",
        "ع",
        "\u2028",
    ]:
        assert sample in text, sample
    assert max(len(w) for line in lines for w in line.split()) > 400
    assert len(vocab) > 5000 and sum(t.startswith("##") for t in vocab) > 1000
    assert any(ord(c) > 0x3000 for token in vocab for c in token)


def test_cased_ids_equal_original(lines, cased):
    _, reference, tokenizer = cased
    ours = _ours(tokenizer, lines)
    mismatches = [line for line, ids in zip(lines, ours) if ids != _ref_ids(reference, line)]
    assert mismatches == []
    assert sum(len(ids) for ids in ours) > 50 * NUM_LINES // 10
    assert any(tokenizer.unk_id in ids for ids in ours)


def test_uncased_ids_equal_original(lines, uncased):
    _, reference, tokenizer = uncased
    ours = _ours(tokenizer, lines)
    mismatches = [line for line, ids in zip(lines, ours) if ids != _ref_ids(reference, line)]
    assert mismatches == []
    assert sum("Σ" in line for line in lines) > 100  # Final-sigma contexts are exercised.


def test_final_sigma_follows_str_lower(tmp_path):
    """U+03A3 -> ς or σ by its context, as Python's str.lower in the original."""
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "οδος",
        "οδοσ",
        "σοφος",
        "σ",
        "##σ",
        "##ς",
        "ς",
        "ο",
        "##ο",
        "##δ",
        "##φ",
        "α",
        "##α",
        ".",
        ",",
        "'",
        "2",
        "##2",
        "##ά",
    ]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab), encoding="utf-8")
    reference = tokenization.FullTokenizer(str(path), do_lower_case=True)
    tokenizer = BertTokenizer(vocab)
    texts = [
        "ΟΔΟΣ ΣΟΦΟΣ",
        "ΟΔΟΣ.Α ΟΔΟΣ,ΟΔΟΣ",
        "ΟΔΟΣ2 Σ ΑΣ",
        "ΣΣΣ ΑΣΣ",
        "x\tΟΔΟΣ\u200b",
        "Α\u0301Σ'Α ΑΣ'",
        "ΑΣ\u0301Α",
        "(ΣΟΦΟΣ)",
        "οδοΣ σοφοσ",
    ]
    assert _ours(tokenizer, texts) == [_ref_ids(reference, t) for t in texts]
    assert _ours(tokenizer, ["ΟΔΟΣ"]) != _ours(tokenizer, ["ΟΔΟσ"])
    # Documented residual: past 16 capital sigmas in one word, the rest stay "σς".
    word = "Α" + "Σ" * 20
    assert _ours(tokenizer, [word[:17]])[0] == _ref_ids(reference, word[:17])
    assert _ours(tokenizer, [word])[0] != _ref_ids(reference, word)


def test_canonical_reordering_is_the_documented_residual(tmp_path):
    """Uncased NFD reorders spacing marks with descending combining classes; ours does not."""
    marks = "\U0001d16d\U0001d165"  # Mc with combining classes 226, 216.
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##" + marks[0], "##" + marks[1]]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab), encoding="utf-8")
    reference = tokenization.FullTokenizer(str(path), do_lower_case=True)
    tokenizer = BertTokenizer(vocab)
    assert _ours(tokenizer, ["a" + marks[::-1]])[0] == _ref_ids(reference, "a" + marks) == [5, 7, 6]
    assert _ours(tokenizer, ["a" + marks])[0] == [5, 6, 7]  # Left in input order.


def test_compatibility_characters_unlike_stock_tf_text(uncased):
    """tensorflow-text's own normalizer (NFKC case folding) gives other ids; ours does not."""
    vocab, reference, tokenizer = uncased
    stock = tf_text.FastBertTokenizer(
        vocab=vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    for text in ["½", "ﬁne", "ＡＢＣ", "x²", "℃", "Ⅻ", "a\x07b", "㎏", "①", "İstanbul", "Straße"]:
        expected = _ref_ids(reference, text)
        assert _ours(tokenizer, [text])[0] == expected, text
        if text not in ("İstanbul", "Straße"):
            assert stock.tokenize(tf.constant([text])).to_list()[0] != expected, text


def test_long_words_follow_each_limit(tmp_path_factory):
    lines = [
        "a" * n + " " + "é" * n + " " + "日本" + "б" * n for n in (199, 200, 201, 399, 400, 401)
    ]
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "a",
        "##a",
        "é",
        "##é",
        "e",
        "##e",
        "б",
        "##б",
        "日",
        "本",
    ]
    vocab += [c * 50 for c in "aéeб"] + ["##" + c * 50 for c in "aéeб"]  # Keeps the reference fast.
    path = tmp_path_factory.mktemp("long") / "vocab.txt"
    path.write_text("\n".join(vocab), encoding="utf-8")
    for lower_case in (True, False):
        for limit in (200, 400):
            reference = tokenization.FullTokenizer(str(path), do_lower_case=lower_case)
            reference.wordpiece_tokenizer.max_input_chars_per_word = limit
            tokenizer = BertTokenizer(vocab, lower_case=lower_case, max_chars_per_word=limit)
            assert _ours(tokenizer, lines) == [_ref_ids(reference, line) for line in lines]


def test_tokens_longer_than_the_op_allows(tmp_path):
    """Tokens over 256 bytes (the op's limit) are kept in the vocabulary, never matched."""
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "hi",
        "ж",
        "##ж",
        "ж" * 150,
        "##" + "a" * 300,
    ]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab), encoding="utf-8")
    reference = tokenization.FullTokenizer(str(path), do_lower_case=True)
    tokenizer = BertTokenizer(vocab)
    assert tokenizer.vocab_size == len(vocab) and tokenizer.token_to_id("ж" * 150) == 8
    texts = ["hi жж", "ж" * 149, "[unmatchable_8]"]
    assert _ours(tokenizer, texts) == [_ref_ids(reference, t) for t in texts]
    # The documented residual: the original can match the long token itself.
    assert _ref_ids(reference, "ж" * 150) == [8] != _ours(tokenizer, ["ж" * 150])[0]


def test_every_split_character_is_known_to_the_normalizer():
    """Sweeps all code points through the op's pre-tokenizer (tensorflow-text's ICU tables)."""
    op = tf_text.FastWordpieceTokenizer(
        vocab=["[UNK]", "a", "##a"], token_out_type=tf.int32, no_pretokenization=False
    )
    cps = [cp for cp in range(1, 0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != ord("a")]
    pieces = op.tokenize(tf.constant([("a" + chr(cp) + "a").encode() for cp in cps]))
    counts = pieces.row_lengths().numpy()
    for cp, count in zip(cps, counts):
        char = chr(cp)
        if normalize.normalize_char(char, False) in ("", " "):
            continue  # Deleted or whitespace before the op sees it.
        if normalize.is_punctuation(char) or normalize.is_cjk(cp):
            assert count == 3, hex(cp)  # The op splits it off, as the original.
        elif count != 1:
            assert cp in normalize.OP_SPLIT_WORD_CHARS, hex(cp)


@pytest.mark.parametrize("lower_case", [True, False])
def test_every_assigned_code_point_matches_the_original(lower_case, tmp_path):
    """Each assigned character of planes 0-2 and 14 inside, before and after a word, with a
    vocabulary holding every character the original produces (whole and "##")."""
    import unicodedata

    cps = [
        cp
        for cp in list(range(1, 0x30000)) + list(range(0xE0000, 0xF0000))
        if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) != "Cn"
    ]
    texts = [f"a{chr(cp)}b {chr(cp)}\u0301{chr(cp)}" for cp in cps]
    basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
    chars = sorted({c for text in texts for word in basic.tokenize(text) for c in word})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    reference = tokenization.FullTokenizer(str(path), do_lower_case=lower_case)
    tokenizer = BertTokenizer(vocab, lower_case=lower_case)
    ours = [
        ids for i in range(0, len(texts), 20000) for ids in _ours(tokenizer, texts[i : i + 20000])
    ]
    mismatches = [
        hex(cp) for cp, text, ids in zip(cps, texts, ours) if ids != _ref_ids(reference, text)
    ]
    assert len(texts) > 140000 and mismatches == []


# === Bad and unusual input ===


def _random_bytes(rng):
    parts = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.4:
            parts.append(rng.choice(["hello", "Straße", "中文", "ΟΔΟΣ", "½", "😀"]).encode())
        elif r < 0.7:
            parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))))
        else:
            parts.append(
                rng.choice(
                    [
                        b"\xe4\xb8",
                        b"\xed\xa0\x80",
                        b"\xf0\x9f",
                        b"\xc0\xaf",
                        b"\xff",
                        b"\x80",
                        b"\xf4\x90\x80\x80",
                        b" ",
                        b"\x00",
                    ]
                )
            )
    return b"".join(parts)


def test_invalid_utf8_bytes_are_deleted_like_the_original(uncased):
    """Defined behaviour: ill-formed UTF-8 is deleted, as bytes.decode("utf-8", "ignore")."""
    _, reference, tokenizer = uncased
    rng = random.Random(0)
    texts = [_random_bytes(rng) for _ in range(500)]
    assert (
        sum(1 for t in texts if t.decode("utf-8", "replace") != t.decode("utf-8", "ignore")) > 300
    )
    ours = _ours(tokenizer, texts)
    for text, ids in zip(texts, ours):
        assert ids == _ref_ids(reference, text.decode("utf-8", "ignore")), text


def test_empty_whitespace_and_shapes(uncased):
    _, reference, tokenizer = uncased
    assert _ours(tokenizer, ["", " ", "\t\r\n", "\x00\u200b"]) == [[], [], [], []]
    scalar = tokenizer(tf.constant("Hello world"))
    assert isinstance(scalar, tf.Tensor) and scalar.numpy().tolist() == _ref_ids(
        reference, "Hello world"
    )
    pairs = tf.constant([["Hello world", "café"], ["", "中文 text"]])
    out = tokenizer(pairs)
    assert out.shape.rank == 3
    assert out.to_list() == [
        [_ref_ids(reference, t.decode()) for t in row] for row in pairs.numpy()
    ]
    ragged = tf.ragged.constant([["a b", "c"], ["d"]])
    assert tokenizer(ragged).to_list() == [
        [_ref_ids(reference, t) for t in row] for row in [["a b", "c"], ["d"]]
    ]
    assert tokenizer(tf.constant([], tf.string)).to_list() == []


def test_huge_text(lines, uncased):
    _, reference, tokenizer = uncased
    text = "\n".join(lines)
    text = text * (1_000_000 // len(text.encode()) + 1)
    assert len(text.encode()) > 1_000_000
    assert _ours(tokenizer, [text])[0] == _ref_ids(reference, text)


# === Offsets and detokenization ===


def test_offsets_point_at_the_tokens(lines, uncased):
    vocab, _, tokenizer = uncased
    texts = lines[:400]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([t.encode() for t in texts]))
    assert ids.to_list() == _ours(tokenizer, texts)
    checked = 0
    for text, row_ids, row_s, row_e in zip(texts, ids.to_list(), starts.to_list(), ends.to_list()):
        data = text.encode()
        assert row_s == sorted(row_s) and all(s <= e for s, e in zip(row_s, row_e))
        for token_id, s, e in zip(row_ids, row_s, row_e):
            span = "".join(normalize.normalize_char(c, True) for c in data[s:e].decode())
            piece = vocab[token_id].removeprefix("##")
            if token_id == tokenizer.unk_id:
                assert span.strip()
            elif data[s:e].isascii():
                assert span == piece
                checked += 1
            else:
                assert piece.replace("ς", "σ") in span.replace("ς", "σ").replace("Σ", "σ")
    assert checked > 1000


def test_detokenize_joins_pieces(lines, uncased):
    vocab, reference, tokenizer = uncased
    texts = [
        t
        for t, ids in zip(lines[:300], _ours(tokenizer, lines[:300]))
        if tokenizer.unk_id not in ids
    ]
    assert len(texts) > 20 and any("\u1b4e" in t for t in texts)  # A stand-in character.
    strings = tokenizer.detokenize(tokenizer(tf.constant(texts))).numpy()
    for text, string in zip(texts, strings):
        words = " ".join(reference.tokenize(text)).replace(" ##", "")
        assert string.decode() == words


def test_vocabulary_accessors(uncased):
    vocab, _, tokenizer = uncased
    assert tokenizer.vocabulary == vocab and tokenizer.vocab_size == len(vocab)
    assert [
        tokenizer.pad_id,
        tokenizer.unk_id,
        tokenizer.cls_id,
        tokenizer.sep_id,
        tokenizer.mask_id,
    ] == [vocab.index(t) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]]
    assert tokenizer.id_to_token(tokenizer.token_to_id(vocab[100])) == vocab[100]
    with pytest.raises(KeyError, match="not in the vocabulary"):
        tokenizer.token_to_id("no-such-token")
    with pytest.raises(IndexError, match="out of range"):
        tokenizer.id_to_token(len(vocab))


# === In tf.data, Keras models, SavedModel, TFLite ===


@pytest.mark.parametrize("case", ["cased", "uncased"])
def test_tf_data_and_tf_function(lines, case, request):
    _, reference, tokenizer = request.getfixturevalue(case)
    texts = lines[:64]
    assert any("Σ" in t for t in texts)  # Uncased: both paths of the graph.
    ds = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(tokenizer)
    batched = [row for batch in ds for row in batch.to_list()]
    assert batched == [_ref_ids(reference, t) for t in texts]
    fn = tf.function(tokenizer, reduce_retracing=True)
    assert fn(tf.constant(texts)).to_list() == batched


class _ToDense(keras.layers.Layer):
    """Test helper: ragged ids -> dense [B, 16]."""

    def call(self, ids):
        return ids.to_tensor(shape=[None, 16])

    def compute_output_spec(self, ids):
        return keras.KerasTensor((None, 16), dtype="int32")


def test_functional_model_keras_file_round_trip(lines, cased, tmp_path):
    vocab, _, tokenizer = cased
    texts = tf.constant(lines[:32])
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, _ToDense()(tokenizer(inputs)))
    expected = model(texts).numpy()
    assert expected.max() > 5
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, custom_objects={"_ToDense": _ToDense})
    np.testing.assert_array_equal(loaded(texts).numpy(), expected)
    config = tokenizer.get_config()
    again = BertTokenizer.from_config(config)
    assert again.get_config() == config and config["vocabulary"] == vocab
    assert again(texts).to_list() == tokenizer(texts).to_list()


def _serving_module(tokenizer, with_offsets=False):
    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, texts):
            if not with_offsets:
                ids = self.tokenizer(texts)
                return {"ids": ids.flat_values, "row_splits": ids.row_splits}
            ids, starts, ends = self.tokenizer.tokenize_with_offsets(texts)
            return {
                "ids": ids.flat_values,
                "row_splits": ids.row_splits,
                "starts": starts.flat_values,
                "ends": ends.flat_values,
            }

    return Serving()


def test_savedmodel_signature(lines, uncased, tmp_path):
    _, _, tokenizer = uncased
    module = _serving_module(tokenizer)
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve})
    serve = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    texts = lines[:50]
    out = serve(tf.constant(texts))
    got = tf.RaggedTensor.from_row_splits(out["ids"], out["row_splits"]).to_list()
    assert got == _ours(tokenizer, texts)


def test_keras_export_of_a_model_with_the_tokenizer(lines, cased, tmp_path):
    _, _, tokenizer = cased
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, _ToDense()(tokenizer(inputs)))
    model.export(str(tmp_path), format="tf_saved_model")
    texts = tf.constant(lines[:40])
    served = tf.saved_model.load(str(tmp_path)).serve(texts)
    np.testing.assert_array_equal(served.numpy(), model(texts).numpy())


def test_tflite_conversion_and_interpreter(lines, uncased):
    """Converts with TFLite builtins + tf-text custom ops only (no SELECT_TF_OPS), runs it."""
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    _, _, tokenizer = uncased
    module = _serving_module(tokenizer, with_offsets=True)  # Ids as the call's, plus offsets.
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.serve.get_concrete_function()], module
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True
    flatbuffer = converter.convert()
    interpreter = InterpreterWithCustomOps(
        model_content=flatbuffer, custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS
    )
    runner = interpreter.get_signature_runner()
    for texts in ([t for t in lines[:60] if t], ["plain text, no capital sigma"]):
        assert any("Σ" in t for t in texts) == (len(texts) > 1)  # Both graph branches.
        out = runner(texts=np.array([t.encode() for t in texts], dtype=object))
        got = tf.RaggedTensor.from_row_splits(out["ids"], out["row_splits"]).to_list()
        assert got == _ours(tokenizer, texts)
        _, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
        np.testing.assert_array_equal(out["starts"], starts.flat_values.numpy())
        np.testing.assert_array_equal(out["ends"], ends.flat_values.numpy())


SIGMA_BATCHES = [
    [],
    [b""],
    [b"", b""],
    [b"\xce", b"\xa3"],  # The two bytes of a capital sigma, in two texts: none.
    [b"abc\xce", b"", b"\xa3x"],
    [b"a\xce\xa3"],
    [b"x", b"", "ΟΔΟΣ".encode()],
    [b"\xce"],
    [b"\xa3\xce"],
]


def _tflite_runner(function):
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], tf.Module()
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True
    flatbuffer = converter.convert()
    interpreter = InterpreterWithCustomOps(
        model_content=flatbuffer, custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS
    )
    return flatbuffer, interpreter.get_signature_runner()


def test_sigma_check_matches_the_sigma_positions_in_tflite_too():
    """`_any_sigma` (the tokenizer's cheap check) answers as `_sigma_positions` reduced."""
    from keras_bert.text.tokenizer import _any_sigma, _sigma_positions

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def check(texts):
        return {
            "fast": _any_sigma(texts),
            "slow": tf.reduce_any(_sigma_positions(texts)[2] > 0),
        }

    _, runner = _tflite_runner(check)
    for texts in SIGMA_BATCHES:
        expected = any("Σ" in t.decode("utf-8", "replace") for t in texts)
        graph = check(tf.constant(texts, tf.string, shape=[len(texts)]))
        lite = runner(texts=np.array(texts + [None], dtype=object)[:-1])
        assert [bool(graph["fast"]), bool(graph["slow"]), bool(lite["fast"])] == [expected] * 3


def test_tflite_prepares_the_final_sigma_path_only_for_texts_with_a_sigma(uncased):
    """TFLite prepares both branches of an IF on every call: the final-sigma path must sit in an IF
    nested in the true branch of the check's IF, after an op of data-dependent shape (where the
    preparation of that branch stops), and answer as the tokenizer for texts with and without Σ."""
    from tensorflow.lite.python import schema_py_generated as schema

    _, _, tokenizer = uncased
    module = _serving_module(tokenizer)
    flatbuffer, runner = _tflite_runner(module.serve)
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    custom = {
        i: code.customCode.decode() for i, code in enumerate(model.operatorCodes) if code.customCode
    }
    is_if = {
        i
        for i, code in enumerate(model.operatorCodes)
        if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.IF
    }
    main = model.subgraphs[0].operators
    (outer,) = [op for op in main if op.opcodeIndex in is_if]
    true_branch = model.subgraphs[outer.builtinOptions.thenSubgraphIndex].operators
    assert len(model.subgraphs[outer.builtinOptions.elseSubgraphIndex].operators) <= 2
    assert custom.get(true_branch[0].opcodeIndex) == "TFText>ByteSplitWithOffsets"
    (inner,) = [op for op in true_branch if op.opcodeIndex in is_if]
    assert len(model.subgraphs[inner.builtinOptions.thenSubgraphIndex].operators) > 200
    assert len(true_branch) < 60
    for texts in (["ΟΔΟΣ ΣΟΦΟΣ.", "plain"], ["plain", "words"], [""]):
        out = runner(texts=np.array([t.encode() for t in texts], dtype=object))
        got = tf.RaggedTensor.from_row_splits(out["ids"], out["row_splits"]).to_list()
        assert got == _ours(tokenizer, texts)
