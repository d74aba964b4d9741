"""``gpuplace extender serve|config``: the GPU-topology-fit kube-scheduler extender from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from gpuplace.cli.base import Command, HelpFormatter
from gpuplace.errors import InvalidInput


class ExtenderCommand(Command):
    name = "extender"
    help = "the GPU-topology-fit kube-scheduler extender (serve it, or print its scheduler config)"
    description = (
        "A kube-scheduler extender over the planner's scoring (docs/extender.md): it filters nodes\n"
        "whose free GPUs cannot hold a pod's GPU set, prefers NVLink/PCIe/NUMA-aligned sets and less\n"
        "fragmentation, and records the GPUs it chose when it binds."
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        verbs = p.add_subparsers(dest="extender_command", required=True, metavar="{serve,config}")
        _add_serve_verb(verbs)
        _add_config_verb(verbs)

    def run(self, args: argparse.Namespace) -> int:
        verb: Callable[[argparse.Namespace], int] = args.verb
        return verb(args)


def _add_serve_verb(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``extender serve`` and its flags: where to listen, which cluster or fleet to answer for, TLS."""
    s = verbs.add_parser(
        "serve",
        help="serve filter/prioritize/bind over HTTP",
        description="Serve the extender's filter, prioritize and bind verbs over HTTP (docs/extender.md)",
        formatter_class=HelpFormatter,
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=int, default=None, help="TCP port (default 8888; 0 = any free port)")
    s.add_argument("--prefix", default=None, help="URL prefix of the verbs (default /gpuplace)")
    source = s.add_mutually_exclusive_group()
    source.add_argument(
        "--kubeconfig", default=None, help="watch this cluster (default: $KUBECONFIG, ~/.kube/config)"
    )
    source.add_argument("--in-cluster", action="store_true", help="watch the cluster this pod runs in")
    source.add_argument(
        "--fleet",
        default=None,
        help="no cluster: answer for this inventory (bundled fleet, fleet YAML or Alibaba CSV); no bind",
    )
    s.add_argument("--task-mix", default="", help="FGD workload mix GPUS:WEIGHT,... (default: the planner's)")
    s.add_argument("--max-nodes", type=int, default=None, help="largest node list accepted (default 5000)")
    s.add_argument("--max-body-bytes", type=int, default=None, help="largest request body (default 32 MiB)")
    s.add_argument("--tls-cert", default=None, help="serve HTTPS with this certificate (PEM)")
    s.add_argument("--tls-key", default=None, help="... and this private key (PEM)")
    s.add_argument("--verbose", action="store_true", help="log every request")
    s.set_defaults(verb=_cmd_serve)


def _add_config_verb(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``extender config`` and its flags: the scheduler config's extender entry and the manifests."""
    c = verbs.add_parser(
        "config",
        help="print a KubeSchedulerConfiguration using the extender (+ manifests)",
        description="Print a KubeSchedulerConfiguration that calls the extender, with --manifests its "
        "in-cluster Deployment, Service and RBAC (docs/extender.md).",
        formatter_class=HelpFormatter,
    )
    c.add_argument(
        "--url", default=None, help="the extender's URL prefix (default http://127.0.0.1:8888/gpuplace)"
    )
    c.add_argument("--weight", type=int, default=None, help="priority weight (default 20)")
    c.add_argument(
        "--no-node-cache", action="store_true", help="send full Node objects (nodeCacheCapable: false)"
    )
    c.add_argument("--not-ignorable", action="store_true", help="fail scheduling when the extender is down")
    c.add_argument(
        "--no-bind", action="store_true", help="let kube-scheduler bind (no GPU assignment recorded)"
    )
    c.add_argument(
        "--http-timeout-s", type=float, default=5.0, help="kube-scheduler's timeout per call, seconds"
    )
    c.add_argument(
        "--managed-resource",
        action="append",
        default=None,
        help="resource whose pods go through the extender (repeatable; default nvidia.com/gpu)",
    )
    c.add_argument("--scheduler-name", default="default-scheduler", help="profile's schedulerName")
    c.add_argument("--scheduler-kubeconfig", default="", help="clientConnection.kubeconfig of kube-scheduler")
    c.add_argument("--tls-ca-file", default="", help="CA that signed the extender's certificate (https URLs)")
    c.add_argument(
        "--manifests", action="store_true", help="also print the in-cluster Deployment/Service/RBAC"
    )
    c.add_argument("--namespace", default=None, help="namespace of the manifests (default kube-system)")
    c.add_argument(
        "--image",
        default=None,
        help="image of the manifests' Deployment (default: the gpuplace CPU image)",
    )
    c.add_argument("--out", default=None, help="write here instead of stdout")
    c.set_defaults(verb=_cmd_config)


def _cmd_config(args: argparse.Namespace) -> int:
    from gpuplace.extender import config as cfg

    defaults = cfg.ExtenderSettings()
    url = args.url or (
        cfg.service_url(args.namespace or cfg.DEFAULT_NAMESPACE) if args.manifests else defaults.url
    )
    settings = cfg.ExtenderSettings(
        url=url,
        weight=args.weight if args.weight is not None else defaults.weight,
        node_cache_capable=not args.no_node_cache,
        ignorable=not args.not_ignorable,
        bind=not args.no_bind,
        http_timeout_s=args.http_timeout_s,
        managed_resources=tuple(args.managed_resource or defaults.managed_resources),
        scheduler_name=args.scheduler_name,
        kubeconfig=args.scheduler_kubeconfig,
        tls_ca_file=args.tls_ca_file,
    )
    docs = [cfg.scheduler_configuration(settings)]
    if args.manifests:
        docs += cfg.manifests(
            namespace=args.namespace or cfg.DEFAULT_NAMESPACE, image=args.image or cfg.DEFAULT_IMAGE
        )
    text = cfg.render(docs)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from gpuplace.extender.run import ServeOptions, serve

    if bool(args.tls_cert) != bool(args.tls_key):
        raise InvalidInput("--tls-cert/--tls-key", args.tls_cert or args.tls_key, "give both or neither")
    options = ServeOptions(
        host=args.host,
        **({"port": args.port} if args.port is not None else {}),
        **({"prefix": args.prefix} if args.prefix is not None else {}),
        kubeconfig=args.kubeconfig,
        in_cluster=args.in_cluster,
        fleet=args.fleet,
        task_mix=args.task_mix,
        **({"max_nodes": args.max_nodes} if args.max_nodes is not None else {}),
        **({"max_body_bytes": args.max_body_bytes} if args.max_body_bytes is not None else {}),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        verbose=args.verbose,
    )
    serve(options)
    return 0
