"""Raw text for the task models' `fit` / `predict` / `evaluate` (`keras_bert.models.task`): texts
and labels -> batched tf.data of encoder inputs, and the paper's fine-tuning defaults (optimizer,
loss, metrics).

Dimensions: B batch, K choices, S sequence.
"""

import math

import keras
import numpy as np
import tensorflow as tf

from keras_bert.training.optimizers import create_optimizer

DEFAULT_BATCH_SIZE = 32  # The paper's fine-tuning batch sizes: 16 or 32.
PEAK_LEARNING_RATE = 2e-5
WARMUP_FRACTION = 0.1
IGNORED_TAG = -1  # Token tags: a packed token without a tag (special tokens, padding).
# Padded lengths of batches: each batch is cut to the smallest that holds its longest row (few
# shapes: few traces, and few compilations under XLA and JAX).
DEFAULT_BUCKETS = (32, 64, 128, 256, 384, 512)
_TEXT_KEYS = ("text_a", "text_b")


def is_text(x):
    """True for raw text (strings, pairs, a dict of text_a/text_b, a tf.data of strings)."""
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        first = spec[0] if isinstance(spec, tuple) else spec
        return any(s.dtype == tf.string for s in tf.nest.flatten(first))
    if isinstance(x, dict):
        return bool(x) and set(x) <= set(_TEXT_KEYS)
    if isinstance(x, tuple) and len(x) in (1, 2):
        return all(_strings(part) for part in x)
    return _strings(x)


def _strings(x):
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, tf.Tensor):
        return x.dtype == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "OUS"
    if isinstance(x, list):
        return bool(x) and (
            _strings(x[0]) if isinstance(x[0], list) else isinstance(x[0], (str, bytes))
        )
    return False


def split_xy(data):
    """(x, y) of validation_data given as (x, y), or (x, y, weights) without the weights."""
    if isinstance(data, tf.data.Dataset):
        return data, None
    return data[0], data[1]


def dataset(model, x, y, batch_size, shuffle=False, labelled=None):
    """A batched tf.data of (encoder inputs, labels) (or encoder inputs alone when y is None).

    Args:
        model: a `BertTask` with a preprocessor.
        x: raw text (see `keras_bert.models.task`), or a batched tf.data of it (with labels).
        y: labels or None.
        batch_size: int or None (32).
        shuffle: bool, shuffle the examples each epoch (not for a tf.data input).
        labelled: bool or None. A tf.data input yields (texts, labels): True for fit and
            evaluate, False for predict (None: whether y is given).

    Raises:
        ValueError: no preprocessor, or texts and labels of different lengths.
    """
    if model.preprocessor is None:
        raise ValueError(
            f"This {type(model).__name__} has no preprocessor for raw text: build it with "
            "from_preset or set model.preprocessor; or pass encoder inputs (token ids)."
        )
    preprocess = _preprocess_fn(model)
    if isinstance(x, tf.data.Dataset):
        labelled = y is not None if labelled is None else labelled
        return x.map(
            lambda *e: _map_element(
                model, preprocess, e if labelled else (e if len(e) > 1 else e[0],)
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        ).prefetch(tf.data.AUTOTUNE)
    x = _as_texts(x)
    count = len(tf.nest.flatten(x)[0])
    if y is not None:
        y = _as_labels(model, y)
        if any(len(part) != count for part in tf.nest.flatten(y)):
            raise ValueError(f"{count} texts but {len(tf.nest.flatten(y)[0])} labels.")
    data = tf.data.Dataset.from_tensor_slices((x,) if y is None else (x, y))
    if shuffle:
        data = data.shuffle(count, reshuffle_each_iteration=True)
    data = data.batch(batch_size or DEFAULT_BATCH_SIZE)
    return data.map(
        lambda *e: _map_element(model, preprocess, e), num_parallel_calls=tf.data.AUTOTUNE
    ).prefetch(tf.data.AUTOTUNE)


def trim_padding(inputs, seq_length, buckets=DEFAULT_BUCKETS):
    """Encoder inputs [B, S] cut to the smallest of `buckets` below `seq_length` (or S itself)
    that holds the batch's longest row: the padding beyond it is never computed, and the
    answers are the same (padded positions are masked out of attention).

    Args:
        inputs: dict of int tensors [B, S] with "input_mask".
        seq_length: int, S.
        buckets: ints, the lengths to cut to.

    Returns:
        dict of int tensors [B, S'].
    """
    sizes = tf.constant([b for b in buckets if b < seq_length] + [seq_length], tf.int32)
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(inputs["input_mask"], tf.int32), -1))
    size = tf.reduce_min(tf.boolean_mask(sizes, sizes >= longest))
    return {k: v[:, :size] for k, v in inputs.items()}


