#!/usr/bin/env bash
# Starts dockerd when no engine answers (CI and fresh machines have none running).
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "start-dockerd: no Docker engine answers and this is not root" >&2
  exit 2
fi
# Its own session: dockerd must outlive the shell (and process group) that started it.
setsid nohup dockerd >/tmp/dockerd.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "start-dockerd: engine up"
    exit 0
  fi
  sleep 1
done
echo "start-dockerd: dockerd did not answer within 60 s; see /tmp/dockerd.log" >&2
tail -n 20 /tmp/dockerd.log >&2 || true
exit 2
