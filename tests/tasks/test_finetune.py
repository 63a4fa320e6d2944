"""The fine-tuning runner: recipe defaults, a tiny end-to-end fine-tune that learns, its output
contract (eval_results.json, predictions/, model/), best-epoch selection, and bad input."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from finetune_cases import VOCAB, write_checkpoint, write_sst2

from keras_bert.tasks import finetune, finetuning, registry
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.glue import data as glue


@pytest.fixture(scope="module")
def sst2(tmp_path_factory):
    root = tmp_path_factory.mktemp("sst2")
    return dict(
        data_dir=write_sst2(str(root / "SST-2")),
        init_checkpoint=write_checkpoint(str(root / "ckpt")),
    )


def test_recipe_defaults_are_the_papers(tmp_path):
    config = FinetuneConfig(
        task="mrpc", init_checkpoint="unused", model_dir=str(tmp_path), do_train=True
    )
    assert (
        config.seq_length,
        config.batch_size,
        config.learning_rate,
        config.num_train_epochs,
    ) == (128, 32, 2e-5, 3)
    assert (config.warmup_proportion, config.dropout, config.weight_decay, config.clip_norm) == (
        0.1,
        0.1,
        0.01,
        1.0,
    )
    assert config.optimizer == "adam_weight_decay"
    assert config.bucket_lengths() is None  # Per-batch padding unless shapes must be fixed.
    xla = FinetuneConfig(
        task="mrpc",
        init_checkpoint="unused",
        model_dir=str(tmp_path),
        do_eval=True,
        jit_compile=True,
        seq_length=100,
    )
    assert xla.bucket_lengths() == [32, 64, 100]
    explicit = FinetuneConfig(
        task="sst2",
        init_checkpoint="unused",
        model_dir=str(tmp_path),
        do_eval=True,
        batch_size=16,
        learning_rate=5e-5,
    )
    assert (explicit.batch_size, explicit.learning_rate) == (16, 5e-5)


def test_fine_tune_learns_and_writes_the_output_contract(sst2, tmp_path):
    model_dir = str(tmp_path / "run")
    summary = run_finetuning(
        task="sst2",
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        learning_rate=3e-3,
        num_train_epochs=5,
        batch_size=16,
        seq_length=64,
        verbose=False,
        **sst2,
    )
    # Learns: dev accuracy far above chance (balanced labels) and the training loss falls.
    assert summary["eval"]["accuracy"] >= 0.9, summary["eval_history"]
    losses = [h["loss"] for h in summary["history"]]
    assert losses[-1] < 0.5 * losses[0]

    # One evaluation per epoch; the kept model is the best epoch's, and eval_results.json says so.
    history = summary["eval_history"]
    assert [e["epoch"] for e in history] == [1, 2, 3, 4, 5]
    best = max(history, key=lambda e: e["accuracy"])
    with open(os.path.join(model_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["task"] == "sst2" and results["split"] == "dev"
    assert results["accuracy"] == best["accuracy"] and results["step"] == best["step"]

    # model/: the kept model reloads alone and gives the same logits; task.json has what export
    # needs.
    with open(os.path.join(model_dir, "model", "task.json")) as f:
        info = json.load(f)
    assert info["task"] == "sst2" and info["labels"] == ["0", "1"] and info["seq_length"] == 64
    assert info["lower_case"] is True and info["problem"] == "classification"
    with open(os.path.join(model_dir, "model", "vocab.txt")) as f:
        assert f.read().split("\n")[:-1] == VOCAB
    reloaded = keras.saving.load_model(os.path.join(model_dir, "model", "model.keras"))
    examples = glue.read_examples(glue.get_spec("sst2"), sst2["data_dir"], "dev")
    task = registry.get_task("sst2")
    from keras_bert.text.tokenizer import BertTokenizer

    feats = task.encode(examples, BertTokenizer(VOCAB), 64)
    ours = finetuning.predict(summary["model"], task, feats, 32)
    theirs = finetuning.predict(reloaded, task, feats, 32)
    np.testing.assert_allclose(ours["logits"], theirs["logits"], atol=1e-5)
    assert task.evaluate(examples, feats, theirs)["accuracy"] == best["accuracy"]

    # predictions/: the GLUE submission file, one row per test example, labels as strings.
    rows = glue.read_submission(os.path.join(model_dir, "predictions", "SST-2.tsv"))
    assert [index for index, _ in rows] == [str(i) for i in range(40)]
    assert {p for _, p in rows} <= {"0", "1"}
    # Logs and plot.
    assert os.listdir(os.path.join(model_dir, "tensorboard", "train"))
    assert os.path.getsize(os.path.join(model_dir, "training_curve.png")) > 1000


def test_eval_only_from_a_saved_run_gives_the_same_metrics(sst2, tmp_path):
    """do_eval without do_train evaluates the init checkpoint (here: untrained) as is."""
    summary = run_finetuning(
        task="sst2",
        model_dir=str(tmp_path / "eval"),
        do_eval=True,
        seq_length=64,
        verbose=False,
        **sst2,
    )
    assert summary["steps"] == 0 and 0 <= summary["eval"]["accuracy"] <= 1


def test_bad_configurations_name_the_problem(sst2, tmp_path):
    with pytest.raises(ValueError, match="Did you mean 'mrpc'"):
        FinetuneConfig(task="mrcp", init_checkpoint="x", model_dir=str(tmp_path), do_train=True)
    with pytest.raises(ValueError, match="Nothing to do"):
        FinetuneConfig(task="sst2", init_checkpoint="x", model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="init_checkpoint"):
        FinetuneConfig(task="sst2", model_dir=str(tmp_path), do_train=True)
    with pytest.raises(ValueError, match="max_position_embeddings 64"):
        run_finetuning(
            task="sst2", model_dir=str(tmp_path / "long"), do_eval=True, seq_length=128, **sst2
        )
    with pytest.raises(FileNotFoundError):
        run_finetuning(
            task="sst2",
            model_dir=str(tmp_path / "nockpt"),
            do_eval=True,
            seq_length=32,
            data_dir=sst2["data_dir"],
            init_checkpoint=str(tmp_path / "missing"),
        )
    with pytest.raises(glue.GlueDataError, match="dev.tsv"):
        run_finetuning(
            task="sst2",
            model_dir=str(tmp_path / "nodata"),
            do_eval=True,
            seq_length=32,
            data_dir=str(tmp_path),
            init_checkpoint=sst2["init_checkpoint"],
        )


def test_command_line_flags_are_the_config_fields(sst2, tmp_path):
    from absl import flags

    finetune.define_flags()
    argv = [
        "finetune",
        "--task=rte",
        f"--model_dir={tmp_path}",
        "--do_eval",
        "--seq_length=64",
        "--nolower_case",
        f"--init_checkpoint={sst2['init_checkpoint']}",
        "--learning_rate=3e-5",
        "--buckets=16,32",
    ]
    flags.FLAGS(argv)
    try:
        config = finetune.config_from_flags()
    finally:
        flags.FLAGS.unparse_flags()
    assert (config.task, config.seq_length, config.learning_rate, config.lower_case) == (
        "rte",
        64,
        3e-5,
        False,
    )
    assert config.batch_size == 32 and config.bucket_lengths() == [16, 32, 64]


def test_mnli_reports_matched_and_mismatched_and_writes_three_submission_files(sst2, tmp_path):
    from finetune_cases import write_mnli

    data = write_mnli(str(tmp_path / "MNLI"))
    model_dir = str(tmp_path / "mnli")
    summary = run_finetuning(
        task="mnli",
        data_dir=data,
        init_checkpoint=sst2["init_checkpoint"],
        model_dir=model_dir,
        do_eval=True,
        do_predict=True,
        seq_length=64,
        verbose=False,
    )
    with open(os.path.join(model_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["split"] == "dev_matched,dev_mismatched"
    # The metric recomputed independently from the model's own predictions.
    task = registry.get_task("mnli")
    from keras_bert.text.tokenizer import BertTokenizer

    examples = glue.read_examples("mnli", data, "dev_matched")
    logits = finetuning.predict(
        summary["model"], task, task.encode(examples, BertTokenizer(VOCAB), 64), 8
    )["logits"]
    gold = [glue.get_spec("mnli").labels.index(e.label) for e in examples]
    assert results["accuracy_matched"] == pytest.approx(np.mean(np.argmax(logits, -1) == gold))
    assert "accuracy_mismatched" in results and "accuracy" not in results
    counts = {
        name: len(glue.read_submission(os.path.join(model_dir, "predictions", name)))
        for name in ("MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv")
    }
    assert counts == {"MNLI-m.tsv": 7, "MNLI-mm.tsv": 5, "AX.tsv": 3}


def test_stsb_regression_trains_on_mse_and_reports_pearson_and_spearman(sst2, tmp_path):
    from finetune_cases import write_stsb
    from scipy import stats

    data = write_stsb(str(tmp_path / "STS-B"), n_train=256)
    model_dir = str(tmp_path / "stsb")
    summary = run_finetuning(
        task="stsb",
        data_dir=data,
        init_checkpoint=sst2["init_checkpoint"],
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        seq_length=64,
        batch_size=16,
        num_train_epochs=3,
        learning_rate=1e-3,
        verbose=False,
        plot=False,
    )
    task = registry.get_task("stsb")
    from keras_bert.text.tokenizer import BertTokenizer

    examples = glue.read_examples("stsb", data, "dev")
    # The runner's own batches (eval_batch_size = batch_size, 16): this tiny model's scores
    # spread over 1e-5 only, so the float rounding of other batch shapes moves the correlation.
    scores = finetuning.predict(
        summary["model"], task, task.encode(examples, BertTokenizer(VOCAB), 64), 16
    )["logits"][:, 0]
    gold = [e.label for e in examples]
    assert summary["eval"]["pearson"] == pytest.approx(stats.pearsonr(scores, gold)[0], rel=1e-4)
    assert summary["eval"]["spearman"] == pytest.approx(stats.spearmanr(scores, gold)[0], rel=1e-4)
    # The loss is the mean squared error (NumPy on one batch).
    feats = task.encode(examples[:5], BertTokenizer(VOCAB), 64)
    outputs = finetuning.predict(summary["model"], task, feats, 8)
    total, count = summary["model"].loss_sums(
        {"logits": feats.labels["label"]}, {"logits": tf.constant(outputs["logits"])}
    )
    np.testing.assert_allclose(
        total / count, np.mean((outputs["logits"][:, 0] - feats.labels["label"]) ** 2), rtol=1e-5
    )
    # The head starts at the mean training score (center_regression_head): the first epoch's
    # loss is already far below predicting 0 (the mean squared score) and, for this tiny model
    # whose scores are noise, stays at about the scores' variance (4.0).
    train_scores = np.array([e.label for e in glue.read_examples("stsb", data, "train")])
    losses = [h["loss"] for h in summary["history"]]
    assert losses[0] < 0.5 * np.mean(train_scores**2)
    assert max(losses) < 1.15 * np.var(train_scores)
    rows = glue.read_submission(os.path.join(model_dir, "predictions", "STS-B.tsv"))
    assert len(rows) == 6 and all(0.0 <= float(p) <= 5.0 for _, p in rows)


def test_no_string_tensor_reaches_the_model(sst2):
    """Tokenization happens in tf.data: the batches handed to fit/strategy.run are int tensors."""
    task = registry.get_task("sst2")
    from keras_bert.tasks import features as feature_lib
    from keras_bert.text.tokenizer import BertTokenizer

    examples = glue.read_examples("sst2", sst2["data_dir"], "dev")
    feats = task.encode(examples, BertTokenizer(VOCAB), 64)
    batches, padded = feature_lib.batch_plan(feats.lengths, 8, shuffle=True)
    spec = feature_lib.make_dataset(
        feats, batches, padded, label_keys=task.label_keys, targets=task.targets
    ).element_spec
    assert all(s.dtype in (tf.int32, tf.float32) for s in tf.nest.flatten(spec))


def test_mixed_bfloat16_fine_tunes_and_saves_in_that_policy(sst2, tmp_path):
    summary = run_finetuning(
        task="sst2",
        model_dir=str(tmp_path / "bf16"),
        do_train=True,
        do_eval=True,
        mixed_precision="mixed_bfloat16",
        num_train_epochs=1,
        batch_size=32,
        seq_length=64,
        learning_rate=1e-3,
        verbose=False,
        plot=False,
        **sst2,
    )
    assert np.isfinite(summary["history"][-1]["loss"])
    reloaded = keras.saving.load_model(os.path.join(str(tmp_path / "bf16"), "model", "model.keras"))
    assert reloaded.encoder.dtype_policy.name == "mixed_bfloat16"


def test_task_options_belong_to_their_task(tmp_path):
    """Task options go to the task that declares them; another task's option is an error
    naming option and task; the command line has a flag per option, passed when given."""
    from absl import flags

    common = dict(init_checkpoint="unused", model_dir=str(tmp_path), do_train=True)
    squad = FinetuneConfig(
        task="squad2", task_options={"doc_stride": 64, "null_score_diff_threshold": -1.5}, **common
    )
    assert (squad.task_object.doc_stride, squad.task_object.null_score_diff_threshold) == (64, -1.5)
    assert squad.task_object.max_query_length == 64  # The default of what is not given.
    with pytest.raises(
        ValueError, match="'mrpc' does not take the option 'n_best_size'.*long_text, doc_stride"
    ):
        FinetuneConfig(task="mrpc", task_options={"n_best_size": 64}, **common)
    with pytest.raises(
        ValueError, match="'swag' does not take the option 'doc_stride'.*no options"
    ):
        FinetuneConfig(task="swag", task_options={"doc_stride": 64}, **common)
    with pytest.raises(
        ValueError, match="'conll2003' does not take the option 'doc_stride'.*entity_types"
    ):
        FinetuneConfig(task="conll2003", task_options={"doc_stride": 64}, **common)
    assert set(registry.option_fields()) == {
        "doc_stride",
        "max_query_length",
        "n_best_size",
        "max_answer_length",
        "null_score_diff_threshold",
        "entity_types",
        "document_context",
        "long_text",
        "max_windows",
        "window_pooling",
        "window_training",
        "token_pooling",
    }
    finetune.define_flags()
    try:
        flags.FLAGS(
            [
                "finetune",
                "--task=conll2003",
                "--document_context",
                "--entity_types=DRUG,DOSE",
                f"--model_dir={tmp_path}",
                "--init_checkpoint=unused",
                "--do_train",
            ]
        )
        config = finetune.config_from_flags()
        assert config.task_options == {"document_context": True, "entity_types": "DRUG,DOSE"}
        assert (
            config.task_object.entity_types == ("DRUG", "DOSE")
            and config.task_object.document_context
        )
    finally:
        flags.FLAGS.unparse_flags()
