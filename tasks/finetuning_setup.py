"""The fine-tuning runner's set-up (`keras_bert.tasks.finetuning`): the encoder and tokenizer from
init_checkpoint (a pre-trained checkpoint, a fine-tuned model/ of the same task, or a preset),
the data of each split, and the task model built in the strategy's scope (LoRA,
quantization-aware training), compiled (with its own loss and metrics, as `fit`'s) and
restored."""

import json
import time

import tensorflow as tf
from absl import logging

from keras_bert.checkpoints.task_model import find_task_model
from keras_bert.io_utils import write_atomic
from keras_bert.models import lora
from keras_bert.models.task_models import center_regression_head
from keras_bert.tasks import quantization_aware
from keras_bert.training import run_skeleton as training_run

LORA_FILE = "lora.json"  # The run's LoRA settings (`_lora_settings`).
QUANTIZATION_AWARE_FILE = "quantization_aware.json"  # Written by quantization-aware runs.


def _load_encoder(config, dtype):
    """(encoder, vocabulary, lower_case, fine-tuned task model or None) from init_checkpoint
    (a fine-tuned model/ of the same task: its encoder, and its model whose head
    `build_and_compile` copies), or a fresh preset encoder."""
    from keras_bert.checkpoints import load_init_checkpoint
    from keras_bert.text.vocab import load_vocabulary

    if config.init_checkpoint and find_task_model(config.init_checkpoint):
        return _fine_tuned(config, find_task_model(config.init_checkpoint))
    if config.init_checkpoint:
        init = load_init_checkpoint(
            config.init_checkpoint,
            vocab_file=config.vocab_file,
            lower_case=config.lower_case,
            dtype=dtype,
        )
        return init.encoder, init.vocabulary, init.lower_case, None
    from keras_bert import BertConfig, BertEncoder

    vocabulary = load_vocabulary(config.vocab_file)
    bert_config = BertConfig.preset(config.model, vocab_size=len(vocabulary))
    lower_case = True if config.lower_case is None else config.lower_case
    return BertEncoder(bert_config, dtype=dtype), vocabulary, lower_case, None


def _fine_tuned(config, directory):
    """`_load_encoder` of a fine-tuned model/ `directory`: its task must be the run's (the head
    carries over); its vocabulary and casing are used."""
    from keras_bert.checkpoints.task_model import load_task_model
    from keras_bert.text.vocab import load_vocabulary

    model, info, vocab_file = load_task_model(directory)
    if info.get("task") != config.task_object.name:
        raise ValueError(
            f"init_checkpoint={config.init_checkpoint} is a model fine-tuned on "
            f"{info.get('task')!r}, not on {config.task_object.name!r}: continue a model of the "
            f"same task, or start from its pre-trained checkpoint."
        )
    vocabulary = load_vocabulary(config.vocab_file or vocab_file)
    return model.encoder, vocabulary, info["lower_case"], model


def _copy_head(model, tuned):
    """The fine-tuned model `tuned`'s weights into the task model built around its encoder."""
    weights = tuned.get_weights()
    if [w.shape for w in weights] != [tuple(v.shape) for v in model.weights]:
        raise ValueError(
            "init_checkpoint's fine-tuned model does not fit this run's task model (another "
            "head): start from its pre-trained checkpoint."
        )
    model.set_weights(weights)


def _read(config, split, limit):
    task = config.task_object
    file = (
        config.train_file
        if split == task.train_split
        else config.eval_file
        if split in task.eval_splits
        else None
    )
    examples = task.read(config.data_dir, split, use_tfds=config.tfds, file=file)
    return examples[:limit] if limit else examples


def load_splits(config, tokenizer):
    """(train, eval_sets): the training split's (examples, FeatureSet) if do_train (else None),
    and {split: (examples, FeatureSet)} of the eval splits if do_train or do_eval. Training is
    read first: a task may learn its label set there (text_classification) and check dev
    against it."""
    task = config.task_object
    train = (
        load_split(config, tokenizer, task.train_split, config.max_train_examples)
        if config.do_train
        else None
    )
    eval_sets = (
        {s: load_split(config, tokenizer, s, config.max_eval_examples) for s in task.eval_splits}
        if (config.do_eval or config.do_train)
        else {}
    )
    return train, eval_sets


