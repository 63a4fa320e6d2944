"""Distillation of a fine-tuned task model into a smaller student (installed as
keras_bert.tasks.distillation): `config` (DistillConfig), `students` (the student and its
initialization), `losses`, `trainer` (DistillTrainer) and `runner` (run_distillation). The
command line is `keras_bert.tasks.distill`."""
