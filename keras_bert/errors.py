"""Error types shared across the package (no imports: every layer may raise and catch them)."""


class CheckpointError(ValueError):
    """A checkpoint cannot be loaded: it does not fit the model (missing variables, wrong
    shapes, another architecture) or it is corrupt or incomplete."""


class MissingExtraError(ImportError):
    """A feature needs an optional dependency (a setup.cfg extra) that is not installed; the
    message names the extra and the pip command that installs it."""
