"""Tiny data for every task of the registry, each in its benchmark's own file format, from the
sentiment sentences of `finetune_cases` (words of its VOCAB): `write_task_data(root, task)`."""

import csv
import json
import os

import numpy as np
from finetune_cases import WORDS, sentiment_rows

from keras_bert.tasks import registry
from keras_bert.tasks.glue import data as glue

SWAG_HEADER = [
    "",
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _glue(root, name, n):
    spec = glue.SPECS[name]
    folder = os.path.join(root, spec.folder)
    columns = [c[0] if isinstance(c, tuple) else c for c in spec.text_columns if c is not None]
    for split, count in [("train", n), *((s, n // 2) for s in spec.eval_splits)]:
        rows = sentiment_rows(count, seed=len(split))
        labels = [
            str(round(float(y) * 5, 1)) if spec.is_regression else spec.labels[i % len(spec.labels)]
            for i, (_, y) in enumerate(rows)
        ]
        texts = [[s] * len(columns) for s, _ in rows]
        if spec.headerless_columns:  # CoLA: source, label, original label, sentence; no header.
            lines = [["src", label, "", t[0]] for t, label in zip(texts, labels)]
        else:
            lines = [columns + [spec.label_column]] + [
                t + [label] for t, label in zip(texts, labels)
            ]
        _write(
            os.path.join(folder, f"{split}.tsv"), "".join("\t".join(line) + "\n" for line in lines)
        )
    return folder


def _squad(root, version, n):
    rng = np.random.default_rng(0)
    for split, count in (("train", n), ("dev", n // 2)):
        paragraphs = []
        for i in range(count):
            words = list(rng.choice(WORDS, size=12))
            context = " ".join(words)
            answer = words[5]
            start = len(" ".join(words[:5])) + 1
            qa = {
                "id": f"{split}-{i}",
                "question": f"{words[0]} {words[1]} ?",
                "answers": [{"text": answer, "answer_start": start}],
            }
            if version == "2.0":
                qa["is_impossible"] = False
            paragraphs.append({"context": context, "qas": [qa]})
        data = {"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}
        _write(os.path.join(root, f"{split}-v{version}.json"), json.dumps(data))
    return root


def _conll(root, n):
    rng = np.random.default_rng(0)
    for split, count in (("train", n), ("dev", n // 2)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(count):
            for j, word in enumerate(rng.choice(WORDS, size=5)):
                lines.append(f"{word} NN O {'B-PER' if j == 1 else 'O'}")
            lines.append("")
        _write(os.path.join(root, f"{split}.txt"), "\n".join(lines) + "\n")
    return root


def _swag(root, n):
    rng = np.random.default_rng(0)
    for _split, file, count in (("train", "train.csv", n), ("dev", "val.csv", n // 2)):
        rows = []
        for i in range(count):
            words = [str(w) for w in rng.choice(WORDS, size=7)]
            rows.append(
                [
                    str(i),
                    "v",
                    str(i),
                    " ".join(words[:2]),
                    words[0],
                    words[1],
                    "gold",
                    *words[2:6],
                    str(i % 4),
                ]
            )
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, file), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(SWAG_HEADER)
            writer.writerows(rows)
    return root


def _text_classification(root, n):
    for split, count in (("train", n), ("dev", n // 2)):
        rows = sentiment_rows(count, seed=len(split))
        _write(
            os.path.join(root, f"{split}.tsv"),
            "".join(f"{'pos' if int(y) else 'neg'}\t{s}\n" for s, y in rows),
        )
    return root


def write_task_data(root, task, n=16):
    """Writes `n` training and n/2 dev examples of `task` (a registry name) under `root` in its
    own file format; returns the data_dir to pass."""
    family, _, argument = registry.TASKS[task]
    root = os.path.join(root, task)
    if family == "glue":
        return _glue(root, task, n)
    if family == "squad":
        return _squad(root, argument, n)
    writers = {"ner": _conll, "swag": _swag, "text_classification": _text_classification}
    return writers[family](root, n)


# Task options for a tiny seq_length (as tests/export/conftest.py's SQUAD_OPTIONS), by family.
FAMILY_OPTIONS = {"squad": dict(doc_stride=8, max_query_length=6, max_answer_length=5)}


def task_options(task):
    """The options `write_task_data`'s data of `task` trains with at a short seq_length."""
    return dict(FAMILY_OPTIONS.get(registry.TASKS[task][0], {}))


def write_glue_tree(root, n=16, test_rows=5):
    """The GLUE distribution's layout under `root` for all nine tasks (`n` training and n/2 dev
    examples each, as `write_task_data`) with their test files (`test_rows` rows, ids 0..n-1;
    MNLI matched and mismatched) and the diagnostic set diagnostic/diagnostic.tsv (AX). Returns
    `root`."""
    for name, spec in glue.SPECS.items():
        folder = _glue(root, name, n)
        columns = [c[0] if isinstance(c, tuple) else c for c in spec.text_columns if c is not None]
        for split in spec.predict_splits:
            path = (
                os.path.join(root, "diagnostic", "diagnostic.tsv")
                if split == "ax"
                else os.path.join(folder, f"{split}.tsv")
            )
            header = (
                ["index", "sentence1", "sentence2"]
                if split == "ax"
                else [spec.index_column] + columns
            )
            rows = sentiment_rows(test_rows, seed=len(split) + 7)
            lines = [header] + [[str(i)] + [s] * (len(header) - 1) for i, (s, _) in enumerate(rows)]
            _write(path, "".join("\t".join(line) + "\n" for line in lines))
    return root
