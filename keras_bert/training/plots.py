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
    return _save(fig, title, path)


def plot_sweeps(panels, path, title="sweep"):
    """One panel per sweep: its dev metric (y) per learning rate (x, log scale), a marker per run
    coloured by seed, and a line through each setting's mean over seeds.

    Args:
        panels: list of (name, metric name, points); points: (learning rate, seed, score,
            label of the run's other settings, e.g. "bs32 ep3 adamw").
        path: the PNG to write (atomically). title: str.

    Returns `path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    if not panels:
        raise ValueError("Nothing to plot: no sweep has runs.")
    columns = min(len(panels), 3)
    rows = -(-len(panels) // columns)
    fig = Figure(figsize=(4.2 * columns, 3.4 * rows))
    seeds = sorted({p[1] for _, _, points in panels for p in points})
    colors = {seed: f"C{i % 10}" for i, seed in enumerate(seeds)}
    for i, (name, metric, points) in enumerate(panels):
        ax = fig.add_subplot(rows, columns, i + 1)
        for seed in seeds:
            mine = [(lr, score) for lr, s, score, _ in points if s == seed]
            if mine:
                ax.scatter(*zip(*mine), color=colors[seed], label=f"seed {seed}", s=18)
        for other in sorted({p[3] for p in points}):
            by_lr = {}
            for lr, _, score, label in points:
                if label == other:
                    by_lr.setdefault(lr, []).append(score)
            lrs = sorted(by_lr)
            ax.plot(
                lrs, [sum(by_lr[lr]) / len(by_lr[lr]) for lr in lrs], "-", alpha=0.6, label=other
            )
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.set_ylabel(f"dev {metric} (x100)")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        low, high = ax.get_ylim()
        ax.set_ylim(low, high + 0.45 * (high - low))  # Room for the legend above the points.
        ax.legend(fontsize=7, loc="upper left", ncols=2)
    return _save(fig, title, path)


def _save(fig, title, path):
    """Title `fig`, lay it out and write it as a PNG at `path` (atomically); returns `path`."""
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    write_atomic(path, buffer.getvalue())
    return path