def _map_element(model, preprocess, element):
    """(encoder inputs[, labels]) of one batch; a classifier's inputs cut to their longest row
    (`trim_padding`): its logits do not depend on the padded length."""
    if type(model).__name__ == "BertClassifier":
        preprocess = _trimmed(preprocess, model.preprocessor.seq_length)
    if len(element) == 1:
        return preprocess(element[0])
    x, y = element[0], element[1]
    if isinstance(y, (tuple, list)) and type(model).__name__ == "BertSpanLabeler":
        y = {"start_logits": y[0], "end_logits": y[1]}
    elif not isinstance(y, dict):
        y = {"logits": y}
    return preprocess(x), y


def _trimmed(preprocess, seq_length):
    return lambda x: trim_padding(preprocess(x), seq_length)


def _preprocess_fn(model):
    preprocessor = model.preprocessor
    if type(model).__name__ != "BertMultipleChoice":
        return lambda x: preprocessor(x if not isinstance(x, list) else tuple(x))

    def choices(x):
        """(contexts [B], endings [B, K]) -> encoder inputs [B, K, S]."""
        contexts, endings = x
        shape = tf.shape(endings)  # (B, K)
        first = tf.reshape(tf.broadcast_to(contexts[:, None], shape), [-1])  # (B*K,)
        packed = preprocessor((first, tf.reshape(endings, [-1])))  # (B*K, S) each
        return {
            k: tf.reshape(v, tf.concat([shape, tf.shape(v)[-1:]], 0)) for k, v in packed.items()
        }  # (B, K, S)

    return choices


def _as_texts(x):
    if isinstance(x, dict):
        return {k: tf.constant(_text_array(v)) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(tf.constant(_text_array(part)) for part in x)
    return tf.constant(_text_array(x))


def _text_array(x):
    array = np.asarray(x.numpy() if isinstance(x, tf.Tensor) else x, dtype=object)
    if array.ndim == 0:
        array = array[None]
    return array.astype(str) if array.dtype.kind == "O" else array


def _as_labels(model, y):
    if type(model).__name__ == "BertSpanLabeler":
        start, end = y
        return (np.asarray(start, np.int32), np.asarray(end, np.int32))
    regression = getattr(model, "num_classes", 0) == 1 and type(model).__name__ == "BertClassifier"
    return np.asarray(y, np.float32 if regression else np.int32)


def train_steps(x, y, batch_size, fit_kwargs):
    """Optimizer updates of a `fit` call: epochs x steps per epoch.

    Raises:
        ValueError: a tf.data input of unknown length without steps_per_epoch.
    """
    epochs = int(fit_kwargs.get("epochs", 1)) - int(fit_kwargs.get("initial_epoch", 0))
    steps = fit_kwargs.get("steps_per_epoch")
    if steps is None and isinstance(x, tf.data.Dataset):
        steps = int(x.cardinality())
        if steps < 0:
            raise ValueError(
                "compile()'s default schedule decays to 0 at the end of fit and needs its length: "
                "pass steps_per_epoch (the dataset's length is unknown), or compile(optimizer=...)."
            )
    if steps is None:
        count = len(tf.nest.flatten(x)[0])
        steps = math.ceil(count / (batch_size or DEFAULT_BATCH_SIZE))
    return max(1, epochs * int(steps))


def paper_optimizer(model, num_train_steps, learning_rate=PEAK_LEARNING_RATE):
    """The original's fine-tuning optimizer (`AdamWeightDecay`: Adam with decoupled weight decay
    0.01, not on LayerNorm and biases, no bias correction; the runner's default too) peaking at
    `learning_rate` after 10% warmup, then linear decay to 0 at `num_train_steps`; gradients
    clipped to global norm 1 (`create_optimizer`)."""
    return create_optimizer(
        learning_rate,
        num_train_steps,
        int(WARMUP_FRACTION * num_train_steps),
        variables=model.trainable_variables,
        optimizer="adam_weight_decay",
    )


def loss_and_metrics(model):
    """(loss, metrics) of the task, per output."""
    kind = type(model).__name__
    xent = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if kind == "BertSpanLabeler":  # The mean of the start and end losses (§4.2).
        return (
            {"start_logits": xent, "end_logits": xent},
            {"start_logits": ["accuracy"], "end_logits": ["accuracy"]},
        )
    if kind == "BertClassifier" and model.num_classes == 1:
        return {"logits": keras.losses.MeanSquaredError()}, {"logits": ["mae"]}
    if kind == "BertTokenClassifier":
        xent = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=IGNORED_TAG
        )
    return {"logits": xent}, {"logits": [keras.metrics.SparseCategoricalAccuracy("accuracy")]}
