"""Fine-tuning runner and command line: one code path for every task (paper §4, §5.3).

    python -m keras_bert.tasks.finetune --task=mrpc --data_dir=glue/MRPC \\
        --init_checkpoint=uncased_L-12_H-768_A-12/ --model_dir=runs/mrpc --do_train --do_eval --do_predict

The training half is the pre-training runner's: `keras_bert.training` strategies, optimizer and
schedule, atomic checkpoints with exact resume, TensorBoard, progress and the curve plot. Batches
hold examples of similar length padded to their own longest one (or, under XLA and on TPU, to the
smallest of a few fixed lengths). Text stays on the host: tokenization runs in `tf.data`, before
anything reaches the strategy.

`--model_dir` receives:
- `checkpoints/` (the training state; running again resumes where a run stopped), `best.json` and
  `best-<step>/` (the weights of the best epoch by the task's main metric), `eval_history.json`;
- `eval_results.json`: task, split, step, epoch and the metrics of the kept (best) model;
- `predictions/`: the task's prediction files (GLUE submission files, SQuAD predictions.json, ...);
- `model/`: `model.keras` (the task model), `task.json` (task, labels, casing, sequence length,
  everything export needs) and `vocab.txt`;
- `tensorboard/`, `history.json`, `training_curve.png`, `summary.json`.
"""

import dataclasses
import json
import math
import os
import time
import weakref

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.tasks import features as feature_lib
from keras_bert.tasks import registry
from keras_bert.training import callbacks, checkpointing, distribute, optimizers, plots
from keras_bert.training.io_utils import write_atomic

PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")
# The paper's GLUE recipe (§4.1, A.3); tasks override some of it (Task.recipe).
RECIPE = {"seq_length": 128, "batch_size": 32, "learning_rate": 2e-5, "num_train_epochs": 3}
TASK_FILE = "task.json"
# FinetuneConfig fields handed to the task's constructor (those it takes).
TASK_OPTIONS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length", "null_score_diff_threshold",
                "document_context", "entity_types")
MODEL_FILE = "model.keras"


