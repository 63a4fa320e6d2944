"""int8 weights of a matrix multiply: rounded to nearest on each output channel's grid
(`round_rows`), or by GPTQ (Frantar et al. 2022, `gptq`) on the calibration texts' inputs."""

import numpy as np


def _row_scales(values):
    """Symmetric int8 scales of the rows of [R, C] values: max |row| / 127."""
    return np.maximum(np.abs(values).max(axis=1), 1e-12) / 127.0


def round_rows(values):
    """(int8 [R, C], scales [R]): [R, C] values rounded to nearest on their row's int8 grid."""
    scale = _row_scales(values)
    return np.clip(np.round(values / scale[:, None]), -127, 127).astype(np.int8), scale


def gptq(kernel, gram, damp=0.01):
    """int8 weights of a matmul by GPTQ (Frantar et al. 2022): each input channel (column of
    `kernel`, TFLite's [out, in]) is rounded in turn, in the order of decreasing input energy
    (the diagonal of `gram`: "act order"), and the channels not yet rounded absorb its rounding
    error as the inputs' correlations say, so that X W^T (not W itself) stays closest to float
    over the calibration inputs X (`gram` = X^T X). The scales are round to nearest's (symmetric,
    per output channel, max |W| / 127): only which step each weight takes changes.

    Args:
        kernel: float array [out, in].
        gram: float array [in, in], X^T X of the calibration inputs.
        damp: added to the diagonal, as a fraction of its mean (the inverse's stability).

    Returns:
        (int8 array [out, in], float32 scales [out]).
    """
    w = np.asarray(kernel, np.float64)
    scale = _row_scales(w)
    order = np.argsort(-np.diag(gram), kind="stable")
    w = w[:, order].copy()
    h = np.array(gram, np.float64)[np.ix_(order, order)]
    dead = np.diag(h) == 0  # Inputs always 0: their weights do not matter.
    h[dead, dead] = 1.0
    h[np.diag_indices_from(h)] += damp * np.mean(np.diag(h))
    # Upper Cholesky factor of H^-1: row i holds how the later channels absorb channel i's error.
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    values = np.zeros(w.shape, np.int8)
    for i in range(w.shape[1]):
        step = np.clip(np.round(w[:, i] / scale), -127, 127)
        values[:, i] = step
        error = (w[:, i] - step * scale) / u[i, i]
        w[:, i + 1 :] -= np.outer(error, u[i, i + 1 :])
    return values[:, np.argsort(order)], scale.astype(np.float32)
