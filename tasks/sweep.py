"""The paper's fine-tuning protocol for any task: a grid of learning rates (batch sizes, epochs,
optimizers) and random restarts, the best run kept by the task's main dev metric (paper §4.1:
"we selected the best fine-tuning learning rate (among 5e-5, 4e-5, 3e-5, and 2e-5) on the Dev
set"; "for BERT-large we found that fine-tuning was sometimes unstable on small datasets, so we
ran several random restarts and selected the best model on the Dev set").

    keras-bert-finetune --task=rte --data_dir=glue/RTE --init_checkpoint=... \\
        --model_dir=runs/rte --do_train --do_eval --sweep --learning_rates=5e-5,3e-5,2e-5 \\
        --restarts=3

`--model_dir` (the sweep directory) receives:
- one run directory per setting, named by it (`lr3e-05_bs32_ep3_adam_weight_decay_seed1/`), each
  a normal run of `keras_bert.tasks.finetuning.run_finetuning` (checkpoints, eval_results.json,
  model/, ...) plus `sweep_run.json` (its setting, dev metrics and score) once it is finished;
- `best`: a relative symbolic link to the best run's directory (on gs://, where there are no
  links, a one-line file holding its name). Relative, it stays right when the sweep directory is
  copied or moved as a whole (`cp -r`, `cp -a`, `tar`, `rsync -a`, `shutil.copytree`);
  `best_run_dir(model_dir)` resolves either form;
- `eval_results.json`: the task, the metric, the winner (`best_run`, its setting and metrics)
  and every run's setting, score and metrics, and the spread of the score across seeds for the
  winner's setting.

With do_predict, the best run's saved model (`best/model/`) then writes the task's prediction
files into `best/predictions/` (`predict_with_model`).

A killed sweep resumes when run again with the same settings: finished runs (with their
`sweep_run.json`) are kept, the interrupted one resumes from its checkpoint (the runner's own
resume), the rest run. A run directory made with other settings than this sweep's (another
seq_length, data or checkpoint) is an error, never silently reused.
"""

import dataclasses
import itertools
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging

from keras_bert.tasks.config import FinetuneConfig
from keras_bert.training.choices import OPTIMIZERS

# The paper's GLUE learning rates (§4.1); the appendix (A.3) lists 5e-5, 3e-5, 2e-5 for all tasks.
PAPER_LEARNING_RATES = (5e-5, 4e-5, 3e-5, 2e-5)
RESULTS_FILE = "eval_results.json"
BEST = "best"
RUN_FILE = "sweep_run.json"
# FinetuneConfig fields that do not change what a run computes (they may differ on resume) or
# that the grid sets.
_NOT_IN_FINGERPRINT = ("model_dir", "verbose", "plot", "do_predict", "do_eval", "do_train")
_GRID_FIELDS = ("learning_rate", "batch_size", "num_train_epochs", "optimizer", "seed")


@dataclasses.dataclass(frozen=True)
class Grid:
    """The settings a sweep tries: every combination, in this order (seeds vary fastest).

    Args:
        learning_rates: tuple of float. batch_sizes: tuple of int. num_train_epochs: tuple of int.
        optimizers: tuple of str (`keras_bert.training.choices.OPTIMIZERS`).
        seeds: tuple of int (the random restarts: weights of the head, dropout, data order).
    """

    learning_rates: tuple[float, ...]
    batch_sizes: tuple[int, ...]
    num_train_epochs: tuple[int, ...]
    optimizers: tuple[str, ...]
    seeds: tuple[int, ...]

    def settings(self) -> list[dict[str, Any]]:
        """Every combination as a dict of `FinetuneConfig` field -> value."""
        return [
            dict(zip(_GRID_FIELDS, values))
            for values in itertools.product(
                self.learning_rates,
                self.batch_sizes,
                self.num_train_epochs,
                self.optimizers,
                self.seeds,
            )
        ]


def parse_list(text: str | Sequence[Any] | None, kind: type, name: str) -> tuple[Any, ...] | None:
    """A comma-separated flag value ("5e-5,3e-5") or a sequence as a tuple of `kind`; None stays
    None (the default). Raises ValueError naming `name` for an empty list or a bad value."""
    if text is None:
        return None
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    items = [s for s in items if s != ""]
    if not items:
        raise ValueError(f"The sweep's grid is empty: {name} lists no values.")
    try:
        values = tuple(kind(s) for s in items)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a comma-separated list of {kind.__name__}, got {text!r}."
        ) from None
    if len(set(values)) != len(values):
        raise ValueError(f"{name} lists a value twice: {text!r}.")
    return values