@dataclasses.dataclass
class FinetuneConfig:
    """Settings of a fine-tuning run (the command-line flags have the same names).

    Args:
        task: str. A task name of `keras_bert.tasks.registry` (cola, sst2, mrpc, ...).
        data_dir: str. The task's folder of its benchmark distribution (e.g. glue/MRPC).
        tfds: bool. Read the data from tensorflow-datasets instead of data_dir.
        train_file, eval_file: str or None. Files replacing the usual names in data_dir.
        init_checkpoint: str. Google TF1 checkpoint, Hugging Face directory or the model_dir
            of `run_pretraining`; its vocabulary and casing are used unless given below.
        model: str or None. A BertConfig preset to start from random weights instead
            (needs vocab_file).
        vocab_file: str or None. lower_case: bool or None (None: from the checkpoint).
        model_dir: str. The run directory (see the module docstring).
        do_train, do_eval, do_predict: bool.
        seq_length, batch_size, learning_rate, num_train_epochs: the recipe; None takes the
            task's default (GLUE: 128, 32, 2e-5, 3).
        eval_batch_size: int or None (default batch_size).
        warmup_proportion: float. Linear warmup over this fraction of the steps.
        optimizer: "adam_weight_decay" (the original BERT optimizer), "adamw" or "lamb".
        weight_decay, clip_norm, dropout: floats (0.01, 1.0, 0.1).
        strategy, tpu, mixed_precision, jit_compile: as for pre-training.
        buckets: str or None. Comma-separated fixed padded lengths; default: pad each batch
            to its longest example, except under jit_compile or TPU, where the lengths of
            `features.DEFAULT_BUCKETS` below seq_length and seq_length itself are used.
        steps_per_loop: int or None. Update steps per logging loop (a divisor of an epoch).
        checkpoint_every: int or None. Save every this many steps, rounded to a loop (and
            always at the end of an epoch).
        keep_checkpoints: int. seed: int. verbose, plot: bool.
        max_train_examples, max_eval_examples: int or None. Use only the first examples.
        doc_stride, max_query_length, n_best_size, max_answer_length, null_score_diff_threshold:
            SQuAD's windows and answer search (the original's 128, 64, 20, 30, 0.0).
        document_context: bool. NER: each sentence in the middle of its document's text.
        entity_types: str or None. NER: comma-separated types (default PER,ORG,LOC,MISC).
    """

    task: str = None
    data_dir: str = None
    tfds: bool = False
    train_file: str = None
    eval_file: str = None
    init_checkpoint: str = None
    model: str = None
    vocab_file: str = None
    lower_case: bool = None
    model_dir: str = None
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    seq_length: int = None
    batch_size: int = None
    eval_batch_size: int = None
    learning_rate: float = None
    num_train_epochs: int = None
    warmup_proportion: float = 0.1
    optimizer: str = "adam_weight_decay"
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    dropout: float = 0.1
    strategy: str = "default"
    tpu: str = None
    mixed_precision: str = "none"
    jit_compile: bool = False
    buckets: str = None
    steps_per_loop: int = None
    checkpoint_every: int = None
    keep_checkpoints: int = 2
    seed: int = 0
    verbose: bool = True
    plot: bool = True
    max_train_examples: int = None
    max_eval_examples: int = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    document_context: bool = False
    entity_types: str = None

    def __post_init__(self):
        self.task_object = registry.get_task(self.task, **{name: getattr(self, name) for name in TASK_OPTIONS})
        if not self.model_dir:
            raise ValueError("model_dir is required (checkpoints, results, predictions and the model go there).")
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("Nothing to do: pass at least one of do_train, do_eval, do_predict.")
        if not self.init_checkpoint and not (self.model and self.vocab_file):
            raise ValueError("Pass init_checkpoint (a Google, Hugging Face or pre-training run checkpoint), "
                             "or model (a BertConfig preset) with vocab_file to start from random weights.")
        if self.mixed_precision not in PRECISIONS:
            raise ValueError(f"mixed_precision must be one of {PRECISIONS}, got {self.mixed_precision!r}.")
        for name, value in RECIPE.items():
            if getattr(self, name) is None:
                setattr(self, name, self.task_object.recipe.get(name, value))
        self.eval_batch_size = self.eval_batch_size or self.batch_size
        for name in ("seq_length", "batch_size", "eval_batch_size", "num_train_epochs", "keep_checkpoints"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if not 0 <= self.warmup_proportion < 1:
            raise ValueError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}.")

    @property
    def fixed_shapes(self):
        """True where every new input shape compiles anew (XLA, TPU)."""
        return self.jit_compile or self.strategy == "tpu"

    def bucket_lengths(self):
        """The fixed padded lengths, or None to pad each batch to its longest example."""
        if self.buckets:
            lengths = sorted({int(b) for b in str(self.buckets).split(",") if b.strip()})
            if not lengths or lengths[0] < 2:
                raise ValueError(f"buckets must be lengths >= 2, got {self.buckets!r}.")
            return [b for b in lengths if b < self.seq_length] + [self.seq_length]
        if self.fixed_shapes:
            return [b for b in feature_lib.DEFAULT_BUCKETS if b < self.seq_length] + [self.seq_length]
        return None


