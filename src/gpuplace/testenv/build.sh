#!/usr/bin/env bash
# Builds the local control-plane binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok) from Go modules served by the Go module proxy into ~/.cache/gpuplace/k8s/<version>/bin.
# Nothing is downloaded from release sites. A complete cache directory is reused as-is.
#
# `build.sh node` builds what a real node needs (kubelet, and gpuplace-pause: the sandbox image's one binary,
# since no registry serves registry.k8s.io/pause here) into the same bin dir, with its own stamp
# (.node-complete), so a cache built before the real node existed gains it without a rebuild.
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
NODE_NAMES=(kubelet gpuplace-pause)

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# The builds' Go caches are private to this cache root and removed once both stamps are written: the build
# cache and the modules of Kubernetes take 5.3 GB (measured 2026-12-02: 3.9 GB build, 1.4 GB modules) that only
# a rebuild would read, and disk, not CPU, is what a CI machine ran out of. GPUPLACE_KEEP_GO_CACHE=1 keeps them
# (a second version built soon after reuses them).
GO_CACHE="$CACHE_ROOT/go"
export GOCACHE="$GO_CACHE/build" GOMODCACHE="$GO_CACHE/mod"
drop_go_cache() {
  [[ "${GPUPLACE_KEEP_GO_CACHE:-0}" == 1 ]] && return 0
  [[ -f "$DEST/.complete" && -f "$DEST/.node-complete" && -d "$GO_CACHE" ]] || return 0
  chmod -R u+w "$GO_CACHE" 2>/dev/null || true  # the module cache is written read-only
  rm -rf "$GO_CACHE"
  echo "k8s-bins: removed the build's Go caches ($GO_CACHE; GPUPLACE_KEEP_GO_CACHE=1 keeps them)"
}

asset_var() { local n="${1^^}"; echo "TEST_ASSET_${n//-/_}"; }

target="${1:-all}"
if [[ $target == node ]]; then NAMES=("${NODE_NAMES[@]}"); STAMP="$DEST/.node-complete"; else STAMP="$DEST/.complete"; fi

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

if [[ -f "$STAMP" ]]; then
  echo "k8s-bins: reusing $BIN ($target)"
  drop_go_cache
  exit 0
fi

# CI shells may not read the profile that puts Go on PATH; its usual install location is a fine fallback.
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "k8s-bins: 'go' not found on PATH or in /usr/local/go/bin; install Go >= 1.25" >&2; exit 1; }

mkdir -p "$BIN"
# Two builds into one cache (a session and its CI, two terminals) would trample each other's work dirs.
exec 9>"$DEST/.lock"
flock 9
if [[ -f "$STAMP" ]]; then
  echo "k8s-bins: reusing $BIN ($target, built while waiting for the lock)"
  exit 0
fi
WORK="$DEST/src"
mkdir -p "$WORK"
start=$(date +%s)
log() { echo "k8s-bins [$(( $(date +%s) - start ))s]: $*"; }

# --- Kubernetes: wrapper module replacing every staging module with its published v0.x twin -----------
# build_kubernetes [cmd...]: the control plane's commands, or the ones named (kubelet for a real node).
build_kubernetes() {
  local cmds=("$@")
  [[ ${#cmds[@]} -gt 0 ]] || cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
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
  local c
  { printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'; } > tools.go
  log "kubernetes $K8S_VERSION: go mod tidy"
  go mod tidy -e >/dev/null
  local vpkg=k8s.io/component-base/version
  local ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $vpkg.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  for c in "${cmds[@]}"; do
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

# --- gpuplace-pause: the pod sandbox's process (sleeps until SIGTERM/SIGINT, reaps orphans as PID 1) ----
build_pause() {
  local dir="$WORK/pause"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init gpuplace.local/pause >/dev/null 2>&1
  cat > main.go <<'GO'
// gpuplace-pause holds a pod's namespaces, as registry.k8s.io/pause does: it waits for a signal to stop
// and, being PID 1 of the sandbox, reaps the zombies re-parented to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
GO
  log "building gpuplace-pause"
  go build -trimpath -ldflags "-s -w" -o "$BIN/gpuplace-pause" .
}

case "$target" in
  node)
    build_kubernetes kubelet
    build_pause
    for n in "${NODE_NAMES[@]}"; do [[ -x "$BIN/$n" ]] || { echo "k8s-bins: $BIN/$n missing" >&2; exit 1; }; done
    echo "kubelet=$K8S_VERSION built_s=$(( $(date +%s) - start ))" > "$STAMP"
    rm -rf "$WORK"
    log "done (node): $BIN"
    drop_go_cache
    ;;
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
    drop_go_cache
    ;;
  *) echo "usage: $0 [all|node|kubernetes|etcd|kwok]" >&2; exit 2 ;;
esac
