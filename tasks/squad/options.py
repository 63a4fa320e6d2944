"""SQuAD's task options (light: the command line defines its flags from them before TensorFlow
loads; `keras_bert.tasks.registry` collects them)."""

import dataclasses


@dataclasses.dataclass
class SquadOptions:
    """The settings of `SquadTask` a run may change (the original run_squad's defaults).

    Args:
        doc_stride: int. Tokens between the starts of a context's windows.
        max_query_length: int. Question tokens kept.
        n_best_size: int. Start and end candidates searched per window.
        max_answer_length: int. Tokens of the longest answer.
        null_score_diff_threshold: float. SQuAD 2.0: answer "no answer" when its score beats
            the best span's by more than this.
    """

    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0


OPTIONS = SquadOptions  # The registry reads a family's options here.
