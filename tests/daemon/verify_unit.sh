#!/bin/sh
# systemd-analyze verify on a unit of the project (petdaqd.service, petdaq-web.service), its
# program pointed at this build's binary. Exit 77 (skipped) where systemd-analyze is missing
# or cannot run here (some containers), told apart by verifying a trivial unit first.
#   verify_unit.sh UNIT_FILE BINARY
set -u
unit=$1
binary=$2
name=$(basename "$unit")
program=$(basename "$binary")
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze is not installed"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '[Unit]\nDescription=probe\n[Service]\nType=oneshot\nExecStart=/bin/true\n' > "$dir/probe.service"
if ! systemd-analyze verify "$dir/probe.service" > "$dir/probe.log" 2>&1; then
  echo "SKIP: systemd-analyze cannot verify units here:"
  cat "$dir/probe.log"
  exit 77
fi
# Installed paths -> this build's binary.
sed -e "s|^\(ExecStart[A-Za-z]*=\)[^ ]*/$program |\1$binary |" "$unit" > "$dir/$name"
grep '^ExecStart' "$dir/$name"
out=$(systemd-analyze verify "$dir/$name" 2>&1)
status=$?
echo "$out"
[ $status -eq 0 ] || exit 1
# verify returns 0 on some warnings; treat every line about our unit as a failure.
if echo "$out" | grep -q "$name"; then exit 1; fi
echo "$name verified"
