"""The five lines on real data: all-MiniLM-L6-v2 -> `BertClassifier.from_preset` -> `fit` on raw
SST-2 sentences -> `predict` on raw held-out sentences -> `export_saved_model(model, ...)`, served
by a process without the package (`keras_bert.testing.served`).

The real data folder has SST-2's dev split only (872 sentences): the even rows train, the odd rows
are held out. tests/tasks/test_from_preset_real.py checks it; bench/bench_preset_fit.py measures
the runner beside it.
"""

import csv
import os

import numpy as np

from keras_bert.testing.real_data import minilm_dir, real_file
from keras_bert.testing.served import serve_fresh

SEQ_LENGTH = 128


def sst2_dev(path=None):
    """(sentences, labels) of SST-2's dev.tsv (`path`, default the real data folder's)."""
    with open(path or real_file("sst2", "dev.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return np.array([r["text"] for r in rows]), np.array([int(r["label"]) for r in rows])


def served_labels(saved_model, texts, workdir):
    """serving_default's labels of `texts` from a process with TensorFlow and tf-text's kernels
    only."""
    (response,) = serve_fresh(saved_model, [{"instances": [{"text": t} for t in texts]}], workdir)
    return [p["label"] for p in response["predictions"]]


def five_lines(
    workdir,
    epochs=2,
    learning_rate=5e-5,
    batch_size=16,
    seq_length=SEQ_LENGTH,
    serve_count=64,
    sst2=None,
):
    """all-MiniLM-L6-v2 -> from_preset -> fit on SST-2 dev's even rows -> predict on the odd rows
    -> export_saved_model -> served by a bare process (`served_labels`).

    Args:
        workdir: str, a folder for the export and the answers.
        epochs, learning_rate, batch_size, seq_length: the fine-tuning's settings.
        serve_count: int or None. Serve the first this many held-out sentences (None: all).
        sst2: str or None. SST-2's dev.tsv (default: the real data folder's).

    Returns:
        dict: `accuracy` (float, on the odd rows), `predicted` (label ids [N]), `labels` (the
        odd rows' [N]), `served` (serving_default's label names of the first `serve_count`)
        and `names` (the label names).
    """
    from keras_bert import export
    from keras_bert.models.task_models import BertClassifier

    texts, labels = sst2_dev(sst2)
    train, held_out = slice(0, None, 2), slice(1, None, 2)
    test_texts, test_labels = texts[held_out], labels[held_out]
    names = ["negative", "positive"]
    model = BertClassifier.from_preset(
        minilm_dir(), num_classes=2, seq_length=seq_length, labels=names
    )
    model.compile(learning_rate=learning_rate)
    model.fit(texts[train], labels[train], epochs=epochs, batch_size=batch_size, verbose=2)
    predicted = model.predict(test_texts, verbose=0).argmax(-1)
    version = export.export_saved_model(model, os.path.join(workdir, "serving"))
    return {
        "accuracy": float(np.mean(predicted == test_labels)),
        "predicted": predicted,
        "labels": test_labels,
        "served": served_labels(version, list(test_texts[:serve_count]), workdir),
        "names": names,
    }
