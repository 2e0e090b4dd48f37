#!/usr/bin/env bash
# Builds the load agent's image (docker/agent/Dockerfile) offline: the project's wheel (with the
# compiled UDP loop) and its dependencies' wheels are built on the host with the host's pip and
# installed into the local Debian base image (scripts/build-test-images.sh); no registry.
# Usage: build-agent-image.sh   (AGENT_IMAGE=soak/agent:latest, BASE=soak-test/base:bookworm)
set -euo pipefail
cd "$(dirname "$0")/.."
image=${AGENT_IMAGE:-soak/agent:latest}
base=${BASE:-soak-test/base:bookworm}
pip=${PIP:-.venv/bin/pip}
docker image inspect "$base" >/dev/null 2>&1 \
  || { echo "build-agent-image: no $base (make docker-ready builds it)" >&2; exit 2; }
# The image is rebuilt only when the code it is built from changed (FORCE=1 rebuilds anyway):
# its label soak.source holds a hash of that code.
source=$(find src pyproject.toml docker/agent -type f \( -name '*.py' -o -name '*.c' \
  -o -name '*.toml' -o -name Dockerfile \) -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
have=$(docker image inspect --format '{{index .Config.Labels "soak.source"}}' "$image" 2>/dev/null || true)
if [ "$have" = "$source" ] && [ -z "${FORCE:-}" ]; then
  echo "build-agent-image: $image is up to date (source $source)"
  exit 0
fi
old=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/context"
"$pip" wheel -q --disable-pip-version-check --wheel-dir "$work/context/wheels" . >"$work/pip.log" 2>&1 \
  || { tail -n 30 "$work/pip.log" >&2; echo "build-agent-image: building wheels failed" >&2; exit 2; }
ls "$work"/context/wheels/soak-*.whl >/dev/null
cp docker/agent/Dockerfile "$work/context/"
# Host networking for the build only: apt inside reaches the host's Debian mirror.
if ! DOCKER_BUILDKIT=0 docker build --network host --build-arg "BASE=$base" --label "soak.source=$source" -t "$image" \
  "$work/context" >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  echo "build-agent-image: building $image failed" >&2
  exit 2
fi
# The image this one replaces, now untagged, is removed (unless a container still uses it).
if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$image")" ]; then
  docker rmi "$old" >/dev/null 2>&1 || true
fi
echo "build-agent-image: built $image"
