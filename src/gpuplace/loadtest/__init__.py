"""Load testing of OpenAI-compatible endpoints with vLLM's metric definitions (docs/loadtest.md).

The rooms, in the order one run uses them: :mod:`.config` holds one run's typed values, a
:class:`~gpuplace.loadtest.config.LoadTestConfig` (built by :mod:`gpuplace.steps.loadtest`);
:mod:`.prompts` builds prompts of exact token counts; :mod:`.client` streams one request;
:mod:`.runner` drives the arrivals; :mod:`.metrics` summarises records into a ``LatencyReport``;
:mod:`.run` ties one run together, :mod:`.sweep` several; :mod:`.io` writes and reads the files and
:mod:`.summary` formats them for people and dashboards.
"""

from gpuplace.loadtest.metrics import peak_concurrency, summarize

__all__ = ["peak_concurrency", "summarize"]
