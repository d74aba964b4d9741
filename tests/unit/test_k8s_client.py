"""gpuplace.k8s.client: bad kubeconfigs are bad input, reported with the path and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.k8s.client import connect


def test_missing_kubeconfig(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"kubeconfig='.*nope': no such file. Pass the path"):
        connect(tmp_path / "nope")


def test_garbage_kubeconfig(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(InvalidInput, match="not a usable kubeconfig"):
        connect(bad)


def test_no_kubeconfig_outside_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(InvalidInput, match="not running in a pod"):
        connect(None)


def test_valid_kubeconfig_disables_urllib3_retries(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    client = connect(kc)
    assert client.configuration.host == "https://127.0.0.1:1"
    assert client.configuration.retries == 0