@keras.saving.register_keras_serializable(package="keras_bert")
class TaskTrainer(keras.Model):
    """Trains a task model with its task's loss, averaged over the examples of all replicas.

    Args:
        task: a `keras_bert.tasks.task.Task`.
        model: the task model (`task.build_model(...)`); it is what gets saved and exported.
    """

    def __init__(self, task, model, **kwargs):
        super().__init__(**kwargs)
        self.task = task
        self.model = model
        self.built = True  # The task model is built; this wrapper adds no weights.

    def call(self, inputs, training=False):
        return self.model(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        total, count = self.task.loss_sums(y, y_pred)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            count = context.all_reduce("sum", count)
        # The global mean's share of this replica: Keras sums the replicas' gradients.
        loss = total / tf.maximum(count, 1.0)
        extra = self.model.losses
        if extra:
            loss = loss + tf.add_n([tf.cast(v, loss.dtype) for v in extra])
        return loss


def _load_encoder(config, dtype):
    """(encoder, vocabulary, lower_case) from init_checkpoint, or a fresh preset encoder."""
    from keras_bert.tasks.init_checkpoint import load_init_checkpoint
    from keras_bert.text.vocab import load_vocabulary

    if config.init_checkpoint:
        init = load_init_checkpoint(config.init_checkpoint, vocab_file=config.vocab_file,
                                    lower_case=config.lower_case, dtype=dtype)
        return init.encoder, init.vocabulary, init.lower_case
    from keras_bert import BertConfig, BertEncoder
    vocabulary = load_vocabulary(config.vocab_file)
    bert_config = BertConfig.preset(config.model, vocab_size=len(vocabulary))
    lower_case = True if config.lower_case is None else config.lower_case
    return BertEncoder(bert_config, dtype=dtype), vocabulary, lower_case


def _read(config, split, limit):
    task = config.task_object
    file = config.train_file if split == task.train_split else config.eval_file if split in task.eval_splits else None
    examples = task.read(config.data_dir, split, use_tfds=config.tfds, file=file)
    return examples[:limit] if limit else examples


def _steps_per_loop(config, steps_per_epoch):
    if config.steps_per_loop:
        if steps_per_epoch % config.steps_per_loop:
            raise ValueError(f"steps_per_loop {config.steps_per_loop} must divide the {steps_per_epoch} steps "
                             f"of an epoch.")
        return config.steps_per_loop
    return max(d for d in range(1, min(100, steps_per_epoch) + 1) if steps_per_epoch % d == 0)


def predict(model, task, features, batch_size, buckets=None, strategy=None, jit_compile=False):
    """The task model's outputs on every feature, in feature order.

    Batches are sorted by length and padded as in training. Outputs a task lists in
    `token_outputs` ([B, S, ...]) come back as a list of one array per feature, cut to its
    tokens; the others as one array [N, ...].
    """
    fixed = bool(buckets) and (jit_compile or isinstance(strategy, tf.distribute.TPUStrategy))
    batches, padded = feature_lib.batch_plan(features.lengths, batch_size, buckets=buckets)
    data = feature_lib.make_dataset(features, batches, padded, pad_batch_to=batch_size if fixed else None,
                                    label_keys=())
    call = _predict_function(model, strategy, jit_compile)
    token_outputs = set(getattr(task, "token_outputs", ()))
    lengths = features.lengths
    collected = {}
    for index, (x, _) in zip(batches, data):
        out = call(x)
        if isinstance(strategy, tf.distribute.TPUStrategy):  # Every replica ran the whole batch.
            out = {k: strategy.experimental_local_results(v)[0] for k, v in out.items()}
        for name, value in out.items():
            value = value.numpy()[:len(index)]
            rows = collected.setdefault(name, [None] * features.num_features)
            for row, i in enumerate(index):
                rows[i] = value[row, :lengths[i]] if name in token_outputs else value[row]
    return {k: v if k in token_outputs else np.stack(v) for k, v in collected.items()}


_PREDICT_FUNCTIONS = weakref.WeakKeyDictionary()  # model -> {(strategy id, jit_compile): tf.function}


def _predict_function(model, strategy, jit_compile):
    """The model's inference `tf.function`, made once per model (XLA compiles a bucket's shape once
    over all epochs' evaluations). On TPU it runs through `strategy.run`."""
    cache = _PREDICT_FUNCTIONS.setdefault(model, {})
    key = (id(strategy), jit_compile)
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


def _save_best(model, model_dir, step, epoch, metrics):
    """Writes the weights as `best-<step>/` and points `best.json` at them (atomically)."""
    path = os.path.join(model_dir, f"best-{step}", "weights")
    tf.train.Checkpoint(model=model).write(path)
    write_atomic(os.path.join(model_dir, "best.json"),
                 json.dumps({"step": step, "epoch": epoch, "path": path, "metrics": metrics}, indent=1))
    for name in tf.io.gfile.listdir(model_dir):
        name = name.rstrip("/")
        if name.startswith("best-") and name != f"best-{step}":
            tf.io.gfile.rmtree(os.path.join(model_dir, name))


def _read_json(path, default):
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)
    return default


def _evaluate(config, model, strategy, eval_sets):
    """Metrics of every eval split, suffixed as the task names them (MNLI: _matched ...)."""
    task = config.task_object
    metrics = {}
    for split, (examples, feats) in eval_sets.items():
        outputs = predict(model, task, feats, config.eval_batch_size, config.bucket_lengths(), strategy,
                          config.jit_compile)
        for name, value in task.evaluate(examples, feats, outputs).items():
            metrics[name + task.eval_splits[split]] = float(value)
    return metrics


