"""Load testing of OpenAI-compatible endpoints with vLLM's metric definitions (docs/loadtest.md).

The rooms, in the order one run uses them: :mod:`.config` parses the parameters once into a
:class:`~gpuplace.loadtest.config.LoadTestConfig` (SLO, prediction and traffic from the plan);
:mod:`.prompts` builds prompts of exact token counts; :mod:`.client` streams one request;
:mod:`.runner` drives the arrivals; :mod:`.metrics` summarises records into a ``LatencyReport``;
:mod:`.run` ties one run together, :mod:`.sweep` several; :mod:`.io` writes and reads the files and
:mod:`.summary` formats them for people and dashboards.
"""

from gpuplace.loadtest.metrics import peak_concurrency, prediction_error, summarize

__all__ = ["peak_concurrency", "prediction_error", "summarize"]
