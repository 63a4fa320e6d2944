"""The exports' self-checks compare outputs on the scale of each output.

A SavedModel, a TF Hub pair or a TFLite model is checked against the Python model it came from
before its version directory appears. The check is there to catch a weight that did not reload or
a kernel that computes something else: such a fault moves an output by a sizeable part of its own
magnitude. Float noise between an eager run and an optimized graph (other kernels, other summation
orders, fused ops) moves it by about 1e-6 of that magnitude. A fixed element-wise tolerance cannot
tell the two apart for every head: logits of a fine-tuned token classifier reach several units and
differ by 3.5e-5 between the eager run and the reloaded graph. So each output is compared within

    atol + scale_rtol * (the reference output's largest finite magnitude)

and a failure says by how much, where, and what was allowed.
"""

import numpy as np

# Of the reference output's largest finite magnitude: float32 noise through a few dozen layers is
# about 1e-6 of it; a zeroed or stale weight moves an output by more than 1e-2 of it.
SCALE_RTOL = 1e-4
ATOL = 1e-5  # Outputs that are all near zero (a probability of an unlikely class, a tiny head).


def tolerance(reference, atol=ATOL, scale_rtol=SCALE_RTOL):
    """The largest difference allowed from `reference`: atol + scale_rtol * its largest finite
    magnitude."""
    finite = np.abs(reference[np.isfinite(reference)])
    return atol + scale_rtol * (float(finite.max()) if finite.size else 0.0)


def difference(got, want, atol=ATOL, scale_rtol=SCALE_RTOL):
    """Why `got` is not `want`, or None when it is.

    Floats: equal where either is not finite (infinities of the same sign, NaN in both), elsewhere
    within `tolerance(want)`. Ints, strings and bools: equal. Shapes: equal.

    Returns:
        None, or one sentence: the shapes, or the largest difference, its index, both values and
        the tolerance (float), or the number of differing elements and the first (other dtypes).
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} where {want.shape} was expected"
    if got.size == 0:
        return None
    if want.dtype.kind != "f" or got.dtype.kind != "f":
        unequal = got != want
        if not unequal.any():
            return None
        index = tuple(int(i) for i in np.argwhere(unequal)[0])
        return (
            f"{int(unequal.sum())} of {got.size} values differ, the first at {list(index)}: "
            f"{got[index]!r} where {want[index]!r} was expected"
        )
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(got64) & np.isfinite(want64)
    special = ~finite & ~((got64 == want64) | (np.isnan(got64) & np.isnan(want64)))
    if special.any():
        index = tuple(int(i) for i in np.argwhere(special)[0])
        return (
            f"{int(special.sum())} values are not finite where the reference differs, the first at "
            f"{list(index)}: {got64[index]} where {want64[index]} was expected"
        )
    gap = np.abs(np.where(finite, got64, 0.0) - np.where(finite, want64, 0.0))
    allowed = tolerance(want64, atol, scale_rtol)
    largest = float(gap.max())
    if largest <= allowed:
        return None
    index = tuple(int(i) for i in np.unravel_index(int(gap.argmax()), gap.shape))
    return (
        f"largest difference {largest:.3g} at {list(index)} ({got64[index]:.6g} where "
        f"{want64[index]:.6g} was expected), {int((gap > allowed).sum())} of {gap.size} values "
        f"beyond the {allowed:.3g} allowed ({atol:g} + {scale_rtol:g} x the output's largest "
        f"magnitude {float(np.abs(want64[finite]).max()) if finite.any() else 0.0:.3g})"
    )
