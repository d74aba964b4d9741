"""Drive an endpoint with a workload: arrivals on schedule, a concurrency cap, bounds, Ctrl-C.

:func:`run_load` sends each :class:`RequestSpec` at its arrival time (open loop) or as soon as one of
``concurrency`` slots frees (closed loop; both together cap an open loop). It stops dispatching at
``max_duration_s`` or on Ctrl-C, lets the requests in flight finish for ``drain_s`` and then cancels
them, so a stopped run still yields every record (the cancelled ones as failures) and a report marked
``interrupted``. Prompts are built before the clock starts so that tokenising never delays a send.
:func:`find_knee` searches the highest rate whose SLO attainment reaches a target share.
"""

from __future__ import annotations

import asyncio
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import aiohttp

from gpuplace.errors import CheckFailed, InvalidInput
from gpuplace.loadtest.client import EndpointState, send
from gpuplace.loadtest.metrics import summarize
from gpuplace.progress import Progress
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import Slo
from gpuplace.workload import RequestSpec

# Sleep until this close to a send time, then yield to the loop without sleeping: asyncio's timer
# granularity (about 1 ms) would otherwise make every request late.
_SPIN_S = 0.0015


@dataclass(frozen=True, slots=True)
class RunResult:
    records: tuple[RequestResult, ...]
    report: LatencyReport
    endpoint_notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunOptions:
    concurrency: int | None = None
    max_duration_s: float | None = None
    request_timeout_s: float = 600.0
    drain_s: float = 30.0
    slo: Slo = field(default_factory=Slo)
    show_progress: bool = True
    warmup: bool = True  # probe /v1/models and send one 2-token request before the clock starts

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise InvalidInput("concurrency", self.concurrency, "must be at least 1", "e.g. --concurrency 4")
        if self.max_duration_s is not None and not self.max_duration_s > 0:
            raise InvalidInput("max_duration_s", self.max_duration_s, "must be positive", "")


class EndpointDown(CheckFailed):
    """The probe before the load got no answer: nothing was sent and nothing is written (exit 1)."""


async def probe(session: aiohttp.ClientSession, endpoint: EndpointState) -> str:
    """Learn the served model (``/v1/models``) and the endpoint's accepted fields with a 2-token request.

    Returns "" when the endpoint answered (an HTTP error to the warm-up is kept as a note: a server that
    answers is up, and its failures are data), else a one-line reason, on which the run stops before the
    clock starts (:class:`EndpointDown`): a load test of an endpoint that is down measures nothing.
    ``--no-warmup`` skips the probe, and then an endpoint that is down is measured as errors.
    """
    try:
        async with session.get(
            endpoint.base_url.rstrip("/") + "/v1/models", timeout=aiohttp.ClientTimeout(total=30)
        ) as resp:
            if resp.status == 200 and not endpoint.model:
                data = (await resp.json()).get("data") or []
                if data:
                    endpoint.model = str(data[0]["id"])
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as e:
        return f"{endpoint.base_url} did not answer /v1/models: {e!r}"
    result = await send(
        session, endpoint, index=-1, prompt="Hello", prompt_tokens=2, max_tokens=2, scheduled_s=0.0
    )
    if result.success:
        return ""
    note = f"warm-up request failed: {result.error_kind}: {result.error}"
    if result.error_kind == "connect":
        return note
    # The server answered, with an error: it is up, so its failures are what the load test measures.
    endpoint.notes.append(note)
    return ""


async def _run(
    endpoint: EndpointState,
    specs: Sequence[RequestSpec],
    prompts: Sequence[str],
    options: RunOptions,
    stop: asyncio.Event,
) -> tuple[list[RequestResult], float, bool]:
    loop = asyncio.get_running_loop()
    clock = time.perf_counter
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    results: list[RequestResult] = []
    slots = asyncio.Semaphore(options.concurrency) if options.concurrency else None
    progress = Progress(len(specs), "load test", enabled=options.show_progress)
    interrupted = False

    async with aiohttp.ClientSession(connector=connector) as session:
        note = await probe(session, endpoint) if options.warmup else ""
        if note:
            raise EndpointDown(
                f"the load test's probe failed, so nothing was sent: {note}. Start the server first "
                "(e.g. gpuplace deploy PLAN --target local --port 8000), check --endpoint, or pass "
                "--no-warmup to send the load anyway and count the failures"
            )
        in_flight: set[asyncio.Task[RequestResult]] = set()

        def done(task: asyncio.Task[RequestResult]) -> None:
            in_flight.discard(task)
            if slots is not None:
                slots.release()
            if not task.cancelled() and task.exception() is None:
                r = task.result()
                results.append(r)
                progress.advance("ok" if r.success else r.error_kind)

        t0 = clock()
        for spec, prompt in zip(specs, prompts, strict=True):
            if stop.is_set():
                break
            elapsed = clock() - t0
            if options.max_duration_s is not None and elapsed >= options.max_duration_s:
                break
            if not math.isnan(spec.arrival_s) and not await _arrive(spec.arrival_s, elapsed, t0, clock, stop):
                break
            if slots is not None and not await _acquire_slot(slots, stop):
                break
            scheduled = spec.arrival_s if not math.isnan(spec.arrival_s) else clock() - t0
            task = loop.create_task(
                send(
                    session,
                    endpoint,
                    index=spec.index,
                    prompt=prompt,
                    prompt_tokens=spec.prompt_tokens,
                    max_tokens=spec.output_tokens,
                    scheduled_s=scheduled,
                    clock=clock,
                    t0=t0,
                    timeout_s=options.request_timeout_s,
                )
            )
            in_flight.add(task)
            task.add_done_callback(done)
        interrupted = stop.is_set()
        await _finish_in_flight(in_flight, stop, options.drain_s)
        duration = clock() - t0
    progress.close()
    results.sort(key=lambda r: r.index)
    return results, duration, interrupted


