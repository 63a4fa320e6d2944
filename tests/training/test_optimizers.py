"""The paper's optimizers against NumPy references: warmup/decay schedule, AdamW with
decoupled weight decay except LayerNorm and bias, global-norm clipping, gradient
accumulation, LAMB, and the original's AdamWeightDecay (no bias correction) with loss
scaling, tf.distribute, XLA, serialization and checkpoints."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from logical_cpus import run_on_logical_cpus

import keras_bert
from keras_bert.checkpoints.training import TrainingCheckpoint
from keras_bert.training import optimizers

B1, B2, EPS, WD = 0.9, 0.999, 1e-6, 0.01


def reference_lr(step, peak, total, warmup):
    if step < warmup:
        return peak * step / warmup
    return peak * max(total - step, 0) / (total - warmup)


def test_schedule_matches_formula():
    schedule = optimizers.WarmupLinearDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    for step in (0, 1, 5, 9, 10, 11, 50, 99, 100, 130):
        np.testing.assert_allclose(
            float(schedule(step)), reference_lr(step, 1e-3, 100, 10), rtol=1e-6, atol=1e-12
        )
    accumulated = optimizers.WarmupLinearDecay(1e-3, 100, 10, steps_per_update=4)
    np.testing.assert_allclose(
        float(accumulated(4 * 37 + 3)), reference_lr(37, 1e-3, 100, 10), rtol=1e-6
    )
    clone = optimizers.WarmupLinearDecay.from_config(schedule.get_config())
    assert float(clone(42)) == float(schedule(42))
    with pytest.raises(ValueError, match="num_warmup_steps"):
        optimizers.WarmupLinearDecay(1e-3, 10, 20)


def _toy_model():
    """A Dense and a LayerNorm: paths dense/kernel, dense/bias, LayerNorm/gamma, LayerNorm/beta."""
    inputs = keras.Input((3,))
    model = keras.Model(
        inputs,
        keras.layers.LayerNormalization(name="LayerNorm")(
            keras.layers.Dense(4, name="dense")(inputs)
        ),
    )
    for v in model.trainable_variables:
        v.assign(np.random.default_rng(len(v.path)).normal(size=v.shape))
    return model


def _toy_variables():
    return _toy_model().trainable_variables


def _grads(variables, rng, scale=3.0):
    return [rng.normal(size=v.shape).astype("float32") * scale for v in variables]


def _clip_by_global_norm(grads, clip):
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    return [g * min(1.0, clip / norm) for g in grads]


def _reference_adamw(weights, grads_per_step, lrs, decayed, clip=1.0):
    w = [x.astype(np.float64) for x in weights]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        grads = _clip_by_global_norm(grads, clip)
        alpha = lr * np.sqrt(1 - B2**t) / (1 - B1**t)
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
    opt = optimizers.create_optimizer(
        1e-2, num_train_steps=10, num_warmup_steps=2, variables=variables
    )
    rng = np.random.default_rng(0)
    steps = [_grads(variables, rng) for _ in range(4)]
    for grads in steps:
        opt.apply(grads, variables)
    decayed = [v.path in ("dense/kernel",) for v in variables]
    assert decayed.count(True) == 1
    expected = _reference_adamw(
        start, steps, [reference_lr(t, 1e-2, 10, 2) for t in range(4)], decayed
    )
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
    means = [
        [(a + b) / 2 for a, b in zip(micro[0], micro[1])],
        [(a + b) / 2 for a, b in zip(micro[2], micro[3])],
    ]
    decayed = [v.path == "dense/kernel" for v in variables]
    expected = _reference_adamw(
        start, means, [reference_lr(t, 1e-2, 10, 0) for t in range(2)], decayed
    )
    for v, e in zip(variables, expected):
        np.testing.assert_allclose(v.numpy(), e, rtol=2e-5, atol=1e-6, err_msg=v.path)


def test_lamb_matches_numpy_reference():
    variables = _toy_variables()
    w = [v.numpy().astype(np.float64) for v in variables]
    opt = optimizers.create_optimizer(
        1e-2, 10, 0, variables=variables, optimizer="lamb", clip_norm=None
    )
    grads = _grads(variables, np.random.default_rng(2))
    opt.apply(grads, variables)
    lr = reference_lr(0, 1e-2, 10, 0)
    for i, (v, g) in enumerate(zip(variables, grads)):
        x = w[i] - lr * WD * w[i] if v.path == "dense/kernel" else w[i]
        update = ((1 - B1) * g / (1 - B1)) / (np.sqrt((1 - B2) * g * g / (1 - B2)) + EPS)
        ratio = np.linalg.norm(x) / np.linalg.norm(update)
        np.testing.assert_allclose(
            v.numpy(), x - lr * ratio * update, rtol=2e-5, atol=1e-6, err_msg=v.path
        )


@pytest.mark.parametrize("name", ["adamw", "adam_weight_decay"])
def test_weight_decay_skips_layer_norm_and_bias_of_bert(name):
    model = keras_bert.BertPretrainer(
        keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny", vocab_size=40))
    )
    variables = model.trainable_variables
    excluded = {v.path for v in optimizers.decay_excluded(variables)}
    assert "cls_predictions/output_bias" in excluded and "embeddings/LayerNorm/gamma" in excluded
    assert all(p.endswith(("bias", "/gamma", "/beta")) for p in excluded)
    assert {v.path for v in variables if v.path.endswith(("bias", "/gamma", "/beta"))} == excluded
    # With zero gradients Adam does not move; only decay does, and only the others.
    before = [v.numpy() for v in variables]
    opt = optimizers.create_optimizer(0.5, 10, 0, variables=variables, optimizer=name)
    opt.apply([np.zeros(v.shape, "float32") for v in variables], variables)
    for v, b in zip(variables, before):
        factor = 1.0 if v.path in excluded else 1 - 0.5 * WD  # Decayed once, not twice.
        np.testing.assert_allclose(v.numpy(), b * factor, rtol=1e-6, atol=1e-9, err_msg=v.path)


def test_options_and_errors():
    variables = _toy_variables()
    scaled = optimizers.create_optimizer(1e-3, 10, 1, variables=variables, loss_scale=True)
    assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)
    assert isinstance(scaled.inner_optimizer, optimizers.AdamW)
    plain = optimizers.create_optimizer(1e-3, 10, 1, variables=variables)
    assert plain.global_clipnorm == 1.0 and plain.epsilon == 1e-6 and plain.beta_2 == 0.999
    original = optimizers.create_optimizer(
        1e-3, 10, 1, variables=variables, optimizer="adam_weight_decay"
    )
    assert isinstance(original, optimizers.AdamWeightDecay) and original.global_clipnorm == 1.0
    assert (
        original.weight_decay is None
    )  # Keras' own decay stays off: decay happens once, in the update.
    defaults = optimizers.AdamWeightDecay()
    assert (defaults.beta_1, defaults.beta_2, defaults.epsilon) == (0.9, 0.999, 1e-6)
    assert (
        defaults.weight_decay_rate == 0.01
        and defaults.no_decay_pattern == "LayerNorm|layer_norm|bias"
    )
    with pytest.raises(ValueError, match="weight_decay_rate"):
        optimizers.AdamWeightDecay(weight_decay=0.01)
    with pytest.raises(ValueError, match="Unknown optimizer 'sgd'"):
        optimizers.create_optimizer(1e-3, 10, 1, variables=variables, optimizer="sgd")
    with pytest.raises(ValueError, match="grad_accumulation_steps"):
        optimizers.create_optimizer(1e-3, 10, 1, variables=variables, grad_accumulation_steps=0)


# === AdamWeightDecay: the original's optimizer ===


def _reference_adam_weight_decay(weights, grads_per_step, lrs, decayed, clip=1.0):
    """google-research/bert `AdamWeightDecayOptimizer.apply_gradients` after its
    `tf.clip_by_global_norm(grads, 1.0)`, in float64."""
    w = [x.astype(np.float64) for x in weights]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    for grads, lr in zip(grads_per_step, lrs):
        grads = _clip_by_global_norm(grads, clip) if clip else grads
        for i, g in enumerate(grads):
            m[i] = B1 * m[i] + (1.0 - B1) * g
            v[i] = B2 * v[i] + (1.0 - B2) * np.square(g)
            update = m[i] / (np.sqrt(v[i]) + EPS)  # No bias correction.
            if decayed[i]:
                update += WD * w[i]
            w[i] = w[i] - lr * update
    return w


def _assert_weights(variables, expected, rtol=1e-5):
    for v, e in zip(variables, expected):
        np.testing.assert_allclose(v.numpy(), e, rtol=rtol, atol=1e-6, err_msg=v.path)


def test_adam_weight_decay_matches_the_original_update_rule():
    variables = _toy_variables()
    start = [v.numpy() for v in variables]
    opt = optimizers.create_optimizer(
        1e-2,
        num_train_steps=6,
        num_warmup_steps=2,
        variables=variables,
        optimizer="adam_weight_decay",
    )
    rng = np.random.default_rng(3)
    steps = [_grads(variables, rng) for _ in range(5)]  # Through warmup, the peak and the decay.
    assert (
        min(np.sqrt(sum((g**2).sum() for g in grads)) for grads in steps) > 2.0
    )  # Clipping is active.
    for grads in steps:
        opt.apply(grads, variables)
    decayed = [v.path == "dense/kernel" for v in variables]
    expected = _reference_adam_weight_decay(
        start, steps, [reference_lr(t, 1e-2, 6, 2) for t in range(5)], decayed
    )
    _assert_weights(variables, expected)
    assert int(opt.iterations.numpy()) == 5


def test_adam_weight_decay_has_no_bias_correction_unlike_adamw():
    model = _toy_model()
    start = [v.numpy() for v in model.trainable_variables]
    grads = _grads(model.trainable_variables, np.random.default_rng(4))
    moved = {}
    for name in ("adamw", "adam_weight_decay"):
        variables = _toy_model().trainable_variables
        opt = optimizers.create_optimizer(
            1e-2, 10, 0, variables=variables, optimizer=name, clip_norm=None
        )
        opt.apply(grads, variables)
        moved[name] = [s - v.numpy() for s, v in zip(start, variables)]
    # First step, LayerNorm and bias (no decay): Adam moves each weight by ~lr * sign(g), the
    # original, without bias correction, by ~lr * (1 - b1) / sqrt(1 - b2), 3.16 times more.
    for i in (1, 2, 3):
        g = grads[i].astype(np.float64)
        np.testing.assert_allclose(
            moved["adamw"][i], 1e-2 * g / (np.abs(g) + EPS / np.sqrt(1 - B2)), rtol=1e-5
        )
        np.testing.assert_allclose(
            moved["adam_weight_decay"][i],
            1e-2 * (1 - B1) * g / (np.sqrt(1 - B2) * np.abs(g) + EPS),
            rtol=1e-5,
        )
    # The decayed kernel: the original's reference matches one and not the other.
    decayed = [v.path == "dense/kernel" for v in model.trainable_variables]
    expected = _reference_adam_weight_decay(start, [grads], [1e-2], decayed, clip=None)
    np.testing.assert_allclose(moved["adam_weight_decay"][0], start[0] - expected[0], rtol=1e-5)
    assert not np.allclose(moved["adamw"][0], start[0] - expected[0], rtol=1e-2)


def test_adam_weight_decay_accumulation_equals_one_update_with_the_mean_gradient():
    variables = _toy_variables()
    start = [v.numpy() for v in variables]
    rng = np.random.default_rng(5)
    micro = [_grads(variables, rng) for _ in range(6)]
    opt = optimizers.create_optimizer(
        1e-2, 4, 0, variables=variables, optimizer="adam_weight_decay", grad_accumulation_steps=3
    )
    for i, grads in enumerate(micro):
        opt.apply(grads, variables)
        if i < 2:  # Nothing moves before the third micro-batch.
            _assert_weights(variables, start, rtol=0)
    assert int(opt.iterations.numpy()) == 2
    accumulated = [v.numpy() for v in variables]

    for v, s in zip(variables, start):
        v.assign(s)
    opt = optimizers.create_optimizer(
        1e-2, 4, 0, variables=variables, optimizer="adam_weight_decay"
    )
    for k in (0, 3):
        opt.apply([np.mean(gs, axis=0) for gs in zip(*micro[k : k + 3])], variables)
    _assert_weights(variables, accumulated)
    assert not np.allclose(accumulated[0], start[0])


@pytest.mark.parametrize("name", optimizers.OPTIMIZERS)
def test_sparse_gradients_with_repeated_rows_update_as_their_dense_sum(name):
    # As the gradient of token type embeddings (tf.gather): row 0 gathered three times.
    # Keras 3 alone would square the three parts one by one in the norm and second moment.
    table = keras.Variable(np.ones((2, 3), "float32"), name="token_type_embeddings")
    kernel = keras.Variable(np.ones((3, 3), "float32"), name="kernel")
    rng = np.random.default_rng(10)
    parts = [rng.normal(size=(4, 3)).astype("float32") for _ in range(2)]
    kernel_grads = [rng.normal(size=(3, 3)).astype("float32") for _ in range(2)]
    sparse = [
        tf.IndexedSlices(tf.constant(p), tf.constant([0, 1, 0, 0]), tf.constant([2, 3]))
        for p in parts
    ]
    results = []
    for table_grads in (sparse, [tf.convert_to_tensor(g) for g in sparse]):
        for v in (table, kernel):
            v.assign(np.ones(v.shape))
        opt = optimizers.create_optimizer(1e-2, 10, 0, variables=[table, kernel], optimizer=name)
        for g, k in zip(table_grads, kernel_grads):
            opt.apply([g, k], [table, kernel])
        results.append([table.numpy(), kernel.numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_adam_weight_decay_config_round_trip():
    opt = optimizers.AdamWeightDecay(
        optimizers.WarmupLinearDecay(1e-3, 10, 2),
        weight_decay_rate=0.02,
        epsilon=1e-5,
        no_decay_pattern="bias",
        global_clipnorm=1.0,
        gradient_accumulation_steps=2,
    )
    assert "weight_decay" not in opt.get_config()
    for original in (opt, optimizers.LossScaleOptimizer(opt)):
        clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(original))
        assert type(clone) is type(original) and clone.get_config() == original.get_config()
    assert (
        clone.inner_optimizer.weight_decay_rate == 0.02
        and clone.inner_optimizer.no_decay_pattern == "bias"
    )


def test_adam_weight_decay_loss_scaling_skips_an_overflowing_step():
    variables = _toy_variables()
    start = [v.numpy() for v in variables]
    opt = optimizers.create_optimizer(
        1e-2, 10, 0, variables=variables, optimizer="adam_weight_decay", loss_scale=True
    )
    opt.build(variables)
    scale = float(opt.dynamic_scale.numpy())
    grads = _grads(variables, np.random.default_rng(6))
    overflow = [g.copy() for g in grads]
    overflow[0][0, 0] = np.inf
    opt.apply(overflow, variables)
    _assert_weights(variables, start, rtol=0)
    assert all(
        not np.any(v.numpy()) for v in opt.inner_optimizer.variables
    )  # m, v and the step untouched.
    assert float(opt.dynamic_scale.numpy()) == scale / 2
    # The next, finite step is the original's first step on the unscaled gradient.
    opt.apply([g * scale / 2 for g in grads], variables)
    decayed = [v.path == "dense/kernel" for v in variables]
    _assert_weights(variables, _reference_adam_weight_decay(start, [grads], [1e-2], decayed))


def test_adam_weight_decay_state_is_checkpointed(tmp_path):
    def trained_state():
        model = _toy_model()
        opt = optimizers.create_optimizer(
            1e-2, 10, 0, variables=model.trainable_variables, optimizer="adam_weight_decay"
        )
        opt.build(model.trainable_variables)
        return model, opt

    grads = _grads(_toy_variables(), np.random.default_rng(7))
    model, opt = trained_state()
    opt.apply(grads, model.trainable_variables)
    assert len(opt.variables) == 1 + 2 * len(
        model.trainable_variables
    )  # The step, m and v of each.
    TrainingCheckpoint(str(tmp_path), model, opt).save(1)

    restored_model, restored_opt = trained_state()
    assert TrainingCheckpoint(str(tmp_path), restored_model, restored_opt).restore_latest() == 1
    for a, b in zip(restored_opt.variables, opt.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # One more step from the restored m and v goes where the uninterrupted one goes.
    for m, o in ((model, opt), (restored_model, restored_opt)):
        o.apply(grads, m.trainable_variables)
    _assert_weights(
        restored_model.trainable_variables, [v.numpy() for v in model.trainable_variables], rtol=0
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_adam_weight_decay_fits_the_same_with_xla(policy):
    keras.config.set_dtype_policy(policy)
    x = np.random.default_rng(8).normal(size=(64, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32")

    def fit(jit_compile):
        keras.utils.set_random_seed(9)
        model = keras.Sequential([_toy_model(), keras.layers.Dense(1, name="head")])
        start = [v.numpy() for v in model.trainable_variables]
        opt = optimizers.create_optimizer(
            1e-2,
            8,
            0,
            variables=model.trainable_variables,
            optimizer="adam_weight_decay",
            grad_accumulation_steps=2,
            loss_scale=policy == "mixed_float16",
        )
        model.compile(optimizer=opt, loss="mse", jit_compile=jit_compile)
        model.fit(x, y, batch_size=4, shuffle=False, verbose=0)  # 16 micro-batches, 8 updates ...
        assert (
            int(opt.iterations.numpy()) >= 2
        )  # ... less those the loss scaling skips (overflows).
        assert not np.allclose(model.trainable_variables[0].numpy(), start[0])
        return [v.numpy() for v in model.trainable_variables]

    tolerance = 1e-5 if policy == "float32" else 1e-2
    for a, b in zip(fit(True), fit(False)):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


MIRRORED_ADAM_WEIGHT_DECAY = """
import numpy as np
import tensorflow as tf
import keras
from keras_bert.training import optimizers

