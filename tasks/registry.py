"""Task names -> task objects (a plain dict, as STYLE asks; modules are imported on demand)."""

import difflib
import importlib
import inspect

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
# name -> (module of keras_bert.tasks, factory in it, its argument)
TASKS = {
    **{name: ("classification", "GlueClassification", name) for name in GLUE_TASKS},
    "squad1": ("squad", "SquadTask", "1.1"),
    "squad2": ("squad", "SquadTask", "2.0"),
    "conll2003": ("ner", "NerTask", "conll2003"),
    "swag": ("swag", "SwagTask", "swag"),
    "text_classification": ("text_classification", "TextClassification", "text_classification"),
}


def task_names():
    return tuple(TASKS)


def get_task(name, **options):
    """The task object for `name`, built with those of `options` its class takes (e.g.
    doc_stride for SQuAD, document_context for NER; None values keep the class default).

    Raises:
        ValueError: for an unknown name, naming the closest valid one and all of them.
    """
    if name not in TASKS:
        close = difflib.get_close_matches(str(name).lower().replace("-", ""), TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown task {name!r}.{hint} Tasks: {', '.join(TASKS)}.")
    module, factory, argument = TASKS[name]
    factory = getattr(importlib.import_module(f"keras_bert.tasks.{module}"), factory)
    accepted = inspect.signature(factory).parameters
    return factory(argument, **{k: v for k, v in options.items() if k in accepted and v is not None})
