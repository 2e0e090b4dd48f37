#!/usr/bin/env bash
# Installs, only when missing, the Debian packages that `make demo` and `make test`
# use: the DNS servers under test, dnsperf, the headers of the compiled DoH loop
# (libssl-dev, libnghttp2-dev), Docker, the time-series stores and the
# alerting and browser tools the tests drive, and the Go toolchain and Go library
# packages that build the reference target (scripts/build-refdns.sh). Idempotent; needs root.
#
# `install-system-deps.sh demo` (and `demo-leak`) installs only what `make demo` uses:
# Python's venv and a C compiler (the compiled UDP loop; with libssl-dev the TCP/DoT
# one), dnsmasq, and Go with the
# library packages refdns builds from (demo-leak: Alertmanager too). On a fresh machine
# the full list is most of a first `make demo`'s time: Docker, Chromium, the DNS servers
# and the time-series stores are for `make test`.
set -euo pipefail

DEMO_PACKAGES=(
  python3-venv gcc libc6-dev python3-dev libssl-dev libnghttp2-dev dnsmasq-base
  golang-go golang-github-miekg-dns-dev golang-github-prometheus-client-golang-dev
  golang-github-mattn-go-sqlite3-dev libsqlite3-dev
)

PACKAGES=(
  python3-venv
  pdns-server pdns-backend-sqlite3 pdns-recursor unbound dnsmasq-base dnsperf
  knot-resolver dnsdist bind9 bind9-utils openssl gcc libc6-dev python3-dev
  libssl-dev libnghttp2-dev
  bind9-dnsutils sqlite3 procps iproute2 tcpdump knot-resolver-module-http
  docker.io docker-compose mmdebstrap
  influxdb victoria-metrics prometheus prometheus-alertmanager
  chromium
  golang-go golang-github-miekg-dns-dev golang-github-prometheus-client-golang-dev
  golang-github-mattn-go-sqlite3-dev libsqlite3-dev
)

case "${1:-all}" in
  all) ;;
  demo) PACKAGES=("${DEMO_PACKAGES[@]}") ;;
  demo-leak) PACKAGES=("${DEMO_PACKAGES[@]}" prometheus-alertmanager) ;;
  *) echo "install-system-deps: unknown set ${1} (all, demo, demo-leak)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-system-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-system-deps: missing packages (${missing[*]}); run as root: sudo $0" >&2
  exit 2
fi

echo "install-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# The packaged services must not start on their default ports: tests start their
# own instances on loopback with temporary directories.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
apt-get install -y -q --no-install-recommends "${missing[@]}"
