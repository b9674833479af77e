#!/bin/sh
# fuzz.sh build SOURCE_DIR FUZZ_BUILD_DIR
# fuzz.sh run   SOURCE_DIR FUZZ_BUILD_DIR TARGET SECONDS
# Builds the fuzz targets with clang (tests/fuzz/project) or runs one for SECONDS on its
# seed corpus. Exit 77 (skipped) where clang or libFuzzer is missing. PETDAQ_FUZZ_CXX names
# another clang++.
set -u
mode=$1
src=$2
dir=$3
cxx=${PETDAQ_FUZZ_CXX:-clang++}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "SKIP: $cxx is not installed (the fuzz targets need clang and libFuzzer)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  > "$probe/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" \
     > "$probe/log" 2>&1; then
  echo "SKIP: $cxx cannot link libFuzzer (Debian: libclang-rt-<version>-dev):"
  cat "$probe/log"
  exit 77
fi

case $mode in
build)
  launcher=""
  command -v ccache >/dev/null 2>&1 && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  cmake -S "$src/tests/fuzz/project" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo $launcher || exit 1
  cmake --build "$dir" -j2 || exit 1
  ;;
run)
  target=$4
  seconds=$5
  bin=$dir/fuzz_$target
  if [ ! -x "$bin" ]; then
    echo "SKIP: $bin was not built (see fuzz.build; fuzz_pcap needs libpcap-dev)"
    exit 77
  fi
  mkdir -p "$dir/corpus/$target" "$dir/artifacts"
  # New inputs go to the build's corpus; the seeds in the source tree are only read.
  exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$dir/artifacts/$target-" "$dir/corpus/$target" \
       "$src/tests/fuzz/corpus/$target"
  ;;
*)
  echo "usage: fuzz.sh build|run SOURCE_DIR FUZZ_BUILD_DIR [TARGET SECONDS]" >&2
  exit 2
  ;;
esac
