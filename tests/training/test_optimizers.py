"""The paper's optimizer against a NumPy reference: warmup/decay schedule, AdamW with
decoupled weight decay except LayerNorm and bias, global-norm clipping, gradient
accumulation, LAMB."""

import keras
import numpy as np
import pytest

import keras_bert
from keras_bert.training import optimizers

B1, B2, EPS, WD = 0.9, 0.999, 1e-6, 0.01


def reference_lr(step, peak, total, warmup):
    if step < warmup:
        return peak * step / warmup
    return peak * max(total - step, 0) / (total - warmup)


def test_schedule_matches_formula():
    schedule = optimizers.WarmupLinearDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    for step in (0, 1, 5, 9, 10, 11, 50, 99, 100, 130):
        np.testing.assert_allclose(float(schedule(step)), reference_lr(step, 1e-3, 100, 10), rtol=1e-6, atol=1e-12)
    accumulated = optimizers.WarmupLinearDecay(1e-3, 100, 10, steps_per_update=4)
    np.testing.assert_allclose(float(accumulated(4 * 37 + 3)), reference_lr(37, 1e-3, 100, 10), rtol=1e-6)
    clone = optimizers.WarmupLinearDecay.from_config(schedule.get_config())
    assert float(clone(42)) == float(schedule(42))
    with pytest.raises(ValueError, match="num_warmup_steps"):
        optimizers.WarmupLinearDecay(1e-3, 10, 20)


def _toy_variables():
    """A Dense and a LayerNorm: paths dense/kernel, dense/bias, LayerNorm/gamma, LayerNorm/beta."""
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.LayerNormalization(name="LayerNorm")(
        keras.layers.Dense(4, name="dense")(inputs)))
    for v in model.trainable_variables:
        v.assign(np.random.default_rng(len(v.path)).normal(size=v.shape))
    return model.trainable_variables


def _grads(variables, rng, scale=3.0):
    return [rng.normal(size=v.shape).astype("float32") * scale for v in variables]


def _reference_adamw(weights, grads_per_step, lrs, decayed, clip=1.0):
    w = [x.astype(np.float64) for x in weights]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
        grads = [g * min(1.0, clip / norm) for g in grads]
        alpha = lr * np.sqrt(1 - B2 ** t) / (1 - B1 ** t)
        for i, g in enumerate(grads):
            if decayed[i]:
                w[i] = w[i] - lr * WD * w[i]
            m[i] = B1 * m[i] + (1 - B1) * g
            v[i] = B2 * v[i] + (1 - B2) * g * g
            w[i] = w[i] - alpha * m[i] / (np.sqrt(v[i]) + EPS)
    return w


def test_adamw_matches_numpy_reference():
    variables = _toy_variables()
    start = [v.numpy() for v in variables]
    opt = optimizers.create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=2, variables=variables)
    rng = np.random.default_rng(0)
    steps = [_grads(variables, rng) for _ in range(4)]
    for grads in steps:
        opt.apply(grads, variables)
    decayed = [v.path in ("dense/kernel",) for v in variables]
    assert decayed.count(True) == 1
    expected = _reference_adamw(start, steps, [reference_lr(t, 1e-2, 10, 2) for t in range(4)], decayed)
    for v, e in zip(variables, expected):
        np.testing.assert_allclose(v.numpy(), e, rtol=2e-5, atol=1e-6, err_msg=v.path)
    assert int(opt.iterations.numpy()) == 4


def test_gradient_accumulation_is_one_update_with_the_mean_gradient():
    variables = _toy_variables()
    start = [v.numpy() for v in variables]
    opt = optimizers.create_optimizer(1e-2, 10, 0, variables=variables, grad_accumulation_steps=2)
    rng = np.random.default_rng(1)
    micro = [_grads(variables, rng, scale=0.1) for _ in range(4)]
    for i, grads in enumerate(micro):
        opt.apply(grads, variables)
        if i == 0:  # Nothing moves until the second micro-batch.
            for v, s in zip(variables, start):
                np.testing.assert_array_equal(v.numpy(), s)
    assert int(opt.iterations.numpy()) == 2
    means = [[(a + b) / 2 for a, b in zip(micro[0], micro[1])], [(a + b) / 2 for a, b in zip(micro[2], micro[3])]]
    decayed = [v.path == "dense/kernel" for v in variables]
    expected = _reference_adamw(start, means, [reference_lr(t, 1e-2, 10, 0) for t in range(2)], decayed)
    for v, e in zip(variables, expected):
        np.testing.assert_allclose(v.numpy(), e, rtol=2e-5, atol=1e-6, err_msg=v.path)


def test_lamb_matches_numpy_reference():
    variables = _toy_variables()
    w = [v.numpy().astype(np.float64) for v in variables]
    opt = optimizers.create_optimizer(1e-2, 10, 0, variables=variables, optimizer="lamb", clip_norm=None)
    grads = _grads(variables, np.random.default_rng(2))
    opt.apply(grads, variables)
    lr = reference_lr(0, 1e-2, 10, 0)
    for i, (v, g) in enumerate(zip(variables, grads)):
        x = w[i] - lr * WD * w[i] if v.path == "dense/kernel" else w[i]
        update = ((1 - B1) * g / (1 - B1)) / (np.sqrt((1 - B2) * g * g / (1 - B2)) + EPS)
        ratio = np.linalg.norm(x) / np.linalg.norm(update)
        np.testing.assert_allclose(v.numpy(), x - lr * ratio * update, rtol=2e-5, atol=1e-6, err_msg=v.path)


def test_weight_decay_skips_layer_norm_and_bias_of_bert():
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny", vocab_size=40)))
    variables = model.trainable_variables
    excluded = {v.path for v in optimizers.decay_excluded(variables)}
    assert "cls_predictions/output_bias" in excluded and "embeddings/LayerNorm/gamma" in excluded
    assert all(p.endswith(("bias", "/gamma", "/beta")) for p in excluded)
    assert {v.path for v in variables if v.path.endswith(("bias", "/gamma", "/beta"))} == excluded
    # With zero gradients Adam does not move; only decay does, and only the others.
    before = [v.numpy() for v in variables]
    opt = optimizers.create_optimizer(0.5, 10, 0, variables=variables)
    opt.apply([np.zeros(v.shape, "float32") for v in variables], variables)
    for v, b in zip(variables, before):
        factor = 1.0 if v.path in excluded else 1 - 0.5 * WD
        np.testing.assert_allclose(v.numpy(), b * factor, rtol=1e-6, atol=1e-9, err_msg=v.path)


def test_options_and_errors():
    variables = _toy_variables()
    scaled = optimizers.create_optimizer(1e-3, 10, 1, variables=variables, loss_scale=True)
    assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)
    assert isinstance(scaled.inner_optimizer, optimizers.AdamW)
    plain = optimizers.create_optimizer(1e-3, 10, 1, variables=variables)
    assert plain.global_clipnorm == 1.0 and plain.epsilon == 1e-6 and plain.beta_2 == 0.999
    with pytest.raises(ValueError, match="Unknown optimizer 'sgd'"):
        optimizers.create_optimizer(1e-3, 10, 1, variables=variables, optimizer="sgd")
    with pytest.raises(ValueError, match="grad_accumulation_steps"):
        optimizers.create_optimizer(1e-3, 10, 1, variables=variables, grad_accumulation_steps=0)
