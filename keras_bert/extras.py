"""Optional dependencies (setup.cfg's extras), imported by the one feature that needs each."""

from types import ModuleType

from keras_bert.errors import MissingExtraError

TFDS_INSTALL = "pip install 'keras3-bert[tfds]'"


def import_tfds() -> ModuleType:
    """tensorflow_datasets, for reading benchmarks and corpora from TensorFlow Datasets.

    Raises:
        MissingExtraError: tensorflow-datasets is not installed (it is the `tfds` extra).
    """
    try:
        import tensorflow_datasets  # Heavy (pyarrow, ...) and optional: the `tfds` extra.
    except ModuleNotFoundError as error:
        raise MissingExtraError(
            f"Reading from TensorFlow Datasets (--tfds, --tfds_name) needs tensorflow-datasets, "
            f"which is not installed: {TFDS_INSTALL}."
        ) from error
    return tensorflow_datasets
