"""Quantization-aware fine-tuning end to end on a tiny model: a fine-tuned model/ continued with
and without `quantization_aware` (same data, steps and seed), both exported as
int8_integer_only TFLite; the quantization-aware model's integer answers must be closer to its
own float answers than the other's are to its own."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from export_cases import TEXTS, keras_logits, softmax
from finetune_cases import sentiment_rows, write_checkpoint, write_sst2

from keras_bert.export import tflite
from keras_bert.tasks.finetune import run_finetuning

SEQ_LENGTH = 32
LABEL_TEXTS = [s for s, _ in sentiment_rows(300, seed=11)] + TEXTS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny SST-2 classifier (base), continued from its model/ for an epoch with and without
    quantization_aware ("qat", "float"), each exported as int8_integer_only."""
    root = tmp_path_factory.mktemp("qat")
    data_dir = write_sst2(str(root / "SST-2"), n_dev=32)
    common = dict(
        task="sst2",
        data_dir=data_dir,
        do_train=True,
        batch_size=16,
        seq_length=SEQ_LENGTH,
        verbose=False,
        plot=False,
    )
    run_finetuning(
        init_checkpoint=write_checkpoint(str(root / "ckpt")),
        model_dir=str(root / "base"),
        learning_rate=3e-3,
        num_train_epochs=5,
        **common,
    )
    calibration = [s for s, _ in sentiment_rows(100, seed=12)]
    found = {"root": root, "data_dir": data_dir}
    for name, flag in (("float", False), ("qat", True)):
        run_finetuning(
            init_checkpoint=str(root / "base" / "model"),
            model_dir=str(root / name),
            learning_rate=1e-3,
            num_train_epochs=1,
            quantization_aware=flag,
            **common,
        )
        model_dir = str(root / name / "model")
        path = tflite.export_tflite(
            model_dir,
            str(root / f"{name}_tflite"),
            quantize="int8_integer_only",
            representative_texts=calibration,
        )
        runner = tflite.load_interpreter(
            os.path.join(path, tflite.MODEL_FILE)
        ).get_signature_runner("serving_default")
        found[name] = {
            "want": softmax(keras_logits(model_dir, LABEL_TEXTS, seq_length=SEQ_LENGTH)),
            "got": runner(text=tflite.as_strings(LABEL_TEXTS))["probabilities"],
        }
    return found


def test_integer_tflite_keeps_the_answers_of_a_quantization_aware_model_better(runs):
    errors = {}
    for name in ("float", "qat"):
        want, got = runs[name]["want"], runs[name]["got"]
        errors[name] = np.abs(got - want)
        agreement = np.mean(got.argmax(-1) == want.argmax(-1))
        print(
            f"{name}: integer labels as float on {agreement:.2%}, mean |dp| "
            f"{errors[name].mean():.4f}, max {errors[name].max():.4f}"
        )
        runs[name]["agreement"] = agreement
    assert 0.2 < runs["qat"]["want"].argmax(-1).mean() < 0.8  # Both labels: a real classifier.
    assert runs["qat"]["agreement"] >= runs["float"]["agreement"]
    assert errors["qat"].mean() < errors["float"].mean()
    assert errors["qat"].max() < errors["float"].max()


def test_flag_changes_the_trainer_only(runs):
    """The quantization-aware run's checkpoints hold the float run's variables plus the ranges;
    both model/ directories hold the same float model's weights."""
    root = runs["root"]
    checkpoints = {
        name: [n for n, _ in tf.train.list_variables(str(root / name / "checkpoints"))]
        for name in ("float", "qat")
    }
    ranges = [n for n in checkpoints["qat"] if "/ranges/" in n]
    assert ranges and not [n for n in checkpoints["float"] if "range" in n]
    assert sorted(set(checkpoints["qat"]) - set(ranges)) == sorted(checkpoints["float"])
    with pytest.raises(ValueError, match="resume it with quantization_aware"):
        run_finetuning(  # Resumed without the flag: named before anything trains.
            task="sst2",
            data_dir=runs["data_dir"],
            init_checkpoint=str(root / "base" / "model"),
            model_dir=str(root / "qat"),
            do_train=True,
            num_train_epochs=2,
            batch_size=16,
            seq_length=SEQ_LENGTH,
            verbose=False,
        )
    models = {name: keras_model(root / name / "model") for name in ("float", "qat")}
    assert [w.path for w in models["qat"].weights] == [w.path for w in models["float"].weights]


def keras_model(directory):
    from keras_bert.checkpoints.task_model import load_task_model

    return load_task_model(str(directory))[0]


def test_continuing_a_fine_tuned_model_starts_from_its_head(runs, tmp_path):
    root = runs["root"]
    run_finetuning(
        task="sst2",
        data_dir=runs["data_dir"],
        init_checkpoint=str(root / "base" / "model"),
        model_dir=str(tmp_path / "eval"),
        do_eval=True,
        seq_length=SEQ_LENGTH,
        verbose=False,
    )
    np.testing.assert_allclose(  # The same model: its encoder and its head.
        keras_logits(str(tmp_path / "eval" / "model"), LABEL_TEXTS[:20], seq_length=SEQ_LENGTH),
        keras_logits(str(root / "base" / "model"), LABEL_TEXTS[:20], seq_length=SEQ_LENGTH),
        atol=1e-6,
    )
    with open(root / "base" / "model" / "task.json") as f:
        info = json.load(f)
    other = tmp_path / "cola_model"
    tf.io.gfile.makedirs(str(other))
    for name in os.listdir(root / "base" / "model"):
        tf.io.gfile.copy(str(root / "base" / "model" / name), str(other / name))
    (other / "task.json").write_text(json.dumps({**info, "task": "cola"}))
    with pytest.raises(ValueError, match="fine-tuned on 'cola', not on 'sst2'"):
        run_finetuning(
            task="sst2",
            data_dir=runs["data_dir"],
            init_checkpoint=str(other),
            model_dir=str(tmp_path / "wrong"),
            do_eval=True,
            verbose=False,
        )


def test_quantization_aware_without_training_or_in_distillation_is_named(runs, tmp_path):
    from keras_bert.tasks.config import FinetuneConfig
    from keras_bert.tasks.distillation.config import DistillConfig

    common = dict(task="sst2", model_dir=str(tmp_path / "run"), quantization_aware=True)
    with pytest.raises(ValueError, match="quantization_aware is a way of training"):
        FinetuneConfig(init_checkpoint="ckpt", do_eval=True, **common)
    with pytest.raises(ValueError, match="Distillation does not take quantization_aware"):
        DistillConfig(
            teacher=str(runs["root"] / "base" / "model"), student_layers=1, do_train=True, **common
        )
    assert not os.path.exists(tmp_path / "run")
