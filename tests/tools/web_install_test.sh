#!/bin/sh
# petdaq-web installed into a scratch DESTDIR: the program, its page and its unit are where
# they belong, the unit starts the installed program with the installed configuration, and
# the installed program finds its page (share/petdaq/web beside its bin/) and serves it.
set -eu
cmake=$1 build=$2 bindir=$3 datadir=$4 sysconfdir=$5 prefix=$6 source=$7
dest=$(mktemp -d)
log=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dest" "$log"' EXIT
DESTDIR=$dest "$cmake" --install "$build" > "$log" 2>&1 || { cat "$log"; exit 1; }
unit=$dest/$prefix/lib/systemd/system/petdaq-web.service
for f in "$dest/$bindir/petdaq-web" "$unit" "$dest/$datadir/petdaq/web/index.html" \
         "$dest/$datadir/petdaq/web/app.js" "$dest/$datadir/petdaq/web/style.css"; do
  [ -e "$f" ] || { echo "missing after install: $f"; exit 1; }
done
grep -qx "ExecStart=$bindir/petdaq-web --config $sysconfdir/petdaq/petdaq.yaml" "$unit" \
  || { echo "the unit does not start $bindir/petdaq-web with $sysconfdir/petdaq/petdaq.yaml"; exit 1; }
"$dest/$bindir/petdaq-web" --endpoint "ipc://$dest/none" --listen 127.0.0.1:0 2> "$log" &
pid=$!
for _ in $(seq 100); do
  grep -q 'page at' "$log" && break
  sleep 0.1
done
url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$log") || { cat "$log"; exit 1; }
python3 -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' \
  "$url" > "$dest/page.html"
cmp "$dest/page.html" "$source/tools/web/page/index.html" \
  || { echo "the installed petdaq-web does not serve its installed page"; exit 1; }
echo "petdaq-web installed and serving its page"
