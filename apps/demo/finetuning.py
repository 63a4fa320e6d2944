"""The demo's stage 5: the package task's TSV files and `run_finetuning` (task
`text_classification`) from the pre-training run, reported next to the majority class."""

import collections
import os

from keras_bert.apps.demo.corpus import write_tsv
from keras_bert.apps.demo.job import SEQ_LENGTH


def finetune(job, train_rows, dev_rows, dev_modules):
    """Stage 5: the package task's TSV files and `run_finetuning` from the pre-training run."""
    from keras_bert.tasks.finetuning import run_finetuning

    job.start(
        f"Fine-tuning it to tell which of {len(job.settings['packages'])} packages a docstring "
        f"paragraph is from"
    )
    write_tsv(train_rows, os.path.join(job.task_dir, "train.tsv"))
    write_tsv(dev_rows, os.path.join(job.task_dir, "dev.tsv"))
    write_tsv(
        dev_rows, os.path.join(job.task_dir, "test.tsv")
    )  # The requests: Keras' answers go to predictions/.
    job.paths["fine-tuning data"] = job.task_dir
    job.result(
        f"{len(train_rows)} training paragraphs, {len(dev_rows)} dev paragraphs from "
        f"{len(dev_modules)} held-out modules ({', '.join(dev_modules[:3])}, ...)",
        timed=False,
    )
    finetuning = run_finetuning(
        task="text_classification",
        data_dir=job.task_dir,
        init_checkpoint=job.paths["pre-training run"],
        model_dir=os.path.join(job.model_dir, "finetune"),
        do_train=True,
        do_eval=True,
        do_predict=True,
        seq_length=SEQ_LENGTH,
        batch_size=32,
        learning_rate=job.settings["learning_rate"],
        num_train_epochs=job.settings["epochs"],
        verbose=True,
    )
    metrics, epochs = finetuning["eval"], job.settings["epochs"]
    job.result(
        f"dev accuracy {metrics['accuracy']:.3f}, macro F1 {metrics['macro_f1']:.3f} (majority "
        f"class {majority_accuracy(train_rows, dev_rows):.3f}; best epoch "
        f"{finetuning['best']['epoch']} of {epochs})"
    )
    job.paths.update(
        {
            "fine-tuning run": os.path.join(job.model_dir, "finetune"),
            "fine-tuned model": finetuning["model_path"],
            "fine-tuning TensorBoard logs": finetuning["tensorboard_dir"],
            "fine-tuning curve": finetuning["plot"],
        }
    )
    return finetuning


def majority_accuracy(train, dev):
    """Dev accuracy of always answering the most frequent training label."""
    top = collections.Counter(label for label, *_ in train).most_common(1)[0][0]
    return sum(label == top for label, *_ in dev) / max(len(dev), 1)


def read_predictions(path):
    """The runner's `index<TAB>prediction` file as a list of labels, in file order."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[1] for line in f.readlines()[1:] if line.strip()]