# (step, replica, 5)
GRADS = np.random.default_rng(0).normal(size=(3, 2, 5)).astype("float32") * 3.0


def train(strategy):
    # Three steps; one device gets the sum of the two replicas' gradients (norm > 1: clipped).
    with strategy.scope():
        kernel = keras.Variable(np.ones(4, "float32"), name="kernel")
        bias = keras.Variable([0.5], name="bias")
        opt = optimizers.create_optimizer(
            0.1, 4, 1, variables=[kernel, bias], optimizer="adam_weight_decay")
        opt.build([kernel, bias])

    @tf.function
    def step(grads):  # (replica, 5)
        def replica_fn():
            g = grads[tf.distribute.get_replica_context().replica_id_in_sync_group]
            opt.apply([g[:4], g[4:]], [kernel, bias])
        strategy.run(replica_fn)

    for grads in GRADS:
        step(grads if strategy.num_replicas_in_sync == 2 else grads.sum(0, keepdims=True))
    return [v.numpy().tolist() for v in [kernel, bias] + opt.variables]


mirrored = tf.distribute.MirroredStrategy()
report(dict(one=train(tf.distribute.get_strategy()), two=train(mirrored),
            replicas=mirrored.num_replicas_in_sync))
"""


def test_adam_weight_decay_mirrored_two_devices_matches_one_device():
    result = run_on_logical_cpus(MIRRORED_ADAM_WEIGHT_DECAY)
    assert result["replicas"] == 2
    one, two = result["one"], result["two"]
    assert not np.allclose(one[0], np.ones(4))  # The weights moved ...
    for a, b in zip(two, one):  # ... and, with the replicas' gradients summed, as on one device.
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
