"""A TF Hub-style BERT pair: `preprocessor/` and `encoder/` SavedModels with TF Hub's API.

>>> export_hub("runs/pretrain", "hub/bert")   # doctest: +SKIP
'hub/bert/1'

Both load with `tf.saved_model.load` or `tensorflow_hub.KerasLayer`, as the BERT models on
TF Hub / Kaggle (https://www.tensorflow.org/hub/common_saved_model_apis/text):

preprocessor = hub.load("hub/bert/1/preprocessor")
- `preprocessor(text)`: tf.string [B] -> `input_word_ids`, `input_mask`, `input_type_ids`
  int32 [B, seq_length].
- `preprocessor.tokenize(text)`: int32 ragged [B, (words), (pieces)]; words are split as the
  original BERT does (whitespace and punctuation), pieces are WordPiece ids.
- `preprocessor.tokenize.get_special_tokens_dict()`: int32 scalars `vocab_size`,
  `padding_id`, `start_of_sequence_id`, `end_of_segment_id`, `mask_id`.
- `preprocessor.bert_pack_inputs(segments, seq_length=...)`: a list of one or two ragged
  [B, (words), (pieces)] or [B, (pieces)] -> encoder inputs [B, seq_length]. As TF Hub's:
  segments are trimmed round-robin (one token at a time to each segment that still has
  some, so both keep prefixes of about equal size), then packed as
  [CLS] A [SEP] (B [SEP]) with type ids 0 and 1 and padded; an empty B keeps its [SEP].

encoder = hub.load("hub/bert/1/encoder")
- `encoder(inputs, training=False)` -> `sequence_output` [B, S, H], `pooled_output` [B, H],
  `default` (= pooled_output) and `encoder_outputs` (list of L [B, S, H]), float32.
- `encoder.mlm(inputs + masked_lm_positions [B, P])` adds `mlm_logits` [B, P, V], when the
  model has its pre-training head (a Google checkpoint with cls/ heads, a Hugging Face
  BertForPreTraining directory, a pre-training run directory).
- `variables`, `trainable_variables`, `regularization_losses` for `hub.KerasLayer(...,
  trainable=True)`.

Everything runs with TensorFlow core ops and the tokenizer's tensorflow-text ops; TF Hub's own
preprocessors use RoundRobinTrim, which TF Serving's tensorflow-text lacks.

Dimensions: B batch, S sequence, H hidden, L layers, P predictions, V vocabulary.
"""

import os

import keras
import tensorflow as tf

from keras_bert.export import ops, versions
from keras_bert.export.saved_model import PROBE_TEXTS, eagerly, verify_reload
from keras_bert.export.source import load_source
from keras_bert.export.text_inputs import encoder_input_specs, text_specs
from keras_bert.text.packer import longest_first_lengths
from keras_bert.text.tokenizer import row_ids

PREPROCESSOR_DIR = "preprocessor"
ENCODER_DIR = "encoder"
_Trackable = tf.__internal__.tracking.AutoTrackable


def export_hub(
    model_dir: str | os.PathLike[str] | keras.Model,
    export_dir: str | os.PathLike[str],
    version: int | None = None,
    seq_length: int | None = None,
    mlm: bool | None = None,
) -> str:
    """Writes `<export_dir>/<version>/preprocessor/` and `.../encoder/` (TF Hub's BERT API).

    Args:
        model_dir: a task model in memory with its preprocessor (`from_preset`), or str:
            A pre-trained encoder (Google, Hugging Face, pre-training run) or a
            fine-tuned task model directory (its fine-tuned encoder is exported).
        export_dir: str. Base directory; each export is a new integer version in it.
        version: int or None (the next version).
        seq_length: int or None. The preprocessor's default length (task.json's, or 128).
        mlm: bool or None. Add `encoder.mlm`: None if the checkpoint has the head.

    Returns:
        str, the version directory holding `preprocessor/` and `encoder/`.
    """
    source = load_source(model_dir, seq_length=seq_length, mlm=mlm)
    preprocessor, preprocessor_signatures = preprocessor_module(source.tokenizer, source.seq_length)
    encoder, encoder_signatures = encoder_module(source.encoder, source.pretrainer)
    texts = tf.constant(PROBE_TEXTS)
    with eagerly():
        probes = dict(
            preprocessor_signatures["serving_default"](texts),
            text=texts,
            masked_lm_positions=tf.zeros([len(PROBE_TEXTS), 2], tf.int32),
        )
    with versions.new_version(export_dir, version) as (tmp, final):
        for name, module, signatures in (
            (PREPROCESSOR_DIR, preprocessor, preprocessor_signatures),
            (ENCODER_DIR, encoder, encoder_signatures),
        ):
            path = os.path.join(tmp, name)
            tf.saved_model.save(module, path, signatures=signatures)
            ops.check_ops(path)
            verify_reload(path, signatures, probes)
    return final


