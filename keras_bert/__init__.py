"""keras_bert: BERT (Devlin et al., 2019) as Keras 3 code, from raw text to a served model."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_bert.config import BertConfig  # noqa: E402
from keras_bert.models.encoder import BertEncoder  # noqa: E402
from keras_bert.models.pretrainer import BertPretrainer  # noqa: E402
from keras_bert import checkpoints  # noqa: E402,F401

__version__ = "0.1.0"
__all__ = ["BertConfig", "BertEncoder", "BertPretrainer", "checkpoints"]
