#!/bin/sh
# Installs the build into a scratch DESTDIR and checks the layout; then installs again over
# an edited configuration, which must be kept.
set -eu
cmake=$1 build=$2 bindir=$3 sysconfdir=$4 prefix=$5
dest=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$dest" "$log"' EXIT
DESTDIR=$dest "$cmake" --install "$build" > "$log" 2>&1 || { cat "$log"; exit 1; }
for f in "$bindir/petdaqd" "$bindir/petdaq-offline" "$bindir/petdaq-dump" "$bindir/petdaq-sim" \
         "$bindir/petdaq-replay" "$bindir/petdaq-top" "$bindir/petdaq-record" "$bindir/petdaq-export" \
         "$bindir/petdaq-runs" \
         "$bindir/petdaq-qa" "$prefix/share/petdaq/python/petdaq/histograms.py" \
         "$bindir/petdaq-nema" "$prefix/share/petdaq/python/petdaq/nema.py" \
         "$bindir/petdaq-calibrate" "$prefix/share/petdaq/python/petdaq_calibrate/cli.py" \
         "$prefix/share/bash-completion/completions/petdaq-sim" \
         "$prefix/share/bash-completion/completions/petdaqd" \
         "$sysconfdir/petdaq/petdaq.yaml" "$sysconfdir/petdaq/petdaq.yaml.default" \
         "$prefix/lib/systemd/system/petdaqd.service" "$prefix/lib/sysctl.d/60-petdaq.conf" \
         "$prefix/lib/sysusers.d/petdaq.conf"; do
  [ -e "$dest/$f" ] || { echo "missing after install: $f"; cat "$log"; exit 1; }
done
# The installed petdaq-qa finds the petdaq package under share/petdaq/python: a file too
# short to be a histogram file is refused by the package's reader (exit 2, not an ImportError).
if /usr/bin/python3 -c "import numpy" 2> /dev/null; then  # petdaq-qa runs with /usr/bin/python3
  printf 'PDQH' > "$log.pdh"
  if "$dest/$bindir/petdaq-qa" "$log.pdh" --output "$dest/qa" > "$log" 2>&1; then rc=0; else rc=$?; fi
  rm -f "$log.pdh"
  [ "$rc" = 2 ] && grep -q "truncated" "$log" \
    || { echo "installed petdaq-qa does not read histograms (exit $rc):"; cat "$log"; exit 1; }
fi
# The installed petdaq-nema finds the petdaq package too: a missing list-mode file is an
# input error (exit 1, naming it), not an ImportError.
if /usr/bin/python3 -c "import numpy, yaml" 2> /dev/null; then
  if "$dest/$bindir/petdaq-nema" count-rate --config "$dest/$sysconfdir/petdaq/petdaq.yaml" \
       --acquisition "$dest/none.plm=1" --output "$dest/nema" > "$log" 2>&1; then rc=0; else rc=$?; fi
  [ "$rc" = 1 ] && grep -q "none.plm" "$log" \
    || { echo "installed petdaq-nema does not run (exit $rc):"; cat "$log"; exit 1; }
fi
# Every installed program, the Python ones included, has its completion; the installed
# petdaq-calibrate finds its package and the petdaq package's command line.
for p in petdaq-qa petdaq-calibrate; do
  [ -e "$dest/$prefix/share/bash-completion/completions/$p" ] \
    || { echo "missing completion: $p"; exit 1; }
done
if /usr/bin/python3 -c "import numpy, scipy, yaml, matplotlib" 2> /dev/null; then
  v=$("$dest/$bindir/petdaq-calibrate" --version 2>&1) \
    && case $v in "petdaq-calibrate (petdaq) "*) ;; *) false ;; esac \
    || { echo "installed petdaq-calibrate --version: $v"; exit 1; }
fi
# Man pages, generated at build time when help2man is there.
if command -v help2man > /dev/null; then
  pages="petdaqd petdaq-sim petdaq-offline petdaq-dump petdaq-export"
  # The Python programs' pages are made where they run (their modules installed).
  /usr/bin/python3 -c "import numpy, scipy, yaml, matplotlib" 2> /dev/null \
    && pages="$pages petdaq-qa petdaq-calibrate"
  [ -e "$dest/$bindir/petdaq-web" ] && pages="$pages petdaq-web"
  for page in $pages; do
    grep -q '^\.TH' "$dest/$prefix/share/man/man1/$page.1" 2>/dev/null \
      || { echo "missing or empty man page: $prefix/share/man/man1/$page.1"; exit 1; }
  done
fi
# The completion registers itself for the petdaq binaries.
if command -v bash > /dev/null; then
  bash -c ". '$dest/$prefix/share/bash-completion/completions/petdaq-sim' && complete -p petdaq-export" \
    > /dev/null || { echo "the bash completion does not register petdaq-export"; exit 1; }
fi
grep -qx "ExecStart=$bindir/petdaqd --config $sysconfdir/petdaq/petdaq.yaml" \
  "$dest/$prefix/lib/systemd/system/petdaqd.service" \
  || { echo "the unit does not start $bindir/petdaqd with $sysconfdir/petdaq/petdaq.yaml"; exit 1; }
echo "# edited" >> "$dest/$sysconfdir/petdaq/petdaq.yaml"
DESTDIR=$dest "$cmake" --install "$build" > "$log" 2>&1 || { cat "$log"; exit 1; }
grep -qx '# edited' "$dest/$sysconfdir/petdaq/petdaq.yaml" \
  || { echo "a reinstall replaced the edited configuration"; exit 1; }
echo "install layout ok ($prefix)"