# === Preprocessor ===


def preprocessor_module(tokenizer, seq_length):
    """(object, signatures): `__call__`, `tokenize` (with `get_special_tokens_dict`) and
    `bert_pack_inputs`, as TF Hub's BERT preprocessors; serving_default is `__call__`."""
    special = special_tokens(tokenizer)
    is_suffix = tf.constant(
        [t.startswith("##") and t != "##" for t in tokenizer.vocabulary]
    )  # (V,)

    @tf.function(input_signature=text_specs(["text"]))
    def tokenize(text):
        return word_pieces(tokenizer(text), is_suffix)

    @tf.function(autograph=False)
    def bert_pack_inputs(inputs, seq_length=seq_length):
        return pack_segments(inputs, seq_length, special)

    for ragged_rank in (1, 2):
        for num_segments in (1, 2):
            spec = tf.RaggedTensorSpec(
                [None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank
            )
            bert_pack_inputs.get_concrete_function(
                [spec] * num_segments, seq_length=tf.TensorSpec([], tf.int32)
            )

    @tf.function(input_signature=text_specs(["text"]))
    def preprocess(text):
        return pack_segments([tokenize(text)], seq_length, special)

    root = _Trackable()
    root.__call__ = preprocess
    root.tokenize = _Trackable()
    root.tokenize.__call__ = tokenize
    root.tokenize.get_special_tokens_dict = _Trackable()
    root.tokenize.get_special_tokens_dict.__call__ = tf.function(
        lambda: {k: tf.constant(v, tf.int32) for k, v in special.items()}, input_signature=[]
    )
    root.bert_pack_inputs = _Trackable()
    root.bert_pack_inputs.__call__ = bert_pack_inputs
    return root, {"serving_default": preprocess}


def special_tokens(tokenizer):
    """TF Hub's special-token dict (Python ints) of a `BertTokenizer`."""
    return {
        "vocab_size": tokenizer.vocab_size,
        "padding_id": tokenizer.pad_id,
        "start_of_sequence_id": tokenizer.cls_id,
        "end_of_segment_id": tokenizer.sep_id,
        "mask_id": tokenizer.mask_id,
    }


def word_pieces(ids, is_suffix):
    """Ragged ids [B, (T)] -> [B, (words), (pieces)]: a word starts at each piece that is not
    a "##" suffix (an over-long word is one [UNK], a word of its own)."""
    pieces = ids.flat_values  # (T_all,)
    starts = tf.cast(tf.logical_not(tf.gather(is_suffix, pieces)), tf.int64)  # (T_all,)
    word = tf.cumsum(starts) - 1  # (T_all,) word index of each piece
    words = tf.RaggedTensor.from_value_rowids(pieces, word, nrows=tf.reduce_sum(starts))  # (W, (P))
    per_text = tf.math.unsorted_segment_sum(
        starts, row_ids(ids), ids.nrows()
    )  # (B,); linear memory
    return tf.RaggedTensor.from_row_lengths(words, per_text)


def pack_segments(segments, seq_length, special):
    """TF Hub's `bert_pack_inputs` with core ops: round-robin trim, [CLS] A [SEP] (B [SEP]), pad.

    Args:
        segments: list of one or two int ragged tensors [B, (T)] or [B, (words), (pieces)].
        seq_length: int or int32 scalar tensor S.
        special: `special_tokens` dict.

    Returns:
        dict of int32 [B, S] `input_word_ids`, `input_mask`, `input_type_ids`.
    """
    segments = list(segments) if isinstance(segments, (list, tuple)) else [segments]
    if not 1 <= len(segments) <= 2:
        raise ValueError(f"bert_pack_inputs packs one or two segments, got {len(segments)}.")
    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]  # (B, (T)) each
    lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]  # (B,) each
    seq_length = tf.cast(seq_length, tf.int32)
    budget = tf.maximum(seq_length - len(segments) - 1, 0)
    # For two segments the round-robin rule keeps what the original longest-first one keeps
    # (tests/export compare it with tensorflow-text's RoundRobinTrimmer).
    kept = (
        [tf.minimum(lengths[0], budget)]
        if len(segments) == 1
        else list(longest_first_lengths(lengths[0], lengths[1], budget))
    )
    pos = tf.range(seq_length)[tf.newaxis, :]  # (1, S)
    ids = tf.fill([tf.size(lengths[0]), seq_length], special["padding_id"])  # (B, S)
    ids = tf.where(pos == 0, special["start_of_sequence_id"], ids)
    types = tf.zeros_like(ids)  # (B, S)
    start = tf.ones_like(kept[0])[:, tf.newaxis]  # (B, 1): where the segment begins
    for index, (segment, keep) in enumerate(zip(segments, kept)):
        keep = keep[:, tf.newaxis]  # (B, 1)
        local = pos - start  # (B, S): position inside the segment
        inside = (local >= 0) & (local < keep)
        values = tf.concat([tf.cast(segment.values, tf.int32), [0]], axis=0)  # never empty
        source = tf.cast(segment.row_starts(), tf.int32)[:, tf.newaxis] + local
        ids = tf.where(
            inside, tf.gather(values, tf.clip_by_value(source, 0, tf.size(values) - 1)), ids
        )
        ids = tf.where(local == keep, special["end_of_segment_id"], ids)
        types = tf.where((local >= 0) & (local <= keep), index, types)
        start += keep + 1
    mask = tf.cast(pos < start, tf.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types * mask}


