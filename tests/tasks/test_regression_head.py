"""STS-B's regression head, pinned against NumPy: the score is the raw output of one dense unit on
`pooled_output` (no squashing, no label scaling), fractional gold scores reach the loss unrounded,
and the runner's batches and a Python user's `fit` train with the same loss: the model's own
(`BertClassifier.loss_sums`), the mean squared error."""

import numpy as np
import pytest

from keras_bert.config import BertConfig
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks import registry
from keras_bert.tasks.glue import data as glue
from keras_bert.text.tokenizer import BertTokenizer

WORDS = "a man is playing guitar woman the cutting onion dog runs".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


def _model():
    config = BertConfig.preset("tiny", vocab_size=len(VOCAB))
    model = BertClassifier(BertEncoder(config), num_classes=1, dropout=0.0)
    # A fine-tuned head's magnitude, so that a squashing or scaling of the output would show.
    head = model.get_layer("classifier")
    rng = np.random.default_rng(0)
    head.kernel.assign(rng.normal(0.0, 0.5, head.kernel.shape).astype(np.float32))
    head.bias.assign(np.array([2.5], np.float32))
    return model


def _examples():
    pairs = [
        ("a man is playing guitar", "a man plays guitar", 4.6),
        ("a woman is cutting onion", "a dog runs", 0.2),
        ("the dog runs", "a dog is playing", 2.75),
        ("a man", "the woman", 1.4),
        ("guitar", "onion", 0.0),
    ]
    return [glue.InputExample(f"dev-{i}", a, b, s) for i, (a, b, s) in enumerate(pairs)]


def test_regression_head_output_and_loss_against_numpy():
    model, task = _model(), registry.get_task("stsb")
    examples = _examples()
    feats = task.encode(examples, BertTokenizer(VOCAB), 16)
    gold = np.array([e.label for e in examples], np.float32)
    np.testing.assert_array_equal(feats.labels["label"], gold)  # 2.75 stays 2.75.
    assert feats.labels["label"].dtype == np.float32

    batches, padded = feature_lib.batch_plan(feats.lengths, 8, shuffle=False)
    dataset = feature_lib.make_dataset(
        feats, batches, padded, label_keys=task.label_keys, targets=task.targets
    )
    inputs, labels = next(iter(dataset))  # The runner's y: labels by the model's output name.
    np.testing.assert_array_equal(np.sort(labels["logits"].numpy()), np.sort(gold))

    outputs = model(inputs, training=False)
    pooled = model.encoder(inputs, training=False)["pooled_output"].numpy()
    head = model.get_layer("classifier")
    want = pooled @ head.kernel.numpy() + head.bias.numpy()  # The raw dense unit: [B, 1].
    np.testing.assert_allclose(outputs["logits"].numpy(), want, rtol=1e-5, atol=1e-5)

    total, count = model.loss_sums(labels, outputs)
    error = want[:, 0] - labels["logits"].numpy()
    np.testing.assert_allclose(float(total), np.sum(error**2), rtol=1e-5)
    assert float(count) == len(examples)

    # The loss a compiled model trains with (the runner's and a Python user's fit): the mean
    # squared error on the same rows (no [B] x [B, 1] broadcast to a [B, B] matrix), also for a
    # fit's plain array of scores.
    model.compile()
    fit_loss = model.compute_loss(inputs, labels["logits"].numpy(), outputs)
    assert float(fit_loss) == pytest.approx(float(total) / float(count), rel=1e-5)
    near = labels["logits"].numpy()[:, None] + np.float32(0.1)  # [B, 1], 0.1 from each score.
    near_loss = model.compute_loss(inputs, labels["logits"].numpy(), {"logits": near})
    assert float(near_loss) == pytest.approx(0.01, rel=1e-4)


def test_predictions_are_the_raw_scores_and_the_metrics_scipys():
    from scipy import stats

    task = registry.get_task("stsb")
    examples = _examples()
    feats = task.encode(examples, BertTokenizer(VOCAB), 16)
    scores = np.array([[3.1], [0.4], [2.2], [1.9], [-0.3]], np.float32)
    predictions = task.predictions(examples, feats, {"logits": scores})
    np.testing.assert_allclose(predictions, scores[:, 0])  # Unclipped for the metrics.
    metrics = task.evaluate(examples, feats, {"logits": scores})
    gold = [e.label for e in examples]
    assert metrics["pearson"] == pytest.approx(stats.pearsonr(scores[:, 0], gold)[0])
    assert metrics["spearman"] == pytest.approx(stats.spearmanr(scores[:, 0], gold)[0])


def test_a_new_regression_head_starts_at_the_mean_score():
    """`center_regression_head`: a new one-unit head's bias becomes the mean training score (its
    outputs move by exactly that); a trained bias, a classifier and empty scores are left alone."""
    from keras_bert.models.task_models import center_regression_head

    config = BertConfig.preset("tiny", vocab_size=len(VOCAB))
    model = BertClassifier(BertEncoder(config), num_classes=1, dropout=0.0)
    ids = {
        "input_word_ids": np.array([[2, 5, 6, 3]], np.int32),
        "input_mask": np.ones([1, 4], np.int32),
        "input_type_ids": np.zeros([1, 4], np.int32),
    }
    before = model(ids)["logits"].numpy()
    scores = np.array([4.6, 0.2, 2.75, 1.4, 0.0], np.float32)
    assert center_regression_head(model, scores)
    np.testing.assert_allclose(model.get_layer("classifier").bias.numpy(), [np.mean(scores)])
    np.testing.assert_allclose(model(ids)["logits"].numpy(), before + np.mean(scores), rtol=1e-6)
    assert not center_regression_head(model, [5.0, 5.0])  # Already set: a trained head stays.
    np.testing.assert_allclose(model.get_layer("classifier").bias.numpy(), [np.mean(scores)])
    classifier = BertClassifier(BertEncoder(config), num_classes=3)
    assert not center_regression_head(classifier, scores)
    assert not np.any(classifier.get_layer("classifier").bias.numpy())
    fresh = BertClassifier(BertEncoder(config), num_classes=1)
    assert not center_regression_head(fresh, [])


def test_fit_starts_a_regression_head_at_the_mean_as_the_runner_does():
    """A Python user's `fit` on scores: the new head's bias is the mean score before the first
    step (a zero learning rate keeps it there); a second fit leaves the trained bias alone."""
    import keras

    model = BertClassifier(BertEncoder(BertConfig.preset("tiny", vocab_size=len(VOCAB))), 1)
    ids = {
        "input_word_ids": np.tile(np.array([[2, 5, 6, 3]], np.int32), (4, 1)),
        "input_mask": np.ones([4, 4], np.int32),
        "input_type_ids": np.zeros([4, 4], np.int32),
    }
    scores = np.array([4.0, 1.0, 2.5, 0.5], np.float32)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss={"logits": "mse"})
    model.fit(ids, {"logits": scores[:, None]}, batch_size=4, epochs=1, verbose=0)
    np.testing.assert_allclose(model.get_layer("classifier").bias.numpy(), [2.0])
    model.fit(ids, {"logits": scores[:, None] + 1.0}, batch_size=4, epochs=1, verbose=0)
    np.testing.assert_allclose(model.get_layer("classifier").bias.numpy(), [2.0])
