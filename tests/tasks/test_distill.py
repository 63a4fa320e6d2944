"""Distillation (`keras_bert.tasks.distillation`): the student's initialization, the losses against
a NumPy transcription, a tiny distillation that beats its from-scratch twin and exports, resume
after a kill, each task kind, and bad input."""

import json
import os
import signal
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
from finetune_cases import TINY, VOCAB, sentiment_rows, write_checkpoint, write_sst2
from task_cases import task_options, write_task_data
from train_job import JOB, run_config

import keras_bert
from keras_bert import checkpoints
from keras_bert.export import tflite
from keras_bert.layers.transformer import attention_bias
from keras_bert.tasks import registry
from keras_bert.tasks.distillation import losses, students
from keras_bert.tasks.distillation.runner import run_distillation
from keras_bert.tasks.distillation.trainer import GOLD, STATES, DistillTrainer, feature_view
from keras_bert.tasks.finetuning import run_finetuning

QUIET = dict(verbose=False, plot=False)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A 1-layer teacher fine-tuned on the sentiment sentences (SST-2 files), as
    test_finetune's (sure of its answers: the tiny 2-layer model learns less reliably)."""
    root = tmp_path_factory.mktemp("distill")
    data_dir = write_sst2(str(root / "SST-2"))
    checkpoint = write_checkpoint(str(root / "ckpt"))
    summary = run_finetuning(
        task="sst2",
        data_dir=data_dir,
        init_checkpoint=checkpoint,
        model_dir=str(root / "teacher"),
        do_train=True,
        do_eval=True,
        learning_rate=3e-3,
        num_train_epochs=5,
        batch_size=16,
        seq_length=64,
        **QUIET,
    )
    assert summary["eval"]["accuracy"] >= 0.9, summary["eval"]
    return dict(
        root=root,
        data_dir=data_dir,
        checkpoint=checkpoint,
        model=summary["model_path"],
        accuracy=summary["eval"]["accuracy"],
    )


# === The student's initialization ===


def test_chosen_layers_are_evenly_spaced():
    assert students.chosen_layers(6, 3) == [0, 2, 5]
    assert students.chosen_layers(12, 6) == [0, 2, 4, 7, 9, 11]  # DistilBERT's.
    assert students.chosen_layers(4, 4) == [0, 1, 2, 3]
    assert students.layer_map(6, 3, [0, 2, 5]) == [(0, 0), (1, 1), (3, 2), (6, 3)]
    assert students.layer_map(6, 3) == [(0, 0), (2, 1), (4, 2), (6, 3)]  # TinyBERT's uniform map.


def _inputs(batch=3, seq=7, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, len(VOCAB), size=(batch, seq)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 4:] = 0
    ids[:, 0] = 2
    return {
        "input_word_ids": tf.constant(ids * mask),
        "input_mask": tf.constant(mask),
        "input_type_ids": tf.zeros_like(ids),
    }


@pytest.mark.parametrize(
    "layers, layer_ids, kept",
    [(2, None, [0, 3]), (None, "1,3", [1, 3]), (None, [0, 2, 3], [0, 2, 3])],
)
def test_student_is_the_teacher_with_the_other_layers_skipped(layers, layer_ids, kept):
    task = registry.get_task("mnli")  # 3 classes.
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**dict(TINY, num_hidden_layers=4)))
    teacher = task.build_model(encoder, 0.1)
    config = types.SimpleNamespace(student_layers=layers, student_layer_ids=layer_ids, dropout=0.1)
    student, pairs = students.build_student(config, task, teacher, VOCAB, "float32")
    assert student.encoder.config.num_hidden_layers == len(kept)
    assert pairs == [(0, 0)] + [(t + 1, j + 1) for j, t in enumerate(kept)]
    for s, t in zip(student.encoder.transformer_layers, kept):
        for a, b in zip(s.weights, encoder.transformer_layers[t].weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The teacher's own layers run with the other blocks left out give the student's logits.
    x = _inputs()
    h = encoder.embeddings(x["input_word_ids"], x["input_type_ids"])
    bias = attention_bias(x["input_mask"], "float32")
    for index in kept:
        h = encoder.transformer_layers[index](h, bias)
    expected = teacher.get_layer("classifier")(encoder.pooler(h[:, 0]))
    np.testing.assert_allclose(student(x)["logits"].numpy(), expected.numpy(), atol=1e-6)
    states = student.encoder(x)["sequence_output"].numpy()
    np.testing.assert_allclose(states, h.numpy(), atol=1e-5)
    assert np.abs(encoder(x)["sequence_output"].numpy() - states).max() > 1e-3  # Not all 4.


# === Losses against NumPy ===


def _np_kl(t, s, temperature, axis=-1):
    def log_softmax(z):
        z = z / temperature
        z = z - z.max(axis=axis, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))

    lt, ls = log_softmax(t), log_softmax(s)
    return temperature**2 * (np.exp(lt) * (lt - ls)).sum(axis=axis)


