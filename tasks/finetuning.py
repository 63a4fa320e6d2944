"""The fine-tuning runner: one code path for every task (paper §4, §5.3). Its settings are a
`FinetuneConfig` (`keras_bert.tasks.config`); its command line is `keras_bert.tasks.finetune`:

    python -m keras_bert.tasks.finetune --task=mrpc --data_dir=glue/MRPC \\
        --init_checkpoint=uncased_L-12_H-768_A-12/ --model_dir=runs/mrpc --do_train --do_eval \\
        --do_predict

What a run writes under `--model_dir` (checkpoints, best epoch, eval_results.json, predictions/,
model/, TensorBoard logs, plot) is listed in that command line's docstring, its --help.

The runner's parts: `keras_bert.tasks.finetuning_setup` (the encoder, tokenizer, data and compiled
task model), `keras_bert.tasks.finetuning_loop` (the epochs and the best epoch) and
`keras_bert.tasks.prediction` (predictions, metrics and prediction files). The names other code
uses (`predict`, `evaluate_splits`, `load_splits`, `plan_steps`, `TrainingWrapper`) are importable
from here too.
"""

from typing import Any

from keras_bert.checkpoints import hf_tasks
from keras_bert.checkpoints.task_model import save_task_model
from keras_bert.models import lora
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.finetuning_loop import plan_steps, restore_best, train_epochs
from keras_bert.tasks.finetuning_setup import build_and_compile, encoder_and_tokenizer, load_splits
from keras_bert.tasks.prediction import (
    evaluate_splits,
    final_evaluation,
    predict,
    write_predictions,
)
from keras_bert.tasks.trainer import TaskTrainer, TrainingWrapper
from keras_bert.training import callbacks, plots, run_skeleton

# The runner's names, some defined in its parts: the distillation runner, the sweep, the command
# line (`keras_bert.tasks.finetune`) and users import them from here.
__all__ = [
    "TaskTrainer",
    "TrainingWrapper",
    "evaluate_splits",
    "load_splits",
    "plan_steps",
    "predict",
    "run_finetuning",
    "serving_rows",
    "train_and_finish",
]

CALIBRATION_SAMPLE = 300  # Training texts recorded in model/ (int8 TFLite calibrates on them).


def serving_rows(task, examples, limit=CALIBRATION_SAMPLE):
    """`task.serving_row` of up to `limit` examples spread evenly over `examples`."""
    step = max(1, len(examples) // limit)
    return [task.serving_row(example) for example in examples[::step][:limit]]


def run_finetuning(config: FinetuneConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Fine-tune, evaluate and predict as `config` says; resumes from `model_dir`.

    The steps: load the encoder and tokenizer, read and encode the data, build and compile
    (restoring the newest checkpoint), train the epochs (evaluating each, keeping the best),
    restore the best, evaluate, predict, save the task model, summarize.

    Args:
        config: `FinetuneConfig`, or None to build one from `overrides`.
        **overrides: `FinetuneConfig` fields.

    Returns:
        dict: `eval` (metrics of the kept model), `steps`, `start_step`, `best` (its epoch,
        step and metrics), `history` (training loops), `eval_history` (per epoch),
        `predictions` (written files), `model_path`, `examples_per_second`,
        `trainable_parameters` (fewer than `full_finetuning_parameters` with LoRA), `model` (the
        trained task model).
    """
    run = run_skeleton.start(FinetuneConfig, config, overrides)
    encoder, tokenizer, tuned = encoder_and_tokenizer(run)
    train, eval_sets = load_splits(run.config, tokenizer)
    plan = plan_steps(run.config, train, run.strategy.num_replicas_in_sync)
    model, trainer = build_and_compile(run, encoder, plan[1], train, tuned)
    fields = {
        "trainable_parameters": lora.count_parameters(model.trainable_weights),
        "full_finetuning_parameters": lora.full_finetuning_parameters(model),
    }
    return train_and_finish(run, model, trainer, tokenizer, train, eval_sets, plan, fields)


def train_and_finish(
    run, model, trainer, tokenizer, train, eval_sets, plan, fields, reference=None
):
    """The steps after compiling, shared by fine-tuning and distillation: train the remaining
    epochs (evaluating each, keeping the best), restore the best, evaluate, predict, save the
    task model, summarize.

    Args:
        run: the `run_skeleton.Run`, compiled and restored (`compile_and_restore`).
        model: the task model that is evaluated, saved and exported.
        trainer: the compiled Keras model that `fit` trains: `model`, or a `TrainingWrapper`.
        tokenizer: `BertTokenizer`.
        train: (examples, FeatureSet) or None. eval_sets: {split: (examples, FeatureSet)}.
        plan: `plan_steps`'s (steps_per_epoch, num_train_steps, loop).
        fields: dict of the runner's own summary fields.
        reference: function() -> dict of more eval_results.json entries (the teacher's
            metrics of a distillation), called once when the final evaluation is written.

    Returns:
        the summary dict of `run_finetuning`.
    """
    config, task = run.config, run.config.task_object
    steps_per_epoch, num_train_steps, loop = plan
    every = config.checkpoint_every or steps_per_epoch
    run_skeleton.start_log(run, num_train_steps, max(loop, every // loop * loop))
    eval_history = callbacks.load_history(run.path("eval_history.json"), run.start_step)
    if train and run.start_step < num_train_steps:
        train_epochs(run, model, trainer, train[1], eval_sets, eval_history, steps_per_epoch, loop)
    best = restore_best(run, model)
    results = (
        final_evaluation(run, model, eval_sets, best, reference)
        if config.do_eval and eval_sets and run.chief
        else {}
    )
    written = write_predictions(run, model, tokenizer) if config.do_predict and run.chief else []
    model_path = None
    if run.chief:
        model_path = save_task_model(
            model,
            run.path("model"),
            task,
            config.seq_length,
            tokenizer.vocabulary,
            tokenizer.lower_case,
            adapters=config.save_adapters,
            training_texts=serving_rows(task, train[0]) if train else None,
            training_data=config.train_file or (config.data_dir and f"{config.data_dir} (train)"),
        )
        if config.save_hf:
            hf_tasks.save_task(
                model,
                run.path("hf"),
                tokenizer.vocabulary,
                tokenizer.lower_case,
                labels=task.info().get("labels"),
                overwrite=True,
                text_pair=len(task.info().get("text_inputs") or ()) == 2,
            )
    summary = run_skeleton.summarize(
        run,
        {
            "task": task.name,
            "eval": results,
            "best": best,
            "eval_history": eval_history,
            "predictions": written,
            "model_path": model_path,
            **fields,
        },
        plot=lambda history, path: _plot(history, eval_history, task.name, path),
    )
    summary["model"] = model
    summary["replicas"] = run.strategy.num_replicas_in_sync
    return summary


def _plot(history, eval_history, task_name, path):
    """Training loss, the dev metrics of each epoch and the learning rate against the step."""
    metric_names = [
        k for k in (eval_history[-1] if eval_history else {}) if k not in ("step", "epoch")
    ]
    points = history + [
        {"step": e["step"], **{f"dev {k}": e[k] for k in metric_names}} for e in eval_history
    ]
    panels = (
        ("loss", ("loss",)),
        ("dev metrics", tuple(f"dev {k}" for k in metric_names)),
        ("learning rate", ("learning_rate",)),
    )
    return plots.plot_history(points, path, title=f"BERT fine-tuning: {task_name}", panels=panels)
