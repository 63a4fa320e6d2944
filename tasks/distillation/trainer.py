"""`DistillTrainer`: the fine-tuning runner's `TrainingWrapper` with the teacher in the loss.

Each training step runs the frozen teacher (inference mode: no dropout) on the student's batch
and adds its soft targets (and, when asked, TinyBERT's hidden-state and attention matching) to
the gold-label loss (`keras_bert.tasks.distillation.losses`). Everything else is the runner's:
the same batches, strategies, checkpoints and logs. The teacher is not a tracked attribute, so
training checkpoints hold the student (and the projection) only.

Why not `keras.distillation.Distiller`: its losses average over every position of a batch
(NER's and SQuAD's padded tokens would count), per replica (the runner averages over the
examples of all replicas), and from Keras loss functions (the task models' losses are their
`loss_sums`, which drop unlabelled positions); its feature extractors read `layer.output`,
which for the encoder nested in a task model is the encoder's own graph, not the task model's
(so no hidden states of the task model come out); and it tracks the teacher, which would go into
every training checkpoint. Its convention for the loss weights (student_loss_weight) is kept:
`alpha` here.
"""

import keras
from keras import ops

from keras_bert import backend
from keras_bert.models import losses as task_losses
from keras_bert.tasks.distillation import losses
from keras_bert.tasks.trainer import TrainingWrapper

GOLD = "gold"  # Label of each training row: 1 where it has gold labels, 0 (unlabeled_file) not.
STATES = "hidden_states"  # The feature views' extra output: [embeddings, block 1, ..., block L].


@keras.saving.register_keras_serializable(package="keras_bert")
class DistillTrainer(TrainingWrapper):
    """Trains `model` (the student) with the teacher's targets and the gold labels.

    Args:
        task: the `TaskDefinition`. problem: its `problem` (task.json).
        model: the student task model (what is saved and exported).
        teacher: the teacher task model (frozen, not tracked).
        temperature, alpha, hidden_weight, attention_weight: as `DistillConfig`.
        layer_pairs: [(teacher index, student index)] of hidden states (0 = embeddings),
            for the hidden-state and attention terms.
    """

    def __init__(
        self,
        task,
        model,
        teacher,
        problem,
        temperature=2.0,
        alpha=0.5,
        hidden_weight=0.0,
        attention_weight=0.0,
        layer_pairs=(),
        **kwargs,
    ):
        super().__init__(task, model, **kwargs)
        teacher.trainable = False
        self.problem = problem
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.hidden_weight = float(hidden_weight)
        self.attention_weight = float(attention_weight)
        self.layer_pairs = [tuple(p) for p in layer_pairs]
        self.features = bool(self.hidden_weight or self.attention_weight)
        views = (feature_view(teacher), feature_view(model)) if self.features else (teacher, model)
        self._teacher = lambda: views[0]  # A function: not tracked, so not checkpointed.
        self.student_view = views[1]
        self.projection = None
        if self.features:
            self._check_features(teacher.encoder, model.encoder)

    def _check_features(self, teacher_encoder, student_encoder):
        t, s = teacher_encoder.config, student_encoder.config
        if self.attention_weight and t.num_attention_heads != s.num_attention_heads:
            raise ValueError(
                f"attention_weight needs as many attention heads in the student as in the "
                f"teacher ({s.num_attention_heads} vs {t.num_attention_heads}); set it to 0."
            )
        if self.hidden_weight and t.hidden_size != s.hidden_size:  # TinyBERT's W_h.
            self.projection = keras.layers.Dense(
                t.hidden_size, use_bias=False, dtype="float32", name="hidden_projection"
            )
            self.projection.build((None, None, s.hidden_size))
        self.teacher_blocks = lambda: teacher_encoder.transformer_layers
        self.student_blocks = student_encoder.transformer_layers

    @property
    def label_keys(self):
        return (*self.task.label_keys, GOLD)

    def call(self, inputs, training=False):
        return self.student_view(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        teacher = self._teacher()(x, training=False)
        mask = x["input_mask"]
        terms = {"gold": gold_sums(self.model, self.problem, y, y_pred)}
        terms["soft"] = losses.soft_target_sums(
            self.problem, teacher, y_pred, mask, self.temperature
        )
        if self.features:
            mask = ops.reshape(mask, [-1, ops.shape(mask)[-1]])  # (B, S); SWAG: (B*K, S)
            terms.update(self._feature_sums(teacher[STATES], y_pred[STATES], mask))
        mean = {}
        for name, (total, count) in terms.items():
            # tf.distribute: the global mean's share of this replica (Keras sums the replicas'
            # gradients); JAX's keras.distribution has the global batch already.
            mean[name] = total / ops.maximum(backend.all_reduce_sum(count), 1.0)
        teacher_terms = mean["soft"]
        if self.hidden_weight:
            teacher_terms += self.hidden_weight * mean["hidden"]
        if self.attention_weight:
            teacher_terms += self.attention_weight * mean["attention"]
        loss = self.alpha * mean["gold"] + (1.0 - self.alpha) * teacher_terms
        for extra in self.model.losses:
            loss = loss + ops.cast(extra, loss.dtype)
        return loss

    def _feature_sums(self, teacher_states, student_states, mask):
        """{"hidden": (sum, count), "attention": (sum, count)} over the mapped layers."""
        out = {}
        if self.hidden_weight:
            out["hidden"] = losses.hidden_sums(
                [teacher_states[t] for t, _ in self.layer_pairs],
                [student_states[s] for _, s in self.layer_pairs],
                mask,
                self.projection,
            )
        if self.attention_weight:
            blocks = [(t, s) for t, s in self.layer_pairs if s > 0]  # Block j reads state j-1.
            teacher_blocks = self.teacher_blocks()
            out["attention"] = losses.attention_sums(
                [teacher_blocks[t - 1].attention_scores(teacher_states[t - 1]) for t, _ in blocks],
                [
                    self.student_blocks[s - 1].attention_scores(student_states[s - 1])
                    for _, s in blocks
                ],
                mask,
            )
        return out


def gold_sums(model, problem, y, outputs):
    """(sum, count) of the task model's own loss (`loss_sums`) over the rows with gold labels
    (`GOLD` 1); other rows hold ignored labels (negative ids) except regression scores, masked
    here. `y`: the batch's labels by output name, and `GOLD`."""
    if problem == "regression":
        return task_losses.squared_error_sums(y["logits"], outputs["logits"], y[GOLD])
    return model.loss_sums({k: v for k, v in y.items() if k != GOLD}, outputs)


def feature_view(model):
    """A model with `model`'s layers (weights shared) and outputs plus `STATES`: the encoder's
    embeddings output and every block's output, in one forward pass.

    The encoder is a model nested in the task model, so its inner tensors are not the task
    model's; the task model's graph is rebuilt (`keras.models.clone_model`, layers reused) with
    the encoder's call replaced by a flat view of it that also returns the embeddings.
    """
    encoder = model.encoder
    inner = keras.Model(
        encoder.inputs,
        {**encoder.output, "embeddings": encoder.embeddings.output},
        name=f"{encoder.name}_states",
    )
    states = []

    def call(layer, *args, **kwargs):
        if layer is not encoder:
            return layer(*args, **kwargs)
        out = inner(*args, **kwargs)
        states.extend([out["embeddings"], *out["encoder_outputs"]])
        return {k: out[k] for k in ("sequence_output", "pooled_output", "encoder_outputs")}

    clone = keras.models.clone_model(model, clone_function=lambda layer: layer, call_function=call)
    return keras.Model(clone.inputs, {**clone.output, STATES: states}, name=f"{model.name}_states")