def test_soft_target_losses_match_numpy():
    rng = np.random.default_rng(1)
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], np.int32)
    T = 2.5
    t, s = rng.normal(size=(2, 3)) * 3, rng.normal(size=(2, 3)) * 3
    total, count = losses.soft_target_sums("classification", {"logits": t}, {"logits": s}, mask, T)
    np.testing.assert_allclose(total / count, _np_kl(t, s, T).mean(), rtol=1e-5)
    t, s = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4))
    total, count = losses.soft_target_sums(
        "token_classification", {"logits": t}, {"logits": s}, mask, T
    )
    per_token = _np_kl(t, s, T)
    np.testing.assert_allclose(total / count, per_token[mask == 1].mean(), rtol=1e-5)
    starts, ends = [rng.normal(size=(2, 5)) * 2 for _ in range(4)], None
    teacher = {"start_logits": starts[0], "end_logits": starts[1]}
    student = {"start_logits": starts[2], "end_logits": starts[3]}
    total, count = losses.soft_target_sums("span", teacher, student, mask, T)
    expected = np.mean(
        [
            np.mean([_np_kl(t[r, m == 1], s[r, m == 1], T) for r, m in enumerate(mask)])
            for t, s in ((starts[0], starts[2]), (starts[1], starts[3]))
        ]
    )
    del ends
    np.testing.assert_allclose(total / count, expected, rtol=1e-5)
    t, s = rng.normal(size=(4, 1)), rng.normal(size=(4, 1))
    total, count = losses.soft_target_sums("regression", {"logits": t}, {"logits": s}, mask, T)
    np.testing.assert_allclose(total / count, ((t - s) ** 2).mean(), rtol=1e-5)


def test_hidden_and_attention_losses_match_numpy():
    rng = np.random.default_rng(2)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.int32)
    teacher = [rng.normal(size=(2, 4, 6)).astype(np.float32) for _ in range(2)]
    student = [rng.normal(size=(2, 4, 3)).astype(np.float32) for _ in range(2)]
    w = rng.normal(size=(3, 6)).astype(np.float32)
    total, count = losses.hidden_sums(teacher, student, mask, lambda h: tf.matmul(h, w))
    errors = [((s @ w - t) ** 2).mean(-1)[mask == 1] for t, s in zip(teacher, student)]
    np.testing.assert_allclose(total / count, np.concatenate(errors).mean(), rtol=1e-5)
    teacher = [rng.normal(size=(2, 2, 4, 4)).astype(np.float32)]
    student = [rng.normal(size=(2, 2, 4, 4)).astype(np.float32)]
    total, count = losses.attention_sums(teacher, student, mask)
    pairs = mask[:, :, None] * mask[:, None, :]
    error = ((student[0] - teacher[0]) ** 2).mean(1)
    np.testing.assert_allclose(total / count, error[pairs == 1].mean(), rtol=1e-5)


def _np_scores(block, h):
    """q.k / sqrt(D) per head from the block's kernels: [B, N, S, S]."""
    n = block.num_attention_heads
    d = h.shape[-1] // n

    def heads(layer):
        y = h @ layer.kernel.numpy() + layer.bias.numpy()  # (B, S, H)
        return y.reshape(h.shape[0], h.shape[1], n, d).transpose(0, 2, 1, 3)

    return heads(block.query) @ heads(block.key).transpose(0, 1, 3, 2) / np.sqrt(d)


