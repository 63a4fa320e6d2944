"""SQuAD predictions from start and end logits: the original run_squad.py's `write_predictions`.

Per example, over all its features: the `n_best_size` best start and end tokens of each feature
give candidate spans, kept when both ends lie in the context window, the start token is scored from
its max-context window, end >= start and the span has at most `max_answer_length` tokens. The
candidates are ranked by start + end logit and the `n_best_size` best distinct answer texts form the
n-best list (with softmax probabilities). v2.0 adds the null answer: [CLS]'s start + end logit in
the feature where it is smallest; the prediction is "" when that null score minus the best non-null
score exceeds `null_score_diff_threshold` (the score difference is the question's "null odds").

Deviations from the original, all where it has no good answer: answer texts are exact substrings
of the context from the tokens' character offsets (no `get_final_text` alignment heuristics); the
best tokens are taken among the feature's real tokens (the original's padded positions could
take some of the n best slots); an example without any valid candidate predicts "" (the original:
the placeholder text "empty").

Dimensions: L tokens of a feature, K = n_best_size.
"""

import collections
import math

import numpy as np

# The original's start value of the smallest null score (an example without features keeps it).
NULL_SCORE = 1e6

Prediction = collections.namedtuple("Prediction", ["predictions", "nbest", "null_odds"])


def postprocess(
    examples,
    features,
    outputs,
    n_best_size=20,
    max_answer_length=30,
    version_2=False,
    null_score_diff_threshold=0.0,
):
    """Answer texts from the model outputs.

    Args:
        examples: list of `SquadExample`.
        features: their `FeatureSet` (`squad.features.encode_examples`).
        outputs: dict with `start_logits` and `end_logits`, one float array [L] per feature
            (`trainer.predict` with the task's `token_outputs`).
        n_best_size, max_answer_length: ints (the original's 20 and 30).
        version_2: bool, consider the null answer (SQuAD 2.0).
        null_score_diff_threshold: float, predict "" when null score - best span score is above it.

    Returns:
        `Prediction`: `predictions` dict qid -> text, `nbest` dict qid -> list of dicts (text,
        probability, start_logit, end_logit), `null_odds` dict qid -> float (v2.0 only, else empty).
    """
    by_example = collections.defaultdict(list)
    for f, e in enumerate(features.example_index):
        by_example[int(e)].append(f)
    predictions, nbest, null_odds = {}, {}, {}
    for i, example in enumerate(examples):
        entries, null = _nbest(
            example,
            i,
            by_example.get(i, []),
            features,
            outputs,
            n_best_size,
            max_answer_length,
            version_2,
        )
        nbest[example.qas_id] = entries
        if not version_2:
            predictions[example.qas_id] = entries[0]["text"] if entries else ""
            continue
        best = next((e for e in entries if e["text"]), None)  # The best non-null answer.
        diff = null - best["start_logit"] - best["end_logit"] if best else null
        null_odds[example.qas_id] = diff
        predictions[example.qas_id] = (
            "" if best is None or diff > null_score_diff_threshold else best["text"]
        )
    return Prediction(predictions, nbest, null_odds)


def _nbest(example, i, feature_ids, features, outputs, n_best_size, max_answer_length, version_2):
    """(n-best list of dicts, null score) of the example `examples[i]`."""
    extras = features.extras
    c = int(extras["context_index"][i])
    parts = []  # per feature: start logits, end logits, character starts and ends of the candidates
    null = (NULL_SCORE, 0.0, 0.0)  # (score, start logit, end logit) of the smallest null score
    for f in feature_ids:
        start_logits = np.asarray(outputs["start_logits"][f], np.float64)  # (L,)
        end_logits = np.asarray(outputs["end_logits"][f], np.float64)
        if version_2 and start_logits[0] + end_logits[0] < null[0]:
            null = (start_logits[0] + end_logits[0], start_logits[0], end_logits[0])
        offset, window = int(extras["doc_offset"][f]), int(extras["window_start"][f])
        max_context = extras["max_context"][f]
        starts, ends = (
            _best_indexes(start_logits, n_best_size),
            _best_indexes(end_logits, n_best_size),
        )
        s, e = (
            np.repeat(starts, len(ends)),
            np.tile(ends, len(starts)),
        )  # (K*K,) start-major, as the original
        s_tok, e_tok = s - offset, e - offset  # positions in the window
        valid = (
            (s_tok >= 0) & (s_tok < len(max_context)) & (e_tok >= 0) & (e_tok < len(max_context))
        )
        valid &= (e >= s) & (e - s + 1 <= max_answer_length)
        valid[valid] &= max_context[s_tok[valid]]
        s_tok, e_tok = s_tok[valid], e_tok[valid]
        parts.append(
            (
                start_logits[s[valid]],
                end_logits[e[valid]],
                extras["char_starts"][c][window + s_tok],
                extras["char_ends"][c][window + e_tok],
            )
        )
    if version_2:
        parts.append(([null[1]], [null[2]], [-1], [-1]))
    start_logit, end_logit, char_start, char_end = (
        np.concatenate([np.asarray(p[k]) for p in parts]) if parts else np.zeros([0])
        for k in range(4)
    )
    entries, seen = [], set()  # (text, start logit, end logit)
    for k in np.argsort(-(start_logit + end_logit), kind="stable"):  # The original's stable sort.
        if len(entries) >= n_best_size:
            break
        text = example.context[int(char_start[k]) : int(char_end[k])] if char_start[k] >= 0 else ""
        if text not in seen:
            seen.add(text)
            entries.append((text, float(start_logit[k]), float(end_logit[k])))
    if version_2 and "" not in seen:
        entries.append(("", float(null[1]), float(null[2])))
    probabilities = _softmax([start + end for _, start, end in entries])
    return [
        {"text": text, "probability": p, "start_logit": start, "end_logit": end}
        for (text, start, end), p in zip(entries, probabilities)
    ], float(null[0])


def _best_indexes(logits, n):
    """Indexes of the `n` largest logits, largest first, ties in position order."""
    return np.argsort(-logits, kind="stable")[:n]


def _softmax(scores):
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [x / total for x in exps]
