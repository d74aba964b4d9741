"""What a real testenv node changes on this machine, and putting it all back.

:func:`snapshot` records, before the node starts, what it may change: network namespaces, network links,
the iptables rules and chains of every table (IPv4 and IPv6), and the sysctls the kubelet sets
(``vm.overcommit_memory``, ``kernel.panic`` ...) and the CNI bridge plugin sets (``net.ipv4.ip_forward``).
:func:`clean_host` then, after the node's processes have stopped, stops any containerd shim still serving
the node's socket and any process left in a container's cgroup, unmounts everything under the node's
directories, removes the network namespaces that were not there before, deletes the bridge with its
veths, deletes every iptables rule and chain that was not there before, and restores those sysctls; it
returns what it had to remove. :func:`leftovers` says what is still different from the snapshot: the
test of ``testenv down`` asserts it is empty. Linux only, as root.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpuplace.testenv.controlplane import process_start_ticks

NETNS_DIR = Path("/run/netns")
OWNER_FILE = Path("/run/gpuplace-node.owner")
SYSCTLS = (
    "net/ipv4/ip_forward",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTAINER_CGROUP = "k8s.io"  # containerd's CRI puts containers without a cgroup parent under /k8s.io/<id>


def _run(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=60)


# --- ownership: one real node per machine ------------------------------------------------------------
def claim(run_dir: Path, state_dir: Path) -> Path | None:
    """Claim the machine's one real node for ``state_dir``; the other testenv's dir if one holds it."""
    if OWNER_FILE.is_file():
        other = Path(OWNER_FILE.read_text().strip())
        if other != state_dir and (run_dir / "containerd.sock").exists() and _owner_alive(other):
            return other
    OWNER_FILE.write_text(str(state_dir))
    return None


def _owner_alive(state_dir: Path) -> bool:
    import json

    try:
        data = json.loads((state_dir / "realnode.json").read_text())
    except (OSError, ValueError):
        return False
    pids, starts = data.get("pids", {}), data.get("pid_starts", {})
    return any(process_start_ticks(int(pid)) == starts.get(n) for n, pid in pids.items())


def release(state_dir: Path) -> None:
    with contextlib.suppress(OSError):
        if OWNER_FILE.read_text().strip() == str(state_dir):
            OWNER_FILE.unlink()


# --- processes ---------------------------------------------------------------------------------------
def stop_pid(pid: int, started: int | None, *, timeout_s: float = 20.0) -> None:
    """SIGTERM ``pid`` (if it is still the process that started at ``started``), then SIGKILL."""

    def alive() -> bool:
        ticks = process_start_ticks(pid)
        if ticks is not None and started is not None and ticks != started:
            return False
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return process_start_ticks(pid) is not None

    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        if not alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        end = time.monotonic() + wait_s
        while alive() and time.monotonic() < end:
            time.sleep(0.05)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def host_path() -> str:
    """``$PATH`` with the sbin folders where Debian puts the node's tools (ctr, iptables, ip)."""
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


def containerd_answers(sock: Path) -> bool:
    """Whether a containerd serves on ``sock``. ``ctr version`` prints its client half to stdout before it
    dials, so its output says nothing; only its exit status does. A socket file left by a containerd that
    has stopped refuses the connection (a CI run imported the pause image into such a socket and failed)."""
    if not sock.exists():
        return False
    result = subprocess.run(
        ["ctr", "--address", str(sock), "version"],
        capture_output=True,
        text=True,
        timeout=10,
        env=dict(os.environ, PATH=host_path()),
    )
    return result.returncode == 0 and "Server:" in result.stdout


