"""An independent NumPy forward pass of BERT (the paper / original modeling.py), for tests.

It reads weights by their Keras variable paths only; every computation is NumPy.
Dimensions: B batch, S sequence, H hidden, N heads, D head size, P masked positions, V vocab.
"""

import numpy as np
from scipy.special import erf


def weights_by_path(model):
    return {w.path: np.asarray(w.numpy(), dtype=np.float64) for w in model.weights}


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def encoder_forward(w, config, word_ids, mask, type_ids, prefix=""):
    """Returns (sequence_output [B,S,H], pooled_output [B,H], per-layer outputs)."""
    p = prefix
    eps = config.layer_norm_eps
    B, S = word_ids.shape
    x = (
        w[f"{p}embeddings/word_embeddings"][word_ids]
        + w[f"{p}embeddings/token_type_embeddings"][type_ids]
        + w[f"{p}embeddings/position_embeddings"][:S][None]
    )
    x = layer_norm(x, w[f"{p}embeddings/LayerNorm/gamma"], w[f"{p}embeddings/LayerNorm/beta"], eps)
    N = config.num_attention_heads
    D = config.hidden_size // N
    bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0  # (B, 1, 1, S)
    outputs = []
    for i in range(config.num_hidden_layers):
        layer = f"{p}layer_{i}/"

        def dense(t, name, layer=layer):
            return t @ w[f"{layer}{name}/kernel"] + w[f"{layer}{name}/bias"]

        def heads(t):
            return t.reshape(B, S, N, D).transpose(0, 2, 1, 3)  # (B, N, S, D)

        q, k, v = heads(dense(x, "query")), heads(dense(x, "key")), heads(dense(x, "value"))
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(D) + bias)  # (B, N, S, S)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, S, N * D)  # (B, S, H)
        x = layer_norm(
            x + dense(context, "attention_output_dense"),
            w[f"{layer}attention_output_LayerNorm/gamma"],
            w[f"{layer}attention_output_LayerNorm/beta"],
            eps,
        )
        inner = gelu(dense(x, "intermediate_dense"))
        x = layer_norm(
            x + dense(inner, "output_dense"),
            w[f"{layer}output_LayerNorm/gamma"],
            w[f"{layer}output_LayerNorm/beta"],
            eps,
        )
        outputs.append(x)
    pooled = np.tanh(x[:, 0] @ w[f"{p}pooler_dense/kernel"] + w[f"{p}pooler_dense/bias"])
    return x, pooled, outputs


def pretrainer_forward(w, config, word_ids, mask, type_ids, positions):
    """Returns (mlm_logits [B,P,V], nsp_logits [B,2])."""
    seq, pooled, _ = encoder_forward(w, config, word_ids, mask, type_ids)
    picked = np.take_along_axis(seq, positions[:, :, None], axis=1)  # (B, P, H)
    h = gelu(
        picked @ w["cls_predictions/transform_dense/kernel"]
        + w["cls_predictions/transform_dense/bias"]
    )
    h = layer_norm(
        h,
        w["cls_predictions/transform_LayerNorm/gamma"],
        w["cls_predictions/transform_LayerNorm/beta"],
        config.layer_norm_eps,
    )
    mlm = h @ w["embeddings/word_embeddings"].T + w["cls_predictions/output_bias"]  # (B, P, V)
    nsp = pooled @ w["cls_seq_relationship/kernel"] + w["cls_seq_relationship/bias"]  # (B, 2)
    return mlm, nsp


def random_inputs(rng, config, batch=3, seq=11, min_len=2):
    """Random encoder inputs with ragged real lengths (padding at the end), [CLS]-like first id."""
    lengths = rng.integers(min_len, seq + 1, size=batch)
    lengths[0] = seq  # At least one full row.
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    word_ids = rng.integers(1, config.vocab_size, size=(batch, seq)).astype(np.int32) * mask
    type_ids = ((np.arange(seq)[None] >= (lengths // 2)[:, None]) & (mask > 0)).astype(np.int32)
    type_ids = np.minimum(type_ids, config.type_vocab_size - 1)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def randomize_weights(model, seed=0, scale=0.2):
    """Non-trivial weights everywhere (biases and LayerNorm too), so no term hides behind zeros or
    ones."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        value = rng.normal(0.0, scale, size=w.shape)
        if w.path.endswith("gamma"):
            value += 1.0
        w.assign(value.astype(w.dtype))
