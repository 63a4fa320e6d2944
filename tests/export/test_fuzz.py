"""Every exported signature on hostile text (tests/export/fuzz_cases.py): a defined answer for each
input, never a crash. The default run feeds ~300 texts; `-m slow` feeds 10,000, and 10,000 rows
to both signatures of each kind's float32 TFLite model.

Defined answers: probabilities that sum to 1 with the label of their argmax; encoder inputs
that are exactly the training tokenizer's ids packed as [CLS] A [SEP], over-long texts cut to
their first seq_length - 2 tokens (the documented truncation); a row's answer does not depend
on the batch it came in (length bucketing is invisible); NER entities, SQuAD answers and their
code point offsets that are exact substrings of the text (or no entity, or "" and -1).
TFLite: the same, `preprocess` exactly the TensorFlow function's on every batch (SQuAD's
windows included), and `serving_default` the TensorFlow function's answers on a random share of
each batch's rows (every 1 MB row among them) sent alone.
"""

import os
import time

import numpy as np
import pytest
import tensorflow as tf
from export_cases import SEQ_LENGTH
from finetune_cases import VOCAB
from fuzz_cases import MEGABYTE, fuzz_batches

from keras_bert.export import tflite
from keras_bert.export.source import load_source

ATOL = 1e-5
CLS, SEP, PAD = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[PAD]")


def check_answers(out, num_rows, labels):
    probabilities = np.asarray(out["probabilities"])
    assert probabilities.shape == (num_rows, len(labels)) and np.all(np.isfinite(probabilities))
    assert probabilities.dtype == np.float32 and np.asarray(out["label_id"]).dtype == np.int32
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(out["label_id"], probabilities.argmax(-1))
    assert [s.decode() for s in np.asarray(out["label"])] == [
        labels[i] for i in probabilities.argmax(-1)
    ]


def check_packed(inputs, tokens, seq_length, width=None):
    """Rows are [CLS] first-tokens [SEP] then padding; the width is the longest row (or `width`)."""
    ids, mask, types = (
        inputs[k].numpy() for k in ("input_word_ids", "input_mask", "input_type_ids")
    )
    lengths = [min(len(t), seq_length - 2) + 2 for t in tokens]
    assert ids.shape == (len(tokens), width or max(lengths, default=2)) and mask.shape == ids.shape
    assert not types.any()
    for row, row_mask, row_tokens, length in zip(ids, mask, tokens, lengths):
        assert row.tolist() == [CLS] + row_tokens[: length - 2] + [SEP] + [PAD] * (
            len(row) - length
        )
        assert row_mask.tolist() == [1] * length + [0] * (len(row) - length)


def run_fuzz(sst2, mnli, pretrained, total, sizes):
    """Runs every signature of the three exports on `total` fuzz texts; returns the rows fed."""
    classifier = tf.saved_model.load(sst2["path"]).signatures
    pair = tf.saved_model.load(mnli["path"]).signatures
    preprocessor = tf.saved_model.load(os.path.join(pretrained["hub"], "preprocessor"))
    encoder = tf.saved_model.load(os.path.join(pretrained["hub"], "encoder"))
    tokenizer, hub_tokenizer = (
        load_source(sst2["model_dir"]).tokenizer,
        load_source(pretrained["checkpoint"]).tokenizer,
    )
    rng = np.random.default_rng(1)
    fed = 0
    for batch in fuzz_batches(total, sizes=sizes):
        texts, texts_b = tf.constant(batch, tf.string), tf.constant(batch[::-1], tf.string)
        n = len(batch)
        # The TF Serving export: serving_default, preprocess, predict_ids.
        answers = classifier["serving_default"](text=texts)
        check_answers(answers, n, ["0", "1"])
        inputs = classifier["preprocess"](text=texts)
        check_packed(inputs, tokenizer(texts).to_list(), SEQ_LENGTH)
        logits = classifier["predict_ids"](**inputs)["logits"].numpy()
        np.testing.assert_allclose(tf.nn.softmax(logits), answers["probabilities"], atol=ATOL)
        alone = classifier["serving_default"](text=texts[-1:])  # Its own batch, its own padding.
        np.testing.assert_allclose(
            alone["probabilities"][0], answers["probabilities"][-1], atol=ATOL
        )
        check_answers(
            pair["serving_default"](text=texts, text_b=texts_b),
            n,
            ["contradiction", "entailment", "neutral"],
        )
        # The hub pair: preprocessor, tokenize, bert_pack_inputs, encoder and mlm.
        tokens = preprocessor.tokenize(texts)
        assert (
            tokens.shape.rank == 3
            and tokens.merge_dims(1, 2).to_list() == hub_tokenizer(texts).to_list()
        )
        packed = preprocessor(texts)
        width = packed["input_word_ids"].shape[1]  # Fixed, as TF Hub's preprocessors.
        check_packed(packed, tokens.merge_dims(1, 2).to_list(), width, width)
        seq_length = int(rng.integers(3, 65))
        pairs = preprocessor.bert_pack_inputs(
            [tokens, preprocessor.tokenize(texts_b)], seq_length=seq_length
        )
        assert pairs["input_word_ids"].shape == (n, seq_length)
        assert np.all(pairs["input_mask"].numpy().sum(1) <= seq_length)
        outputs = encoder.mlm(dict(packed, masked_lm_positions=tf.zeros([n, 1], tf.int32)))
        assert all(
            np.all(np.isfinite(outputs[k]))
            for k in ("pooled_output", "sequence_output", "mlm_logits")
        )
        fed += n
    return fed