def make_grid(
    config: FinetuneConfig,
    learning_rates: Any = None,
    batch_sizes: Any = None,
    num_train_epochs: Any = None,
    optimizers: Any = None,
    seeds: Any = None,
    restarts: int | None = None,
) -> Grid:
    """The sweep's grid; each list a comma-separated string or a sequence, None for its default:
    the paper's learning rates (`PAPER_LEARNING_RATES`), and the config's batch size, epochs,
    optimizer and seed. `restarts=N` means seeds config.seed .. config.seed + N - 1.

    Raises:
        ValueError: an empty list, a bad value, or both seeds and restarts (naming them).
    """
    if seeds is not None and restarts is not None:
        raise ValueError("Pass seeds or restarts, not both.")
    if restarts is not None and int(restarts) < 1:
        raise ValueError(f"The sweep's grid is empty: restarts must be >= 1, got {restarts}.")
    grid = Grid(
        learning_rates=_or(
            parse_list(learning_rates, float, "learning_rates"), PAPER_LEARNING_RATES
        ),
        batch_sizes=_or(parse_list(batch_sizes, int, "batch_sizes"), (config.batch_size,)),
        num_train_epochs=_or(
            parse_list(num_train_epochs, int, "num_train_epochs"), (config.num_train_epochs,)
        ),
        optimizers=_or(parse_list(optimizers, str, "optimizers"), (config.optimizer,)),
        seeds=_or(
            parse_list(seeds, int, "seeds"),
            tuple(range(config.seed, config.seed + int(restarts or 1))),
        ),
    )
    for name, values in (("learning_rates", grid.learning_rates),):
        if any(not v > 0 for v in values):
            raise ValueError(f"{name} must be > 0, got {list(values)}.")
    for name, values in (
        ("batch_sizes", grid.batch_sizes),
        ("num_train_epochs", grid.num_train_epochs),
    ):
        if any(v < 1 for v in values):
            raise ValueError(f"{name} must be >= 1, got {list(values)}.")
    for value in grid.optimizers:
        if value not in OPTIMIZERS:
            raise ValueError(f"optimizers: {value!r} is not one of {', '.join(OPTIMIZERS)}.")
    return grid


def _or(values, default):
    return values if values is not None else tuple(default)


def run_name(setting: dict[str, Any]) -> str:
    """The run directory's name of a grid setting, e.g. lr3e-05_bs32_ep3_adamw_seed1."""
    return (
        f"lr{setting['learning_rate']:g}_bs{setting['batch_size']}_"
        f"ep{setting['num_train_epochs']}_{setting['optimizer']}_seed{setting['seed']}"
    )


class Progress:
    """Which run of how many, and the expected time left, for log lines.

    Args:
        weights: list of float, one per run to do (e.g. its training examples x epochs); the time
            left is the time per weight of the runs finished in this process x the weight left.
        prefix: str put before every line (the suite: "task 2/9 (mrpc)").
    """

    def __init__(self, weights: Sequence[float], prefix: str = ""):
        self.weights = list(weights)
        self.prefix = prefix
        self.done = 0  # Runs finished (or found finished).
        self._timed = [0.0, 0.0]  # (seconds, weight) of the runs trained in this process.

    def line(self, what: str) -> str:
        """`<prefix> run i/n <what>, about <time> left`."""
        left = sum(self.weights[self.done :])
        seconds, weight = self._timed
        eta = f", about {_duration(seconds / weight * left)} left" if weight else ""
        prefix = f"{self.prefix}, " if self.prefix else ""
        return f"{prefix}run {self.done + 1}/{len(self.weights)}: {what}{eta}"

    def finished(self, seconds: float | None) -> None:
        """One run finished after `seconds` of work in this process (None: found finished)."""
        if seconds is not None:
            self._timed[0] += seconds
            self._timed[1] += self.weights[self.done]
        self.done += 1


