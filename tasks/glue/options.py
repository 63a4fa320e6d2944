"""GLUE's task options: long texts (light: the command line defines its flags from them before
TensorFlow loads; `keras_bert.tasks.registry` collects them)."""

from keras_bert.tasks.long_text import LongTextOptions

OPTIONS = LongTextOptions  # The registry reads a family's options here.
