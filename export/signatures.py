"""Serving signatures: one small builder per kind of task.

Text tasks export three signatures (the names TF Serving requests use):
- `serving_default`: raw strings in (`text`, and `text_b` for pairs), the task's answer out,
  named for people (`label`, `label_id`, `probabilities`; `score`; `pooled_output`, ...).
- `preprocess`: the same strings -> encoder inputs `input_word_ids`, `input_mask`,
  `input_type_ids` (int32 [B, S]), as the model was trained with.
- `predict_ids`: encoder inputs -> the model's raw outputs (`logits`, ...), float32.

A builder takes an `ExportSource` and returns {signature name: tf.function with an input
signature}. Kinds whose examples are one text (or pair) per row only say how the model's
outputs become the answer and call `text_signatures`. Kinds with other inputs (SQuAD's
question and context windows, NER's word offsets, SWAG's choices) write their own builder
from the same pieces (`text_inputs.TextPacker`, `keras_bert.text.windows.pack_windows`,
`model_outputs`, and their answers' modules `entities` and `spans`) and register it in
`BUILDERS` under the `problem` their task writes to task.json.

Dimensions: B batch, S sequence, H hidden, C classes, K choices, E entities, W windows.
"""

import tensorflow as tf

from keras_bert.export import entities, single_request, spans
from keras_bert.export.text_inputs import (
    TextPacker,
    encoder_input_specs,
    text_specs,
)
from keras_bert.models.documents import WINDOW_INDEX
from keras_bert.text import windows as window_lib
from keras_bert.text.packer import _take
from keras_bert.text.tokenizer import row_ids
from keras_bert.text.window_sizes import MAX_WINDOWS, max_first_length, resolve_stride


def model_outputs(source, inputs):
    """The task model's (or the encoder's) tensor outputs in inference mode, as float32."""
    model = source.model if source.model is not None else source.encoder
    outputs = model(inputs, training=False)
    return {
        name: tf.cast(value, tf.float32) for name, value in outputs.items() if tf.is_tensor(value)
    }


def text_signatures(source, answer):
    """serving_default, preprocess and predict_ids of a one-text-per-row task.

    Args:
        source: `ExportSource`.
        answer: callable (encoder inputs, model outputs) -> dict of named answer tensors.

    Returns:
        dict signature name -> tf.function.
    """
    if source.info.get("long_text") == "windows":
        return window_signatures(source, answer)
    packer = TextPacker(source.tokenizer, source.seq_length)
    texts_spec = text_specs(source.text_inputs)

    @tf.function(input_signature=[encoder_input_specs()])
    def predict_ids(inputs):
        return model_outputs(source, inputs)

    @tf.function(input_signature=texts_spec)
    def preprocess(*texts):
        return packer(*texts)

    @tf.function(input_signature=texts_spec)
    def serving_default(*texts):
        inputs = preprocess(*texts)  # (B, S): padded to the batch's longest row only.
        # int8: a batch of one runs the single-request graph.
        return answer(
            inputs, single_request.by_batch_size(source, inputs, predict_ids, model_outputs)
        )

    return {
        "serving_default": serving_default,
        "preprocess": preprocess,
        "predict_ids": predict_ids,
    }


