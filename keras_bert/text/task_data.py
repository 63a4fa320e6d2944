"""Raw text for the task models' `fit` / `predict` / `evaluate` (`keras_bert.models.task`): texts
and labels -> batched tf.data of encoder inputs, packed by the model's preprocessor.

A task model hands its own parts in: how a batch of texts is packed (`packer`, or
`choices_packer` for multiple choice), and how a batch of labels maps onto its outputs.

Dimensions: B batch, K choices, S sequence.
"""

import math

import numpy as np
import tensorflow as tf

DEFAULT_BATCH_SIZE = 32  # The paper's fine-tuning batch sizes: 16 or 32.
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


def is_pair(x):
    """Whether raw text `x` (see `keras_bert.models.task`) is sentence pairs."""
    if hasattr(x, "element_spec"):  # A tf.data of (texts, labels...) or of texts.
        spec = x.element_spec
        x = spec[0] if isinstance(spec, tuple) and len(spec) > 1 else spec
    if isinstance(x, dict):
        return "text_b" in x
    return isinstance(x, tuple) and len(x) == 2


def split_xy(data):
    """(x, y) of validation_data given as (x, y), or (x, y, weights) without the weights."""
    if isinstance(data, tf.data.Dataset):
        return data, None
    return data[0], data[1]


def dataset(pack, x, y=None, batch_size=None, shuffle=False, labelled=None, targets=None):
    """A batched tf.data of (encoder inputs, labels) (or encoder inputs alone when y is None).

    Args:
        pack: callable, a batch of raw texts -> encoder inputs (`packer`, `choices_packer`).
        x: raw text (see `keras_bert.models.task`), or a batched tf.data of it (with labels).
        y: labels (NumPy arrays, or a tuple of them) or None.
        batch_size: int or None (32).
        shuffle: bool, shuffle the examples each epoch (not for a tf.data input).
        labelled: bool or None. A tf.data input yields (texts, labels): True for fit and
            evaluate, False for predict (None: whether y is given).
        targets: callable, a batch of labels -> dict output name -> labels, or None: labels
            that are not a dict go to the output "logits".

    Raises:
        ValueError: texts and labels of different lengths.
    """
    targets = targets or _logits

    def element(*e):
        return pack(e[0]) if len(e) == 1 else (pack(e[0]), targets(e[1]))

    if isinstance(x, tf.data.Dataset):
        labelled = y is not None if labelled is None else labelled
        return x.map(
            lambda *e: element(*(e if labelled else (e if len(e) > 1 else e[0],))),
            num_parallel_calls=tf.data.AUTOTUNE,
        ).prefetch(tf.data.AUTOTUNE)
    x = _as_texts(x)
    count = len(tf.nest.flatten(x)[0])
    if y is not None and any(len(part) != count for part in tf.nest.flatten(y)):
        raise ValueError(f"{count} texts but {len(tf.nest.flatten(y)[0])} labels.")
    data = tf.data.Dataset.from_tensor_slices((x,) if y is None else (x, y))
    if shuffle:
        data = data.shuffle(count, reshuffle_each_iteration=True)
    data = data.batch(batch_size or DEFAULT_BATCH_SIZE)
    return data.map(element, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _logits(y):
    return y if isinstance(y, dict) else {"logits": y}


def packer(preprocessor, trim=False):
    """A batch of texts (one, a pair as a tuple or list, a dict) -> encoder inputs [B, S] by
    `preprocessor`; with `trim`, cut to their longest row (`trim_padding`)."""

    def pack(x):
        inputs = preprocessor(x if not isinstance(x, list) else tuple(x))
        return trim_padding(inputs, preprocessor.seq_length) if trim else inputs

    return pack


def choices_packer(preprocessor):
    """(contexts [B], endings [B, K]) -> encoder inputs [B, K, S]: each context paired with each
    of its endings by `preprocessor`."""

    def pack(x):
        contexts, endings = x
        shape = tf.shape(endings)  # (B, K)
        first = tf.reshape(tf.broadcast_to(contexts[:, None], shape), [-1])  # (B*K,)
        packed = preprocessor((first, tf.reshape(endings, [-1])))  # (B*K, S) each
        return {
            k: tf.reshape(v, tf.concat([shape, tf.shape(v)[-1:]], 0)) for k, v in packed.items()
        }  # (B, K, S)

    return pack


def bucket_sizes(seq_length, buckets=DEFAULT_BUCKETS):
    """The padded lengths of batches: `buckets` below `seq_length`, and `seq_length` itself.
    One rule for a Python user's `fit` (`trim_padding`) and the fine-tuning runner's batch plans
    (`keras_bert.tasks.features.padded_length`)."""
    return [int(b) for b in sorted(buckets) if b < seq_length] + [int(seq_length)]


def padded_length(longest, sizes=None):
    """The padded length of a batch whose longest row has `longest` tokens: the smallest of
    `sizes` (`bucket_sizes`) that holds it (the largest when none does), or `longest` itself
    without sizes. `trim_padding` is its in-graph form."""
    if not sizes:
        return int(longest)
    fitting = [s for s in sorted(sizes) if s >= longest]
    return int(fitting[0] if fitting else max(sizes))


def trim_padding(inputs, seq_length, buckets=DEFAULT_BUCKETS):
    """Encoder inputs [B, S] cut to the padded length of their longest row (`padded_length`
    of `bucket_sizes(seq_length, buckets)`, computed in the graph): the padding beyond it is
    never computed, and the answers are the same (padded positions are masked out of
    attention).

    Args:
        inputs: dict of int tensors [B, S] with "input_mask".
        seq_length: int, S.
        buckets: ints, the lengths to cut to.

    Returns:
        dict of int tensors [B, S'].
    """
    sizes = tf.constant(bucket_sizes(seq_length, buckets), tf.int32)
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(inputs["input_mask"], tf.int32), -1))
    size = tf.reduce_min(tf.boolean_mask(sizes, sizes >= longest))
    return {k: v[:, :size] for k, v in inputs.items()}


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
                "The default schedule decays to 0 at the end of fit and needs its length: pass "
                "steps_per_epoch (the dataset's length is unknown), or compile(optimizer=...)."
            )
    if steps is None:
        count = len(tf.nest.flatten(x)[0])
        steps = math.ceil(count / (batch_size or DEFAULT_BATCH_SIZE))
    return max(1, epochs * int(steps))
