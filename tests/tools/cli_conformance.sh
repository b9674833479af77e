#!/usr/bin/env bash
# Every petdaq program follows one command-line convention (docs/tools.md, "Command lines"):
#   PROGRAM --help and -h       exit 0 and print a usage on stdout
#   PROGRAM --version           exit 0 and print "NAME (petdaq) VERSION"
#   PROGRAM --no-such-option    exit 2 and name the option on stderr
#   a script's first line       #!/usr/bin/python3 (Debian's interpreter, with the dependencies,
#                               whatever python3 comes first on PATH)
# usage: cli_conformance.sh VERSION PYTHON PROGRAM...   (PROGRAM ending in .py runs with PYTHON)
set -u
version=$1 python=$2
shift 2
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
failures=0 checked=0
fail() { echo "FAIL $name: $*"; failures=$((failures + 1)); }

for program in "$@"; do
  name=$(basename "$program")
  cmd=("$program")
  if [[ $program == *.py ]]; then
    if ! "$python" -c 'import zmq, numpy' 2>/dev/null; then
      echo "skip $name: no python3 with pyzmq and NumPy"; continue
    fi
    cmd=("$python" "$program"); name=${name%.py}
  fi
  checked=$((checked + 1))
  if [[ $(head -c 2 "$program") == '#!' ]]; then
    shebang=$(head -n 1 "$program")
    [[ $shebang == '#!/usr/bin/python3' ]] || fail "first line '$shebang', expected '#!/usr/bin/python3'"
  fi
  for help in --help -h; do
    "${cmd[@]}" "$help" >"$out" 2>"$err"; rc=$?
    [[ $rc -eq 0 ]] || fail "$help exits $rc: $(cat "$err")"
    grep -qi '^usage:' "$out" || fail "$help prints no usage line"
    grep -q -- '--version' "$out" || fail "$help does not list --version"
  done
  "${cmd[@]}" --version >"$out" 2>"$err"; rc=$?
  [[ $rc -eq 0 ]] || fail "--version exits $rc"
  [[ $(cat "$out") == "$name (petdaq) $version" ]] || fail "--version prints '$(cat "$out")', expected '$name (petdaq) $version'"
  "${cmd[@]}" --no-such-option >"$out" 2>"$err"; rc=$?
  [[ $rc -eq 2 ]] || fail "--no-such-option exits $rc, expected 2"
  grep -q -- '--no-such-option' "$err" || fail "the usage error does not name --no-such-option: $(cat "$err")"
  [[ $failures -eq 0 ]] && echo "ok   $name"
done
echo "$checked programs checked, $failures failures"
[[ $checked -gt 0 && $failures -eq 0 ]]
