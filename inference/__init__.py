"""Batch-1 inference engine: Hugging Face checkpoints -> streamed tokens (never imports Django).

Entry points: `inference.engine.Engine`, the CLIs `python -m inference.generate`,
`python -m inference.synth` and `python -m inference.bench`.
"""
