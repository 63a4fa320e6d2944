"""Pre-training: corpus to examples (static TFRecords, dynamic masking), data reading, the runner."""
