"""What the demo's stages share: the settings of a default and a --quick run, the directories and
paths written, the stage lines, and a way to keep native log lines off the terminal."""

import contextlib
import os
import time

from keras_bert import cli
from keras_bert.apps.demo.corpus import PACKAGES, QUICK_PACKAGES

# Settings of the default run and of --quick (`model`: changes to the "tiny" preset).
SETTINGS = {
    False: dict(
        steps=1500,
        vocab_size=4000,
        dupe_factor=3,
        workers=2,
        model={},
        packages=PACKAGES,
        train_cap=150,
        dev_cap=30,
        epochs=6,
        learning_rate=1e-3,
        shown_answers=8,
    ),
    True: dict(
        steps=40,
        vocab_size=1000,
        dupe_factor=1,
        workers=1,
        model=dict(num_hidden_layers=1, intermediate_size=256),
        packages=QUICK_PACKAGES,
        train_cap=64,
        dev_cap=16,
        epochs=6,
        learning_rate=2e-3,
        shown_answers=4,
    ),
}
SEQ_LENGTH, MAX_PREDICTIONS = 64, 10
LOWER_CASE = True  # An uncased vocabulary, examples and models.
QUANTIZE = "dynamic_range"


class Job:
    """What the stages share: settings, directories, the paths written, and the stage lines
    ("k/N title ..." as a stage starts, an indented result line as it ends)."""

    STAGES = 7

    def __init__(self, model_dir, settings):
        self.model_dir, self.settings = model_dir, settings
        self.data_dir = os.path.join(model_dir, "data")
        self.task_dir = os.path.join(self.data_dir, "packages")
        self.paths = {}
        self.seconds = {}  # Stage title -> wall seconds.
        self.done, self.started, self.title = 0, None, None
        os.makedirs(self.task_dir, exist_ok=True)

    def start(self, title):
        self.done += 1
        self.started, self.title = time.perf_counter(), title
        print(f"{self.done}/{self.STAGES} {title} ...", flush=True)

    def result(self, text, timed=True):
        elapsed = time.perf_counter() - self.started
        if timed:
            self.seconds[self.title] = elapsed
        seconds = f" ({elapsed:.0f} s)" if timed else ""
        print(f"    {text}{seconds}", flush=True)


@contextlib.contextmanager
def native_stderr_to(path):
    """Sends what is written to the standard error file descriptor in this block to `path`
    (appended): the TFLite converter's and LiteRT's native log lines, which
    TF_CPP_MIN_LOG_LEVEL does not silence and which would break into the progress bar."""
    with open(path, "ab") as log, cli.stderr_descriptor_to(log):
        yield