def test_trainer_loss_is_the_documented_sum():
    """alpha * gold CE + (1 - alpha) * (T^2 KL + w_h * hidden MSE + w_a * attention MSE), every
    term from the two models' own outputs and NumPy, widths differing (projection)."""
    task = registry.get_task("mnli")
    teacher = task.build_model(
        keras_bert.BertEncoder(keras_bert.BertConfig(**dict(TINY, num_hidden_layers=2))), 0.1
    )
    student = task.build_model(
        keras_bert.BertEncoder(
            keras_bert.BertConfig(**dict(TINY, hidden_size=16, intermediate_size=32))
        ),
        0.1,
    )
    pairs = [(0, 0), (2, 1)]
    trainer = DistillTrainer(
        task, student, teacher, "classification", 3.0, 0.3, 0.5, 0.25, layer_pairs=pairs
    )
    x = _inputs()
    # The runner's batch: labels by the model's output name (`Task.targets`), GOLD kept.
    (y,) = task.targets({"label": tf.constant([0, 2, -1]), GOLD: tf.constant([1.0, 1.0, 0.0])})
    assert sorted(y) == [GOLD, "logits"]
    loss = float(trainer.compute_loss(x, y, trainer(x, training=False)))

    t_logits = teacher(x)["logits"].numpy()
    s_logits = student(x)["logits"].numpy()
    z = s_logits - s_logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    gold = -np.mean([log_p[0, 0], log_p[1, 2]])
    soft = _np_kl(t_logits, s_logits, 3.0).mean()
    mask = x["input_mask"].numpy()

    def states(model):
        enc = model.encoder
        out = enc(x)
        return [enc.embeddings(x["input_word_ids"], x["input_type_ids"]).numpy()] + [
            o.numpy() for o in out["encoder_outputs"]
        ]

    ts, ss = states(teacher), states(student)
    w = trainer.projection.kernel.numpy()
    hidden = np.concatenate(
        [((ss[s] @ w - ts[t]) ** 2).mean(-1)[mask == 1] for t, s in pairs]
    ).mean()
    pair_mask = (mask[:, :, None] * mask[:, None, :]) == 1
    t_scores = _np_scores(teacher.encoder.transformer_layers[1], ts[1])
    s_scores = _np_scores(student.encoder.transformer_layers[0], ss[0])
    attention = ((s_scores - t_scores) ** 2).mean(1)[pair_mask].mean()
    expected = 0.3 * gold + 0.7 * (soft + 0.5 * hidden + 0.25 * attention)
    np.testing.assert_allclose(loss, expected, rtol=1e-4)
    assert len(feature_view(student)(x)[STATES]) == 2  # embeddings + 1 block


# === End to end ===


def _unlabeled(path, n, seed):
    """SST-2 test.tsv layout: index<TAB>sentence."""
    with open(path, "w") as f:
        f.write("index\tsentence\n")
        f.writelines(f"{i}\t{s}\n" for i, (s, _) in enumerate(sentiment_rows(n, seed)))
    return str(path)