def window_signatures(source, answer):
    """`text_signatures` of a model trained on windows of long texts (task.json `long_text`
    "windows", `keras_bert.tasks.long_text`): each text is read in windows
    (`keras_bert.text.windows.pack_windows`, at most `max_windows`), whose logits are pooled
    (`window_pooling`) into the text's answer, plus `num_windows` int32 [B] (windows read) and
    `text_cut` bool [B] (the text had more than `max_windows` windows: its end was not read).
    `preprocess` gives every window's encoder inputs [W, S] (S: the longest window of the
    batch) and its text's `example_index` int32 [W]. A model trained on whole documents
    (task.json `window_training` "document", `keras_bert.models.documents`) pools inside
    itself, as in training: it gets each text's `window_index` [B, K] (`window_index`), and
    `predict_ids` and `preprocess` carry it too."""
    info, seq_length = source.info, source.seq_length
    pair = len(source.text_inputs) == 2
    settings = dict(
        seq_length=seq_length,
        doc_stride=resolve_stride(seq_length, pair, info.get("doc_stride")),
        max_first_length=max_first_length(seq_length),
        max_windows=int(info["max_windows"]),
    )
    texts_spec = text_specs(source.text_inputs)

    def windows_of(texts):
        first, second = (None, texts[0]) if len(texts) == 1 else texts
        inputs, windows, _ = window_lib.pack_windows(source.tokenizer, first, second, **settings)
        return inputs, windows

    documents = info.get("window_training") == "document"
    specs = encoder_input_specs()
    if documents:
        specs[WINDOW_INDEX] = tf.TensorSpec([None, None], tf.int32, name=WINDOW_INDEX)

    @tf.function(input_signature=[specs])
    def predict_ids(inputs):
        return model_outputs(source, inputs)

    @tf.function(input_signature=texts_spec)
    def preprocess(*texts):
        inputs, windows = windows_of(texts)
        if documents:
            inputs[WINDOW_INDEX] = window_index(windows["count"])
        return dict(inputs, example_index=windows["example"])

    @tf.function(input_signature=texts_spec)
    def serving_default(*texts):
        inputs, windows = windows_of(texts)  # (W, S)
        if documents:  # The model pools (B, C), as in training.
            inputs[WINDOW_INDEX] = window_index(windows["count"])  # (B, K)
            logits = predict_ids(inputs)["logits"]
        else:
            logits = window_lib.pool_windows(
                predict_ids(inputs)["logits"],
                windows["example"],
                windows["count"],
                info.get("window_pooling", "mean"),
            )  # (B, C)
        return dict(
            answer(None, {"logits": logits}),
            **_window_counts(windows),
        )

    return {
        "serving_default": serving_default,
        "preprocess": preprocess,
        "predict_ids": predict_ids,
    }


def window_index(count):
    """int32 [B, K] (K: the most windows of a text): the windows of each text in order (they
    are consecutive), -1 past its last; `keras_bert.models.documents.WindowPooling`'s input."""
    first = tf.expand_dims(tf.cumsum(count, exclusive=True), 1)  # (B, 1)
    column = tf.expand_dims(tf.range(tf.reduce_max(tf.concat([count, [1]], 0))), 0)  # (1, K)
    return tf.where(column < tf.expand_dims(count, 1), first + column, -1)


def classification(source):
    """`label` (string [B]), `label_id` (int32 [B]) and `probabilities` (float32 [B, C])."""
    labels = tf.constant([str(label) for label in source.info["labels"]])

    def answer(inputs, outputs):
        probabilities = tf.nn.softmax(outputs["logits"], axis=-1)  # (B, C)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)  # (B,)
        return {
            "label": tf.gather(labels, label_id),
            "label_id": label_id,
            "probabilities": probabilities,
        }

    return text_signatures(source, answer)


def regression(source):
    """`score` (float32 [B]), e.g. STS-B similarity."""
    return text_signatures(source, lambda inputs, outputs: {"score": outputs["logits"][:, 0]})


def encoder(source):
    """`pooled_output` [B, H], `sequence_output` [B, S, H] and its `input_mask` [B, S]."""
    return text_signatures(
        source,
        lambda inputs, outputs: {
            "pooled_output": outputs["pooled_output"],
            "sequence_output": outputs["sequence_output"],
            "input_mask": inputs["input_mask"],
        },
    )


