"""Named-entity recognition on CoNLL-2003 files: `task` (reading, features, `NerTask`, entity
metrics) and `options` (the task's settings, light)."""
