"""A task model's outputs (`predict`, batches sorted by length as in training), its metrics on
the eval splits (`evaluate_splits`) and the fine-tuning runner's final evaluation and prediction
files (`keras_bert.tasks.finetuning`)."""

import json
import weakref
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from keras_bert.io_utils import write_atomic
from keras_bert.tasks import documents
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.finetuning_setup import load_split
from keras_bert.tasks.long_text import document_level
from keras_bert.training.memory import out_of_memory_hint


def predict(model, task, features, batch_size, buckets=None, strategy=None, jit_compile=False):
    """The task model's outputs on every feature, in feature order.

    Batches are sorted by length and padded as in training. Outputs a task lists in
    `token_outputs` ([B, S, ...]) come back as a list of one array per feature, cut to its
    tokens; the others as one array [N, ...]. A document-level model
    (`long_text.document_level`) gives `logits` per example [N_examples, C] instead, from
    batches of whole documents of at most `batch_size` windows.
    """
    if document_level(task):
        return _predict_documents(model, task, features, batch_size, buckets, strategy, jit_compile)
    fixed = bool(buckets) and (
        jit_compile or is_jax() or isinstance(strategy, tf.distribute.TPUStrategy)
    )
    batches, padded = feature_lib.batch_plan(features.lengths, batch_size, buckets=buckets)
    data = feature_lib.make_dataset(
        features, batches, padded, pad_batch_to=batch_size if fixed else None, label_keys=()
    )
    call = _predict_function(model, strategy, jit_compile)
    token_outputs = set(getattr(task, "token_outputs", ()))
    lengths = features.lengths
    collected = {}
    # strict: read the dataset to its end. A tf.data iterator dropped before its end waits at
    # deletion for the autotuning thread to wake: seconds to a minute idle after a long pass.
    for index, (x, _) in zip(batches, data, strict=True):
        out = call(x)
        if isinstance(strategy, tf.distribute.TPUStrategy):  # Every replica ran the whole batch.
            out = {k: strategy.experimental_local_results(v)[0] for k, v in out.items()}
        for name, value in out.items():
            value = np.asarray(keras.ops.convert_to_numpy(value))[: len(index)]
            rows = collected.setdefault(name, [None] * features.num_features)
            for row, i in enumerate(index):
                rows[i] = value[row, : lengths[i]] if name in token_outputs else value[row]
    return {k: v if k in token_outputs else np.stack(v) for k, v in collected.items()}


def _predict_documents(model, task, features, batch_size, buckets, strategy, jit_compile):
    """`predict` of a document-level model (`documents.predict_documents`)."""
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    inner = _predict_function(model, strategy, jit_compile)

    def call(x):
        out = inner(x)
        if tpu:  # Every replica ran the whole batch.
            return {k: strategy.experimental_local_results(v)[0].numpy() for k, v in out.items()}
        return {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in out.items()}

    return documents.predict_documents(
        call,
        features,
        batch_size,
        buckets=buckets,
        fixed=bool(buckets) and (jit_compile or tpu or is_jax()),
        max_windows=task.options.max_windows,
    )


_PREDICT_FUNCTIONS: weakref.WeakKeyDictionary[keras.Model, dict[Any, Any]] = (
    weakref.WeakKeyDictionary()
)  # model -> {(strategy id, jit_compile): tf.function}


def _predict_function(model, strategy, jit_compile):
    """The model's inference `tf.function`, made once per model (XLA compiles a bucket's shape once
    over all epochs' evaluations). On TPU it runs through `strategy.run`; on JAX it is a
    `jax.jit` program (`_jax_predict_function`)."""
    cache = _PREDICT_FUNCTIONS.setdefault(model, {})
    key = (id(strategy), jit_compile)
    if key not in cache and is_jax():
        cache[key] = _jax_predict_function(model)
    if key not in cache:

        def infer(x):
            return model(x, training=False)

        call = tf.function(infer, jit_compile=jit_compile, reduce_retracing=not jit_compile)
        if isinstance(strategy, tf.distribute.TPUStrategy):

            def replicated(x, inner=call):
                return strategy.run(inner, args=(x,))

            call = tf.function(replicated)
        cache[key] = call
    return cache[key]


def is_jax():
    """True on the JAX backend."""
    return keras.config.backend() == "jax"


def _jax_predict_function(model):
    """The model's inference as one `jax.jit` program per input shape (its variables passed in,
    so later training is seen), run on the current keras.distribution's devices."""
    import jax

    def infer(trainable, non_trainable, x):
        outputs, _ = model.stateless_call(trainable, non_trainable, x, training=False)
        return outputs

    jitted = jax.jit(infer)

    def call(x):
        return jitted(
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            {k: np.asarray(v) for k, v in x.items()},
        )

    return call


def evaluate_splits(config, model, strategy, eval_sets):
    """Metrics of every eval split, suffixed as the task names them (MNLI: _matched ...)."""
    task = config.task_object
    metrics = {}
    for split, (examples, feats) in eval_sets.items():
        outputs = _predict_or_explain(config, model, feats, strategy)
        for name, value in task.evaluate(examples, feats, outputs).items():
            metrics[name + task.eval_splits[split]] = float(value)
    return metrics


def _predict_or_explain(config, model, feats, strategy):
    """`predict` with the run's settings; out of memory names eval_batch_size."""
    with out_of_memory_hint(
        "evaluation", config.eval_batch_size, config.seq_length, "use a smaller eval_batch_size"
    ):
        return predict(
            model,
            config.task_object,
            feats,
            config.eval_batch_size,
            config.bucket_lengths(),
            strategy,
            config.jit_compile,
        )


def final_evaluation(run, model, eval_sets, best, reference=None):
    """The metrics of the kept model (the best epoch's, or evaluated now), in eval_results.json
    (with `reference()`'s entries after them)."""
    config, task = run.config, run.config.task_object
    results = (
        best["metrics"]
        if best is not None and config.do_train
        else evaluate_splits(config, model, run.strategy, eval_sets)
    )
    record = {
        "task": task.name,
        "split": ",".join(eval_sets),
        "step": best["step"] if best else run.step,
        "epoch": best["epoch"] if best else None,
        **results,
        **(reference() if reference is not None else {}),
    }
    write_atomic(run.path("eval_results.json"), json.dumps(record, indent=1))
    return results


def write_predictions(run, model, tokenizer):
    """The task's prediction files of its predict splits in `predictions/`; returns their paths."""
    config, task = run.config, run.config.task_object
    out_dir = run.path("predictions")
    tf.io.gfile.makedirs(out_dir)
    written = []
    for split in task.predict_splits:
        examples, feats = load_split(config, tokenizer, split, None)
        outputs = _predict_or_explain(config, model, feats, run.strategy)
        written += task.write_predictions(split, examples, feats, outputs, out_dir)
    return written
