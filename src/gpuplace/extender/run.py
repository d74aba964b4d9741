"""Running the extender: build its state (a watched cluster, or a fixed fleet), serve until signalled.

With a cluster (``--kubeconfig``, ``--in-cluster``, or the default kubeconfig) the state follows Node
and pod watches and bind writes through the API. With ``--fleet`` the extender answers for a fixed
inventory with no API at all — for trying requests by hand and for benchmarks — and cannot bind.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from gpuplace.extender.server import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    DEFAULT_PREFIX,
    ExtenderHTTPServer,
    tls_context,
)
from gpuplace.extender.service import DEFAULT_MAX_NODES, ExtenderService
from gpuplace.extender.state import ClusterState
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, parse_mix
from gpuplace.types import Inventory


@dataclass(frozen=True, slots=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    prefix: str = DEFAULT_PREFIX
    kubeconfig: str | None = None
    in_cluster: bool = False
    fleet: str | None = None
    task_mix: str = ""
    max_nodes: int = DEFAULT_MAX_NODES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    tls_cert: str | None = None
    tls_key: str | None = None
    verbose: bool = False


def fleet_state(inventory: Inventory, state: ClusterState) -> ClusterState:
    """Fill ``state`` with the Node objects of ``inventory`` and pods holding what it marks allocated."""
    from gpuplace.testenv.nodes import node_objects, placeholder_pods

    state.replace_nodes(node_objects(inventory))
    state.replace_pods(placeholder_pods(inventory))
    state.synced.set()
    return state


def build(options: ServeOptions) -> tuple[ExtenderService, threading.Event]:
    """The service (state filled or being watched) and the event that stops its watches."""
    from gpuplace.errors import InvalidInput

    if options.max_nodes < 1 or options.max_body_bytes < 1024:
        raise InvalidInput(
            "--max-nodes/--max-body-bytes", (options.max_nodes, options.max_body_bytes), "too small"
        )
    mix = parse_mix(options.task_mix) if options.task_mix else DEFAULT_LLM_MIX
    state = ClusterState(task_mix=mix)
    stop = threading.Event()
    if options.fleet:
        from gpuplace.inventory import load_inventory

        fleet_state(load_inventory(options.fleet), state)
        return ExtenderService(state, max_nodes=options.max_nodes), stop
    from gpuplace.extender.watch import start_watches
    from gpuplace.k8s import Api, connect
    from gpuplace.k8s.client import IN_CLUSTER

    api = Api(connect(IN_CLUSTER if options.in_cluster else options.kubeconfig))
    start_watches(state, api, stop)
    return ExtenderService(state, api=api, max_nodes=options.max_nodes), stop


def make_server(options: ServeOptions, service: ExtenderService) -> ExtenderHTTPServer:
    tls = (
        tls_context(Path(options.tls_cert), Path(options.tls_key))
        if options.tls_cert and options.tls_key
        else None
    )
    return ExtenderHTTPServer(
        (options.host, options.port),
        service,
        prefix=options.prefix,
        max_body_bytes=options.max_body_bytes,
        tls=tls,
    )


def _freeze_when_synced(service: ExtenderService) -> None:
    """Once the nodes and pods are in, move them out of the garbage collector's sight.

    A full collection walks every tracked object: with a 1,213-node fleet parsed it paused a request for
    ~70 ms (benchmarks/extender.md). What exists after the sync lives as long as the process, so
    ``gc.freeze`` exempts it; later objects are collected as usual.
    """
    service.state.synced.wait()
    gc.collect()
    gc.freeze()


def serve(options: ServeOptions) -> None:
    """Serve until SIGTERM or SIGINT; prints the URL first (a line that tests and scripts wait for)."""
    logging.basicConfig(
        level=logging.DEBUG if options.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    service, stop = build(options)
    server = make_server(options, service)
    threading.Thread(target=_freeze_when_synced, args=(service,), daemon=True).start()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"gpuplace extender serving on {server.url}", flush=True)
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        stop.set()
        server.server_close()