def encoder_and_tokenizer(run):
    """(encoder, tokenizer, fine-tuned model or None): the encoder in the strategy's scope, and
    the tokenizer of its vocabulary and casing, checked against the task and the run's
    seq_length (see `_load_encoder`)."""
    from keras_bert.text.tokenizer import BertTokenizer

    config = run.config
    with run.strategy.scope():
        encoder, vocabulary, lower_case, tuned = _load_encoder(config, run.dtype)
    tokenizer = BertTokenizer(vocabulary, lower_case=lower_case)
    config.task_object.check_vocabulary(tokenizer)
    if config.lora_rank is not None:  # Before training writes anything to model_dir.
        lora.check_rank(config.lora_rank, encoder.config.hidden_size)
    if config.seq_length > encoder.config.max_position_embeddings:
        raise ValueError(
            f"seq_length {config.seq_length} exceeds the model's max_position_embeddings "
            f"{encoder.config.max_position_embeddings}."
        )
    return encoder, tokenizer, tuned


def load_split(config, tokenizer, split, limit):
    """(examples, FeatureSet) of `split`, its first `limit` examples if given."""
    task = config.task_object
    started = time.perf_counter()
    examples = _read(config, split, limit)
    feats = task.encode(examples, tokenizer, config.seq_length, training=split == task.train_split)
    logging.info(
        "%s %s: %d examples -> %d features in %.1f s",
        task.name,
        split,
        len(examples),
        feats.num_features,
        time.perf_counter() - started,
    )
    return examples, feats


def build_and_compile(run, encoder, num_train_steps, train=None, tuned=None):
    """(task model, the Keras model that trains: the task model itself, compiled as `fit`
    compiles it with the run's optimizer, or with quantization_aware a
    `QuantizationAwareTrainer` around it whose ranges start from the first batch of `train`
    (examples, FeatureSet)); the newest checkpoint restored; the head of `tuned` (a fine-tuned
    task model around `encoder`) copied; with lora_rank, LoRA on the encoder (the rest of it
    frozen) before the optimizer is made; a new regression head starts at the mean training
    score (`center_regression_head`)."""
    config, task = run.config, run.config.task_object
    rank, alpha = _lora_settings(run)
    with run.strategy.scope():
        model = task.build_model(encoder, config.dropout)
        if train and task.info().get("problem") == "regression":
            center_regression_head(model, train[1].labels["label"])
        if tuned is not None:
            _copy_head(model, tuned)
        if rank is not None:
            lora.enable_lora(encoder, rank, alpha)
        if _quantization_aware(run) and train:
            trainer = quantization_aware.QuantizationAwareTrainer(task, model)
            trainer.initialize_ranges(quantization_aware.first_batch(config, train[1]))
        else:
            trainer = model
    trainable = lora.count_parameters(model.trainable_weights)
    full = lora.full_finetuning_parameters(model)
    logging.info(
        "Trainable parameters: %d of full fine-tuning's %d (%.2f%%)",
        trainable,
        full,
        100 * trainable / full,
    )
    training_run.compile_and_restore(
        run,
        model,
        num_train_steps,
        int(num_train_steps * config.warmup_proportion),
        run.path("checkpoints"),
        keras_model=trainer,
    )
    return model, trainer


def _lora_settings(run):
    """(lora_rank, lora_alpha) of the run, kept in `<model_dir>/lora.json` from its first start:
    a run resumed without --lora_rank restores its LoRA model; other LoRA settings than the
    recorded ones are an error (the checkpoints would not fit)."""
    config, path = run.config, run.path(LORA_FILE)
    given = {"lora_rank": config.lora_rank, "lora_alpha": config.lora_alpha}
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            recorded = json.load(f)
        if config.lora_rank is None:
            given = recorded
        elif recorded != given:
            raise ValueError(
                f"{config.model_dir} holds a run with {recorded}, not {given}: resume it with its "
                f"own settings, or use another model_dir."
            )
    elif run.chief:
        write_atomic(path, json.dumps(given))
    return given["lora_rank"], given["lora_alpha"]


def _quantization_aware(run):
    """The run's quantization_aware, kept in `<model_dir>/quantization_aware.json` from the first
    start of a quantization-aware run: resuming it without the flag (its checkpoints hold the
    activation ranges) is an error naming it."""
    path = run.path(QUANTIZATION_AWARE_FILE)
    if tf.io.gfile.exists(path) and not run.config.quantization_aware:
        raise ValueError(
            f"{run.config.model_dir} holds a quantization-aware run: resume it with "
            f"quantization_aware (--quantization_aware), or use another model_dir."
        )
    if run.config.quantization_aware and run.chief and not tf.io.gfile.exists(path):
        write_atomic(path, json.dumps({"quantization_aware": True}))
    return run.config.quantization_aware
