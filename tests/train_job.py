"""A pre-training or fine-tuning run in its own process, for the distributed and kill/resume tests.

Usage: python train_job.py '<json>' where the JSON holds `configs` (a list of runs, each
run_pretraining keyword arguments with `bert_config` as a dict, or, with `"runner": "finetune"`,
run_finetuning keyword arguments, or with `"runner": "distill"` run_distillation's), `out` (a
JSON file for the list of their results),
optional `logical_cpus` (split the CPU into that many logical devices before TensorFlow
starts), optional `kill_after_checkpoint` (SIGKILL this process right after the
checkpoint of that step is written, as a preemption would) and optional `weights` (add each
run's trained weights: [path, values] in order). The backend is KERAS_BACKEND's (TensorFlow
if unset); on JAX, `XLA_FLAGS=--xla_force_host_platform_device_count=N` gives N CPU devices.
"""

import json
import os
import signal
import sys

from logical_cpus import split_cpu

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

JOB = os.path.abspath(__file__)  # The script the tests start in a subprocess.
# The tiny BERT of the resume tests. Dropout stays on (0.1): a resumed run must draw the same masks.
RESUME_BERT = dict(
    vocab_size=48,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=32,
)


def resume_state(vocab_size=48):
    """(model, built optimizer): a `BertPretrainer` of RESUME_BERT and its optimizer, for the
    checkpoint tests."""
    import keras_bert
    from keras_bert.training import optimizers

    config = keras_bert.BertConfig(**dict(RESUME_BERT, vocab_size=vocab_size))
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(config))
    optimizer = optimizers.create_optimizer(1e-3, 10, 1, variables=model.trainable_variables)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def weights_of(model, optimizer):
    """Copies of the values of every model and optimizer variable."""
    import keras

    return [
        keras.ops.convert_to_numpy(v).copy()
        for v in list(model.variables) + list(optimizer.variables)
    ]


def pretraining_job(tmp_path, name):
    """run_pretraining settings of the resume tests: 6 steps of RESUME_BERT on records written
    into `tmp_path`, a checkpoint every 2 steps, into `tmp_path / name`."""
    from pretraining_data import write_records

    train, _ = write_records(
        str(tmp_path), 200, vocab_size=48, seq_length=24, max_predictions_per_seq=4, num_shards=2
    )
    return dict(
        bert_config=RESUME_BERT,
        train_files=train,
        batch_size=8,
        seq_length=24,
        max_predictions_per_seq=4,
        num_train_steps=6,
        num_warmup_steps=2,
        learning_rate=2e-3,
        steps_per_loop=1,
        checkpoint_every=2,
        keep_checkpoints=2,
        model_dir=str(tmp_path / name),
        verbose=False,
        plot=False,
        seed=7,
        shuffle_buffer=50,
    )


def finetune_job(tmp_path, name, bert=None, **extra):
    """run_finetuning settings of the resume and device tests: two epochs of 3 steps on a tiny
    SST-2 written into `tmp_path`, from a checkpoint of `bert` (write_checkpoint's overrides), a
    checkpoint every 2 steps, into `tmp_path / name`; `extra` adds or overrides settings."""
    from finetune_cases import write_checkpoint, write_sst2

    data = write_sst2(str(tmp_path / "SST-2"), n_train=48, n_dev=24, n_test=4)
    ckpt = write_checkpoint(str(tmp_path / "ckpt"), **(bert or {}))
    return dict(
        runner="finetune",
        task="sst2",
        data_dir=data,
        init_checkpoint=ckpt,
        do_train=True,
        do_eval=True,
        batch_size=16,
        seq_length=48,
        num_train_epochs=2,
        learning_rate=2e-3,
        steps_per_loop=1,
        checkpoint_every=2,
        model_dir=str(tmp_path / name),
        verbose=False,
        plot=False,
        **extra,
    )


def run_config(config):
    """One run of a spec's `configs`, in this process; returns the runner's summary."""
    config = dict(config)
    kind = config.pop("runner", "pretrain")
    if kind == "finetune":
        from keras_bert.tasks.finetuning import run_finetuning

        return run_finetuning(**config)
    if kind == "distill":
        from keras_bert.tasks.distillation.runner import run_distillation

        return run_distillation(**config)
    import keras_bert
    from keras_bert.pretraining import runner

    return runner.run_pretraining(
        **dict(config, bert_config=keras_bert.BertConfig(**config["bert_config"]))
    )


def main(spec):
    import keras
    import numpy as np

    if spec.get("logical_cpus"):
        split_cpu(spec["logical_cpus"])
    from keras_bert.training import callbacks

    kill_step = spec.get("kill_after_checkpoint")
    if kill_step:
        save = callbacks.PeriodicCheckpoint.on_epoch_end

        def save_then_die(self, epoch, logs=None):
            save(self, epoch, logs)
            if int(self.model.optimizer.iterations.numpy()) >= kill_step:
                os.kill(os.getpid(), signal.SIGKILL)

        callbacks.PeriodicCheckpoint.on_epoch_end = save_then_die
    results = []
    for config in spec["configs"]:
        summary = run_config(config)
        results.append(
            {
                "history": summary["history"],
                "eval": summary["eval"],
                "steps": summary["steps"],
                "start_step": summary["start_step"],
                "eval_history": summary.get("eval_history"),
                "replicas": summary.get("replicas")
                or summary["model"].distribute_strategy.num_replicas_in_sync,
            }
        )
        if spec.get("weights"):  # The trained weights, for comparisons across runs.
            results[-1]["weights"] = [
                [v.path, np.asarray(keras.ops.convert_to_numpy(v), float).tolist()]
                for v in summary["model"].weights
            ]
    with open(spec["out"], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