def save_task_model(model, config, vocabulary, lower_case, path):
    """Writes `model.keras`, `task.json` and `vocab.txt` to `path` as one new directory."""
    task = config.task_object
    info = {"task": task.name, "seq_length": int(config.seq_length), "lower_case": bool(lower_case),
            "vocab_file": "vocab.txt", "model_file": MODEL_FILE, "model_class": type(model).__name__,
            "keras_bert_version": _version(), **task.info()}
    tmp = path.rstrip("/") + ".tmp"
    if tf.io.gfile.exists(tmp):
        tf.io.gfile.rmtree(tmp)
    tf.io.gfile.makedirs(tmp)
    model.save(os.path.join(tmp, MODEL_FILE))  # Keras writes gs:// paths through tf.io.gfile.
    with tf.io.gfile.GFile(os.path.join(tmp, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocabulary))
    with tf.io.gfile.GFile(os.path.join(tmp, TASK_FILE), "w") as f:
        f.write(json.dumps(info, indent=1))
    if tf.io.gfile.exists(path):
        old = path.rstrip("/") + ".old"
        if tf.io.gfile.exists(old):
            tf.io.gfile.rmtree(old)
        tf.io.gfile.rename(path, old)
        tf.io.gfile.rename(tmp, path)
        tf.io.gfile.rmtree(old)
    else:
        tf.io.gfile.rename(tmp, path)
    return path


def _version():
    import keras_bert
    return keras_bert.__version__


