"""Did quantization hurt the model? Weight error offline, output agreement online.

Modules: codecs (number formats and bit unpacking), layouts (which quantized layout a module is
stored in, and its dequantization), reference (where a candidate weight lives in the BF16
reference: same name, split or fused projections, transposed expert stacks), baseline
(round-to-nearest in the candidate's format), smoothing (AWQ factors folded into norms), metrics
(streamed error statistics), verdict (thresholds and why), compare (the `quality` passes), results,
report (documents and JSON); prompts, agreement_stats and canary for `bench --reference-url`
(the runner is launchers/agreement.py); evidence for `plan`/`report --quality`; dequantized_copy for
`convert --dequantized` (the BF16 copy served as a reference, written with convert's shard writer).
"""
