"""Command line: fine-tune, evaluate and predict with one code path for every task (paper §4, §5.3).

    python -m keras_bert.tasks.finetune --task=mrpc --data_dir=glue/MRPC \\
        --init_checkpoint=uncased_L-12_H-768_A-12/ --model_dir=runs/mrpc --do_train --do_eval \\
        --do_predict

With `--sweep`, the paper's protocol instead of one run (`keras_bert.tasks.sweep`): every setting
of `--learning_rates` (default 5e-5,4e-5,3e-5,2e-5), `--batch_sizes`, `--num_train_epochs`
(a list here), `--optimizers` and `--seeds` (or `--restarts=N`) in its own sub-directory of
`--model_dir`, the best by the task's main dev metric linked as `<model_dir>/best`, every run's
score in `<model_dir>/eval_results.json`; a killed sweep resumes.

The runner is `keras_bert.tasks.finetuning` (`run_finetuning`, `predict`, `save_task_model`,
...; also importable from here) and its settings a `FinetuneConfig` (flag name = field name).
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
  everything export needs) and `vocab.txt` (with `--lora_rank`, LoRA merged into the kernels;
  with `--save_adapters` also `adapters.npz` and `adapters.json`, the LoRA and head weights);
- `tensorboard/`, `history.json`, `training_curve.png`, `summary.json`, `lora.json` (the run's LoRA
  settings: a resumed run restores them), with `--quantization_aware` `quantization_aware.json` (a
  resumed run needs the flag; its checkpoints hold the activation ranges).

`--init_checkpoint` may also be a fine-tuned `model/` of the same task, to continue it (e.g. with
`--quantization_aware`, `keras_bert.tasks.quantization_aware`).
"""

import json

from absl import flags

from keras_bert import _lazy, cli
from keras_bert.tasks import registry
from keras_bert.tasks.config import RECIPE, FinetuneConfig, check_input_paths
from keras_bert.training import settings

# The runner's names, importable from here as before (loaded on first use: --help stays light).
_TRAINER_NAMES = ("TaskTrainer", "TrainingWrapper", "predict", "run_finetuning")
__all__ = [
    "FinetuneConfig",
    "RECIPE",
    *_TRAINER_NAMES,
    "config_from_flags",
    "console_main",
    "sweep_grid",
    "define_flags",
    "main",
    "print_summary",
]


__getattr__, __dir__ = _lazy.attach(
    __name__, {name: f"keras_bert.tasks.finetuning:{name}" for name in _TRAINER_NAMES}
)


_FLAG_HELP = {
    "task": f"Task name: {' '.join(registry.task_names())}.",
    "data_dir": "The task's data folder in its benchmark's own layout (e.g. glue/MRPC).",
    "init_checkpoint": (
        "Google TF1 checkpoint, Hugging Face directory or run_pretraining model_dir."
    ),
    "model_dir": "Run directory: checkpoints, eval_results.json, predictions/, model/, logs.",
    "model": "BertConfig preset to start from random weights (with --vocab_file) instead.",
    **{
        name: f"FinetuneConfig.{name} (default: the task's recipe; GLUE {value})."
        for name, value in RECIPE.items()
    },
    "lora_rank": "LoRA fine-tuning of this rank (1..hidden size); the rest of the encoder frozen.",
    "lora_alpha": "LoRA updates are scaled by lora_alpha / lora_rank (default: lora_rank).",
    "save_adapters": "With lora_rank: also write model/adapters.npz and adapters.json.",
    "save_hf": "Also write <model_dir>/hf/, the model as a Hugging Face BertFor... directory.",
    "quantization_aware": (
        "Fine-tune with int8 fake quantization (weights and activations), so that "
        "--quantize=int8_integer_only TFLite keeps the answers."
    ),
    "buckets": (
        "Comma-separated fixed padded lengths (default: per-batch padding; fixed under XLA/TPU)."
    ),
}


# The sweep's flags (keras_bert.tasks.sweep): name -> help.
SWEEP_FLAGS = {
    "learning_rates": "With --sweep: comma-separated learning rates (default 5e-5,4e-5,3e-5,2e-5).",
    "batch_sizes": "With --sweep: comma-separated batch sizes (default: --batch_size).",
    "optimizers": "With --sweep: comma-separated optimizers (default: --optimizer).",
    "seeds": "With --sweep: comma-separated seeds, the random restarts (default: --seed).",
}


