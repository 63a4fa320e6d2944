"""Packed ELECTRA rows against instances alone, on the current Keras backend (for
tests/pretraining/test_electra_packing.py).

Usage: KERAS_BACKEND=<jax|tensorflow> python electra_packing_job.py  (exits 0 when every check
passes)

`check_packed_equals_alone()` builds a tiny `ElectraPretrainer` and its packed twin (the same
weights), packs three instances of different lengths into one row (with padding) and asserts that,
with the samples fixed (the generator's most likely tokens), each instance gets the generator's
masked-LM logits, the discriminator's logits and labels it gets alone, and the batch the same
losses (float32, 1e-5); that changing one instance's tokens leaves the others' outputs unchanged;
and that the real sampler replaces tokens only at the row's masked positions.
`check_fit()` trains the packed pre-trainer for a few steps (falling loss).
"""

import keras
import numpy as np
import packing_job

from keras_bert.models.electra import ElectraPretrainer, electra_loss, real_tokens
from keras_bert.models.encoder import BertEncoder
from keras_bert.pretraining import packing

LENGTHS, SEQ = packing_job.LENGTHS, packing_job.SEQ
LABELS = ("masked_lm_ids", "masked_lm_weights")


def _fixed_samples(model):
    """The generator's most likely tokens as its samples (the argmax, no sampling)."""
    model.sampler.sample = lambda logits: keras.ops.argmax(logits, axis=-1)
    return model


def models():
    """(alone, packed): an unpacked `ElectraPretrainer` and a packed one with the same weights."""
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(packing_job.tiny_config())
    alone = ElectraPretrainer(encoder, generator_size=0.5, seed=1)
    packed = ElectraPretrainer(encoder, generator_size=0.5, seed=1, packed=True)
    shared = {id(w) for w in encoder.weights}
    by_path = {w.path: w for w in alone.weights}
    assert len(by_path) == len(alone.weights) == len(packed.weights)
    for w in packed.weights:  # The generator and the discriminator's head.
        if id(w) not in shared:
            w.assign(by_path[w.path])
    return alone, packed


def packed_inputs(features, max_predictions=12):
    """(inputs, labels, bins): the instances packed into rows as `ElectraPretrainer(packed=True)`
    takes them (the original tokens among the inputs, no `cls_positions`)."""
    rows, bins = packing.pack_examples(features, max_instances=4, max_predictions=max_predictions)
    inputs, labels = packing_job._packed_batch(rows)
    del inputs["cls_positions"]
    inputs["masked_lm_ids"] = np.asarray(labels["masked_lm_ids"], np.int32)
    return inputs, labels, bins


def _alone_inputs(features):
    inputs = {
        "input_word_ids": features["input_ids"],
        "input_mask": features["input_mask"],
        "input_type_ids": features["segment_ids"],
        "masked_lm_positions": features["masked_lm_positions"],
        "masked_lm_ids": features["masked_lm_ids"],
    }
    return {k: np.asarray(v, np.int32) for k, v in inputs.items()}


def _outputs(model, inputs):
    return {k: keras.ops.convert_to_numpy(v) for k, v in model(inputs, training=False).items()}


def check_packed_equals_alone(atol=1e-5):
    alone, packed = (_fixed_samples(m) for m in models())
    features = packing_job._instances(np.random.default_rng(0), 40)
    inputs, labels, bins = packed_inputs(features)
    assert len(bins) == 1 and inputs["input_word_ids"].shape == (1, SEQ), bins
    alone_inputs = _alone_inputs(features)
    out_alone, out_packed = _outputs(alone, alone_inputs), _outputs(packed, inputs)
    assert out_alone["rtd_labels"].sum() > 0  # Some tokens replaced: the labels say something.
    start, p = 0, 0
    for item in bins[0]:  # Instances in row order.
        n, real = LENGTHS[item], features["masked_lm_weights"][item] > 0
        m = int(real.sum())
        np.testing.assert_allclose(
            out_packed["mlm_logits"][0, p : p + m], out_alone["mlm_logits"][item][real], atol=atol
        )
        for key in ("rtd_logits", "rtd_labels"):
            np.testing.assert_allclose(
                out_packed[key][0, start : start + n], out_alone[key][item, :n], atol=atol
            )
        start, p = start + n, p + m
    assert out_packed["rtd_labels"][0, start:].sum() == 0  # Padding is never replaced.
    loss_alone = electra_loss(
        {k: features[k] for k in LABELS}, out_alone, alone_inputs["input_mask"]
    )
    loss_packed = electra_loss(labels, out_packed, real_tokens(inputs))
    for key in ("mlm_loss", "rtd_loss", "loss"):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(loss_packed[key]),
            keras.ops.convert_to_numpy(loss_alone[key]),
            rtol=atol,
        )
    _check_no_cross_attention(packed, inputs, bins[0], out_packed)
    _check_real_samples_at_masked_positions(inputs, labels)


def _check_no_cross_attention(model, inputs, order, before):
    """New tokens in the middle instance leave the other instances' outputs unchanged."""
    starts = np.cumsum([0] + [LENGTHS[i] for i in order])
    ids = inputs["input_word_ids"].copy()
    ids[0, starts[1] + 1 : starts[2]] = (ids[0, starts[1] + 1 : starts[2]] + 7) % 35 + 5
    after = _outputs(model, dict(inputs, input_word_ids=ids))
    predicted = inputs["masked_lm_positions"][0]
    for key, where in (("rtd_logits", np.arange(SEQ)), ("mlm_logits", predicted)):
        for k in (0, 2):
            mine = (where >= starts[k]) & (where < starts[k + 1])
            assert mine.any()
            np.testing.assert_allclose(after[key][0, mine], before[key][0, mine], atol=1e-6)
        middle = (where >= starts[1]) & (where < starts[2])
        assert np.abs(after[key][0, middle] - before[key][0, middle]).max() > 1e-3, key


def _check_real_samples_at_masked_positions(inputs, labels):
    """The real sampler replaces tokens of the packed row only at its real masked positions."""
    _, packed = models()
    out = _outputs(packed, inputs)
    masked = np.zeros(SEQ, bool)
    masked[inputs["masked_lm_positions"][0][labels["masked_lm_weights"][0] > 0]] = True
    assert out["rtd_labels"][0, ~masked].sum() == 0 and np.isfinite(out["rtd_logits"]).all()


def check_fit():
    """Training steps of the packed pre-trainer on a packed batch: finite, falling loss."""
    _, model = models()
    inputs, labels, _ = packed_inputs(packing_job._instances(np.random.default_rng(1), 40))
    packing_job.assert_fit_lowers_loss(model, inputs, labels, epochs=4)


if __name__ == "__main__":
    check_packed_equals_alone()
    check_fit()
    print("ok", keras.config.backend())