def shim_pids(address: str) -> list[int]:
    """containerd shims started by the containerd serving ``address`` (they outlive it by design)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            args = _cmdline(int(entry.name))
            if args and "containerd-shim" in args[0] and address in args:
                found.append(int(entry.name))
    return found


def container_pids() -> list[int]:
    """Processes in containerd's CRI cgroups (``/k8s.io/<container>``), in any v1 hierarchy."""
    pids: set[int] = set()
    for hierarchy in ("pids", "memory", "cpu", "systemd"):
        base = CGROUP_ROOT / hierarchy / CONTAINER_CGROUP
        if base.is_dir():
            for procs in base.rglob("cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    pids.update(int(p) for p in procs.read_text().split())
    return sorted(pids)


def _remove_cgroups() -> None:
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else ():
        base = hierarchy / CONTAINER_CGROUP
        if base.is_dir():
            for d in sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    d.rmdir()
            with contextlib.suppress(OSError):
                base.rmdir()


# --- mounts and network --------------------------------------------------------------------------------
def mounts() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        points.append(point.encode().decode("unicode_escape"))
    return points


def mounts_under(dirs: Iterable[Path]) -> list[str]:
    prefixes = [str(d.resolve()) if d.exists() else str(d) for d in dirs]
    return [m for m in mounts() if any(m == p or m.startswith(p + "/") for p in prefixes)]


def unmount_under(dirs: Iterable[Path]) -> list[str]:
    """Unmount every mount under ``dirs``, deepest first; returns the mount points."""
    points = sorted(set(mounts_under(dirs)), key=len, reverse=True)
    for point in points:
        if _run("umount", point).returncode != 0:
            _run("umount", "-l", point)
    return points


def create_bridge(name: str, cidr: str) -> None:
    if _run("ip", "link", "show", name).returncode != 0:
        _run("ip", "link", "add", name, "type", "bridge", check=True)
    _run("ip", "addr", "replace", cidr, "dev", name, check=True)
    _run("ip", "link", "set", name, "up", check=True)


def route_service(subnet: str, service: str, to: str) -> None:
    """What kube-proxy does for one Service here: TCP from the pods' ``subnet`` to ``service`` (ip:port) is
    sent to ``to`` (ip:port) on this machine. The rule goes first in PREROUTING: a rule for the same Service
    left by a node that was killed before it cleaned up (its API server's port now closed) would otherwise
    match first, and every pod's in-cluster call would be refused (a CI run, 2026-12-04). Removed by
    :func:`clean_host` as every rule made after the snapshot is."""
    ip, port = service.rsplit(":", 1)
    match = [
        "-s",
        subnet,
        "-d",
        f"{ip}/32",
        "-p",
        "tcp",
        "--dport",
        port,
        "-j",
        "DNAT",
        "--to-destination",
        to,
    ]
    while _run("iptables", "-t", "nat", "-C", "PREROUTING", *match).returncode == 0:
        _run("iptables", "-t", "nat", "-D", "PREROUTING", *match, check=True)
    _run("iptables", "-t", "nat", "-I", "PREROUTING", "1", *match, check=True)


def service_routes(service: str) -> list[str]:
    """The nat PREROUTING rules that DNAT ``service`` (ip:port), in the order iptables matches them."""
    ip, port = service.rsplit(":", 1)
    out = _run("iptables", "-t", "nat", "-S", "PREROUTING").stdout
    return [r for r in out.splitlines() if f"-d {ip}/32" in r and f"--dport {port}" in r and "DNAT" in r]


def links() -> list[str]:
    out = _run("ip", "-o", "link", "show").stdout
    return sorted(line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line)


def netns() -> list[str]:
    return sorted(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else []


# --- iptables ----------------------------------------------------------------------------------------
BUILTIN_CHAINS = {"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"}


def iptables_state(tool: str) -> dict[str, list[str]]:
    """table → its custom chains (``:NAME``) and rules (``-A ...``) as ``<tool>`` (``iptables-save``)
    prints them."""
    result = _run(tool)
    return parse_iptables_save(result.stdout if result.returncode == 0 else "")


def parse_iptables_save(text: str) -> dict[str, list[str]]:
    """``iptables-save`` output as table → custom chains (``:NAME``) and rules (``-A ...``); tables with
    neither are left out (an empty table is as good as none)."""
    tables: dict[str, list[str]] = {}
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:]
            tables.setdefault(table, [])
        elif line.startswith(":") and line.split()[0][1:] not in BUILTIN_CHAINS:
            tables[table].append(line.split()[0])
        elif line.startswith("-A "):
            tables[table].append(line)
    return {t: entries for t, entries in tables.items() if entries}


def _restore_iptables(tool: str, before: dict[str, list[str]]) -> list[str]:
    removed = []
    binary = tool.replace("-save", "")
    for table, entries in iptables_state(tool).items():
        added = Counter(entries) - Counter(before.get(table, []))
        for rule in (e for e in entries if e.startswith("-A ") and added[e] > 0):
            added[rule] -= 1
            _run(binary, "-t", table, "-D", *shlex.split(rule)[1:])
            removed.append(f"{binary} -t {table} {rule}")
        for chain in (e[1:] for e in added.elements() if e.startswith(":")):
            _run(binary, "-t", table, "-F", chain)
            _run(binary, "-t", table, "-X", chain)
            removed.append(f"{binary} -t {table} chain {chain}")
    return removed


# --- sysctls -----------------------------------------------------------------------------------------
def sysctls() -> dict[str, str]:
    values = {}
    for key in SYSCTLS:
        with contextlib.suppress(OSError):
            values[key] = (Path("/proc/sys") / key).read_text().strip()
    return values


def snapshot() -> dict[str, Any]:
    return {
        "netns": netns(),
        "links": links(),
        "iptables": {t: iptables_state(t) for t in ("iptables-save", "ip6tables-save")},
        "sysctls": sysctls(),
    }


def clean_host(
    before: dict[str, Any], *, owned_dirs: Iterable[Path], shim_address: str, bridge: str
) -> list[str]:
    """Put the machine back as :func:`snapshot` found it (module docstring); returns what it removed."""
    removed: list[str] = []
    for pid in shim_pids(shim_address):
        stop_pid(pid, process_start_ticks(pid), timeout_s=5.0)
        removed.append(f"shim {pid}")
    for pid in container_pids():
        stop_pid(pid, process_start_ticks(pid), timeout_s=2.0)
        removed.append(f"container process {pid}")
    _remove_cgroups()
    owned = tuple(owned_dirs)
    removed += [f"mount {m}" for m in unmount_under(owned)]
    for name in sorted(set(netns()) - set(before.get("netns", []))):
        _run("umount", str(NETNS_DIR / name))
        with contextlib.suppress(OSError):
            (NETNS_DIR / name).unlink()
        removed.append(f"netns {name}")
    if bridge in links():
        for line in _run("ip", "-o", "link", "show", "master", bridge).stdout.splitlines():
            veth = line.split(":")[1].strip().split("@")[0]
            _run("ip", "link", "del", veth)
            removed.append(f"veth {veth}")
        _run("ip", "link", "del", bridge)
    for tool, state in (before.get("iptables") or {}).items():
        removed += _restore_iptables(tool, state)
    for key, value in (before.get("sysctls") or {}).items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)
    return removed