def define_flags(config_class=FinetuneConfig, help_text=None):
    """Define the flags (again on each call: another command line may define the same names):
    `config_class`'s fields (`FinetuneConfig`, or a subclass such as distillation's
    `DistillConfig`, with `help_text`'s lines), every task family's options
    (`registry.option_fields`) and, for `FinetuneConfig`, the sweep's (`--sweep`, its lists and
    `--restarts`; `--num_train_epochs` takes a list)."""
    settings.define_flags(config_class, {**_FLAG_HELP, **(help_text or {})})
    if config_class is FinetuneConfig:
        _define_sweep_flags()
    for name, (field, text, takers) in registry.option_fields().items():
        define = settings.flag_definer(field)
        cli.define(
            define,
            name,
            None,
            f"{text} (task option of {', '.join(takers)}; default {field.default}).",
        )


def _define_sweep_flags():
    cli.define(
        flags.DEFINE_list,
        "num_train_epochs",
        None,
        "Training epochs (default: the task's recipe; GLUE 3); with --sweep a comma list.",
    )
    cli.define(flags.DEFINE_bool, "sweep", False, "Run the grid of the sweep flags, keep the best.")
    for name, text in SWEEP_FLAGS.items():
        cli.define(flags.DEFINE_string, name, None, text)
    cli.define(flags.DEFINE_integer, "restarts", None, "With --sweep: seeds --seed .. --seed+N-1.")


def config_from_flags(config_class=FinetuneConfig):
    """A `config_class` (`FinetuneConfig`) from the parsed flags (flag name = field name); the
    task option flags given go into `task_options`."""
    given = {
        name: flags.FLAGS[name].value
        for name in registry.option_fields()
        if flags.FLAGS[name].value is not None
    }
    values = settings.flag_values(config_class)
    if config_class is FinetuneConfig:
        values["num_train_epochs"] = _epochs_list()[0]
    return config_class(**values, task_options=given)


def _epochs_list():
    """--num_train_epochs as a list of int ([None] when not given); several only with --sweep."""
    given = flags.FLAGS["num_train_epochs"].value
    if not given:
        return [None]
    try:
        epochs = [int(v) for v in given]
    except ValueError:
        raise cli.UsageError(
            f"num_train_epochs must be integers, got {','.join(given)!r}."
        ) from None
    if len(epochs) > 1 and not flags.FLAGS.sweep:
        raise cli.UsageError("num_train_epochs takes several values only with --sweep.")
    return epochs


def sweep_grid(config):
    """The sweep's `Grid` from the parsed sweep flags (`keras_bert.tasks.sweep.make_grid`)."""
    from keras_bert.tasks import sweep

    FLAGS = flags.FLAGS
    epochs = _epochs_list()
    return sweep.make_grid(
        config,
        learning_rates=FLAGS.learning_rates,
        batch_sizes=FLAGS.batch_sizes,
        num_train_epochs=None if epochs == [None] else epochs,
        optimizers=FLAGS.optimizers,
        seeds=FLAGS.seeds,
        restarts=FLAGS.restarts,
    )


def _check_sweep_flags():
    FLAGS = flags.FLAGS
    if not FLAGS.sweep:
        given = [n for n in (*SWEEP_FLAGS, "restarts") if FLAGS[n].value is not None]
        if given:
            raise cli.UsageError(f"{', '.join(given)} need --sweep.")


def main(argv):
    del argv
    FLAGS = flags.FLAGS  # Paths, the task name and settings are checked before TensorFlow loads.
    check_input_paths(FLAGS.init_checkpoint, FLAGS.vocab_file, FLAGS.data_dir, FLAGS.tfds)
    _check_sweep_flags()
    config = config_from_flags()
    if FLAGS.sweep:
        from keras_bert.tasks import sweep

        results = sweep.run_sweep(config, sweep_grid(config))
        print(json.dumps({k: v for k, v in results.items() if k != "runs"}, indent=1))
        return
    from keras_bert.tasks.finetuning import run_finetuning

    print_summary(run_finetuning(config))


def print_summary(summary):
    """Print a runner's summary as JSON, without the model and the step history."""
    print(json.dumps({k: v for k, v in summary.items() if k not in ("model", "history")}, indent=1))


def console_main():
    """Entry point (`python -m keras_bert.tasks.finetune`, `keras-bert-finetune`)."""
    cli.run_command(__doc__, define_flags, ["task", "model_dir"], main)


if __name__ == "__main__":
    console_main()