# (texts fed, batch sizes): the default run, and `-m slow`.
RUNS = [
    pytest.param(300, (1, 3, 17, 64, 250), id="300"),
    pytest.param(10_000, (1, 7, 1000, 64, 250, 1, 31), id="10000", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("total, sizes", RUNS)
def test_fuzz_every_signature(sst2, mnli, pretrained, total, sizes):
    assert run_fuzz(sst2, mnli, pretrained, total, sizes) == total


def test_empty_batches_and_bad_ids(sst2):
    signatures = tf.saved_model.load(sst2["path"]).signatures
    out = signatures["serving_default"](text=tf.constant([], tf.string))
    assert out["probabilities"].shape == (0, 2) and out["label"].shape == (0,)
    inputs = signatures["preprocess"](text=tf.constant(["the movie", "good"]))
    bad = dict(inputs, input_word_ids=inputs["input_word_ids"] + len(VOCAB))
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_word_ids"):
        signatures["predict_ids"](**bad)


ENTITY_TYPES = (b"PER", b"ORG", b"LOC", b"MISC")


def check_entities(texts, out):
    """NER answers [B, E] (E the most entities of a row): each entity the exact substring of its
    text (bytes, decoded as Python's "replace") at its code point offsets, then "" and -1
    padding."""
    text, kind, start, end = (
        np.asarray(out[k]) for k in ("entity_text", "entity_type", "start_char", "end_char")
    )
    counts = np.asarray(out["entity_count"])
    assert counts.shape == (
        len(texts),
    ) and text.shape == kind.shape == start.shape == end.shape == (
        len(texts),
        max(counts, default=0),
    )
    assert counts.dtype == start.dtype == end.dtype == np.int32
    for i, raw in enumerate(texts):
        decoded, n = raw.decode("utf-8", "replace"), counts[i]
        for j in range(n):
            assert 0 <= start[i, j] < end[i, j] <= len(decoded) and kind[i, j] in ENTITY_TYPES
            assert decoded[start[i, j] : end[i, j]] == text[i, j].decode("utf-8", "replace")
        assert all(t == b"" for t in text[i, n:]) and all(t == b"" for t in kind[i, n:])
        assert (start[i, n:] == -1).all() and (end[i, n:] == -1).all()


def check_span_answers(contexts, out, version_2=True):
    """SQuAD answers [B]: the exact substring of the context at its code point offsets, or "" and
    -1; scores without NaN (-inf: no span), finite when answered; finite null odds (v2.0)."""
    answer, start, end = (np.asarray(out[k]) for k in ("answer", "start_char", "end_char"))
    has_answer, score = np.asarray(out["has_answer"]), np.asarray(out["score"])
    assert (
        answer.shape
        == start.shape
        == end.shape
        == has_answer.shape
        == score.shape
        == (len(contexts),)
    )
    assert (
        start.dtype == end.dtype == np.int32
        and has_answer.dtype == bool
        and score.dtype == np.float32
    )
    for i, text in enumerate(contexts):
        if has_answer[i]:
            assert (
                text.decode("utf-8", "replace")[start[i] : end[i]]
                == answer[i].decode("utf-8", "replace")
                != ""
            )
            assert np.isfinite(score[i])
        else:
            assert (answer[i], start[i], end[i]) == (b"", -1, -1)
    assert not np.any(np.isnan(score))
    if version_2:
        null_odds = np.asarray(out["null_odds"])
        assert (
            null_odds.shape == (len(contexts),)
            and null_odds.dtype == np.float32
            and np.isfinite(null_odds).all()
        )


def check_choices(out, num_rows, k=4):
    probabilities = np.asarray(out["probabilities"])
    assert probabilities.shape == (num_rows, k) and probabilities.dtype == np.float32
    assert np.isfinite(probabilities).all() and np.asarray(out["choice"]).dtype == np.int32
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(out["choice"], probabilities.argmax(-1))


def run_task_fuzz(conll, swag, squad, total, sizes):
    """NER, SWAG and SQuAD serving_default on `total` fuzz texts: entities and answers are exact
    substrings at their code point offsets, probabilities sum to 1; returns the rows fed."""
    ner, choice, span = (
        tf.saved_model.load(e["path"]).signatures["serving_default"] for e in (conll, swag, squad)
    )
    fed = 0
    for batch in fuzz_batches(total, seed=2, sizes=sizes):
        texts = tf.constant(batch, tf.string)
        n = len(batch)
        check_entities(batch, ner(text=texts))
        endings = tf.stack([tf.roll(texts, i, 0) for i in range(4)], 1)  # (n, 4)
        check_choices(choice(context=texts[::-1], endings=endings), n)
        check_span_answers(batch, span(question=texts[::-1], context=texts))
        fed += n
    return fed


@pytest.mark.parametrize("total, sizes", RUNS)
def test_fuzz_task_signatures(conll, swag, squad2, total, sizes):
    assert run_task_fuzz(conll, swag, squad2, total, sizes) == total


# === TFLite ===

# Found by this fuzz: with `RaggedTensor.value_rowids()` (tf.repeat: a dense [B, longest text] tile)
# NER and SQuAD needed over 20 GB for 1,000 rows holding a 1 MB text; entities.py now uses the
# linear `keras_bert.text.tokenizer.row_ids`.
# The session exports (conftest.py) converted to float32 TFLite: every kind of `tflite.KINDS`,
# classification as one uncased text and as cased pairs.
TFLITE_EXPORTS = [
    pytest.param("sst2", id="classification"),
    pytest.param("mnli", id="classification_pairs"),
    pytest.param("stsb", id="regression"),
    pytest.param("pretrained", id="encoder"),
    pytest.param("conll", id="token_classification"),
    pytest.param("swag", id="multiple_choice"),
    pytest.param("squad2", id="span"),
]
TFLITE_ROWS, TFLITE_SIZES = 10_000, (1, 7, 1000, 64, 250, 1, 31)
# Share of each batch's rows (at least one, and every 1 MB row) answered again by TensorFlow.
COMPARED = 0.06


def tflite_batches(widths, total, sizes, seed):
    """`total` fuzz rows for text inputs of `widths` ({name: texts per row}, `tflite.text_widths`),
    each text column its own fuzz stream: dicts {name: bytes [B] or [B, K]}."""
    columns = [fuzz_batches(total, seed=seed + j, sizes=sizes) for j in range(sum(widths.values()))]
    for batch in zip(*columns):
        inputs, start = {}, 0
        for name, k in widths.items():
            inputs[name] = tflite.as_strings(
                batch[start] if k == 1 else list(zip(*batch[start : start + k]))
            )
            start += k
        yield inputs


def check_tflite_packed(inputs, seq_length, num_rows, pairs):
    """int32 encoder inputs [B, S] ([B, K, S], or [W, S] for SQuAD's windows): [CLS] ... [SEP] then
    padding, S the longest row (>= 2, <= seq_length); types 0 then 1 for pairs, all 0 otherwise."""
    ids, mask, types = (inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids"))
    assert (
        ids.dtype == mask.dtype == types.dtype == np.int32
        and ids.shape == mask.shape == types.shape
    )
    assert ids.shape[0] == num_rows or "example_index" in inputs
    lengths = mask.sum(-1)
    assert 2 <= ids.shape[-1] == max(lengths.max(initial=0), 2) <= seq_length
    np.testing.assert_array_equal(mask, np.arange(ids.shape[-1]) < lengths[..., np.newaxis])
    assert (ids[..., 0] == CLS).all() and (
        np.take_along_axis(ids, lengths[..., np.newaxis] - 1, -1) == SEP
    ).all()
    assert (
        (ids[mask == 0] == PAD).all()
        and (types[mask == 0] == 0).all()
        and types.max(initial=0) <= int(pairs)
    )
    assert (np.diff(types, axis=-1) >= 0)[mask[..., 1:] == 1].all()
    if "example_index" in inputs:  # Every question has one window or more, in order.
        example = inputs["example_index"]
        assert example.dtype == np.int32 and example.shape == ids.shape[:1]
        assert (np.diff(example) >= 0).all() and (
            np.bincount(example, minlength=num_rows) >= 1
        ).all()


def check_tflite_answers(source, texts, out, packed):
    """`serving_default`'s outputs on `texts` (the inputs by name) are the kind's defined
    answers."""
    n = len(next(iter(texts.values())))
    if source.kind == "classification":
        check_answers(out, n, [str(label) for label in source.info["labels"]])
    elif source.kind == "regression":
        assert (
            out["score"].shape == (n,)
            and out["score"].dtype == np.float32
            and np.isfinite(out["score"]).all()
        )
    elif source.kind == "encoder":
        hidden = source.encoder.config.hidden_size
        assert out["pooled_output"].shape == (n, hidden) and out["sequence_output"].shape == (
            n,
            packed["input_mask"].shape[1],
            hidden,
        )
        assert all(
            out[k].dtype == np.float32 and np.isfinite(out[k]).all()
            for k in ("pooled_output", "sequence_output")
        )
        np.testing.assert_array_equal(out["input_mask"], packed["input_mask"])
    elif source.kind == "token_classification":
        check_entities(texts["text"], out)
    elif source.kind == "multiple_choice":
        check_choices(out, n, int(source.info["num_choices"]))
    else:
        check_span_answers(texts["context"], out, source.info.get("squad_version") == "2.0")


def compared_rows(rng, texts):
    """Rows answered again alone: a random COMPARED share (at least one) and every 1 MB row."""
    flat = [np.asarray(value).reshape(len(value), -1) for value in texts.values()]
    n = len(flat[0])
    big = [
        i for i in range(n) if any(len(t) >= MEGABYTE // 2 for column in flat for t in column[i])
    ]
    return np.union1d(rng.choice(n, max(1, round(COMPARED * n)), replace=False), big).astype(int)


def check_as_tensorflow(function, texts, out, rows):
    """`out`'s rows `rows` equal the TensorFlow function's answers for those rows sent alone (ints
    and strings exactly, floats within ATOL; outputs [B, X, ...] cut to the smaller batch's X)."""
    want = function(*[tf.constant(texts[spec.name][rows]) for spec in function.input_signature])
    for key, value in want.items():
        value, got = value.numpy(), out[key][rows]
        if value.ndim > 1:
            got = got[
                :, : value.shape[1]
            ]  # NER's entities and the encoder's positions: the batch's most.
        assert got.shape == value.shape and got.dtype == value.dtype, key
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got, value, atol=ATOL, err_msg=key)
        else:
            np.testing.assert_array_equal(got, value, err_msg=key)


def run_tflite_fuzz(source, functions, path, total, sizes, seed=20):
    """Both signatures of the TFLite model at `path` on `total` fuzz rows; returns (rows fed,
    rows compared with TensorFlow, batch sizes)."""
    interpreter = tflite.load_interpreter(os.path.join(path, tflite.MODEL_FILE))
    serve, preprocess = (
        interpreter.get_signature_runner(n) for n in ("serving_default", "preprocess")
    )
    rng = np.random.default_rng(seed)
    fed, compared, batch_sizes = 0, 0, []
    pairs = len(tflite.text_widths(functions)) > 1 or source.kind == "multiple_choice"
    preprocess_specs = functions[
        "preprocess"
    ].input_signature  # (Positional: `*texts` for one-text kinds.)
    for texts in tflite_batches(tflite.text_widths(functions), total, sizes, seed):
        n = len(next(iter(texts.values())))
        packed = preprocess(**texts)
        check_tflite_packed(packed, source.seq_length, n, pairs)
        want = functions["preprocess"](
            *[tf.constant(texts[spec.name]) for spec in preprocess_specs]
        )
        assert sorted(packed) == sorted(want)
        for key, value in want.items():
            np.testing.assert_array_equal(packed[key], value, err_msg=key)
        out = serve(**texts)
        check_tflite_answers(source, texts, out, packed)
        rows = compared_rows(rng, texts)
        check_as_tensorflow(functions["serving_default"], texts, out, rows)
        fed, compared = fed + n, compared + len(rows)
        batch_sizes.append(n)
    return fed, compared, batch_sizes


@pytest.mark.slow
@pytest.mark.parametrize("name", TFLITE_EXPORTS)
def test_fuzz_tflite_signatures(name, request, tmp_path):
    """10,000 rows through serving_default and preprocess of the kind's float32 TFLite model,
    in batches of 1 to 1,000 holding 1 MB texts; >= 500 rows compared with TensorFlow."""
    export = request.getfixturevalue(name)
    began = time.perf_counter()
    source = load_source(export.get("model_dir") or export["checkpoint"], mlm=False)
    functions = tflite.text_functions(source)
    path = tflite.write_tflite(source, str(tmp_path / "tflite"), functions=functions)
    converted = time.perf_counter()
    fed, compared, sizes = run_tflite_fuzz(source, functions, path, TFLITE_ROWS, TFLITE_SIZES)
    print(
        f"TFLite {source.kind} ({name}): {fed} rows in {len(sizes)} batches of "
        f"{min(sizes)}-{max(sizes)} ({sorted(set(sizes))}), {compared} compared with TensorFlow; "
        f"conversion {converted - began:.0f} s, fuzz {time.perf_counter() - converted:.0f} s"
    )
    assert fed == TFLITE_ROWS and compared >= 500 and max(sizes) == 1000 and min(sizes) == 1
