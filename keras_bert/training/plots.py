"""The training-curve plot: losses, accuracies and learning rate against the step (PNG)."""

import io

from keras_bert.io_utils import write_atomic

PANELS = (
    ("loss", ("loss", "mlm_loss", "nsp_loss")),
    ("accuracy", ("mlm_accuracy", "nsp_accuracy")),
    ("learning rate", ("learning_rate",)),
)


def plot_history(history, path, title="BERT pre-training", panels=PANELS):
    """Draw `history` (a list of dicts with `step` and scalar logs) to a PNG at `path`.

    Uses matplotlib's Agg backend (no display needed); the file is written atomically.
    Series missing from the history are left out. `panels` is a tuple of (title, keys).
    Returns `path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    if not history:
        raise ValueError("Nothing to plot: the training history is empty.")
    fig = Figure(figsize=(4 * len(panels), 3.6))
    steps = [h["step"] for h in history]
    for i, (label, keys) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for key in keys:
            points = [(s, h[key]) for s, h in zip(steps, history) if key in h]
            if points:
                ax.plot(*zip(*points), label=key, marker="o" if len(points) < 20 else None)
        ax.set_xlabel("step")
        ax.set_title(label)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    write_atomic(path, buffer.getvalue())
    return path
