"""The in-graph max-context choice (`keras_bert.export.spans.max_context`) against the Python
features' (`keras_bert.tasks.squad.features.max_context_masks`, itself checked against the
original's `_check_is_max_context`), on batches whose texts all fit one window and on batches
that mix them with texts of many windows, in TensorFlow and in TFLite."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.export import spans
from keras_bert.tasks.squad.features import doc_windows, max_context_masks

# (num_tokens, room, stride) of each text in a batch.
BATCHES = {
    "one window each": [(1, 5, 2), (7, 10, 3), (10, 10, 4)],
    "mixed": [(7, 10, 3), (50, 10, 3), (1, 5, 2), (97, 20, 7), (300, 128, 64), (50, 10, 10)],
}


def graph_masks(texts, width):
    """`spans.max_context` for every position 0..width-1 of each window of `texts` (as in the
    windows of `keras_bert.text.windows.pack_windows`), and the windows as (text, start, length)."""
    flat = [
        (i, start, length)
        for i, (num_tokens, room, stride) in enumerate(texts)
        for start, length in doc_windows(num_tokens, room, stride)
    ]
    windows = {
        "example": tf.constant([i for i, _, _ in flat], tf.int32),
        "count": tf.constant([len(doc_windows(*t)) for t in texts], tf.int32),
        "step": tf.constant([min(stride, room) for _, room, stride in texts], tf.int32),
        "room": tf.constant([room for _, room, _ in texts], tf.int32),
        "num_tokens": tf.constant([n for n, _, _ in texts], tf.int32),
    }
    position = tf.constant([[start + p for p in range(width)] for _, start, _ in flat], tf.int32)
    reach = max(-(-room // min(stride, room)) for _, room, stride in texts)
    width_needed = max(room for _, room, _ in texts) + 3
    return spans.max_context(windows, position, reach, width_needed).numpy(), flat


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_max_context_in_the_graph_matches_the_features(batch):
    texts = BATCHES[batch]
    width = max(room for _, room, _ in texts) + 2  # Positions past each window's end too.
    got, flat = graph_masks(texts, width)
    expected = []
    for num_tokens, room, stride in texts:
        windows = doc_windows(num_tokens, room, stride)
        expected += [
            np.pad(mask, (0, width - len(mask))) for mask in max_context_masks(windows, num_tokens)
        ]
    np.testing.assert_array_equal(got, np.stack(expected))
    assert (len(flat) == len(texts)) == (batch == "one window each")


def test_max_context_in_tflite_matches_the_graph():
    """The same choice from the TFLite interpreter (the windows around each one on a last axis:
    broadcasts the converter must keep), for the mixed batch."""
    from keras_bert.export import tflite

    texts = BATCHES["mixed"]
    width = max(room for _, room, _ in texts) + 2
    expected, flat = graph_masks(texts, width)
    windows = {
        "example": [i for i, _, _ in flat],
        "count": [len(doc_windows(*t)) for t in texts],
        "step": [min(stride, room) for _, room, stride in texts],
        "room": [room for _, room, _ in texts],
        "num_tokens": [n for n, _, _ in texts],
    }
    reach = max(-(-room // min(stride, room)) for _, room, stride in texts)
    specs = {name: tf.TensorSpec([None], tf.int32, name=name) for name in windows}

    @tf.function(input_signature=[specs, tf.TensorSpec([None, None], tf.int32)])
    def choose(windows, position):
        mask = spans.max_context(windows, position, reach, max(r for _, r, _ in texts) + 3)
        return {"mask": tf.cast(mask, tf.int32)}

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [choose.get_concrete_function()], tf.Module()
    )
    runner = tflite.load_interpreter(model_content=converter.convert()).get_signature_runner()
    position = np.array([[start + p for p in range(width)] for _, start, _ in flat], np.int32)
    got = runner(position=position, **{k: np.array(v, np.int32) for k, v in windows.items()})
    np.testing.assert_array_equal(got["mask"].astype(bool), expected)
