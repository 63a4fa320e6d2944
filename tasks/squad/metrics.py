"""The official SQuAD evaluation: v1.1 (exact match, F1) and v2.0 (also HasAns / NoAns and the
best no-answer threshold), giving the official scripts' numbers exactly.

Both scripts (evaluate-v1.1.py, evaluate-v2.0.py; copies in tf-models-official's
`official/nlp/tools/squad_evaluate_v*.py`) compare normalized answers: lower-cased, ASCII
punctuation and the articles a/an/the removed, whitespace collapsed. They differ on purpose in
details kept here: v1.1 counts a question without a prediction as wrong, v2.0 leaves it out; v2.0
scores an empty answer (no-answer) as F1 1 against an empty gold answer, v1.1 has no such rule.

Gold answers are a dict question id -> list of answer texts (`gold_answers`), in file order.
Scores are percentages, as the official scripts print them.
"""

import collections
import re
import string

from absl import logging

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def gold_answers(examples):
    """dict question id -> list of gold answer texts, from `SquadExample`s."""
    return {e.qas_id: e.answer_texts for e in examples}


def normalize_answer(text):
    """Lower-case, remove punctuation, articles and extra whitespace (the official rule)."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def f1_score(prediction, ground_truth, empty_matches_empty=False):
    """Token-overlap F1 of two answers; v2.0 (`empty_matches_empty`): 1 if both normalize to
    nothing, 0 if only one does."""
    pred, gold = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
    if empty_matches_empty and (not pred or not gold):
        return float(pred == gold)
    common = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_match_score(prediction, ground_truth):
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def evaluate_v1(gold, predictions):
    """The official v1.1 evaluation.

    Args:
        gold: dict question id -> list of answer texts (at least one each).
        predictions: dict question id -> predicted text; a missing question scores 0.

    Returns:
        {"exact_match": %, "f1": %}.
    """
    exact = f1 = 0.0
    for qid, answers in gold.items():
        if not answers:
            raise ValueError(
                f"SQuAD v1.1 evaluation needs gold answers: question {qid!r} has none."
            )
        if qid not in predictions:
            logging.error("Unanswered question %s will receive score 0.", qid)
            continue
        exact += max(exact_match_score(predictions[qid], a) for a in answers)
        f1 += max(f1_score(predictions[qid], a) for a in answers)
    total = max(len(gold), 1)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def evaluate_v2(gold, predictions, na_probs=None, na_prob_thresh=1.0):
    """The official v2.0 evaluation (without its precision-recall plots).

    Args:
        gold: dict question id -> list of answer texts (empty: unanswerable).
        predictions: dict question id -> predicted text ("" for no answer); questions without
            a prediction are left out, as the official script does.
        na_probs: dict question id -> no-answer score (the `--na-prob-file`, e.g. our
            null_odds.json), or None for 0.0 everywhere.
        na_prob_thresh: float, questions with a score above it count as answered "no answer".

    Returns:
        dict with the official keys: exact, f1, total, HasAns_exact, HasAns_f1, HasAns_total,
        NoAns_exact, NoAns_f1, NoAns_total (those present), best_exact, best_exact_thresh,
        best_f1, best_f1_thresh.
    """
    gold = {qid: answers for qid, answers in gold.items() if qid in predictions}
    if na_probs is None:
        na_probs = {qid: 0.0 for qid in predictions}
    has_answer = {qid: bool(answers) for qid, answers in gold.items()}
    exact_raw, f1_raw = {}, {}
    for qid, answers in gold.items():
        answers = [a for a in answers if normalize_answer(a)] or [""]
        exact_raw[qid] = max(exact_match_score(predictions[qid], a) for a in answers)
        f1_raw[qid] = max(f1_score(predictions[qid], a, empty_matches_empty=True) for a in answers)
    exact = _apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1 = _apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    result = _scores(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has == wanted]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in _scores(exact, f1, qids).items()})
    for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
        result[f"best_{name}"], result[f"best_{name}_thresh"] = _best_threshold(
            predictions, raw, na_probs, has_answer
        )
    return result


def _apply_no_answer_threshold(scores, na_probs, has_answer, threshold):
    return {
        qid: float(not has_answer[qid]) if na_probs[qid] > threshold else s
        for qid, s in scores.items()
    }


def _scores(exact, f1, qids):
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[q] for q in qids) / total,
        "f1": 100.0 * sum(f1[q] for q in qids) / total,
        "total": total,
    }


def _best_threshold(predictions, scores, na_probs, has_answer):
    """(best score %, its no-answer threshold): predicting "no answer" for every question whose
    na_prob is above the threshold, the official search over the sorted na_probs."""
    score = best = sum(1 for has in has_answer.values() if not has)
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), threshold