# === Encoder ===


def encoder_module(encoder, pretrainer=None):
    """(object, signatures): `__call__(inputs, training=False)`, `mlm` with a pre-training head,
    and the variable lists hub.KerasLayer reads; signatures serving_default (and mlm)."""
    root = _with_variables(_Trackable(), encoder.variables, _trainable(encoder))
    specs = encoder_input_specs()

    def encode(inputs, training):
        outputs = encoder(inputs, training=training)
        sequence = tf.cast(outputs["sequence_output"], tf.float32)  # (B, S, H)
        pooled = tf.cast(outputs["pooled_output"], tf.float32)  # (B, H)
        layers = [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]]  # L x (B, S, H)
        return {
            "sequence_output": sequence,
            "pooled_output": pooled,
            "default": pooled,
            "encoder_outputs": layers,
        }

    root.__call__ = tf.function(lambda inputs, training=False: encode(inputs, training))
    _trace_training(root.__call__, specs)
    signatures = {
        "serving_default": tf.function(
            lambda inputs: _tensors(encode(inputs, False)), input_signature=[specs]
        )
    }
    if pretrainer is not None:
        head = pretrainer.masked_lm_head
        root.mlm = _with_variables(
            _Trackable(),
            _unique(encoder.variables + head.variables),
            _unique(_trainable(encoder) + head.trainable_variables),
        )

        def mlm(inputs, training=False):
            outputs = encode({k: inputs[k] for k in specs}, training)
            logits = head(
                outputs["sequence_output"], inputs["masked_lm_positions"], training=training
            )
            return dict(outputs, mlm_logits=tf.cast(logits, tf.float32))  # (B, P, V)

        mlm_specs = dict(
            specs,
            masked_lm_positions=tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions"),
        )
        root.mlm.__call__ = tf.function(mlm)
        _trace_training(root.mlm.__call__, mlm_specs)
        signatures["mlm"] = tf.function(
            lambda inputs: _tensors(mlm(inputs)), input_signature=[mlm_specs]
        )
    return root, signatures


def _trainable(encoder):
    """The encoder's variables a hub user fine-tunes: its trainable ones and the pooler, also
    where the head it was trained under left the pooler frozen (`BertEncoder.use_pooler`: a
    head on the tokens), since a hub user's [CLS] classifier trains it."""
    chosen = {id(v) for v in encoder.trainable_variables + encoder.pooler.weights}
    return [v for v in encoder.variables if id(v) in chosen]


def _with_variables(obj, variables, trainable):
    obj.variables = list(variables)
    obj.trainable_variables = list(trainable)
    obj.regularization_losses = []
    return obj


def _unique(variables):
    seen = {}
    for v in variables:
        seen.setdefault(id(v), v)
    return list(seen.values())


def _trace_training(function, specs):
    for training in (False, True):
        function.get_concrete_function(specs, training=training)


def _tensors(outputs):
    """A signature's outputs: the tensors of `outputs` (encoder_outputs is a list)."""
    return {k: v for k, v in outputs.items() if tf.is_tensor(v)}
