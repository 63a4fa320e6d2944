"""Deployment rewrites: copies of a model whose encoder computes its forward pass in another form,
sharing the trained weights (the core layers and models carry no deployment modes).

- `encoder`: `EncoderRewrite`, the copy of a `BertEncoder` in TensorFlow ops whose Transformer
  blocks run the core block's forward pass with substituted steps (`BlockRewrite`), and
  `substitute_encoder`, which puts such a copy in place of a task model's encoder;
- `integer`: the integer-friendly forms of integer TFLite (`IntegerEncoder`);
- `channel_groups`: the residual stream in channel groups (`GroupedEncoder`, `calibrate`);
- `fake_quant`: the fake-quantization sites of quantization-aware fine-tuning
  (`quantization_aware`, `ActivationRanges`).

`keras_bert.export` (TFLite) and `keras_bert.tasks.quantization_aware` build these copies; they
import only the core and one another.

>>> from keras_bert.rewrites import encoder, integer                       # doctest: +SKIP
>>> copy = encoder.substitute_encoder(model, integer.IntegerEncoder)     # doctest: +SKIP
"""
