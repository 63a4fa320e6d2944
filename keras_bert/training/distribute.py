"""Deprecated: renamed `keras_bert.training.strategies` (the `tf.distribute` strategies); this name
goes in the next release. Importing it warns and gives that module."""

import sys

from keras_bert import _deprecated

sys.modules[__name__] = _deprecated.moved_module(__name__, "keras_bert.training.strategies")
