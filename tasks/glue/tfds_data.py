"""GLUE's nine tasks from tensorflow-datasets (`glue/<task>`): the same `InputExample`s as the
distribution's files give (`keras_bert.tasks.glue.data`), labels mapped by name."""

from keras_bert import extras
from keras_bert.tasks.glue.data import (
    GlueDataError,
    InputExample,
    check_score,
    check_split,
    get_spec,
    nonempty_text,
    parse_label,
)

# Our split names -> tensorflow-datasets split names ("ax" is the test split of glue/ax).
TFDS_SPLITS = {
    "train": "train",
    "dev": "validation",
    "test": "test",
    "dev_matched": "validation_matched",
    "dev_mismatched": "validation_mismatched",
    "test_matched": "test_matched",
    "test_mismatched": "test_mismatched",
    "ax": "test",
}


def read_tfds(task, split, data_dir=None):
    """Reads one split from tensorflow-datasets `glue/<task>` (downloads and prepares it if needed).

    Args:
        task: task name or `GlueSpec`.
        split: our split name (see `TFDS_SPLITS`; MNLI's "ax" reads glue/ax).
        data_dir: str, the tfds data directory, or None for tfds' default.

    Returns:
        list of `InputExample` sorted by tfds' `idx` (the file order); labels mapped by name.
    """
    tfds = extras.import_tfds()

    task = get_spec(task)
    check_split(task, split)
    name = "glue/ax" if split == "ax" else task.tfds_name
    builder = tfds.builder(name, data_dir=data_dir)
    builder.download_and_prepare()
    label_names = None if task.is_regression else builder.info.features["label"].names
    dataset = builder.as_dataset(split=TFDS_SPLITS[split], shuffle_files=False)
    rows = sorted(tfds.as_numpy(dataset), key=lambda features: int(features["idx"]))
    return [
        example_from_tfds(task, split, features, label_names, where=f"{name}[{TFDS_SPLITS[split]}]")
        for features in rows
    ]


def example_from_tfds(task, split, features, label_names, where="tfds"):
    """One tfds GLUE example (a dict of NumPy values) as an `InputExample`.

    Args:
        task: task name or `GlueSpec`.
        split: our split name; predict splits get label None (tfds stores -1 there).
        features: dict with the task's `tfds_text_features` (bytes), "label" and "idx".
        label_names: the dataset's ClassLabel names (`builder.info.features["label"].names`), in the
            dataset's own order; None for STS-B. Label ids are mapped through these names.
        where: str naming the dataset in errors.

    Raises:
        GlueDataError: an empty text, a label id outside the names, or a name with no counterpart.
    """
    task = get_spec(task)
    idx = int(features["idx"])
    where = f"{where} idx {idx}"
    texts = [
        None if name is None else nonempty_text(_decode(features[name]), name, where)
        for name in task.tfds_text_features
    ]
    if split in task.predict_splits:
        return InputExample(str(idx), texts[0], texts[1], None)
    if task.is_regression:
        label = check_score(float(features["label"]), where)
    else:
        label_id = int(features["label"])
        if not 0 <= label_id < len(label_names):
            raise GlueDataError(f"{where}: label id {label_id} outside {list(label_names)}.")
        name = label_names[label_id]
        label = parse_label(
            task, task.tfds_label_names.get(name, name), f"{where} (tfds label {name!r})"
        )
    return InputExample(f"{split}-{idx}", texts[0], texts[1], label)


def _decode(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
