"""Training utilities: optimizers and schedules, distribution strategies, checkpoint/resume."""