def leftovers(before: dict[str, Any], *, owned_dirs: Iterable[Path], shim_address: str) -> list[str]:
    """What still differs from ``before``: empty when the node left nothing behind."""
    left = [f"shim {p}" for p in shim_pids(shim_address)]
    left += [f"container process {p}" for p in container_pids()]
    left += [f"mount {m}" for m in mounts_under(owned_dirs)]
    left += [f"netns {n}" for n in sorted(set(netns()) - set(before.get("netns", [])))]
    left += [f"link {n}" for n in sorted(set(links()) - set(before.get("links", [])))]
    for tool, state in (before.get("iptables") or {}).items():
        now = iptables_state(tool)
        for table in now:
            extra = Counter(now[table]) - Counter(state.get(table, []))
            left += [f"{tool} -t {table} {e}" for e in extra.elements()]
    now_sysctls = sysctls()
    left += [
        f"sysctl {k}={now_sysctls.get(k)} (was {v})"
        for k, v in (before.get("sysctls") or {}).items()
        if now_sysctls.get(k) != v
    ]
    return left


def processes_mentioning(text: str) -> list[str]:
    """Running processes whose command line contains ``text`` (a state directory): ``pid: command``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            args = _cmdline(int(entry.name))
            if any(text in a for a in args):
                found.append(f"{entry.name}: {' '.join(args)[:200]}")
    return found
