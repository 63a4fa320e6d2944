"""Task names -> task objects: the one table of tasks (a plain dict, as STYLE asks; modules are
imported on demand).

A task family is a sub-package of `keras_bert.tasks` (glue/, squad/, ner/, swag/,
text_classification/) with a `task` module holding its `TaskDefinition` class and, when the
family has settings a run may change, a light `options` module (no TensorFlow) whose `OPTIONS` is a
dataclass of them (one docstring line per field). Adding a task is its folder plus one line of
`TASKS`: training, the command line's option flags and every export format follow (export picks
its signatures by the `problem` the task writes to task.json).
"""

import dataclasses
import difflib
import importlib
import importlib.util
import re

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
# name -> (family: sub-package of keras_bert.tasks, the TaskDefinition class in its `task`
# module, its first argument)
TASKS = {
    **{name: ("glue", "GlueClassification", name) for name in GLUE_TASKS},
    "squad1": ("squad", "SquadTask", "1.1"),
    "squad2": ("squad", "SquadTask", "2.0"),
    "conll2003": ("ner", "NerTask", "conll2003"),
    "swag": ("swag", "SwagTask", "swag"),
    "text_classification": ("text_classification", "TextClassification", "text_classification"),
}


def task_names():
    return tuple(TASKS)


def check_name(name):
    """Raises ValueError for an unknown task name, naming the closest valid one and all of them."""
    if name not in TASKS:
        close = difflib.get_close_matches(str(name).lower().replace("-", ""), TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown task {name!r}.{hint} Tasks: {', '.join(TASKS)}.")


def options_class(name):
    """The options dataclass of task `name`'s family, or None if it has none (light: imports
    only the family's `options` module)."""
    check_name(name)
    module = f"keras_bert.tasks.{TASKS[name][0]}.options"
    if importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module).OPTIONS


def option_fields():
    """Every task option: dict name -> (dataclasses.Field, help line, names of the tasks that
    take it), for the command line's flags."""
    fields = {}
    for name in TASKS:
        cls = options_class(name)
        for field in dataclasses.fields(cls) if cls else ():
            _, _, takers = fields.setdefault(field.name, (field, _field_help(cls, field.name), []))
            takers.append(name)
    return {k: (field, text, tuple(takers)) for k, (field, text, takers) in fields.items()}


def _field_help(cls, name):
    """The first line of `name`'s entry in the Args of `cls`'s docstring."""
    match = re.search(rf"^\s+{name}: (.*)$", cls.__doc__ or "", re.MULTILINE)
    return match.group(1) if match else f"{cls.__name__}.{name}."


def get_task(name, options=None):
    """The task object for `name`, built with its options.

    Args:
        name: str, a task name of `TASKS`.
        options: dict or None. Task options (e.g. {"doc_stride": 64} for SQuAD,
            {"document_context": True} for NER); the others keep their defaults.

    Raises:
        ValueError: for an unknown name (naming the closest valid one and all of them), or an
            option the task does not take (naming option and task).
    """
    cls = options_class(name)
    options = dict(options or {})
    accepted = [f.name for f in dataclasses.fields(cls)] if cls else []
    for key in options:
        if key not in accepted:
            takes = f"its options: {', '.join(accepted)}" if accepted else "it takes no options"
            raise ValueError(f"Task {name!r} does not take the option {key!r} ({takes}).")
    family, factory, argument = TASKS[name]
    factory = getattr(importlib.import_module(f"keras_bert.tasks.{family}.task"), factory)
    values = dataclasses.asdict(cls(**options)) if cls else {}
    return factory(argument, **values)
