#!/bin/sh
# Creates the sqlite database on first start (fresh volume), then runs pdns_server.
# Extra arguments go to pdns_server (e.g. --local-port=N for host networking).
set -e
db=/var/lib/powerdns/pdns.sqlite3
if [ ! -s "$db" ]; then
  sqlite3 "$db" < /usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql
  echo "pdns-entrypoint: created $db"
fi
exec pdns_server --config-dir=/etc/powerdns --api-key="${PDNS_API_KEY}" "$@"
