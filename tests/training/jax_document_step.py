"""One document-level training step on the JAX backend, on one device and over two, from the
same weights: the global batch is two packs side by side (`concatenate_packs`), as the runner
feeds `keras.distribution.DataParallel`. Run by test_jax_training.py in a subprocess with
`XLA_FLAGS=--xla_force_host_platform_device_count=2`; prints a JSON line: each run's loss and the
largest difference between their updated weights, and the largest update."""

import contextlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from finetune_cases import NEGATIVE, POSITIVE, TINY, VOCAB, WORDS  # noqa: E402

from keras_bert import BertConfig, BertEncoder  # noqa: E402
from keras_bert.models.documents import DocumentClassifier  # noqa: E402
from keras_bert.tasks import features as feature_lib  # noqa: E402
from keras_bert.tasks import registry  # noqa: E402
from keras_bert.tasks.documents import (  # noqa: E402
    concatenate_packs,
    document_plan,
    make_document_dataset,
    window_counts,
)
from keras_bert.text.tokenizer import BertTokenizer  # noqa: E402

OPTIONS = dict(long_text="windows", max_windows=4, doc_stride=8, window_training="document")
BUDGET = 12  # Windows (and documents) per device's pack.


def global_batch(task):
    """The first global batch of two packs: (inputs, labels) of NumPy arrays."""
    rng = np.random.default_rng(0)
    words = WORDS + POSITIVE + NEGATIVE
    texts = [" ".join(rng.choice(words, size=int(rng.integers(5, 40)))) for _ in range(16)]
    inputs, example_index = feature_lib.encode_long_texts(
        BertTokenizer(VOCAB), 16, texts, None, task.options, "t"
    )
    labels = {"label": (np.arange(16) % 2).astype(np.int32)[example_index]}
    feats = feature_lib.FeatureSet(inputs, labels, example_index)
    plan = document_plan(window_counts(feats), BUDGET, num_replicas=2)
    packs = make_document_dataset(feats, plan, fixed=(BUDGET, OPTIONS["max_windows"]))
    x, y = next(iter(concatenate_packs(packs, 0, 2, BUDGET)))
    return {k: v.numpy() for k, v in x.items()}, {k: v.numpy() for k, v in y.items()}


def train_step(task, x, y, weights, distribution):
    """(loss, updated weights) of one SGD step from `weights` (None: the seeded ones)."""
    keras.distribution.set_distribution(distribution)
    keras.utils.set_random_seed(0)
    with distribution.scope() if distribution else contextlib.nullcontext():
        model = task.build_model(BertEncoder(BertConfig(**TINY)), 0.0)
        assert isinstance(model, DocumentClassifier)
        model(x)
        if weights is not None:
            model.set_weights(weights)
        start = [np.array(w) for w in model.get_weights()]
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5))  # The task's loss.
    loss = float(model.train_on_batch(x, *task.targets(y), return_dict=True)["loss"])
    return loss, start, [np.array(w) for w in model.get_weights()]


def main():
    task = registry.get_task("sst2", dict(OPTIONS, window_pooling=sys.argv[1]))
    x, y = global_batch(task)
    one_loss, start, one = train_step(task, x, y, None, None)
    devices = keras.distribution.list_devices()
    two_loss, _, two = train_step(
        task, x, y, start, keras.distribution.DataParallel(devices=devices)
    )
    result = dict(
        devices=len(devices),
        documents=int(y["weight"].sum()),
        losses=[one_loss, two_loss],
        max_difference=max(float(np.abs(a - b).max()) for a, b in zip(one, two)),
        max_update=max(float(np.abs(a - s).max()) for a, s in zip(one, start)),
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
