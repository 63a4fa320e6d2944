"""The distillation losses, as (sum, count) pairs the trainer averages over all replicas.

Soft targets (Hinton et al. 2015): the teacher's and the student's logits divided by the
temperature T, the Kullback-Leibler divergence KL(p_teacher || p_student) of the two softmaxes,
scaled by T^2 (so that its gradients keep their size as T changes). Which axis holds the
distribution, and what one term of the mean is, follows the task's `problem`:

| problem | outputs | distribution over | averaged over |
|---|---|---|---|
| classification | logits [B, C] | classes | examples |
| multiple_choice | logits [B, K] | choices | examples |
| token_classification | logits [B, S, C] | tags | real tokens (input_mask) |
| span | start_logits, end_logits [B, S] | real tokens (input_mask) | examples (start, end halved) |
| regression | logits [B, 1] | (mean-squared error to the teacher's score, no T) | examples |

Hidden states and attention (TinyBERT, Jiao et al. 2020): the mean-squared error between the
student's hidden states (through a learned projection when its width differs from the
teacher's) and the teacher's at mapped layers, and between their attention scores (q.k / sqrt(D)
per head, before the mask and softmax) at the same layers, over real tokens only.

Dimensions: B batch, S sequence, C classes, K choices, H hidden, N heads, L layers.
"""

from keras import ops

# The task's outputs that carry its answer distribution, by problem.
SOFT_OUTPUTS = {
    "classification": ("logits",),
    "multiple_choice": ("logits",),
    "token_classification": ("logits",),
    "span": ("start_logits", "end_logits"),
    "regression": ("logits",),
}
_NEG = -1e9  # Logit of padded positions in a span distribution: probability 0.


def soft_target_sums(problem, teacher, student, input_mask, temperature):
    """(sum of the soft-target loss, number of terms) over a batch.

    Args:
        problem: str, the task's `problem` (a key of `SOFT_OUTPUTS`).
        teacher, student: dicts of the two models' outputs (float logits as in the table).
        input_mask: int [B, S] (or [B, K, S]), 1 on real tokens.
        temperature: float T > 0.

    Returns:
        (sum, count): float32 scalars; the mean is sum / count.
    """
    if problem not in SOFT_OUTPUTS:
        raise ValueError(
            f"No soft-target loss for problem {problem!r}; problems: {list(SOFT_OUTPUTS)}."
        )
    names = SOFT_OUTPUTS[problem]
    t = {k: ops.cast(teacher[k], "float32") for k in names}
    s = {k: ops.cast(student[k], "float32") for k in names}
    if problem == "regression":
        error = ops.reshape(s["logits"] - t["logits"], [-1])  # (B,)
        return ops.sum(ops.square(error)), ops.cast(ops.size(error), "float32")
    mask = ops.cast(input_mask, "float32")
    if problem == "token_classification":
        kl = _kl(t["logits"], s["logits"], temperature)  # (B, S)
        return ops.sum(kl * mask), ops.sum(mask)
    if problem == "span":
        total = 0.0
        for name in names:  # Padded positions take no probability.
            kl = _kl(_masked(t[name], mask), _masked(s[name], mask), temperature)  # (B,)
            total += ops.sum(kl) / len(names)
        return total, ops.cast(ops.shape(mask)[0], "float32")
    kl = _kl(t["logits"], s["logits"], temperature)  # (B,)
    return ops.sum(kl), ops.cast(ops.size(kl), "float32")


def _masked(logits, mask):
    return ops.where(mask > 0, logits, _NEG)


def _kl(teacher_logits, student_logits, temperature):
    """T^2 KL(softmax(t/T) || softmax(s/T)) over the last axis: [...]."""
    log_t = ops.log_softmax(teacher_logits / temperature, axis=-1)
    log_s = ops.log_softmax(student_logits / temperature, axis=-1)
    kl = ops.sum(ops.exp(log_t) * (log_t - log_s), axis=-1)
    return kl * (temperature**2)


def hidden_sums(teacher_states, student_states, input_mask, projection=None):
    """(sum of squared errors / H, number of real tokens x pairs) of mapped hidden states.

    Args:
        teacher_states, student_states: lists of the mapped pairs' states, [B, S, H_t] and
            [B, S, H_s] (pair i is teacher_states[i] and student_states[i]).
        input_mask: int [B, S], 1 on real tokens.
        projection: callable [.., H_s] -> [.., H_t], or None when the widths are equal.
    """
    mask = ops.cast(input_mask, "float32")[..., None]  # (B, S, 1)
    total = 0.0
    for t, s in zip(teacher_states, student_states):
        s = ops.cast(s, "float32")
        if projection is not None:
            s = ops.cast(projection(s), "float32")
        error = ops.mean(ops.square(s - ops.cast(t, "float32")), axis=-1, keepdims=True)
        total += ops.sum(error * mask)  # (B, S, 1) summed
    return total, ops.sum(mask) * len(teacher_states)


def attention_sums(teacher_scores, student_scores, input_mask):
    """(sum of squared errors / N, number of real query-key pairs x layers) of mapped attention
    scores [B, N, S, S] (query rows and key columns of padding left out)."""
    mask = ops.cast(input_mask, "float32")
    pairs = mask[:, :, None] * mask[:, None, :]  # (B, S, S)
    total = 0.0
    for t, s in zip(teacher_scores, student_scores):
        error = ops.mean(
            ops.square(ops.cast(s, "float32") - ops.cast(t, "float32")), axis=1
        )  # (B, S, S)
        total += ops.sum(error * pairs)
    return total, ops.sum(pairs) * len(teacher_scores)
