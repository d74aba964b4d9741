"""Serving targets: the local inference server (``transformers serve`` over a locally built model) and
the serving-runtime (vLLM) arguments that cluster manifests carry. See docs/serving.md.

Nothing heavy is imported here: :mod:`gpuplace.deploy.local` uses only the standard library until it
builds a model directory.
"""
