"""GLUE's nine tasks: `data` (GlueSpec, the files, submission files), `tfds_data`
(tensorflow-datasets), `metrics` and `task` (`GlueClassification`, the model side for the
runner)."""
