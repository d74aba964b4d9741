#!/usr/bin/env bash
# Builds the local control-plane binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok) from Go modules served by the Go module proxy into ~/.cache/gpuplace/k8s/<version>/bin.
# Nothing is downloaded from release sites. A complete cache directory is reused as-is.
#
# Overrides (envtest's convention): KUBEBUILDER_ASSETS=<dir> or TEST_ASSET_<NAME>=<file> for every binary
# means nothing is built. GPUPLACE_K8S_CACHE changes the cache root.
set -euo pipefail

K8S_VERSION="${GPUPLACE_K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${GPUPLACE_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${GPUPLACE_KWOK_VERSION:-v0.7.0}"
CACHE_ROOT="${GPUPLACE_K8S_CACHE:-$HOME/.cache/gpuplace/k8s}"
DEST="$CACHE_ROOT/$K8S_VERSION"
BIN="$DEST/bin"
NAMES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false

asset_var() { local n="${1^^}"; echo "TEST_ASSET_${n//-/_}"; }

all_overridden=1
for n in "${NAMES[@]}"; do
  v="$(asset_var "$n")"
  if [[ -n "${!v:-}" && -x "${!v}" ]]; then continue; fi
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$n" ]]; then continue; fi
  all_overridden=0
done
if [[ $all_overridden == 1 ]]; then
  echo "k8s-bins: every binary comes from KUBEBUILDER_ASSETS/TEST_ASSET_*; nothing to build"
  exit 0
fi

if [[ -f "$DEST/.complete" ]]; then
  echo "k8s-bins: reusing $BIN"
  exit 0
fi

# CI shells may not read the profile that puts Go on PATH; its usual install location is a fine fallback.
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "k8s-bins: 'go' not found on PATH or in /usr/local/go/bin; install Go >= 1.25" >&2; exit 1; }

mkdir -p "$BIN"
# Two builds into one cache (a session and its CI, two terminals) would trample each other's work dirs.
exec 9>"$DEST/.lock"
flock 9
if [[ -f "$DEST/.complete" ]]; then
  echo "k8s-bins: reusing $BIN (built while waiting for the lock)"
  exit 0
fi
WORK="$DEST/src"
mkdir -p "$WORK"
start=$(date +%s)
log() { echo "k8s-bins [$(( $(date +%s) - start ))s]: $*"; }

# --- Kubernetes: wrapper module replacing every staging module with its published v0.x twin -----------
build_kubernetes() {
  local dir="$WORK/kubernetes" minor="v0.${K8S_VERSION#v1.}"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init gpuplace.local/k8sbins >/dev/null 2>&1
  local gomod
  gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')"
  [[ -f "$gomod" ]] || { echo "k8s-bins: could not download k8s.io/kubernetes@$K8S_VERSION" >&2; exit 1; }
  go mod edit -require "k8s.io/kubernetes@$K8S_VERSION"
  # Every "k8s.io/x => ./staging/src/k8s.io/x" line in kubernetes' own go.mod becomes a versioned replace.
  local mods
  mods="$(awk '/=> \.\/staging\//{print $1}' "$gomod" | sort -u)"
  [[ -n "$mods" ]] || { echo "k8s-bins: no staging replaces found in $gomod" >&2; exit 1; }
  local m
  for m in $mods; do go mod edit -replace "$m=$m@$minor"; done
  cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  log "kubernetes $K8S_VERSION: go mod tidy"
  go mod tidy -e >/dev/null
  local vpkg=k8s.io/component-base/version
  local ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $vpkg.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    log "building $c"
    go build -trimpath -ldflags "$ldflags" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c"
  done
}

# --- etcd: server/v3 is a main package; its go.mod replaces sibling modules with relative paths ---------
build_etcd() {
  local dir="$WORK/etcd"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init gpuplace.local/etcdbins >/dev/null 2>&1
  local gomod
  gomod="$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')"
  go mod edit -require "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  local m
  for m in $(awk '/=> \.\./{print $1}' "$gomod" | sort -u); do go mod edit -replace "$m=$m@$ETCD_VERSION"; done
  # etcd's main package lives at the module root of server/v3 in 3.5 and 3.6 (package main in etcdmain is
  # wrapped by go.etcd.io/etcd/server/v3 main.go).
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  log "etcd $ETCD_VERSION: go mod tidy"
  go mod tidy -e >/dev/null
  log "building etcd"
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

build_kwok() {
  log "building kwok $KWOK_VERSION"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}

case "${1:-all}" in
  kubernetes) build_kubernetes ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  all)
    build_etcd
    build_kwok
    build_kubernetes
    for n in "${NAMES[@]}"; do [[ -x "$BIN/$n" ]] || { echo "k8s-bins: $BIN/$n missing" >&2; exit 1; }; done
    echo "k8s=$K8S_VERSION etcd=$ETCD_VERSION kwok=$KWOK_VERSION built_s=$(( $(date +%s) - start ))" > "$DEST/.complete"
    rm -rf "$WORK"
    log "done: $BIN"
    ;;
  *) echo "usage: $0 [all|kubernetes|etcd|kwok]" >&2; exit 2 ;;
esac
