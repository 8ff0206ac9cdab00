#!/usr/bin/env bash
# bootstrap.sh - install the packages gculaunch needs, from Debian's archive only.  Idempotent:
# a second run installs nothing.  Needs root (apt-get).
#
#   scripts/bootstrap.sh [all]   everything: build, test, lint, fuzz, benchmark (scripts/test.sh)
#   scripts/bootstrap.sh demo    only what building the gculaunch executable and running the
#                                all-reduce demo need (scripts/demo_allreduce.sh): the
#                                toolchain, the libraries it links, python3 and python3-torch
#
# The Boost 1.81 set is named package by package: bookworm's default
# libboost-dev is 1.74, and every libboost1.81-*-dev package conflicts with
# its 1.74 counterpart, so nothing may pull in the default set.
# libboost-filesystem1.81-dev is in it because Boost.Process v2 in 1.81 does
# not compile with BOOST_PROCESS_USE_STD_FS and needs Boost.Filesystem.
set -euo pipefail
set_name=${1:-all}

# The demo set: what CMakeLists.txt's find_package/find_library/find_path calls need when
# configured with -DGCULAUNCH_TESTS=OFF, what the gculaunch target links, and the demo's Python.
demo_packages=(
  # toolchain
  build-essential g++ cmake make pkg-config ca-certificates
  # libraries (static archives come with the -dev packages)
  libboost1.81-dev libboost-filesystem1.81-dev libboost-system1.81-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  # TLS of the etcd client: OpenSSL's static archives (libssl.a, libcrypto.a) for the static
  # binary
  libssl-dev
  # the demo's ranks: real PyTorch (1.13, CPU, gloo)
  python3 python3-torch
)

# Everything else: the test suite, the checks, fuzzing, benchmarks, packaging.
test_packages=(
  catch2
  # fuzzing: libclang-rt-14-dev is only a recommendation of clang
  clang libclang-rt-14-dev
  # the format and lint checks (tests/checks/format.sh, tidy.sh): version 14, as .clang-format
  # and .clang-tidy expect
  clang-format clang-tidy
  # platform recipes test: parses the Kubernetes/Volcano/Kubeflow manifests
  python3-yaml
  # rendezvous on etcd: the etcd 3.4 server the tests start (its v3 HTTP/JSON gateway is what
  # etcd/ speaks), and etcdctl for people debugging a job's keys
  etcd-server etcd-client
  # the openssl command, with which the TLS tests make their test CA
  openssl
  # test hosts and chroots: network namespaces, debootstrap, process tools
  iproute2 procps psmisc util-linux debootstrap binutils file
  # packaging checks
  dpkg-dev fakeroot
  # the wheel's test: the host's pip installs it into a venv and with --target
  python3-pip python3-venv
)

case $set_name in
  demo) packages=("${demo_packages[@]}") ;;
  all) packages=("${demo_packages[@]}" "${test_packages[@]}") ;;
  *) echo "bootstrap: unknown set '$set_name' (use 'demo' or 'all')" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "bootstrap: all ${#packages[@]} packages of the $set_name set present"
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "bootstrap: missing packages: ${missing[*]}; run this script as root to install them" >&2
  exit 1
fi

echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