def test_distillation_beats_its_from_scratch_twin_and_exports(teacher, tmp_path):
    """16 gold labels and 384 sentences only the teacher labels: the distilled student (alpha
    0.5) beats its twin trained on the gold labels alone (alpha 1: same student, same steps),
    and its model/ exports to TFLite with the same answers."""
    data_dir = write_sst2(str(tmp_path / "few"), n_train=16)  # Same dev set as the teacher's.
    common = dict(
        teacher=teacher["model"],  # A random 1-layer student of the teacher's vocabulary:
        student_init_checkpoint=write_checkpoint(str(tmp_path / "student"), seed=1),
        data_dir=data_dir,
        unlabeled_file=_unlabeled(tmp_path / "unlabeled.tsv", 384, seed=5),
        do_train=True,
        do_eval=True,
        learning_rate=3e-3,
        num_train_epochs=5,
        batch_size=32,
        **QUIET,
    )
    distilled = run_distillation(
        model_dir=str(tmp_path / "distilled"), alpha=0.5, do_predict=True, **common
    )
    assert [os.path.basename(p) for p in distilled["predictions"]] == ["SST-2.tsv"]
    twin = run_distillation(model_dir=str(tmp_path / "twin"), alpha=1.0, **common)
    assert distilled["steps"] == twin["steps"] == 5 * 13
    assert distilled["eval"]["accuracy"] >= twin["eval"]["accuracy"] + 0.1, (distilled, twin)
    assert distilled["eval"]["accuracy"] >= teacher["accuracy"] - 0.1
    with open(tmp_path / "distilled" / "eval_results.json") as f:
        results = json.load(f)
    assert results["accuracy"] == distilled["eval"]["accuracy"]
    assert results["teacher"] == {"accuracy": pytest.approx(teacher["accuracy"])}

    # The student's model/ exports as any fine-tuned model: TFLite answers give the same accuracy.
    path = keras_bert.export.export(
        distilled["model_path"], str(tmp_path / "tflite"), format="tflite"
    )
    run = tflite.load_interpreter(os.path.join(path, tflite.MODEL_FILE)).get_signature_runner(
        "serving_default"
    )
    with open(os.path.join(data_dir, "dev.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    labels = [run(text=tflite.as_strings([text]))["label"][0].decode() for text, _ in rows]
    accuracy = np.mean([a == b for a, (_, b) in zip(labels, rows)])
    assert accuracy == pytest.approx(distilled["eval"]["accuracy"], abs=1.5 / len(rows))


def test_killed_distillation_resumes_exactly(teacher, tmp_path):
    config = dict(
        runner="distill",
        teacher=teacher["model"],
        student_layers=1,
        data_dir=teacher["data_dir"],
        do_train=True,
        max_train_examples=96,
        batch_size=16,
        num_train_epochs=1,
        steps_per_loop=1,
        checkpoint_every=2,
        learning_rate=1e-3,
        hidden_weight=1.0,
        seed=3,
        **QUIET,
    )
    full = run_config(dict(config, model_dir=str(tmp_path / "full")))
    killed = dict(config, model_dir=str(tmp_path / "killed"))
    spec = dict(configs=[killed], out=str(tmp_path / "never.json"), kill_after_checkpoint=4)
    proc = subprocess.run(
        [sys.executable, JOB, json.dumps(spec)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    resumed = run_config(killed)
    assert (resumed["start_step"], resumed["steps"]) == (4, 6)
    by_step = {h["step"]: h for h in full["history"]}
    for record in resumed["history"][4:]:
        np.testing.assert_allclose(record["loss"], by_step[record["step"]]["loss"], rtol=1e-5)
    assert abs(by_step[5]["loss"] - by_step[6]["loss"]) > 1e-5
    for a, b in zip(resumed["model"].weights, full["model"].weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7, err_msg=a.path)
    # The frozen teacher is not in the training checkpoints: they hold the student alone.
    ckpt = tf.train.latest_checkpoint(str(tmp_path / "killed" / "checkpoints"))
    saved = sum(int(np.prod(shape)) for name, shape in tf.train.list_variables(ckpt))
    student = sum(int(np.prod(v.shape)) for v in full["model"].weights)
    assert saved < 4 * student  # Weights, two Adam moments and a few counters; no teacher.


@pytest.mark.parametrize(
    "task",
    [
        "conll2003",
        "squad1",
        pytest.param("stsb", marks=pytest.mark.slow),
        pytest.param("swag", marks=pytest.mark.slow),
    ],
)
def test_each_task_kind_distills(task, tmp_path):
    """A teacher of each kind (a few steps) distils into a 1-layer student with every loss on
    (classification: the tests above; the masked kinds by default, regression and multiple
    choice under `slow`)."""
    data_dir = write_task_data(str(tmp_path / "data"), task)
    options = task_options(task)
    common = dict(data_dir=data_dir, do_train=True, batch_size=8, task_options=options, **QUIET)
    fine_tuned = run_finetuning(
        task=task,
        init_checkpoint=write_checkpoint(str(tmp_path / "ckpt"), num_hidden_layers=2),
        model_dir=str(tmp_path / "teacher"),
        num_train_epochs=1,
        seq_length=32,
        learning_rate=1e-3,
        **common,
    )
    summary = run_distillation(
        teacher=fine_tuned["model_path"],
        student_layers=1,
        model_dir=str(tmp_path / "student"),
        do_eval=True,
        hidden_weight=1.0,
        attention_weight=1.0,
        num_train_epochs=1,
        **common,
    )
    assert np.isfinite([h["loss"] for h in summary["history"]]).all()
    assert set(summary["eval"]) == set(summary["teacher_eval"])
    with open(os.path.join(summary["model_path"], "task.json")) as f:
        assert json.load(f)["task"] == task


# === Bad input: one clear error each, nothing written ===


def _assert_nothing_written(path):
    assert not os.path.exists(path) or not os.listdir(path)


def test_bad_input_is_one_clear_error(teacher, tmp_path):
    other_vocab = list(VOCAB[:-1]) + ["zebra"]
    other = str(tmp_path / "other")
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**dict(TINY, vocab_size=len(VOCAB))))
    checkpoints.save(encoder, other, format="google", vocab=other_vocab)
    common = dict(data_dir=teacher["data_dir"], do_train=True, **QUIET)
    cases = [
        (
            dict(teacher=str(tmp_path / "nope"), student_layers=1),
            FileNotFoundError,
            "does not exist",
        ),
        (
            dict(teacher=teacher["checkpoint"], student_layers=1),
            ValueError,
            "is not a fine-tuned task model",
        ),
        (
            dict(teacher=teacher["model"], student_layers=0),
            ValueError,
            "student_layers must be >= 1",
        ),
        (
            dict(teacher=teacher["model"], student_layers=2),
            ValueError,
            r"student_layers must be in \[1, 1\] \(the teacher has 1 layers\), got 2",
        ),
        (
            dict(teacher=teacher["model"], student_layer_ids="1"),
            ValueError,
            r"student_layer_ids must be in \[0, 0\] \(the teacher has 1 layers\), got '1'",
        ),
        (
            dict(teacher=teacher["model"], student_layer_ids="0,0"),
            ValueError,
            r"comma-separated in increasing order \(e.g. '1,3,5'\), got '0,0'",
        ),
        (
            dict(teacher=teacher["model"], student_layer_ids="first"),
            ValueError,
            "student_layer_ids must be the teacher's 0-based layers.* got 'first'",
        ),
        (
            dict(teacher=teacher["model"], student_layers=2, student_layer_ids="0"),
            ValueError,
            r"student_layers=2 but student_layer_ids names 1 layers \(0\)",
        ),
        (
            dict(teacher=teacher["model"], student_layer_ids="0", student_preset="L-2_H-128"),
            ValueError,
            "Pass one student",
        ),
        (
            dict(
                teacher=teacher["model"], student_preset="L-2_H-128", student_init_checkpoint=other
            ),
            ValueError,
            f"differs from the teacher's .* at id {len(VOCAB) - 1}: 'zebra' vs 'boring'",
        ),
    ]
    for i, (settings, error, match) in enumerate(cases):
        model_dir = str(tmp_path / f"run{i}")
        with pytest.raises(error, match=match):
            run_distillation(model_dir=model_dir, **settings, **common)
        _assert_nothing_written(model_dir)


@pytest.mark.slow
def test_distillation_on_jax_with_two_devices_exports_on_tensorflow(teacher, tmp_path):
    """`KERAS_BACKEND=jax keras-bert-distill` over two XLA host devices: the TensorFlow-trained
    teacher's `.keras` model teaches a 1-layer student whose loss falls, whose eval_results.json
    has the runner's accuracy, and whose model/ exports (on TensorFlow) with the same answers."""
    config = dict(
        runner="distill",
        teacher=teacher["model"],
        student_layers=1,
        data_dir=teacher["data_dir"],
        do_train=True,
        do_eval=True,
        batch_size=16,
        num_train_epochs=4,
        learning_rate=3e-3,
        hidden_weight=1.0,
        distribution="data_parallel",
        model_dir=str(tmp_path / "student"),
        **QUIET,
    )
    spec = dict(configs=[config], out=str(tmp_path / "out.json"))
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    proc = subprocess.run(
        [sys.executable, JOB, json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert result["replicas"] == 2
    losses = [h["loss"] for h in result["history"]]
    assert np.isfinite(losses).all() and np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    with open(tmp_path / "student" / "eval_results.json") as f:
        accuracy = json.load(f)["accuracy"]
    assert accuracy == result["eval"]["accuracy"] >= 0.75
    path = keras_bert.export.export(
        str(tmp_path / "student" / "model"), str(tmp_path / "serving"), format="saved_model"
    )
    serve = tf.saved_model.load(path).signatures["serving_default"]
    with open(os.path.join(teacher["data_dir"], "dev.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    labels = serve(text=tf.constant([text for text, _ in rows]))["label"].numpy()
    served = np.mean([a.decode() == b for a, (_, b) in zip(labels, rows)])
    assert served == pytest.approx(accuracy, abs=1.5 / len(rows))
