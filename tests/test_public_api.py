"""The public API is type-annotated (keras_bert ships py.typed, so users' type checkers read the
hints): every parameter and return value of the public callables below, and of the `__init__`
and public methods our code defines for the public classes. A new name in one of the packages'
`__all__` is checked too; mypy (CI) checks that the hints are right."""

import importlib
import inspect

import pytest

# Packages whose `__all__` is public API (their modules' names are walked, not checked).
PACKAGES = ("keras_bert", "keras_bert.checkpoints", "keras_bert.export")
# Public callables outside those `__all__` lists, by dotted name.
NAMES = (
    "keras_bert.training.settings.TrainingSettings",
    "keras_bert.tasks.config.FinetuneConfig",
    "keras_bert.pretraining.config.PretrainingConfig",
    "keras_bert.tasks.finetuning.run_finetuning",
    "keras_bert.pretraining.runner.run_pretraining",
    "keras_bert.pretraining.static_records.create_pretraining_data",
    "keras_bert.tasks.extract_features.extract_features",
    "keras_bert.tasks.extract_features.iter_features",
    "keras_bert.tasks.extract_features.write_features",
    "keras_bert.export.tflite.export_tflite",
)


def _import(dotted):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def public_callables():
    """dotted name -> function or class: `NAMES` and the packages' `__all__`."""
    found = {name: _import(name) for name in NAMES}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                found[f"{package}.{name}"] = value
    return found


def _ours(cls):
    return cls.__module__.split(".")[0] == "keras_bert"


def functions_to_check(name, value):
    """(qualified name, function) of a public function, or of a class's `__init__` and the
    public methods and properties defined in our classes of its MRO (not Keras')."""
    if inspect.isfunction(value):
        yield name, value
        return
    for cls in value.__mro__:
        if not _ours(cls):
            continue
        for attribute, member in vars(cls).items():
            if attribute.startswith("_") and attribute != "__init__":
                continue
            if isinstance(member, property):
                member = member.fget
            elif isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            if inspect.isfunction(member):
                yield f"{name}.{attribute} ({cls.__name__})", member


def missing_annotations(function):
    """Names of the unannotated parameters (self, cls, *args and **kwargs aside), and
    "return" if the return value is unannotated."""
    signature = inspect.signature(function)
    missing = [
        p.name
        for i, p in enumerate(signature.parameters.values())
        if p.annotation is inspect.Parameter.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and not (i == 0 and p.name in ("self", "cls"))
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_the_walk_finds_the_public_api():
    found = public_callables()
    for name in (
        "keras_bert.BertConfig",
        "keras_bert.BertEncoder",
        "keras_bert.BertMultipleChoice",
        "keras_bert.checkpoints.load_encoder",
        "keras_bert.export.export",
        "keras_bert.export.list_ops",
    ):
        assert name in found
    methods = {
        qualified
        for name, value in found.items()
        for qualified, _ in functions_to_check(name, value)
    }
    assert "keras_bert.BertConfig.from_json_file (BertConfig)" in methods
    assert "keras_bert.BertClassifier.get_config (BertTask)" in methods
    assert "keras_bert.BertTokenizer.vocab_size (BertTokenizer)" in methods
    assert not any(m.endswith(("(Model)", "(Layer)")) for m in methods), "Keras' are skipped"


@pytest.mark.parametrize("name", sorted(public_callables()))
def test_public_callable_is_annotated(name):
    value = public_callables()[name]
    missing = {
        qualified: names
        for qualified, function in functions_to_check(name, value)
        if (names := missing_annotations(function))
    }
    assert not missing, f"unannotated parameters / return values: {missing}"
