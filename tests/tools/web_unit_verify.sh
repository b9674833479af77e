#!/bin/sh
# systemd-analyze verify on petdaq-web.service, its program pointed at this build. Exit 77
# (skipped) where systemd-analyze is missing or cannot verify units here (some containers).
set -u
unit=$1
binary=$2
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
sed -e "s|^\(ExecStart=\)[^ ]*/petdaq-web |\1$binary |" "$unit" > "$dir/petdaq-web.service"
grep '^ExecStart' "$dir/petdaq-web.service"
out=$(systemd-analyze verify "$dir/petdaq-web.service" 2>&1)
status=$?
echo "$out"
[ $status -eq 0 ] || exit 1
if echo "$out" | grep -q "petdaq-web.service"; then exit 1; fi
echo "petdaq-web.service verified"
