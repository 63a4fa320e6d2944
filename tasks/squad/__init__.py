"""SQuAD 1.1 and 2.0: `data` (examples), `features` (windows over the context), `postprocess`
(answer spans from logits), `metrics` (the official evaluation), `task` (`SquadTask`) and
`options` (the task's settings, light)."""
