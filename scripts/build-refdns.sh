#!/usr/bin/env bash
# Builds the reference Go DNS server (testbed/refdns) with Debian's Go toolchain
# and Debian's Go library packages, in GOPATH mode: nothing is downloaded.
#   golang-go (1.19), golang-github-miekg-dns-dev,
#   golang-github-prometheus-client-golang-dev, golang-github-mattn-go-sqlite3-dev
# (scripts/install-system-deps.sh installs them). Output: build/refdns/refdns, or $1.
# Skips the build when the binary is newer than every source file (FORCE=1 rebuilds).
set -euo pipefail
cd "$(dirname "$0")/.."

SRC=testbed/refdns
OUT=${1:-build/refdns/refdns}
GOPATH_SYS=/usr/share/gocode

command -v go >/dev/null || { echo "build-refdns: go is not installed (apt-get install golang-go)" >&2; exit 2; }
for pkg in github.com/miekg/dns github.com/prometheus/client_golang github.com/mattn/go-sqlite3; do
  [ -d "$GOPATH_SYS/src/$pkg" ] || {
    echo "build-refdns: $GOPATH_SYS/src/$pkg is missing; run scripts/install-system-deps.sh" >&2; exit 2; }
done

if [ "${FORCE:-0}" != 1 ] && [ -x "$OUT" ] && [ -z "$(find "$SRC" -newer "$OUT" -name '*.go')" ]; then
  echo "build-refdns: $OUT is up to date"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# GOPATH mode wants the package under <gopath>/src/<import path>.
mkdir -p "$work/src"
ln -s "$PWD/$SRC" "$work/src/refdns"
mkdir -p "$(dirname "$OUT")"
out_abs="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
# GOPROXY=off and GOFLAGS=-mod=mod unset: a missing package is an error, never a download.
# Not -trimpath: with it Go rebuilds its whole standard library instead of using the
# installed one (36 s of CPU against 13 s from an empty build cache, measured on the
# two-core machine `make demo` is timed on). The compiler's own -trimpath, for refdns and
# its libraries only, keeps their file names short in profiles ("refdns/server.go:335").
(
  cd "$work/src/refdns"
  env GOPATH="$work:$GOPATH_SYS" GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local \
    GOCACHE="${GOCACHE:-${HOME:-/root}/.cache/go-build}" CGO_ENABLED=1 \
    go build -gcflags="refdns=-trimpath=$work/src" \
      -gcflags="github.com/...=-trimpath=$GOPATH_SYS/src" -o "$out_abs" .
)
echo "build-refdns: built $OUT ($(go version | awk '{print $3}'))"