def _duration(seconds):
    minutes = int(round(seconds / 60))
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def run_sweep(
    config: FinetuneConfig,
    grid: Grid,
    progress: Progress | None = None,
    runner: Callable[..., dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Runs every setting of `grid` (each in its own directory under config.model_dir), keeps the
    best by the task's main dev metric and, with config.do_predict, predicts with it.

    Args:
        config: the `FinetuneConfig` of the runs (its model_dir is the sweep's directory; the
            grid's fields replace its own).
        grid: `Grid` (see `make_grid`).
        progress: `Progress` over the grid's runs (default: one that weighs runs by epochs).
        runner: the function that runs one config (default `run_finetuning`).

    Returns:
        dict, what `eval_results.json` holds (see the module docstring), plus `best_dir`.

    Raises:
        ValueError: the config does not train or evaluate, model_dir holds a single run, or a
            run directory was made with other settings.
    """
    if not config.do_train:
        raise ValueError("A sweep trains each of its runs: pass do_train (and do_eval).")
    model_dir = str(config.model_dir)  # FinetuneConfig requires it.
    if os.path.isdir(os.path.join(model_dir, "checkpoints")):
        raise ValueError(
            f"{config.model_dir} holds a single run (checkpoints/), not a sweep: use another "
            f"model_dir for the sweep."
        )
    if runner is None:
        from keras_bert.tasks.finetuning import run_finetuning as runner
    settings = grid.settings()
    progress = progress or Progress([s["num_train_epochs"] for s in settings])
    runs = [_run_once(config, setting, progress, runner) for setting in settings]
    results = summarize(config, runs)
    _point_best(model_dir, results["best_run"])
    best_dir = os.path.join(model_dir, results["best_run"])
    if config.do_predict:
        results["predictions"] = _predictions(config, best_dir, results["best_run"])
    write_file(os.path.join(model_dir, RESULTS_FILE), json.dumps(results, indent=1))
    logging.info(
        "%s sweep: best %s, %s %.4f (of %d runs)",
        config.task,
        results["best_run"],
        results["metric"],
        results["best"]["score"],
        len(runs),
    )
    return {**results, "best_dir": best_dir}


def _predictions(config, best_dir, best_run):
    """The best run's prediction files: those of an earlier call if the best run is the same and
    they are all there (a finished sweep started again), else written now."""
    import tensorflow as tf

    before = _read_json(os.path.join(str(config.model_dir), RESULTS_FILE)) or {}
    written = before.get("predictions")
    if before.get("best_run") == best_run and written and all(map(tf.io.gfile.exists, written)):
        return written
    return predict_with_model(config, best_dir)


def predict_with_model(config: FinetuneConfig, run_dir: str) -> list[str]:
    """Writes the task's prediction files (`task.predict_splits`) into `run_dir/predictions/`
    with the run's saved task model (`run_dir/model/`: its weights, vocabulary, casing and
    sequence length), as the runner's do_predict would. Returns the paths written."""
    import tensorflow as tf

    from keras_bert.checkpoints.task_model import load_task_model
    from keras_bert.tasks.finetuning import predict
    from keras_bert.text.tokenizer import BertTokenizer
    from keras_bert.text.vocab import load_vocabulary

    model, info, vocab_file = load_task_model(os.path.join(run_dir, "model"))
    tokenizer = BertTokenizer(load_vocabulary(vocab_file), lower_case=info["lower_case"])
    task = config.task_object
    out_dir = os.path.join(run_dir, "predictions")
    tf.io.gfile.makedirs(out_dir)
    written = []
    for split in task.predict_splits:
        file = config.eval_file if split in task.eval_splits else None  # As the runner reads.
        examples = task.read(config.data_dir, split, use_tfds=config.tfds, file=file)
        feats = task.encode(examples, tokenizer, info["seq_length"])
        outputs = predict(model, task, feats, config.eval_batch_size, config.bucket_lengths())
        written += task.write_predictions(split, examples, feats, outputs, out_dir)
    logging.info("Predictions of %s: %s", run_dir, ", ".join(written))
    return written


def _run_config(config, setting):
    return dataclasses.replace(
        config,
        model_dir=os.path.join(config.model_dir, run_name(setting)),
        do_train=True,
        do_eval=True,
        do_predict=False,
        **setting,
    )


def fingerprint(config: FinetuneConfig) -> dict[str, Any]:
    """The settings of a run that change what it computes (all fields but the model_dir, the
    do_* switches and the display), JSON-able."""
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in _NOT_IN_FINGERPRINT
    }


def _run_once(config, setting, progress, runner):
    """One run of the grid: its recorded result if finished, else trained (or resumed) now."""
    run_config = _run_config(config, setting)
    record_path = os.path.join(run_config.model_dir, RUN_FILE)
    prints = json.loads(json.dumps(fingerprint(run_config), default=str))
    what = f"{config.task} {run_name(setting)}"
    record = _read_json(record_path)
    if record is not None:
        if record["fingerprint"] != prints:
            changed = sorted(k for k in prints if record["fingerprint"].get(k) != prints[k])
            raise ValueError(
                f"{run_config.model_dir} was made with other settings ({', '.join(changed)} "
                f"differ): resume it with its own, or use another model_dir."
            )
        logging.info(
            "%s (finished before: %s %.4f)", progress.line(what), record["metric"], record["score"]
        )
        progress.finished(None)
        return record
    logging.info(progress.line(what))
    _fresh_session()
    started = time.perf_counter()
    summary = runner(run_config)
    metric = config.task_object.main_metric
    if metric not in summary["eval"]:
        raise ValueError(
            f"Run {run_config.model_dir} reported no dev {metric!r}: {summary['eval']}."
        )
    record = {
        "name": run_name(setting),
        "setting": setting,
        "metric": metric,
        "score": float(summary["eval"][metric]),
        "metrics": summary["eval"],
        "best_epoch": (summary.get("best") or {}).get("epoch"),
        "fingerprint": prints,
    }
    write_file(record_path, json.dumps(record, indent=1))
    progress.finished(time.perf_counter() - started)
    return record


def _fresh_session():
    """Frees what earlier runs left in this process (Keras' global state, TensorFlow's graphs):
    without it, dozens of runs in one process (a suite) grow until the system kills it."""
    import gc

    import keras

    keras.backend.clear_session()
    gc.collect()


def _read_json(path):
    """The JSON file at `path` (local or gs://), or None if there is none."""
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def summarize(config: FinetuneConfig, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The sweep's results from its runs' records: the best (first of the highest scores, in grid
    order), every run, and the spread across seeds of the winner's setting."""
    if not runs:
        raise ValueError("The sweep's grid is empty: no runs.")
    scores = [r["score"] for r in runs]
    best_index = max(range(len(runs)), key=lambda i: (_finite(scores[i]), -i))
    best = runs[best_index]
    same = [
        r["score"]
        for r in runs
        if {k: v for k, v in r["setting"].items() if k != "seed"}
        == {k: v for k, v in best["setting"].items() if k != "seed"}
    ]
    return {
        "task": config.task,
        "metric": best["metric"],
        "best_run": best["name"],
        "best_index": best_index,
        "best": {k: best[k] for k in ("setting", "score", "metrics", "best_epoch")},
        "seeds": {
            "count": len(same),
            "mean": statistics.fmean(same),
            "std": statistics.pstdev(same) if len(same) > 1 else 0.0,
            "min": min(same),
            "max": max(same),
        },
        "runs": [
            {k: r[k] for k in ("name", "setting", "score", "metrics", "best_epoch")} for r in runs
        ],
    }


def _finite(value):
    return value if math.isfinite(value) else -math.inf


def _point_best(model_dir, name):
    """`model_dir/best` -> `name`: a relative symbolic link, replaced atomically (a one-line file
    on gs://)."""
    path = os.path.join(model_dir, BEST)
    if "://" in model_dir:
        write_file(path, name + "\n")
        return
    tmp = f"{path}.tmp-link"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(name, tmp)
    os.replace(tmp, path)


def best_run_dir(model_dir: str) -> str:
    """The best run's directory of a finished sweep (through `best`, a link or a one-line file).

    Raises:
        FileNotFoundError: model_dir holds no finished sweep.
    """
    path = os.path.join(model_dir, BEST)
    if os.path.islink(path) or os.path.isdir(path):
        return os.path.join(model_dir, os.readlink(path)) if os.path.islink(path) else path
    import tensorflow as tf

    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            return os.path.join(model_dir, f.read().strip())
    raise FileNotFoundError(f"{model_dir} holds no finished sweep (no {BEST}).")


def write_file(path: str, data: str | bytes) -> None:
    """`keras_bert.io_utils.write_atomic` (imported on use: the command lines' --help stays
    without TensorFlow)."""
    from keras_bert.io_utils import write_atomic

    write_atomic(path, data)
