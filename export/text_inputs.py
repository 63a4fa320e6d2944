"""Raw text -> encoder inputs inside a serving graph, with length bucketing.

The tokenizer and packer are those of training (`keras_bert.text.BertPreprocessor`: the
vocabulary and casing of task.json / vocab.txt, [CLS] A [SEP] (B [SEP]), the original's
longest-first truncation to `seq_length`). Each batch is then cut to its longest row: a batch
of short texts runs the encoder on a few positions instead of `seq_length`, with the same
answers (padding is masked out of attention).

Dimensions: B batch, S sequence.
"""

import tensorflow as tf

from keras_bert.inputs import INPUT_NAMES
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.windows import MIN_LENGTH


def text_specs(names):
    """Input signature of text inputs: one tf.string [B] per name."""
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def encoder_input_specs():
    """Input signature of encoder inputs: {name: int32 [B, S]} with the TF Hub names."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}


class TextPacker:
    """Text segments [B] -> encoder inputs [B, longest packed row <= seq_length].

    Args:
        tokenizer: `keras_bert.text.BertTokenizer`.
        seq_length: int, the longest packed row; longer texts are truncated as in training.

    Call arguments:
        *texts: one or two tf.string tensors [B] (text, and text_b for pairs).

    Returns:
        dict of int32 [B, S] `input_word_ids`, `input_mask`, `input_type_ids`.
    """

    def __init__(self, tokenizer, seq_length):
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.preprocessor = BertPreprocessor(tokenizer, seq_length=seq_length, name="preprocessor")

    def __call__(self, *texts):
        return trim_to_longest(self.preprocessor(list(texts)))  # (B, S) each


def trim_to_longest(inputs):
    """Cuts encoder inputs padded to a fixed length to the batch's longest row (>= 2)."""
    longest = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1))
    width = tf.maximum(longest, MIN_LENGTH)  # An empty batch's max is the smallest int.
    return {name: value[:, :width] for name, value in inputs.items()}
