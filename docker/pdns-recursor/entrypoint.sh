#!/bin/sh
# Without RECURSOR_CONFIG_DIR: the image's configuration (/etc/powerdns/recursor.conf)
# and the API key from PDNS_API_KEY; extra arguments go to pdns_recursor.
# With RECURSOR_CONFIG_DIR (a volume): the operator's configuration lives there, as it
# would across an upgrade. On first start the image's configuration is copied in with
# the API key and a zone the recursor serves itself (auth-zones, no upstream needed).
set -e
if [ -z "$RECURSOR_CONFIG_DIR" ]; then
  exec pdns_recursor --config-dir=/etc/powerdns --api-key="$PDNS_API_KEY" "$@"
fi
dir=$RECURSOR_CONFIG_DIR
if [ ! -e "$dir/recursor.conf" ] && [ ! -e "$dir/recursor.yml" ]; then
  cp /etc/powerdns/recursor.conf /usr/share/soak/example.test.zone "$dir/"
  printf 'api-key=%s\nauth-zones=example.test=%s/example.test.zone\n' \
    "$PDNS_API_KEY" "$dir" >> "$dir/recursor.conf"
  echo "recursor-entrypoint: wrote $dir/recursor.conf"
fi
exec pdns_recursor --config-dir="$dir" "$@"