def run_finetuning(config=None, **overrides):
    """Fine-tune, evaluate and predict as `config` says; resumes from `model_dir`.

    Args:
        config: `FinetuneConfig`, or None to build one from `overrides`.
        **overrides: `FinetuneConfig` fields.

    Returns:
        dict: `eval` (metrics of the kept model), `steps`, `start_step`, `best` (its epoch,
        step and metrics), `history` (training loops), `eval_history` (per epoch),
        `predictions` (written files), `model_path`, `examples_per_second`, `model` (the
        trained task model).
    """
    config = dataclasses.replace(config, **overrides) if config is not None else FinetuneConfig(**overrides)
    task = config.task_object
    keras.utils.set_random_seed(config.seed)
    strategy = distribute.get_strategy(config.strategy, config.tpu)
    chief = distribute.is_chief(strategy)
    tf.io.gfile.makedirs(config.model_dir)
    dtype = "float32" if config.mixed_precision == "none" else config.mixed_precision

    with strategy.scope():
        encoder, vocabulary, lower_case = _load_encoder(config, dtype)
    from keras_bert.text.tokenizer import BertTokenizer
    tokenizer = BertTokenizer(vocabulary, lower_case=lower_case)
    task.check_vocabulary(tokenizer)
    if config.seq_length > encoder.config.max_position_embeddings:
        raise ValueError(f"seq_length {config.seq_length} exceeds the model's max_position_embeddings "
                         f"{encoder.config.max_position_embeddings}.")

    def load(split, limit):
        started = time.perf_counter()
        examples = _read(config, split, limit)
        feats = task.encode(examples, tokenizer, config.seq_length, training=split == task.train_split)
        logging.info("%s %s: %d examples -> %d features in %.1f s", task.name, split, len(examples),
                     feats.num_features, time.perf_counter() - started)
        return examples, feats

    eval_sets = {s: load(s, config.max_eval_examples) for s in task.eval_splits} \
        if (config.do_eval or config.do_train) else {}
    train = load(task.train_split, config.max_train_examples) if config.do_train else None

    buckets = config.bucket_lengths()
    replicas = strategy.num_replicas_in_sync
    steps_per_epoch = 1
    if train:
        n = train[1].num_features
        steps_per_epoch = n // config.batch_size if config.fixed_shapes else math.ceil(n / config.batch_size)
        if steps_per_epoch < 1:
            raise ValueError(f"{n} training features are fewer than one batch of {config.batch_size}.")
    num_train_steps = steps_per_epoch * config.num_train_epochs
    loop = _steps_per_loop(config, steps_per_epoch)

    with strategy.scope():
        model = task.build_model(encoder, config.dropout)
        trainer = TaskTrainer(task, model)
        optimizer = optimizers.create_optimizer(
            config.learning_rate, num_train_steps, int(num_train_steps * config.warmup_proportion),
            variables=model.trainable_variables, optimizer=config.optimizer, weight_decay=config.weight_decay,
            clip_norm=config.clip_norm, loss_scale=config.mixed_precision == "mixed_float16")
        optimizer.build(model.trainable_variables)
        trainer.compile(optimizer=optimizer, jit_compile=config.jit_compile)
        distribute.adapt_keras_model(trainer, strategy)
        checkpoint = checkpointing.TrainingCheckpoint(os.path.join(config.model_dir, "checkpoints"), trainer,
                                                      optimizer, max_to_keep=config.keep_checkpoints,
                                                      strategy=strategy)
        start_step = checkpoint.restore_latest()

    history_path = os.path.join(config.model_dir, "history.json")
    eval_history_path = os.path.join(config.model_dir, "eval_history.json")
    log_dir = os.path.join(config.model_dir, "tensorboard")
    eval_history = [e for e in _read_json(eval_history_path, []) if e["step"] <= start_step]
    history = [h for h in _read_json(history_path, []) if h["step"] <= start_step] if start_step else []
    log = callbacks.TrainingLog(num_train_steps, config.batch_size, history=history,
                                log_dir=os.path.join(log_dir, "train") if chief else None,
                                history_path=history_path if chief else None, verbose=config.verbose and chief)
    every = config.checkpoint_every or steps_per_epoch
    saver = callbacks.PeriodicCheckpoint(checkpoint, max(loop, every // loop * loop), num_train_steps)

    if train and start_step < num_train_steps:
        _check_resume(start_step, loop)
        for epoch in range(start_step // steps_per_epoch, config.num_train_epochs):
            done = int(optimizer.iterations.numpy()) - epoch * steps_per_epoch
            batches, padded = feature_lib.batch_plan(
                train[1].lengths, config.batch_size, shuffle=True, seed=config.seed, epoch=epoch,
                drop_remainder=config.fixed_shapes, buckets=buckets)
            batches, padded = batches[done:steps_per_epoch], padded[done:steps_per_epoch]
            data = _distribute(strategy, train[1], batches, padded, task.label_keys)
            first_loop = epoch * steps_per_epoch // loop
            trainer.fit(data, epochs=(epoch + 1) * steps_per_epoch // loop,
                        initial_epoch=first_loop + done // loop, steps_per_epoch=loop, callbacks=[log, saver],
                        verbose=0, shuffle=False)
            step = int(optimizer.iterations.numpy())
            if eval_sets and chief:  # Evaluation is local: other workers need not wait for it.
                metrics = _evaluate(config, model, strategy, eval_sets)
                eval_history.append({"epoch": epoch + 1, "step": step, **metrics})
                log.write_eval(step, metrics)
                logging.info("epoch %d (step %d): %s", epoch + 1, step,
                             ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
                best = _read_json(os.path.join(config.model_dir, "best.json"), None)
                if best is None or metrics[task.main_metric] > best["metrics"][task.main_metric]:
                    _save_best(model, config.model_dir, step, epoch + 1, metrics)
                write_atomic(eval_history_path, json.dumps(eval_history, indent=1))
            if step % saver.every:  # PeriodicCheckpoint saved already on multiples of `every`.
                saver.last_path = checkpoint.save(step) or saver.last_path

    step = int(optimizer.iterations.numpy())
    best = _read_json(os.path.join(config.model_dir, "best.json"), None) if chief else None
    if best is not None:
        tf.train.Checkpoint(model=model).read(best["path"]).assert_existing_objects_matched()
        logging.info("Kept the model of epoch %d (step %d): %s %.4f", best["epoch"], best["step"],
                     task.main_metric, best["metrics"][task.main_metric])

    results = {}
    if config.do_eval and eval_sets and chief:
        results = best["metrics"] if best is not None and config.do_train else \
            _evaluate(config, model, strategy, eval_sets)
        record = {"task": task.name, "split": ",".join(eval_sets), "step": best["step"] if best else step,
                  "epoch": best["epoch"] if best else None, **results}
        write_atomic(os.path.join(config.model_dir, "eval_results.json"), json.dumps(record, indent=1))
    written = []
    if config.do_predict and chief:
        out_dir = os.path.join(config.model_dir, "predictions")
        tf.io.gfile.makedirs(out_dir)
        for split in task.predict_splits:
            examples, feats = load(split, None)
            outputs = predict(model, task, feats, config.eval_batch_size, buckets, strategy, config.jit_compile)
            written += task.write_predictions(split, examples, feats, outputs, out_dir)
    model_path = None
    if chief:
        model_path = save_task_model(model, config, vocabulary, lower_case, os.path.join(config.model_dir, "model"))
    plot = None
    if chief and config.plot and log.history:
        plot = _plot(log.history, eval_history, task.name, os.path.join(config.model_dir, "training_curve.png"))
    new = [h for h in log.history if h["step"] > start_step]
    timed = new[1:] or new  # The first loop includes tracing.
    seconds = sum(h["seconds"] for h in timed)
    summary = {"task": task.name, "eval": results, "steps": step, "start_step": start_step, "best": best,
               "eval_history": eval_history, "predictions": written, "model_path": model_path, "plot": plot,
               "tensorboard_dir": log_dir, "examples_per_second": (
                   sum(h["examples_per_second"] * h["seconds"] for h in timed) / seconds if seconds else None)}
    if chief:
        write_atomic(os.path.join(config.model_dir, "summary.json"), json.dumps(summary, indent=1))
    summary["history"] = log.history
    summary["model"] = model
    summary["replicas"] = replicas
    return summary


def _plot(history, eval_history, task_name, path):
    """Training loss, the dev metrics of each epoch and the learning rate against the step."""
    metric_names = [k for k in (eval_history[-1] if eval_history else {}) if k not in ("step", "epoch")]
    points = history + [{"step": e["step"], **{f"dev {k}": e[k] for k in metric_names}} for e in eval_history]
    panels = (("loss", ("loss",)), ("dev metrics", tuple(f"dev {k}" for k in metric_names)),
              ("learning rate", ("learning_rate",)))
    return plots.plot_history(points, path, title=f"BERT fine-tuning: {task_name}", panels=panels)


def _check_resume(start_step, loop):
    if start_step % loop:
        raise ValueError(f"The checkpoint is at step {start_step}, not a multiple of the {loop} steps of a "
                         f"logging loop; resume with the settings it was made with.")


def _distribute(strategy, feats, batches, padded, label_keys):
    """The training dataset of a batch plan, split over the strategy's replicas (row r::R
    of each global batch to replica r, every replica padded to the global batch's length)."""
    replicas = strategy.num_replicas_in_sync
    if replicas == 1 and not isinstance(strategy, tf.distribute.TPUStrategy):
        return feature_lib.make_dataset(feats, batches, padded, label_keys=label_keys)

    def dataset_fn(context):
        per_pipeline = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * per_pipeline
        return feature_lib.make_dataset(feats, batches, padded, num_replicas=replicas,
                                        replica_range=(first, first + per_pipeline), label_keys=label_keys)

    return strategy.distribute_datasets_from_function(dataset_fn)


# === Command line ===

_FLAG_HELP = {
    "task": "Task name: cola sst2 mrpc stsb qqp mnli qnli rte wnli squad1 squad2 conll2003 swag.",
    "data_dir": "The task's data folder in its benchmark's own layout (e.g. glue/MRPC).",
    "init_checkpoint": "Google TF1 checkpoint, Hugging Face directory or run_pretraining model_dir.",
    "model_dir": "Run directory: checkpoints, eval_results.json, predictions/, model/, logs.",
    "model": "BertConfig preset to start from random weights (with --vocab_file) instead.",
    "buckets": "Comma-separated fixed padded lengths (default: per-batch padding; fixed under XLA/TPU).",
}


def define_flags():
    """Define the flags (again on each call: another command line may define the same names)."""
    from absl import flags

    from keras_bert import cli
    from keras_bert.training.distribute import STRATEGIES
    for field in dataclasses.fields(FinetuneConfig):
        name, default = field.name, field.default
        help_text = _FLAG_HELP.get(name, f"FinetuneConfig.{name}.")
        if name == "strategy":
            cli.define(flags.DEFINE_enum, name, default, STRATEGIES, help_text)
        elif name == "mixed_precision":
            cli.define(flags.DEFINE_enum, name, default, PRECISIONS, help_text)
        elif name == "optimizer":
            cli.define(flags.DEFINE_enum, name, default, optimizers.OPTIMIZERS, help_text)
        elif field.type is bool:
            cli.define(flags.DEFINE_bool, name, default, help_text)
        elif field.type is int:
            cli.define(flags.DEFINE_integer, name, default, help_text)
        elif field.type is float:
            cli.define(flags.DEFINE_float, name, default, help_text)
        else:
            cli.define(flags.DEFINE_string, name, default, help_text)


def config_from_flags():
    """A `FinetuneConfig` from the parsed flags (flag name = field name)."""
    from absl import flags
    return FinetuneConfig(**{f.name: flags.FLAGS[f.name].value for f in dataclasses.fields(FinetuneConfig)})


def main(argv):
    del argv
    summary = run_finetuning(config_from_flags())
    print(json.dumps({k: v for k, v in summary.items() if k not in ("model", "history")}, indent=1))


def console_main():
    """Entry point (`python -m keras_bert.tasks.finetune`, `keras-bert-finetune`)."""
    from keras_bert import cli
    cli.run_command(__doc__, define_flags, ["task", "model_dir"], main)


if __name__ == "__main__":
    console_main()
