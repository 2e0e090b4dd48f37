#!/usr/bin/env bash
# Builds the local test images (no registry is reachable here):
#   soak-test/base:bookworm    a Debian bookworm rootfs made with mmdebstrap, `docker import`ed
#   soak-test/pdns-auth        pdns-server + gsqlite3 backend + sqlite3, API on    (docker/pdns-auth)
#   soak-test/pdns-recursor    pdns-recursor                                       (docker/pdns-recursor)
#   soak-test/unbound          unbound                                             (docker/unbound)
# Idempotent: an image that exists is skipped (FORCE=1 rebuilds). The mirror is read
# from the host's apt sources and goes only into the image, never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=soak-test/base:bookworm
SUITE=bookworm

have_image() { docker image inspect "$1" >/dev/null 2>&1 && [ "${FORCE:-0}" != 1 ]; }

mirror_uri() {
  local uri=""
  if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    # The first URIs: line that is not the security archive.
    uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
    uri=$(awk '/^deb / && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
      /etc/apt/sources.list)
  fi
  [ -n "$uri" ] || { echo "build-test-images: no Debian mirror in the host's apt sources" >&2; exit 2; }
  echo "$uri"
}

build_base() {
  if have_image "$BASE"; then echo "build-test-images: $BASE exists"; return; fi
  command -v mmdebstrap >/dev/null || { echo "build-test-images: mmdebstrap is not installed" >&2; exit 2; }
  local uri work
  uri=$(mirror_uri)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  echo "build-test-images: bootstrapping $SUITE from $uri"
  # Docs, man pages and locales are dropped to keep the image small.
  mmdebstrap --quiet --variant=apt \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$work/rootfs.tar" "deb $uri $SUITE main" "deb $uri $SUITE-updates main"
  docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    "$work/rootfs.tar" "$BASE" >/dev/null
  echo "build-test-images: built $BASE"
}

build_image() {  # name, context directory
  if have_image "$1"; then echo "build-test-images: $1 exists"; return; fi
  # Host networking for the build only: apt inside reaches the same mirror as the host.
  # The legacy builder's notice about buildx is noise; the log is shown only on failure.
  local log
  log=$(mktemp)
  if ! DOCKER_BUILDKIT=0 docker build --network host --build-arg "BASE=$BASE" -t "$1" "$2" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    echo "build-test-images: building $1 failed" >&2
    exit 2
  fi
  rm -f "$log"
  echo "build-test-images: built $1"
}

build_base
build_image soak-test/pdns-auth:latest docker/pdns-auth
build_image soak-test/pdns-recursor:latest docker/pdns-recursor
build_image soak-test/unbound:latest docker/unbound
