"""CoNLL-2003 named-entity recognition on the runner (paper §5.3): data, features, metrics, files.

The paper's recipe: the first WordPiece of every word is classified by a dense layer on the
final hidden states (`BertTokenClassifier`), with no CRF; the other pieces carry
`IGNORE_LABEL` (no loss, no prediction). Optionally (`document_context`) each sentence is
encoded inside the maximal window of its document's text ("we include the maximal document
context"), and only the sentence's words are labelled.

Tags are read in IOB1 or IOB2 (the CoNLL-2003 files circulate in both; each file's scheme is
detected and logged) and kept in IOB2 internally, the scheme `seqeval`'s default mode and
conlleval read alike: B- opens every entity. Metrics are conlleval's entity-level precision,
recall and F1 (`seqeval.metrics`, default mode: an I- tag after O or another type also opens
an entity), overall and per entity type.

Dimensions: N features, L tokens (ragged), C tags.
"""

import dataclasses
import difflib
import itertools
import os
import warnings

import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert import extras
from keras_bert.io_utils import write_atomic
from keras_bert.models.task_models import BertTokenClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.definition import TaskDefinition

# The CoNLL-2003 entity types; the model's tags are O, then B- and I- of each, in this order
# (tensorflow-datasets' conll2003 order).
CONLL2003_ENTITY_TYPES = ("PER", "ORG", "LOC", "MISC")
# The names each split's file goes by in the distributions (the first is the usual one).
FILE_NAMES = {
    "train": ("train.txt", "eng.train"),
    "dev": ("dev.txt", "valid.txt", "eng.testa"),
    "test": ("test.txt", "eng.testb"),
}
DOCSTART = "-DOCSTART-"
COLUMNS = ("token", "POS", "chunk", "NER")


class ConllDataError(ValueError):
    """A CoNLL file that cannot be read as NER data; the message names the file and line."""


@dataclasses.dataclass
class NerExample:
    """One sentence.

    Args:
        words: list of str.
        tags: list of str, one IOB2 tag per word; None when unlabelled.
        document: int, the sentence's document (between -DOCSTART- lines) in its file.
        where: str, "path:line" of the sentence's first word (for messages).
    """

    words: list[str]
    tags: list[str] | None = None
    document: int = 0
    where: str = ""


def tag_names(entity_types):
    """The tags of `entity_types` in model output order: O, B-T1, I-T1, B-T2, ..."""
    return ("O",) + tuple(f"{p}-{t}" for t in entity_types for p in ("B", "I"))


# === Reading ===


