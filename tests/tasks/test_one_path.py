"""One fine-tuning path: the runner (`keras_bert.tasks`) compiles and fits the task model classes
that Python users get, with their own loss (`loss_sums`) and metrics, and pads its batches by the
rule of `fit`'s. The same examples through the runner's FeatureSet batches and through `fit`'s
raw-text batches give the same token ids and the same loss; each model's loss against NumPy."""

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.models.task_models import BertClassifier, BertSpanLabeler, BertTokenClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks import registry
from keras_bert.tasks.glue import data as glue
from keras_bert.text import task_data

PAIRS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "checkpoints", "hf_tasks", "pairs"
)
A = ["The film was great.", "John lives in Paris", "an awful plot", "fine", "bad film", "good"]
B = ["Mary loved it", "where is London ?", "the movie", "plots", "a film", "it was"]
LABELS = np.array([1, 2, 0, 1, 0, 2], np.int32)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_the_runners_batches_and_fits_give_the_same_ids_and_loss():
    """MNLI-style pairs (3 classes) through the runner's task (encode, batch plan, `targets`)
    and through `fit`'s raw-text dataset: the same rows of token ids, and the compiled model's
    loss (the one both train with) equal on both batches and equal to NumPy's cross-entropy."""
    model = BertClassifier.from_preset(PAIRS, seq_length=32, text_pair=True)
    task = registry.get_task("mnli")
    examples = [
        glue.InputExample(f"dev-{i}", a, b, task.spec.labels[y])
        for i, (a, b, y) in enumerate(zip(A, B, LABELS))
    ]
    feats = task.encode(examples, model.preprocessor.tokenizer, 32)
    # The runner's fixed-shape buckets (`FinetuneConfig.bucket_lengths`): fit's sizes.
    sizes = task_data.bucket_sizes(32)
    batches, padded = feature_lib.batch_plan(feats.lengths, 6, buckets=sizes)
    (x_run, y_run), *_ = feature_lib.make_dataset(
        feats, batches, padded, label_keys=task.label_keys, targets=task.targets
    )
    (x_fit, y_fit), *_ = model._dataset((A, B), LABELS, batch_size=6)
    order = batches[0]  # The runner sorts by length: its row r is example order[r].
    np.testing.assert_array_equal(y_run["logits"].numpy(), LABELS[order])
    np.testing.assert_array_equal(y_fit["logits"].numpy(), LABELS)
    assert x_run["input_word_ids"].shape[1] == x_fit["input_word_ids"].shape[1] == 32
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(x_run[name].numpy(), x_fit[name].numpy()[order])

    model.compile()  # The paper's recipe; the runner compiles the same way with its optimizer.
    losses = []
    for x, y in ((x_run, y_run), (x_fit, y_fit)):
        out = model(x, training=False)
        losses.append(float(model.compute_loss(x, y, out)))
    logits = model(x_fit, training=False)["logits"].numpy()
    want = -np.mean(_log_softmax(logits.astype(np.float64))[np.arange(6), LABELS])
    assert losses == pytest.approx([want, want], rel=1e-5)


def test_span_and_token_losses_against_numpy():
    """`BertSpanLabeler`: the mean of the start and end cross-entropies (§4.2), for `fit`'s pair
    of positions and the runner's dict alike; `BertTokenClassifier`: over tagged tokens only
    (label -1 left out), the same count whichever batch holds them."""
    rng = np.random.default_rng(0)
    start, end = rng.normal(size=[3, 7]), rng.normal(size=[3, 7])
    positions = (np.array([1, 4, 0]), np.array([2, 6, 0]))
    span = BertSpanLabeler.__new__(BertSpanLabeler)  # loss_sums reads no weights.
    lp_s, lp_e = _log_softmax(start), _log_softmax(end)
    want = -np.mean((lp_s[np.arange(3), positions[0]] + lp_e[np.arange(3), positions[1]]) / 2.0)
    outputs = {"start_logits": start.astype(np.float32), "end_logits": end.astype(np.float32)}
    for y in (span._targets(positions), {"start_logits": positions[0], "end_logits": positions[1]}):
        total, count = span.loss_sums(span._targets(y), outputs)
        assert float(total) / float(count) == pytest.approx(want, rel=1e-5)

    logits = rng.normal(size=[2, 5, 4]).astype(np.float32)
    tags = np.array([[-1, 0, 3, -1, -1], [-1, 2, 2, 1, -1]], np.int32)
    tokens = BertTokenClassifier.__new__(BertTokenClassifier)
    tokens.num_classes = 4
    total, count = tokens.loss_sums({"logits": tags}, {"logits": logits})
    tagged = tags >= 0
    lp = _log_softmax(logits.astype(np.float64))
    picked = np.take_along_axis(lp, np.maximum(tags, 0)[..., None], -1)[..., 0]
    assert float(count) == tagged.sum() == 5
    assert float(total) == pytest.approx(-picked[tagged].sum(), rel=1e-5)
    # Per-example weights (the runner's padding documents) multiply each example's terms.
    total, count = tokens.loss_sums(
        {"logits": tags}, {"logits": logits}, np.array([0.0, 1.0], np.float32)
    )
    assert float(count) == 3 and float(total) == pytest.approx(-picked[1][tagged[1]].sum(), 1e-5)


def test_the_runner_and_fit_pad_batches_by_one_rule():
    """`trim_padding` (fit, in the graph) cuts a batch to the length `padded_length` (the runner's
    batch plans) gives, for every longest row."""
    seq_length = 100
    sizes = task_data.bucket_sizes(seq_length)
    assert sizes == [32, 64, 100]
    for longest in range(1, seq_length + 1):
        mask = np.zeros([2, seq_length], np.int32)
        mask[0, :longest] = 1
        mask[1, : max(1, longest // 2)] = 1
        inputs = {"input_mask": tf.constant(mask), "input_word_ids": tf.constant(mask)}
        cut = task_data.trim_padding(inputs, seq_length)["input_mask"].shape[1]
        assert cut == feature_lib.padded_length(longest, sizes), longest


def test_the_runner_fits_the_task_model_itself(tmp_path):
    """A run's trained model is the task model class, compiled as `fit` compiles it (its own
    loss and metrics), no wrapper; the old wrapper's name warns."""
    from keras_bert.tasks import finetuning as runner
    from keras_bert.testing.tiny_tasks import write_checkpoint, write_sst2

    data = write_sst2(str(tmp_path / "sst2"), n_train=16, n_dev=8, n_test=4)
    summary = runner.run_finetuning(
        task="sst2",
        data_dir=data,
        init_checkpoint=write_checkpoint(str(tmp_path / "ckpt")),
        model_dir=str(tmp_path / "run"),
        do_train=True,
        do_eval=True,
        batch_size=8,
        num_train_epochs=1,
        seq_length=32,
    )
    model = summary["model"]
    assert type(model) is BertClassifier and model.compiled and model._task_loss
    assert [m.name for m in model.metrics] == ["loss", "compile_metrics"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.TaskTrainer(registry.get_task("sst2"), model)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert isinstance(runner.TaskTrainer, type) and issubclass(
        runner.TaskTrainer, runner.TrainingWrapper
    )
