#!/bin/sh
# systemd-analyze security on petdaqd.service, offline (no running systemd needed): the
# exposure must stay at or below THRESHOLD tenths (docs/daemon.md gives the score). Exit 77
# (skipped) where systemd-analyze is missing or too old for --offline.
set -u
unit=$1
threshold=$2
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze is not installed"
  exit 77
fi
if ! systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
  echo "SKIP: systemd-analyze has no --offline (systemd 250 or later)"
  exit 77
fi
# --threshold counts in tenths of the printed level (2.0 is 20).
out=$(systemd-analyze security --offline=true --threshold="$threshold" "$unit" 2>&1)
status=$?
echo "$out" | tail -n 25
exit $status