def read_conll(path, entity_types=CONLL2003_ENTITY_TYPES):
    """Reads a CoNLL-2003 file: `token POS chunk NER` per line, blank lines between
    sentences, `-DOCSTART-` lines between documents.

    Args:
        path: str, local or gs:// path.
        entity_types: the allowed entity types; any other tag is an error.

    Returns:
        (list of `NerExample` with IOB2 tags, the file's scheme "IOB1" or "IOB2").

    Raises:
        ConllDataError: naming the file and line: a line without 4 columns, an unknown tag, a
            tag its scheme does not allow where it stands, non-UTF-8 bytes, no sentences.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        lines = f.read().removeprefix(b"\xef\xbb\xbf").split(b"\n")  # (A UTF-8 byte-order mark.)
    sentences, document, in_document = [], 0, False
    words, tags, wheres = [], [], []

    def end_sentence():
        if words:
            sentences.append((list(words), list(tags), list(wheres), document))
            words.clear(), tags.clear(), wheres.clear()

    for number, raw in enumerate(lines, 1):
        where = f"{path}:{number}"
        try:
            fields = raw.decode("utf-8").split()
        except UnicodeDecodeError as e:
            raise ConllDataError(f"{where}: not UTF-8 ({e}).") from None
        if not fields:
            end_sentence()
        elif fields[0] == DOCSTART:
            end_sentence()
            if in_document:
                document, in_document = document + 1, False
        else:
            if len(fields) != len(COLUMNS):
                raise ConllDataError(
                    f"{where}: expected {len(COLUMNS)} columns ({' '.join(COLUMNS)}), "
                    f"got {len(fields)}: {raw.decode('utf-8').strip()!r}."
                )
            words.append(fields[0])
            tags.append(fields[-1])
            wheres.append(where)
            in_document = True
    end_sentence()
    if not sentences:
        raise ConllDataError(f"{path}: no sentences (expected lines of {' '.join(COLUMNS)}).")
    return _to_examples(sentences, entity_types, name=path)


def read_tfds(split, data_dir=None, entity_types=CONLL2003_ENTITY_TYPES):
    """Reads tensorflow-datasets `conll2003` (which drops the -DOCSTART- lines: every
    sentence is in document 0). Returns (examples, scheme) as `read_conll`."""
    tfds = extras.import_tfds()

    builder = tfds.builder("conll2003", data_dir=data_dir)
    builder.download_and_prepare()
    names = builder.info.features["ner"].feature.names
    sentences = []
    for i, record in enumerate(tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False))):
        words = [w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in record["tokens"]]
        tags = [names[int(t)] for t in record["ner"]]
        sentences.append(
            (
                words,
                tags,
                [f"tfds conll2003[{split}] sentence {i} word {j}" for j in range(len(words))],
                0,
            )
        )
    return _to_examples(sentences, entity_types, name=f"tfds conll2003[{split}]")


def _to_examples(sentences, entity_types, name):
    """Sentences of (words, tags, wheres, document) -> (IOB2 examples, scheme), checked."""
    allowed = tag_names(entity_types)
    for _, tags, wheres, _ in sentences:
        for tag, where in zip(tags, wheres):
            if tag not in allowed:
                close = difflib.get_close_matches(tag, allowed, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ConllDataError(
                    f"{where}: unknown tag {tag!r}.{hint} Tags: {' '.join(allowed)} "
                    f"(other entity types: pass entity_types)."
                )
    scheme = _detect_scheme(sentences, name)
    return [
        NerExample(words, to_iob2(tags), document, wheres[0])
        for words, tags, wheres, document in sentences
    ], scheme


def _opens_entity(tags):
    """(index, "IOB1"|"IOB2") of each tag that opens an entity only in that scheme: an I- tag
    at the start, after O or after another type (IOB1), or a B- tag there (IOB2). A B- tag
    right after the same type (two adjacent entities) is valid in both."""
    prev = "O"
    for i, tag in enumerate(tags):
        if tag != "O" and (prev == "O" or prev[2:] != tag[2:]):
            yield i, "IOB1" if tag.startswith("I-") else "IOB2"
        prev = tag


def _detect_scheme(sentences, name):
    """The scheme of a file's tags (the one most entities follow; IOB2 if none tells);
    raises on a tag that the scheme does not allow where it stands."""
    found = {"IOB1": [], "IOB2": []}
    for _, tags, wheres, _ in sentences:
        for i, kind in _opens_entity(tags):
            found[kind].append((wheres[i], tags[i], tags[i - 1] if i else None))
    scheme = "IOB1" if len(found["IOB1"]) > len(found["IOB2"]) else "IOB2"
    other = "IOB2" if scheme == "IOB1" else "IOB1"
    if found[other]:
        where, tag, prev = found[other][0]
        after = f"after {prev}" if prev else "at a sentence start"
        rule = (
            "B- only separates two adjacent entities of the same type"
            if scheme == "IOB1"
            else "every entity opens with B-, and I- only continues one"
        )
        raise ConllDataError(
            f"{where}: tag {tag!r} {after} is not valid in {scheme}, the scheme of {name} "
            f"({len(found[scheme])} entities open as it says, e.g. {found[scheme][0][0]}; "
            f"in {scheme}, {rule})."
        )
    logging.info("%s: %d sentences, %s tags (used as IOB2).", name, len(sentences), scheme)
    return scheme


def to_iob2(tags):
    """IOB1 (or IOB2) tags -> IOB2: an I- tag that opens an entity becomes B-."""
    tags = list(tags)
    for i, _kind in _opens_entity(tags):
        tags[i] = "B-" + tags[i][2:]
    return tags


def find_file(data_dir, split):
    """The split's file in `data_dir` under any of its usual names (`FILE_NAMES`)."""
    if not data_dir:
        raise ValueError(
            f"CoNLL-2003 needs data_dir (with {', '.join(FILE_NAMES[split])}) or "
            "train_file/eval_file."
        )
    for name in FILE_NAMES[split]:
        path = os.path.join(data_dir, name)
        if tf.io.gfile.exists(path):
            return path
    raise FileNotFoundError(
        f"No {split} file in {data_dir}: expected one of {', '.join(FILE_NAMES[split])}."
    )


# === Features ===


def word_pieces(tokenizer, examples, chunk=8192):
    """Each example's words as WordPiece ids: a list (per example) of lists of int arrays. A
    word the tokenizer drops entirely (only characters it deletes) becomes one [UNK]."""
    flat = [w for e in examples for w in e.words]
    pieces = []
    for start in range(0, len(flat), chunk):
        ids = tokenizer(tf.constant(flat[start : start + chunk]))  # (W, (P))
        values, splits = ids.flat_values.numpy(), ids.row_splits.numpy()
        pieces += [
            values[a:b] if b > a else np.array([tokenizer.unk_id], values.dtype)
            for a, b in zip(splits[:-1], splits[1:])
        ]
    out, start = [], 0
    for e in examples:
        out.append(pieces[start : start + len(e.words)])
        start += len(e.words)
    return out


