"""The serving engines gpuplace plans, deploys and predicts, registered in one place.

An :class:`Engine` is what the rest of gpuplace asks about an engine instead of comparing its name: where
gpuplace plans it (a cluster's pods, or this machine), how its server starts in a container, the release
whose defaults the plan records and its image, how a live server of it is recognised, and which test holds
gpuplace's spelling of its flags to the engine's own code. Plans and serving specs carry the engine's
``name``; :func:`engine_of` turns it back into the engine, and refuses a name nobody registered.

What an engine *does* lives beside the room that does it, keyed by the engine's target: its command-line
arguments (:mod:`gpuplace.serving.runtime`), the engine parameters and KV-cache capacity the plan assumes
(:mod:`gpuplace.planner.engine`), and the step-time model the prediction simulates
(:mod:`gpuplace.planner.engine_sim`). docs/architecture.md lists what adding an engine touches.

Pure standard library (and :mod:`gpuplace.errors`), so every room may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplace.errors import InvalidInput

CLUSTER = "cluster"  # pods on a Kubernetes cluster's GPUs, from the plan's manifests
LOCAL = "local"  # a server process on this machine (or a node's own, where a task pod runs it)


@dataclass(frozen=True, slots=True)
class Engine:
    """One serving engine: its facts, looked up by the name a plan records."""

    name: str  # as plan.json and the serving spec spell it
    title: str  # for people
    target: str  # CLUSTER or LOCAL: the plans gpuplace makes for it
    command: tuple[str, ...]  # the server's entry point in a container; () when gpuplace starts it itself
    version: str  # the release whose defaults the engine parameters record; "" for the installed one
    repository: str  # its upstream image's repository, tagged v<version>; "" for gpuplace's own images
    process_word: bytes  # a part of a live server's command line that names the engine
    referee: str  # the test that checks gpuplace's flags against the engine's own argument parser

    @property
    def image(self) -> str:
        """That release's upstream image; "" when it runs in gpuplace's own images (images.py)."""
        return f"{self.repository}:v{self.version}" if self.repository else ""

    @property
    def runs_here(self) -> bool:
        """A plan for this engine is a plan of this machine: a local server process, not pods."""
        return self.target == LOCAL

    @property
    def serves_in_task_pod(self) -> bool:
        """The Kubeflow path's serving task can start this engine in its own container (the serving image
        has it) from the plan's serving spec."""
        return bool(self.command)

    def started_by(self, command: str) -> bool:
        """Whether a container command line (``" ".join(command)``) starts this engine."""
        return bool(self.command) and " ".join(self.command) in command


VLLM = Engine(
    name="vllm",
    title="vLLM",
    target=CLUSTER,
    command=("vllm", "serve"),
    # the release the cluster manifests run (vllm/vllm-openai:v<this>) and whose defaults the engine
    # parameters record; tests/referee/test_vllm_args.py checks both against the installed package
    version="0.34.0",
    repository="vllm/vllm-openai",
    process_word=b"vllm",
    referee="tests/referee/test_vllm_args.py",
)
TRANSFORMERS = Engine(
    name="transformers",
    title="transformers serve --continuous-batching",
    target=LOCAL,
    command=(),  # gpuplace's serve script (manifests.local) or this interpreter (serving.runtime)
    version="",
    repository="",
    process_word=b"transformers",
    referee="tests/integration/test_serving_local.py",  # the real `transformers serve`, gpuplace's args
)
ENGINES: dict[str, Engine] = {e.name: e for e in (VLLM, TRANSFORMERS)}
CLUSTER_ENGINE = VLLM  # the engine a cluster plan's manifests run
LOCAL_ENGINE = TRANSFORMERS  # the engine a plan of this machine starts


def engine_of(name: str, field: str = "serving.engine") -> Engine:
    """The registered engine called ``name``; an unknown name refused, naming ``field``."""
    try:
        return ENGINES[name]
    except KeyError:
        raise InvalidInput(
            field, name, f"is not a registered engine (one of {', '.join(ENGINES)})", "Plan it again"
        ) from None


def engine_of_command(command: str) -> Engine | None:
    """The engine a container's command line starts, or None (a command gpuplace did not write)."""
    return next((e for e in ENGINES.values() if e.started_by(command)), None)
