#!/usr/bin/env bash
# petdaq's two entry points on a Debian 12 machine, run as root from the repository:
#   tools/run.sh demo   install what is missing, build (Release), run the embedded demo
#   tools/run.sh test   install what is missing, build (Release), run every test (ctest)
# A second run neither reinstalls nor rebuilds from scratch.
set -euo pipefail

cd "$(dirname "$0")/.."
mode=${1:-demo}
build=${PETDAQ_BUILD_DIR:-build}
jobs=$(nproc)

packages=(build-essential cmake pkg-config git libboost-dev libzmq3-dev cppzmq-dev
          libconcurrentqueue-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libgtest-dev
          libsystemd-dev libpcap-dev libncurses-dev python3 python3-zmq python3-numpy tmux
          systemd iproute2 libcli11-dev nlohmann-json3-dev libhdf5-dev python3-h5py help2man python3-matplotlib
          python3-scipy python3-yaml
          bash-completion libjs-chart.js chromium clang libclang-rt-14-dev
          prometheus-cpp-dev prometheus libsqlite3-dev libssl-dev)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "petdaq: installing ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
      echo "petdaq: installing packages needs root (run as root, or install them first)" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

build() {
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
  fi
  cmake --build "$build" -j"$jobs"
}

case $mode in
  demo)
    install_missing
    build
    exec tools/demo.sh "$build"
    ;;
  test)
    install_missing
    build
    cd "$build"
    exec ctest --output-on-failure -j"$jobs" --timeout 900
    ;;
  *)
    echo "usage: tools/run.sh demo|test" >&2
    exit 2
    ;;
esac
