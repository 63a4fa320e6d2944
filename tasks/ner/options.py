"""NER's task options (light: the command line defines its flags from them before TensorFlow
loads; `keras_bert.tasks.registry` collects them)."""

import dataclasses


@dataclasses.dataclass
class NerOptions:
    """The settings of `NerTask` a run may change.

    Args:
        entity_types: str or None. Comma-separated entity types (default PER,ORG,LOC,MISC).
        document_context: bool. Each sentence in the middle of its document's text.
    """

    entity_types: str | None = None
    document_context: bool = False


OPTIONS = NerOptions  # The registry reads a family's options here.