async def _arrive(
    arrival_s: float, elapsed: float, t0: float, clock: Callable[[], float], stop: asyncio.Event
) -> bool:
    """Wait until ``arrival_s`` after ``t0`` (sleep, then spin the last stretch); False if stopped first."""
    wait = arrival_s - elapsed - _SPIN_S
    if wait > 0:
        with _stoppable(stop) as stopped:
            await asyncio.wait([stopped], timeout=wait)
        if stop.is_set():
            return False
    while clock() - t0 < arrival_s:
        await asyncio.sleep(0)
    return True


async def _acquire_slot(slots: asyncio.Semaphore, stop: asyncio.Event) -> bool:
    """Take one concurrency slot; False, holding none, if ``stop`` is set first."""
    acquire = asyncio.get_running_loop().create_task(slots.acquire())
    with _stoppable(stop) as stopped:
        await asyncio.wait([acquire, stopped], return_when=asyncio.FIRST_COMPLETED)
    if stop.is_set():
        if acquire.done() and not acquire.cancelled():
            slots.release()
        acquire.cancel()
        return False
    return True


async def _finish_in_flight(
    in_flight: set[asyncio.Task[RequestResult]], stop: asyncio.Event, drain_s: float
) -> None:
    """Let the requests in flight finish: all on a normal end; after a stop, ``drain_s``, then cancel them."""
    if not in_flight:
        return
    pending = set(in_flight)
    if not stop.is_set():
        # Normal end: wait for everything (each request has its own timeout).
        await asyncio.wait(pending)
    else:
        await asyncio.wait(pending, timeout=drain_s)
        for task in list(in_flight):
            task.cancel()
        if in_flight:
            await asyncio.wait(set(in_flight))


class _stoppable:
    """A task that finishes when ``stop`` is set, for waiting on 'timeout or stop'."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.task: asyncio.Task[bool] | None = None

    def __enter__(self) -> asyncio.Task[bool]:
        self.task = asyncio.get_running_loop().create_task(self.stop.wait())
        return self.task

    def __exit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()


def run_load(
    endpoint: EndpointState,
    specs: Sequence[RequestSpec],
    prompts: Sequence[str],
    options: RunOptions = RunOptions(),
    *,
    workload: dict[str, object] | None = None,
    stop_after: Callable[[asyncio.Event], None] | None = None,
) -> RunResult:
    """Run the workload against the endpoint and summarise it; Ctrl-C stops it with partial results.

    ``stop_after`` receives the stop event before the run starts (tests and embedding callers use it
    to stop a run the way Ctrl-C does).
    """

    async def main() -> tuple[list[RequestResult], float, bool]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = False
        try:
            loop.add_signal_handler(signal.SIGINT, stop.set)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread: only stop_after can stop the run
        if stop_after is not None:
            stop_after(stop)
        try:
            return await _run(endpoint, specs, prompts, options, stop)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    started_at_s = time.time()  # the wall clock, for the run's span in MLflow (durations use perf_counter)
    records, duration, interrupted = asyncio.run(main())
    report = summarize(
        records, duration_s=duration, slo=options.slo, interrupted=interrupted, workload=workload or {}
    )
    report = replace(report, started_at_s=started_at_s, finished_at_s=time.time())
    return RunResult(tuple(records), report, tuple(endpoint.notes))


def find_knee(
    evaluate: Callable[[float], LatencyReport],
    *,
    low_rps: float,
    high_rps: float,
    target_share: float = 0.9,
    iterations: int = 5,
) -> tuple[float, list[tuple[float, LatencyReport]]]:
    """The highest rate in [low, high] whose SLO attainment ≥ ``target_share`` (bisection), and the trials.

    Returns ``(0.0, trials)`` when even ``low_rps`` misses. Assumes attainment falls as the rate rises.
    """
    if not 0 < target_share <= 1:
        raise InvalidInput("target_share", target_share, "must be in (0, 1]", "e.g. 0.9")
    if not 0 < low_rps < high_rps:
        raise InvalidInput("rates", (low_rps, high_rps), "need 0 < low < high", "")
    trials: list[tuple[float, LatencyReport]] = []

    def passes(rate: float) -> bool:
        report = evaluate(rate)
        trials.append((rate, report))
        return report.slo_attainment >= target_share

    if not passes(low_rps):
        return 0.0, trials
    if passes(high_rps):
        return high_rps, trials
    lo, hi = low_rps, high_rps
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo, trials
