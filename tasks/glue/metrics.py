"""GLUE's metrics (scikit-learn, scipy) of predictions against gold labels: `compute_metrics`."""

import numpy as np
from absl import logging
from scipy import stats
from sklearn import metrics as sk_metrics

from keras_bert.tasks.glue.data import GlueDataError, get_spec

_METRICS = {
    "accuracy": sk_metrics.accuracy_score,
    "f1": lambda y, p: sk_metrics.f1_score(y, p, pos_label="1", zero_division=0.0),
    "matthews_correlation": sk_metrics.matthews_corrcoef,
    "pearson": lambda y, p: _correlation(stats.pearsonr, y, p),
    "spearman": lambda y, p: _correlation(stats.spearmanr, y, p),
}


def _correlation(function, labels, predictions):
    """scipy's correlation, or 0.0 when either side is constant (scipy's NaN: undefined, and a NaN
    would never compare as better, so a run whose first epoch predicts a constant kept it as
    best)."""
    if np.ptp(labels) == 0 or np.ptp(predictions) == 0:
        logging.warning(
            "Constant %s: the correlation is undefined, reported as 0.0.",
            "labels" if np.ptp(labels) == 0 else "predictions",
        )
        return 0.0
    return function(labels, predictions)[0]


def compute_metrics(task, labels, predictions):
    """The task's metrics (scikit-learn, scipy) of predictions against gold labels.

    Args:
        task: task name or `GlueSpec`.
        labels: sequence of gold labels: label strings, or floats for STS-B.
        predictions: sequence of the same kind and length.

    Returns:
        dict metric name -> float, plain names (no split suffix): `task.metrics`. F1 is that of the
        positive class "1".

    Raises:
        GlueDataError: lengths differ, no examples, or a value outside the label set.
    """
    task = get_spec(task)
    if len(labels) != len(predictions) or len(labels) == 0:
        raise GlueDataError(
            f"{task.name}: {len(labels)} labels and {len(predictions)} predictions; "
            "need the same non-zero number."
        )
    if task.is_regression:
        labels, predictions = np.asarray(labels, np.float64), np.asarray(predictions, np.float64)
    else:
        labels, predictions = list(labels), list(predictions)
        for value in labels + predictions:
            if value not in task.labels:
                raise GlueDataError(
                    f"{task.name}: {value!r} is not one of {', '.join(task.labels)}."
                )
    return {name: float(_METRICS[name](labels, predictions)) for name in task.metrics}
