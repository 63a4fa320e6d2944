"""keras_bert: BERT (Devlin et al., 2019) as Keras 3 code, from raw text to a served model.

The names below load on first use (`import keras_bert` imports neither Keras nor TensorFlow, and
sets no backend: Keras reads `KERAS_BACKEND`, "tensorflow", "jax" or "torch"; the command lines
default to TensorFlow). `keras.saving.load_model` reads our models after `import keras_bert`
(`keras_bert._saving`):

>>> import keras_bert
>>> encoder = keras_bert.BertEncoder(keras_bert.BertConfig.preset("tiny"))  # doctest: +SKIP
"""

from keras_bert import _lazy, _saving

__version__ = "0.1.0"

_NAMES = {
    "BertConfig": "keras_bert.config:BertConfig",
    "BertEncoder": "keras_bert.models.encoder:BertEncoder",
    "BertPretrainer": "keras_bert.models.pretrainer:BertPretrainer",
    "BertTokenizer": "keras_bert.text.tokenizer:BertTokenizer",
    "BertPreprocessor": "keras_bert.text.preprocessor:BertPreprocessor",
    "BertClassifier": "keras_bert.models.task_models:BertClassifier",
    "BertSpanLabeler": "keras_bert.models.task_models:BertSpanLabeler",
    "BertTokenClassifier": "keras_bert.models.task_models:BertTokenClassifier",
    "BertMultipleChoice": "keras_bert.models.task_models:BertMultipleChoice",
    "checkpoints": "keras_bert.checkpoints",
    "presets": "keras_bert.presets",
    "tasks": "keras_bert.tasks",
    "export": "keras_bert.export",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = _lazy.attach(__name__, _NAMES)
_saving.register_when_keras_loads()
