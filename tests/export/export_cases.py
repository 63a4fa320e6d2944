"""Tiny fine-tuned model directories (as the fine-tuning runner writes them) and their Keras
answers.

The answers are computed without keras_bert.export: the saved Keras model on the training
preprocessing (`BertPreprocessor`, padded to the full seq_length), so an export must match
them whatever bucketing it does.
"""

import json
import os

import keras
import numpy as np
import reference
import tensorflow as tf
from finetune_cases import TINY, VOCAB

import keras_bert
from keras_bert.checkpoints.task_model import save_task_model
from keras_bert.models.task_models import BertClassifier, BertTokenClassifier
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

SEQ_LENGTH = 32
# Texts with answers to compare: in-vocabulary sentences, casing, unknown words, punctuation,
# empty and blank, over-long (truncated), emoji, CJK, control characters, invalid UTF-8.
TEXTS = [
    "the movie was really good .",
    "an awful , boring plot",
    "THE FILM IS GREAT!",
    "",
    "   \t\n ",
    "a story with music and scenes but the actor was poor",
    "zzz unknown words xyz",
    "it , it . it",
    " ".join(["very"] * 80) + " lovely",
    "🙂 the 东京 film",
    "the\x00movie\x07was\x1b fine",
    b"the movie \xff\xfe was bad",
]
TEXTS_B = [
    "a lovely film .",
    "",
    "it was bad",
    "the plot",
    "music",
    "fine",
    "story " * 40,
    "BORING",
    "good",
    "",
    "the actor",
    "great",
]


def write_task_model(directory, task, seed=0, seq_length=SEQ_LENGTH, lower_case=True, **options):
    """A `model/` directory of `task` (a registry name) with random weights, as `save_task_model`
    writes it; returns its path. `options` are task options of `FinetuneConfig` (doc_stride,
    ...)."""
    config = FinetuneConfig(
        task=task,
        init_checkpoint="unused",
        model_dir=str(directory),
        do_eval=True,
        seq_length=seq_length,
        task_options=options,
    )
    keras.utils.set_random_seed(seed)
    model = config.task_object.build_model(
        keras_bert.BertEncoder(keras_bert.BertConfig(**TINY)), dropout=0.1
    )
    reference.randomize_weights(model, seed=seed, scale=0.2)
    if isinstance(model, (BertClassifier, BertTokenClassifier)):
        # Centre the logits on varied texts, so that every label occurs (a label check can fail).
        inputs = BertPreprocessor(
            BertTokenizer(VOCAB, lower_case=lower_case), seq_length=seq_length
        )([tf.constant(TEXTS), tf.constant(TEXTS_B)])
        logits = np.asarray(model(inputs)["logits"])  # (N, C) or (N, S, C)
        bias = model.get_layer("classifier").bias
        bias.assign(bias - np.median(logits.reshape(-1, logits.shape[-1]), axis=0))
    return save_task_model(
        model,
        os.path.join(str(directory), "model"),
        config.task_object,
        seq_length,
        VOCAB,
        lower_case,
    )


def keras_logits(model_dir, texts, texts_b=None, seq_length=SEQ_LENGTH):
    """The saved Keras model's logits [N, C] on texts (or pairs), preprocessed as in training."""
    model = keras.saving.load_model(os.path.join(model_dir, "model.keras"))
    with open(os.path.join(model_dir, "task.json")) as f:
        lower_case = json.load(f)["lower_case"]
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"), lower_case=lower_case)
    preprocessor = BertPreprocessor(tokenizer, seq_length=seq_length)
    inputs = preprocessor(
        [tf.constant(texts)] + ([tf.constant(texts_b)] if texts_b is not None else [])
    )
    return np.asarray(model(inputs, training=False)["logits"])


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
