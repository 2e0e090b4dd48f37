#!/usr/bin/env bash
# Builds the local test images (no registry is reachable here):
#   soak-test/base:SUITE       a Debian rootfs (bookworm, bullseye, trixie) made with mmdebstrap,
#                              `docker import`ed
#   soak-test/pdns-auth        pdns-server + gsqlite3 backend + sqlite3, API on    (docker/pdns-auth)
#   soak-test/pdns-recursor    pdns-recursor                                       (docker/pdns-recursor)
#   soak-test/unbound          unbound                                             (docker/unbound)
#   soak-test/refdns           the reference Go server, binary built on the host   (docker/refdns)
# and, for the real-version upgrade tests (`make test-upgrades`), one image per
# Debian suite of the same Dockerfiles, tagged with the packaged version:
#   soak-test/pdns-auth:4.4 (bullseye)  :4.7 (bookworm)  :4.9 (trixie)
#   soak-test/pdns-recursor:4.8 (bookworm)  :5.2 (trixie)
#   soak-test/unbound:1.13 (bullseye)  :1.17 (bookworm)  :1.26 (trixie)
#   soak-test/knot-resolver:5.3 (bullseye)  :5.6 (bookworm)  :5.7 (trixie)
#
# Usage: build-test-images.sh [IMAGE...|upgrades]   no argument: the three `latest` images;
# `upgrades`: the versioned ones; IMAGE: just those (and the base image each needs).
# Idempotent: an image that exists is skipped (FORCE=1 rebuilds; FORCE_BASE=1 the bases too).
# The mirror is read from the host's apt sources and goes only into the image, never into
# the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

# image -> "suite context-directory"
declare -A IMAGES=(
  [soak-test/pdns-auth:latest]="bookworm docker/pdns-auth"
  [soak-test/pdns-recursor:latest]="bookworm docker/pdns-recursor"
  [soak-test/unbound:latest]="bookworm docker/unbound"
  [soak-test/refdns:latest]="bookworm docker/refdns"
  [soak-test/pdns-auth:4.4]="bullseye docker/pdns-auth"
  [soak-test/pdns-auth:4.7]="bookworm docker/pdns-auth"
  [soak-test/pdns-auth:4.9]="trixie docker/pdns-auth"
  [soak-test/pdns-recursor:4.8]="bookworm docker/pdns-recursor"
  [soak-test/pdns-recursor:5.2]="trixie docker/pdns-recursor"
  [soak-test/unbound:1.13]="bullseye docker/unbound"
  [soak-test/unbound:1.17]="bookworm docker/unbound"
  [soak-test/unbound:1.26]="trixie docker/unbound"
  [soak-test/knot-resolver:5.3]="bullseye docker/knot-resolver"
  [soak-test/knot-resolver:5.6]="bookworm docker/knot-resolver"
  [soak-test/knot-resolver:5.7]="trixie docker/knot-resolver"
)
DEFAULT=(soak-test/pdns-auth:latest soak-test/pdns-recursor:latest soak-test/unbound:latest
  soak-test/refdns:latest)
UPGRADES=(soak-test/pdns-auth:4.4 soak-test/pdns-auth:4.7 soak-test/pdns-auth:4.9
  soak-test/pdns-recursor:4.8 soak-test/pdns-recursor:5.2
  soak-test/unbound:1.13 soak-test/unbound:1.17 soak-test/unbound:1.26
  soak-test/knot-resolver:5.3 soak-test/knot-resolver:5.6 soak-test/knot-resolver:5.7)

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

build_base() {  # suite
  local suite=$1 base="soak-test/base:$1"
  # FORCE rebuilds images, not their base (FORCE_BASE=1 does that too).
  if docker image inspect "$base" >/dev/null 2>&1 && [ "${FORCE_BASE:-0}" != 1 ]; then
    return
  fi
  command -v mmdebstrap >/dev/null || { echo "build-test-images: mmdebstrap is not installed" >&2; exit 2; }
  local uri work
  uri=$(mirror_uri)
  work=$(mktemp -d)
  # A global trap: a RETURN trap would also fire when the caller returns.
  trap 'rm -rf "$work"' EXIT
  echo "build-test-images: bootstrapping $suite from $uri"
  # Docs, man pages and locales are dropped to keep the image small. The host's
  # keyring knows the older and newer suites' keys too (debian-archive-keyring).
  mmdebstrap --quiet --variant=apt \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$work/rootfs.tar" "deb $uri $suite main" "deb $uri $suite-updates main"
  docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    "$work/rootfs.tar" "$base" >/dev/null
  rm -rf "$work"
  trap - EXIT
  echo "build-test-images: built $base"
}

build_image() {  # name, context directory, suite
  if have_image "$1"; then echo "build-test-images: $1 exists"; return; fi
  build_base "$3"
  # Host networking for the build only: apt inside reaches the same mirror as the host.
  # The legacy builder's notice about buildx is noise; the log is shown only on failure.
  local log
  log=$(mktemp)
  if ! DOCKER_BUILDKIT=0 docker build --network host --build-arg "BASE=soak-test/base:$3" \
    -t "$1" "$2" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    echo "build-test-images: building $1 failed" >&2
    exit 2
  fi
  rm -f "$log"
  echo "build-test-images: built $1"
}

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${DEFAULT[@]}")
if [ "${wanted[0]}" = upgrades ]; then wanted=("${UPGRADES[@]}"); fi
# The bookworm base first, as before: every default image needs it.
build_base bookworm
for image in "${wanted[@]}"; do
  spec=${IMAGES[$image]:-}
  [ -n "$spec" ] || { echo "build-test-images: no recipe for $image (known: ${!IMAGES[*]})" >&2; exit 2; }
  read -r suite context <<<"$spec"
  # The reference Go server's image takes the binary built on the host into its context;
  # an image holding another binary than the one just built (its sources changed) is rebuilt.
  if [ "$context" = docker/refdns ]; then
    bash scripts/build-refdns.sh docker/refdns/refdns
    if docker image inspect "$image" >/dev/null 2>&1; then
      inside=$(docker run --rm --network none --entrypoint sha256sum "$image" /usr/local/bin/refdns | cut -c1-64)
      if [ "$inside" != "$(sha256sum docker/refdns/refdns | cut -c1-64)" ]; then
        FORCE=1 build_image "$image" "$context" "$suite"
        continue
      fi
    fi
  fi
  build_image "$image" "$context" "$suite"
done