def windows(length, start, end, budget):
    """Token windows [a, b) of a sequence of `length` tokens that together hold its span
    [start, end). A span that fits gets one window of up to `budget` tokens with the span in
    the middle of as much context as the sequence offers (the rest of one side goes to the
    other). A longer span is cut into windows of `budget` tokens, half a window apart."""
    if end - start <= budget:
        a = max(0, min(start - (budget - (end - start)) // 2, length - budget))
        return [(a, min(length, a + budget))]
    stride = max(1, budget // 2)
    out = []
    for a in range(start, end, stride):
        out.append((a, min(end, a + budget)))
        if a + budget >= end:
            break
    return out


def best_window(position, spans):
    """The window where `position` has the most context: the largest min(left, right) tokens,
    plus 0.01 per window token (the original SQuAD rule), the first on ties."""
    scores = [
        min(position - a, b - 1 - position) + 0.01 * (b - a) if a <= position < b else -1.0
        for a, b in spans
    ]
    return int(np.argmax(scores))


# === The task ===


class NerTask(TaskDefinition):
    """CoNLL-2003 NER for the fine-tuning runner.

    Args:
        name: str, the task name ("conll2003").
        entity_types: entity types (a sequence or a comma-separated str); default the four of
            CoNLL-2003. The tags are `tag_names(entity_types)`; other tags in the data are errors.
        document_context: bool. Encode each sentence in the maximal window of its document's
            text (paper §5.3); only the sentence's words are labelled.

    Attributes: the arguments, and `labels` (the tags in model output order).
    """

    main_metric = "f1"
    eval_splits = {"dev": ""}
    predict_splits = {"test": "test_predictions.txt"}
    label_outputs = {"tags": "logits"}
    token_outputs = ("logits",)
    recipe: dict[
        str, int | float
    ] = {}  # PAPER.md gives no NER hyperparameters: the GLUE defaults (128, 32, 2e-5, 3).

    def __init__(self, name="conll2003", entity_types=None, document_context=False):
        self.name = name
        if isinstance(entity_types, str):
            entity_types = [t.strip() for t in entity_types.split(",") if t.strip()]
        self.entity_types = tuple(entity_types or CONLL2003_ENTITY_TYPES)
        if len(set(self.entity_types)) != len(self.entity_types) or any(
            "-" in t for t in self.entity_types
        ):
            raise ValueError(
                f"entity_types must be distinct names without '-', got {self.entity_types}."
            )
        self.document_context = bool(document_context)
        self.labels = tag_names(self.entity_types)

    def read(self, data_dir, split, use_tfds=False, file=None):
        if split not in FILE_NAMES:
            raise ValueError(
                f"Unknown CoNLL-2003 split {split!r}; splits: {', '.join(FILE_NAMES)}."
            )
        if use_tfds:
            if file:
                raise ValueError("Pass either tfds or train_file/eval_file, not both.")
            if self.document_context:
                raise ValueError(
                    "tensorflow-datasets' conll2003 drops the -DOCSTART- lines that "
                    "document_context needs: read the CoNLL files (data_dir) instead."
                )
            return read_tfds(split, data_dir, self.entity_types)[0]
        return read_conll(file or find_file(data_dir, split), self.entity_types)[0]

    def encode(self, examples, tokenizer, seq_length, training=False):
        """One feature per sentence, or several windows of a long one (each word labelled in
        exactly one: where it has the most context). extras: `words` and `positions`, per
        feature the labelled words' indices in their sentence and their token positions."""
        budget = int(seq_length) - 2  # [CLS] ... [SEP]
        if budget < 1:
            raise ValueError(f"seq_length must be >= 3 for NER, got {seq_length}.")
        tag_ids = {tag: i for i, tag in enumerate(self.labels)}
        labelled = bool(examples) and all(e.tags is not None for e in examples)
        for e in examples:
            if not e.words or (
                labelled and (len(e.tags) != len(e.words) or not set(e.tags) <= tag_ids.keys())
            ):
                raise ValueError(
                    f"{e.where or 'A sentence'}: needs words and one tag of {self.labels} per "
                    f"word; got {e.words} {e.tags}."
                )
        ids, labels, words, positions, example_index = [], [], [], [], []
        for tokens, (start, end), first, index in self._sequences(
            examples, word_pieces(tokenizer, examples)
        ):
            spans = windows(len(tokens), start, end, budget)
            chosen = np.array([best_window(p, spans) for p in first])
            for w, (a, b) in enumerate(spans):
                mine = np.flatnonzero(chosen == w)
                if not len(mine):
                    continue
                ids.append(np.concatenate([[tokenizer.cls_id], tokens[a:b], [tokenizer.sep_id]]))
                words.append(mine)
                positions.append(first[mine] - a + 1)
                example_index.append(index)
                if labelled:
                    row = np.full(b - a + 2, feature_lib.IGNORE_LABEL, np.int32)
                    row[positions[-1]] = [tag_ids[examples[index].tags[i]] for i in mine]
                    labels.append(row)
        lengths = np.array([len(r) for r in ids], np.int64)

        def ragged(rows):
            flat = np.concatenate(rows).astype(np.int32) if rows else np.zeros([0], np.int32)
            return tf.RaggedTensor.from_row_lengths(flat, lengths)

        inputs = {
            "input_word_ids": ragged(ids),
            "input_type_ids": ragged([np.zeros_like(r) for r in ids]),
        }
        return feature_lib.FeatureSet(
            inputs,
            {"tags": ragged(labels)} if labelled else {},
            np.array(example_index, np.int64),
            {"words": words, "positions": positions},
        )

    def _sequences(self, examples, pieces):
        """Yields (tokens, (start, end), first, example index) per sentence: the token ids to
        window (the sentence's, or its whole document's), the sentence's span in them, and
        each word's first-piece position."""
        groups = [[i] for i in range(len(examples))]
        if self.document_context:  # Consecutive sentences of one document.
            groups = [
                list(g)
                for _, g in itertools.groupby(
                    range(len(examples)), key=lambda i: examples[i].document
                )
            ]
        for group in groups:
            sentences = [np.concatenate(pieces[i]) for i in group]
            tokens = np.concatenate(sentences)
            start = 0
            for i, sentence in zip(group, sentences):
                first = start + np.cumsum([0] + [len(p) for p in pieces[i][:-1]])
                yield tokens, (start, start + len(sentence)), first, i
                start += len(sentence)

    def build_model(self, encoder, dropout):
        return BertTokenClassifier(encoder, num_classes=len(self.labels), dropout=dropout)

    def predictions(self, examples, features, outputs):
        """Predicted IOB2 tags per example (one per word) from the logits of each word's first
        piece."""
        tags = [[None] * len(e.words) for e in examples]
        for f, (words, positions) in enumerate(
            zip(features.extras["words"], features.extras["positions"])
        ):
            best = np.argmax(outputs["logits"][f][positions], axis=-1)
            row = tags[features.example_index[f]]
            for w, label in zip(words, best):
                row[w] = self.labels[label]
        missing = [e.where for e, row in zip(examples, tags) if None in row]
        if missing:
            raise ValueError(
                f"{len(missing)} sentences have words without a prediction (first: {missing[0]}); "
                f"were the features encoded from these examples?"
            )
        return tags

    def evaluate(self, examples, features, outputs):
        return entity_metrics(
            [e.tags for e in examples],
            self.predictions(examples, features, outputs),
            self.entity_types,
        )

    def write_predictions(self, split, examples, features, outputs, output_dir):
        path = os.path.join(output_dir, self.predict_splits[split])
        write_predictions_file(path, examples, self.predictions(examples, features, outputs))
        return [path]

    def serving_row(self, example):
        return (" ".join(example.words),)

    def info(self):
        return {
            "problem": "token_classification",
            "labels": list(self.labels),
            "entity_types": list(self.entity_types),
            "tag_scheme": "IOB2",
            "labelled_piece": "first",
            "document_context": self.document_context,
            "text_inputs": ["words"],
        }


# === Metrics and files ===


def entity_metrics(gold, predicted, entity_types):
    """conlleval's entity-level metrics (`seqeval.metrics`, default mode).

    Args:
        gold, predicted: lists (per sentence) of tag lists.
        entity_types: the types to report (0.0 where a type has neither gold nor predicted
            entities).

    Returns:
        dict: `precision`, `recall`, `f1` (micro over all entities) and `<TYPE>_precision`,
        `<TYPE>_recall`, `<TYPE>_f1` for each type.
    """
    from seqeval.metrics import classification_report

    with (
        warnings.catch_warnings()
    ):  # Empty types: zero_division covers them; numpy warns on the macro mean.
        warnings.simplefilter("ignore")
        report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    names = (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score"))
    metrics = {ours: float(report["micro avg"][theirs]) for ours, theirs in names}
    for t in entity_types:
        metrics.update(
            {f"{t}_{ours}": float(report.get(t, {}).get(theirs, 0.0)) for ours, theirs in names}
        )
    return metrics


def write_predictions_file(path, examples, predicted):
    """CoNLL lines `word gold predicted` (conlleval's input; gold left out when unlabelled), a
    blank line after each sentence; written atomically."""
    lines = []
    for example, tags in zip(examples, predicted):
        gold = example.tags or [None] * len(tags)
        lines += [
            " ".join(x for x in row if x is not None) for row in zip(example.words, gold, tags)
        ]
        lines.append("")
    write_atomic(path, "\n".join(lines) + "\n" if lines else "")
    return path
