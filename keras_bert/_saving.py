"""`keras.saving.load_model` after a plain `import keras_bert`, which imports neither Keras nor
TensorFlow.

Keras finds a saved object's class by its registered name ("keras_bert>BertClassifier") in its
custom objects (`keras.saving.get_custom_objects()`), where our classes appear when their modules
are imported. `import keras_bert` puts a stand-in there for each of them (`MODULES`) once Keras is
imported: at once if it is, else right after its import (a one-time import hook on "keras"). A
stand-in's `from_config` imports its class's module (whose registration replaces the stand-ins of
that module) and builds the object with the class. Nothing loads before an object is read.

>>> import keras_bert, keras                                          # doctest: +SKIP
>>> keras.saving.load_model("classifier.keras").task_facts["labels"]  # doctest: +SKIP
['negative', 'positive']
"""

import importlib
import importlib.util
import sys

PACKAGE = "keras_bert"
# Module -> the names its classes are registered under (`register_keras_serializable(package=
# "keras_bert")`); tests/test_saving_registration.py checks it against the source.
MODULES = {
    "keras_bert.layers.dropout": ("ReplicaDropout",),
    "keras_bert.layers.embeddings": ("BertEmbeddings",),
    "keras_bert.layers.heads": ("MaskedLMHead",),
    "keras_bert.layers.pooling": ("MaskedMeanPooling",),
    "keras_bert.layers.transformer": ("TransformerBlock",),
    "keras_bert.models.encoder": (
        "BertEncoder",
        "_AttentionBias",
        "_FirstToken",
        "_PackedAttentionBias",
        "_Positions",
    ),
    "keras_bert.models.pretrainer": ("BertPretrainer",),
    "keras_bert.models.electra": ("ElectraPretrainer", "_SampleAndReplace"),
    "keras_bert.models.task_models": (
        "BertClassifier",
        "BertSpanLabeler",
        "BertTokenClassifier",
        "BertMultipleChoice",
        "_SplitLast",
        "_MergeChoices",
        "_SplitChoices",
    ),
    "keras_bert.models.documents": ("DocumentClassifier", "WindowPooling"),
    "keras_bert.text.packer": ("BertPacker",),
    "keras_bert.text.preprocessor": ("BertPreprocessor",),
    "keras_bert.text.tokenizer": ("BertTokenizer",),
    "keras_bert.training.optimizers": (
        "AdamW",
        "AdamWeightDecay",
        "Lamb",
        "LossScaleOptimizer",
        "WarmupLinearDecay",
    ),
    "keras_bert.tasks.trainer": ("TrainingWrapper",),
    "keras_bert.tasks.distillation.trainer": ("DistillTrainer",),
    "keras_bert.rewrites.fake_quant": ("ActivationRanges",),
    "keras_bert.rewrites.encoder": ("EncoderRewrite",),
    "keras_bert.rewrites.channel_groups": ("GroupedEncoder",),
    "keras_bert.rewrites.integer": ("IntegerEncoder",),
}


class StandIn:
    """Stands for a keras_bert class in Keras' custom objects until its module is imported.

    Args:
        module: str, the module that defines and registers the class.
        name: str, the class's registered name (without "keras_bert>").
    """

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def resolve(self):
        """The class (its module imported: registered, replacing this stand-in)."""
        return getattr(importlib.import_module(self.module), self.name)

    def from_config(self, config):
        """The object of `config`, built by the class (`cls.from_config`)."""
        return self.resolve().from_config(config)

    def __repr__(self):
        return f"<stand-in for {self.module}.{self.name}>"


def registered_class(name):
    """The class registered as "keras_bert>`name`" (its module imported), as Keras' registry
    finds a saved object's class.

    Raises:
        ValueError: no class of ours has that name.
    """
    import keras

    found = keras.saving.get_registered_object(f"{PACKAGE}>{name}")
    if found is None:
        raise ValueError(f"No keras_bert class is registered as {name!r}.")
    return found.resolve() if isinstance(found, StandIn) else found


def add_stand_ins(custom_objects):
    """Adds a `StandIn` to `custom_objects` for each name of `MODULES` not registered yet."""
    for module, names in MODULES.items():
        for name in names:
            custom_objects.setdefault(f"{PACKAGE}>{name}", StandIn(module, name))


def register_when_keras_loads():
    """Adds the stand-ins to Keras' custom objects now if Keras is imported, else right after
    its import (see the module)."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "saving"):
        add_stand_ins(keras.saving.get_custom_objects())
    elif keras is None and not any(isinstance(f, _AfterKeras) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterKeras())


class _AfterKeras:
    """Finds "keras" as the other finders do, its loader wrapped to add the stand-ins once the
    package has run (and to take this finder off `sys.meta_path`: a look-up alone, as
    `importlib.util.find_spec("keras")`, leaves it there)."""

    def __init__(self):
        self._finding = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(fullname)  # The other finders' answer.
        finally:
            self._finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenAddStandIns(spec.loader, self)
        return spec


class _ThenAddStandIns:
    """A loader that runs `loader`'s module, then adds the stand-ins to its custom objects and
    takes `finder` off `sys.meta_path`."""

    def __init__(self, loader, finder):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        add_stand_ins(module.saving.get_custom_objects())
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)

    def __getattr__(self, name):  # get_source, get_resource_reader, ... as the loader's.
        return getattr(self.loader, name)
