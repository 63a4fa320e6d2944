"""The student of a distillation: fewer layers of the teacher, or a compact preset.

- `student_layers=N`: the teacher's configuration with N layers; the embeddings, the pooler, the
  task head and N of the teacher's Transformer blocks, evenly spaced from the first to the last
  (`chosen_layers`: 3 of 6 -> 0, 2, 5; 6 of 12 -> 0, 2, 4, 7, 9, 11, DistilBERT's choice) are
  copied (Sanh et al. 2019's initialization). `student_layer_ids="1,3,5"` names the teacher's
  blocks instead (0-based, increasing): on SQuAD the top block of each pair of MiniLM's six
  (1, 3, 5) distilled better than the evenly spaced 0, 2, 5 (see README).
- `student_preset="L-4_H-256"`: a `BertConfig` preset with the teacher's vocabulary, random
  weights, or the encoder of `student_init_checkpoint` (anything `--init_checkpoint` takes;
  its vocabulary must be the teacher's). Its head starts random.

The layer map of hidden-state and attention matching (`layer_map`): student layer j (1-based)
is matched with the teacher layer it was copied from, or, for a preset, with teacher layer
round(j * L_teacher / L_student) (TinyBERT's uniform map); the embeddings (layer 0) with the
teacher's embeddings.
"""

import dataclasses

import numpy as np
from absl import logging