def token_classification(source):
    """NER: `text` string [B] -> its entities, padded to the batch's most (E):
    `entity_text`, `entity_type` string [B, E] (the exact substring of the text, and its
    type), `start_char`, `end_char` int32 [B, E] (code point offsets, see
    `keras_bert.export.entities`; -1 and "" pad), `entity_count` int32 [B], `num_windows`
    int32 [B] and `text_cut` bool [B]. A text longer than seq_length - 2 pieces is read in
    windows half a window apart, each word tagged in the window where it has the most context
    (as the NER task's long sentences in training and evaluation), at most `max_windows`
    (task.json, default `window_sizes.MAX_WINDOWS`) per text: words past them get no tag and
    `text_cut` says so. `preprocess` gives the windows' encoder inputs [W, S] and
    `example_index` [W]; `predict_ids` the tag `logits` [W, S, C]."""
    labels = [str(label) for label in source.info["labels"]]
    is_suffix = tf.constant([t.startswith("##") and t != "##" for t in source.tokenizer.vocabulary])
    seq_length, room = source.seq_length, source.seq_length - 2
    step = max(1, room // 2)  # `keras_bert.tasks.ner.task.windows`' stride.
    settings = dict(
        seq_length=seq_length,
        doc_stride=step,
        max_first_length=0,
        max_windows=int(source.info.get("max_windows", MAX_WINDOWS)),
    )

    @tf.function(input_signature=[encoder_input_specs()])
    def predict_ids(inputs):
        return model_outputs(source, inputs)

    @tf.function(input_signature=text_specs(["text"]))
    def preprocess(text):
        inputs, windows, _ = window_lib.pack_windows(source.tokenizer, None, text, **settings)
        return dict(inputs, example_index=windows["example"])

    @tf.function(input_signature=text_specs(["text"]))
    def serving_default(text):
        inputs, windows, (ids, starts, ends) = window_lib.pack_windows(
            source.tokenizer, None, text, **settings
        )
        logits = predict_ids(inputs)["logits"]  # (W, S, C)
        words = entities.word_spans(ids, starts, ends, is_suffix)  # (N,) each
        piece = tf.gather(tf.cast(ids.row_splits, tf.int32), words["row"]) + words["piece"]
        slot = tf.gather(
            _token_slots(windows, ids, tf.shape(logits)[1], -(-room // step), seq_length), piece
        )  # (N,)
        tagged = slot >= 0  # (N,) inside a window read
        words = {k: tf.boolean_mask(v, tagged) for k, v in words.items()}
        slot = tf.boolean_mask(slot, tagged)
        width = tf.shape(logits)[1]
        position = tf.stack([slot // width, slot % width], 1)  # (N, 2): window, position
        tag = tf.argmax(tf.gather_nd(logits, position), axis=-1, output_type=tf.int32)  # (N,)
        return dict(
            entities.entity_outputs(
                text, entities.decode_iob2(words, tag, labels), entities.entity_types(labels)
            ),
            **_window_counts(windows),
        )

    return {
        "serving_default": serving_default,
        "preprocess": preprocess,
        "predict_ids": predict_ids,
    }


def _token_slots(windows, ids, width, reach, seq_length):
    """int32 [M] (M: the pieces of `ids`, flat): where each piece is read, window * width +
    position in it, in the window where it has the most context (`spans.max_context`); -1 for
    pieces in no window (past `max_windows`). Batches of one window per text (an IF in TFLite)
    skip the comparison of windows. (Measured 2026-11-25 without the IF: the same entities, and
    the CoNLL-2003 student's dynamic range 1.77x its teacher's speed, against 1.83x with it in an
    earlier run of the same benchmark; one process timing both exports of the teacher: the same.)"""
    return tf.cond(
        tf.reduce_all(windows["count"] <= 1),
        lambda: _one_window_slots(windows, ids, width),
        lambda: _any_window_slots(windows, ids, width, reach, seq_length),
    )


def _one_window_slots(windows, ids, width):
    """`_token_slots` when no text has more than one window: each piece's text's window."""
    row = row_ids(ids)  # (M,)
    window = tf.gather(tf.cumsum(windows["count"], exclusive=True), row)  # (M,) if it has one
    read = tf.gather(windows["count"], row) > 0
    window = tf.where(read, window, 0)
    token = tf.range(tf.size(row)) - tf.gather(tf.cast(ids.row_splits, tf.int32), row)  # (M,)
    token -= _take(windows["start"], window)  # In the window's pieces.
    read &= (token >= 0) & (token < _take(windows["length"], window))
    return tf.where(read, window * width + token + 1, -1)


def _any_window_slots(windows, ids, width, reach, seq_length):
    """`_token_slots` for texts of any number of windows."""
    pos = tf.range(width)[tf.newaxis, :]  # (1, S)
    token = windows["start"][:, tf.newaxis] + pos - 1  # (W, S) the piece at each position
    inside = (pos >= 1) & (pos <= windows["length"][:, tf.newaxis])  # (W, S)
    best = inside & spans.max_context(windows, token, reach, seq_length)  # (W, S)
    row_start = tf.gather(tf.cast(ids.row_splits, tf.int32), windows["example"])[:, tf.newaxis]
    window = tf.range(tf.size(windows["example"]))[:, tf.newaxis]  # (W, 1)
    num_pieces = tf.size(ids.flat_values)
    slot = tf.math.unsorted_segment_max(
        tf.reshape(tf.where(best, window * width + pos, -1), [-1]),
        tf.reshape(tf.where(best, row_start + token, num_pieces), [-1]),
        num_pieces + 1,  # One segment more for the positions read by no piece.
    )[:num_pieces]
    return tf.maximum(slot, -1)  # (M,) a piece in no window: the lowest int -> -1


def multiple_choice(source):
    """SWAG: `context` string [B] (segment A) and `endings` string [B, K] (segment B of each
    choice; for SWAG, sent2 + " " + ending) -> `choice` int32 [B], `probabilities` float32
    [B, K]. `preprocess` gives encoder inputs [B, K, S], `predict_ids` the `logits` [B, K]."""
    packer = TextPacker(source.tokenizer, source.seq_length)
    k = int(source.info["num_choices"])
    texts_spec = [
        tf.TensorSpec([None], tf.string, name="context"),
        tf.TensorSpec([None, k], tf.string, name="endings"),
    ]

    @tf.function(
        input_signature=[
            {
                name: tf.TensorSpec([None, k, None], tf.int32, name=name)
                for name in encoder_input_specs()
            }
        ]
    )
    def predict_ids(inputs):
        return model_outputs(source, inputs)

    @tf.function(input_signature=texts_spec)
    def preprocess(context, endings):
        inputs = packer(tf.repeat(context, k), tf.reshape(endings, [-1]))  # (B*K, S)
        return {
            name: tf.reshape(v, [-1, k, tf.shape(v)[1]]) for name, v in inputs.items()
        }  # (B, K, S)

    @tf.function(input_signature=texts_spec)
    def serving_default(context, endings):
        probabilities = tf.nn.softmax(
            predict_ids(preprocess(context, endings))["logits"], axis=-1
        )  # (B, K)
        return {
            "choice": tf.argmax(probabilities, axis=-1, output_type=tf.int32),
            "probabilities": probabilities,
        }

    return {
        "serving_default": serving_default,
        "preprocess": preprocess,
        "predict_ids": predict_ids,
    }


def span(source):
    """SQuAD: `question`, `context` string [B] -> `answer` string [B] (the exact substring of the
    context, "" for none), `start_char`, `end_char` int32 [B] (its code point offsets in the
    context, -1 for none), `score` float32 [B] (the best span's start + end logit, -inf for
    none), `has_answer` bool [B]; SQuAD 2.0 adds `null_odds` float32 [B] (null score minus the
    best span's, the task's null_odds.json). Windows and answers as `keras_bert.export.spans`
    (settings from task.json). `preprocess` gives the encoder inputs of every window [W, S] and
    its question's `example_index` int32 [W]; `predict_ids` the `start_logits`, `end_logits`."""
    info = source.info
    seq_length, doc_stride, max_query = (
        source.seq_length,
        int(info["doc_stride"]),
        int(info["max_query_length"]),
    )
    reach = _window_reach(seq_length, doc_stride, max_query)
    texts_spec = text_specs(["question", "context"])

    @tf.function(input_signature=[encoder_input_specs()])
    def predict_ids(inputs):
        return model_outputs(source, inputs)

    @tf.function(input_signature=texts_spec)
    def preprocess(question, context):
        inputs, windows, _ = spans.pack_windows(
            source.tokenizer, question, context, seq_length, doc_stride, max_query
        )
        return dict(inputs, example_index=windows["example"])

    @tf.function(input_signature=texts_spec)
    def serving_default(question, context):
        inputs, windows, (_, starts, ends) = spans.pack_windows(
            source.tokenizer, question, context, seq_length, doc_stride, max_query
        )
        logits = predict_ids(inputs)  # (W, S) each
        best = spans.best_spans(
            windows,
            logits["start_logits"],
            logits["end_logits"],
            int(info["n_best_size"]),
            int(info["max_answer_length"]),
            reach,
            seq_length,
        )  # (B,) each
        has_answer, answer = _null_answer(info, windows, logits, best)
        byte_start, byte_end = spans.span_bytes(starts, ends, best, has_answer)  # (B,) each
        return dict(
            answer,
            **_answer_text(question, context, byte_start, byte_end, has_answer),
            score=best["score"][0],
            has_answer=has_answer,
        )

    return {
        "serving_default": serving_default,
        "preprocess": preprocess,
        "predict_ids": predict_ids,
    }


def _window_reach(seq_length, doc_stride, max_query):
    """The `reach` of `spans.max_context`; raises if no context fits beside the question."""
    least_room = seq_length - max_query - 3
    if least_room < 1:
        raise ValueError(
            f"seq_length {seq_length} leaves no room for the context after {max_query} question "
            f"tokens (max_query_length): export with a longer seq_length."
        )
    # Windows holding one token are fewer apart.
    return -(-(seq_length - 3) // min(doc_stride, least_room))


def _null_answer(info, windows, logits, best):
    """SQuAD 2.0's no-answer decision: (has_answer bool [B], {"null_odds": float32 [B]} or {})."""
    if info.get("squad_version") != "2.0":
        return best["found"], {}
    threshold = float(info.get("null_score_diff_threshold", 0.0))
    null = spans.null_scores(windows, logits["start_logits"], logits["end_logits"])  # (B,) pair
    null_odds = tf.where(
        best["found"], (null[0] - best["score"][0]) + (null[1] - best["score"][1]), null[0]
    )
    has_answer = best["found"]
    if int(info["n_best_size"]) == 1:  # The null answer then takes the only n-best slot.
        has_answer &= spans.at_most(null, best["score"])
    has_answer &= null_odds <= threshold
    return has_answer, {"null_odds": null_odds}


def _answer_text(question, context, byte_start, byte_end, has_answer):
    """The answer's `answer` string [B] and `start_char`, `end_char` int32 [B] in the context."""
    row = tf.range(tf.size(question))
    char = [
        tf.where(has_answer, c, entities.PAD_OFFSET)
        for c in entities.char_offsets(context, row, byte_start, byte_end)
    ]
    text = entities.substrings(
        context, byte_start[:, tf.newaxis], byte_end[:, tf.newaxis]
    )  # (B, 1)
    text = tf.reshape(text, [-1])  # (B,) (TFLite slices no strings)
    return {"answer": text, "start_char": char[0], "end_char": char[1]}


# task.json `problem` (or "encoder") -> builder.
BUILDERS = {
    "classification": classification,
    "regression": regression,
    "encoder": encoder,
    "token_classification": token_classification,
    "multiple_choice": multiple_choice,
    "span": span,
}


def build_signatures(source):
    """The signatures of `source` by its kind.

    Raises:
        ValueError: no builder for the kind (naming the known ones).
    """
    if source.kind not in BUILDERS:
        raise ValueError(
            f"No serving signatures for {source.kind!r} models ({source.path}); "
            f"kinds: {', '.join(BUILDERS)}."
        )
    return BUILDERS[source.kind](source)


def _window_counts(windows):
    """The outputs of a windowed signature besides its answer: windows read per text, and
    whether the text had more than the cap (its end was not read)."""
    return {"num_windows": windows["count"], "text_cut": windows["needed"] > windows["count"]}
