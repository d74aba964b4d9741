"""Load testing of OpenAI-compatible endpoints: workloads, the streaming client, the runner, metrics.

``gpuplace loadtest`` and the ``load_test`` component call :func:`gpuplace.loadtest.step.run_loadtest_step`;
:func:`gpuplace.loadtest.metrics.summarize` turns per-request records into a ``LatencyReport`` with
vLLM's metric definitions (docs/loadtest.md).
"""

from gpuplace.loadtest.metrics import peak_concurrency, prediction_error, summarize

__all__ = ["peak_concurrency", "prediction_error", "summarize"]