def layer_ids(text):
    """The teacher blocks of `student_layer_ids` ("1,3,5"; a list of ints is taken as well):
    0-based, strictly increasing.

    Raises:
        ValueError: not comma-separated integers >= 0 in increasing order, naming the value.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        ids = [int(str(item).strip()) for item in items]
    except ValueError:
        ids = []
    if not ids or ids[0] < 0 or any(b <= a for a, b in zip(ids, ids[1:])):
        raise ValueError(
            f"student_layer_ids must be the teacher's 0-based layers, comma-separated in "
            f"increasing order (e.g. '1,3,5'), got {text!r}."
        )
    return ids


def chosen_layers(teacher_layers, student_layers, student_layer_ids=None):
    """The 0-based teacher blocks a student of `student_layers` keeps: `student_layer_ids`
    (`layer_ids`) when given, else evenly spaced from the first to the last (rounded half to
    even).

    Raises:
        ValueError: student_layers is not in [1, teacher_layers], or a student_layer_ids is
            not one of the teacher's layers.
    """
    if student_layer_ids is not None:
        ids = layer_ids(student_layer_ids)
        if ids[-1] >= int(teacher_layers):
            raise ValueError(
                f"student_layer_ids must be in [0, {int(teacher_layers) - 1}] (the teacher has "
                f"{teacher_layers} layers), got {student_layer_ids!r}."
            )
        return ids
    if not 1 <= int(student_layers) <= int(teacher_layers):
        raise ValueError(
            f"student_layers must be in [1, {teacher_layers}] (the teacher has {teacher_layers} "
            f"layers), got {student_layers}."
        )
    return [int(i) for i in np.round(np.linspace(0, teacher_layers - 1, int(student_layers)))]


def layer_map(teacher_layers, student_layers, chosen=None):
    """[(teacher, student)] hidden-state indices (0 = embeddings, j = output of block j)."""
    if chosen is not None:
        return [(0, 0)] + [(t + 1, j + 1) for j, t in enumerate(chosen)]
    return [(0, 0)] + [
        (int(round((j + 1) * teacher_layers / student_layers)), j + 1)
        for j in range(student_layers)
    ]


def build_student(config, task, teacher, vocabulary, dtype):
    """(student task model, layer map) as the config asks (call in the strategy's scope).

    Args:
        config: `DistillConfig`.
        task: the `TaskDefinition`.
        teacher: the teacher's task model (its `encoder` a `BertEncoder`).
        vocabulary: list[str], the teacher's vocabulary.
        dtype: the run's Keras dtype policy.
    """
    from keras_bert import BertConfig, BertEncoder

    teacher_config = teacher.encoder.config
    teacher_layers = teacher_config.num_hidden_layers
    if config.student_layers is not None or config.student_layer_ids is not None:
        chosen = chosen_layers(teacher_layers, config.student_layers, config.student_layer_ids)
        student_config = dataclasses.replace(teacher_config, num_hidden_layers=len(chosen))
        student = task.build_model(BertEncoder(student_config, dtype=dtype), config.dropout)
        copy_layers(teacher, student, chosen)
        logging.info(
            "Student: teacher layers %s of %d, with its embeddings and head.",
            chosen,
            teacher_layers,
        )
        return student, layer_map(teacher_layers, len(chosen), chosen)
    if config.student_init_checkpoint:
        encoder = _checkpoint_encoder(config, vocabulary, teacher_config.vocab_size, dtype)
    else:
        encoder = BertEncoder(
            BertConfig.preset(config.student_preset, vocab_size=len(vocabulary)), dtype=dtype
        )
    student_layers = encoder.config.num_hidden_layers
    return task.build_model(encoder, config.dropout), layer_map(teacher_layers, student_layers)


def copy_layers(teacher, student, chosen):
    """Copies the teacher's embeddings, blocks `chosen`, pooler and head into the student."""
    t, s = teacher.encoder, student.encoder
    s.embeddings.set_weights(t.embeddings.get_weights())
    s.pooler.set_weights(t.pooler.get_weights())
    for block, index in zip(s.transformer_layers, chosen):
        block.set_weights(t.transformer_layers[index].get_weights())
    for layer in student.layers:
        if layer is not s and layer.weights:
            layer.set_weights(teacher.get_layer(layer.name).get_weights())


def _checkpoint_encoder(config, vocabulary, vocab_size, dtype):
    """The encoder of student_init_checkpoint, its vocabulary and casing checked against the
    teacher's and its size against student_preset (when given)."""
    from keras_bert import BertConfig
    from keras_bert.checkpoints import load_init_checkpoint

    init = load_init_checkpoint(config.student_init_checkpoint, dtype=dtype)
    check_same_vocabulary(init.vocabulary, vocabulary, config.student_init_checkpoint)
    if init.lower_case != config.lower_case:
        raise ValueError(
            f"student_init_checkpoint {config.student_init_checkpoint} is "
            f"{'uncased' if init.lower_case else 'cased'} but the teacher is "
            f"{'uncased' if config.lower_case else 'cased'}: the student must tokenize as the "
            f"teacher does."
        )
    if config.student_preset:
        want = BertConfig.preset(config.student_preset, vocab_size=vocab_size)
        got = init.encoder.config
        if (want.num_hidden_layers, want.hidden_size) != (got.num_hidden_layers, got.hidden_size):
            raise ValueError(
                f"student_init_checkpoint {config.student_init_checkpoint} has "
                f"{got.num_hidden_layers} layers of width {got.hidden_size}, not student_preset "
                f"{config.student_preset}'s {want.num_hidden_layers} of {want.hidden_size}: "
                f"pass the preset of the checkpoint, or none."
            )
    return init.encoder


def check_same_vocabulary(student_vocabulary, teacher_vocabulary, where):
    """Raises ValueError naming the first difference when the two vocabularies differ."""
    student_vocabulary, teacher_vocabulary = list(student_vocabulary), list(teacher_vocabulary)
    if student_vocabulary == teacher_vocabulary:
        return
    first = next(
        (i for i, (a, b) in enumerate(zip(student_vocabulary, teacher_vocabulary)) if a != b),
        min(len(student_vocabulary), len(teacher_vocabulary)),
    )

    def token(vocab):
        return repr(vocab[first]) if first < len(vocab) else "(none)"

    raise ValueError(
        f"The student's vocabulary ({where}: {len(student_vocabulary)} tokens) differs from the "
        f"teacher's ({len(teacher_vocabulary)} tokens) at id {first}: {token(student_vocabulary)} "
        f"vs {token(teacher_vocabulary)}. Teacher and student read the same token ids: use a "
        f"student checkpoint with the teacher's vocabulary."
    )
