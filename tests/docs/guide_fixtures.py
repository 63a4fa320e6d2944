"""Tiny stand-ins, with the real names, for the files the guides start from (see guide_runner).

A guide says `--init_checkpoint=uncased_L-12_H-768_A-12` or `--data_dir=glue/MRPC` as a reader
would type it; before the test runs the guide, `write(names, workdir)` puts a 1-layer random
checkpoint or a few dozen examples in the benchmark's own format there.
"""

import os

from finetune_cases import sentiment_rows, write_checkpoint
from task_cases import write_glue_tree, write_task_data


def _checkpoint(workdir):
    write_checkpoint(os.path.join(workdir, "uncased_L-12_H-768_A-12"))


def _corpus(workdir):
    """corpus/part-0.txt, part-1.txt: one sentence per line, a blank line between documents."""
    os.makedirs(os.path.join(workdir, "corpus"), exist_ok=True)
    for part in range(2):
        rows = sentiment_rows(60, seed=part)
        documents = ["\n".join(s for s, _ in rows[k : k + 6]) for k in range(0, len(rows), 6)]
        with open(os.path.join(workdir, "corpus", f"part-{part}.txt"), "w") as f:
            f.write("\n\n".join(documents) + "\n")


def _glue(workdir):
    write_glue_tree(os.path.join(workdir, "glue"), n=24)


def _task(task, folder):
    def write(workdir):
        written = write_task_data(os.path.join(workdir, "_tasks"), task, n=24)
        os.rename(written, os.path.join(workdir, folder))

    return write


FIXTURES = {
    "checkpoint": _checkpoint,
    "corpus": _corpus,
    "glue": _glue,
    "squad": _task("squad1", "squad"),
    "conll2003": _task("conll2003", "conll2003"),
    "swag": _task("swag", "swag"),
    "my_data": _task("text_classification", "my_data"),
}


def write(names, workdir):
    """Writes the fixtures `names` (keys of FIXTURES) under `workdir`.

    Raises:
        KeyError: an unknown name (the message lists the known ones).
    """
    for name in names:
        if name not in FIXTURES:
            raise KeyError(f"unknown guide fixture {name!r}; known: {sorted(FIXTURES)}")
        FIXTURES[name](workdir)
