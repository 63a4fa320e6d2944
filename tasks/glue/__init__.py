"""GLUE's nine tasks: `data` (GlueSpec, the files and tensorflow-datasets, metrics, submission
files) and `task` (`GlueClassification`, the model side for the runner)."""
