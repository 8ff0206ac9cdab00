#!/usr/bin/env bash
# bench_store.sh - compare `gculaunch store` with torch 1.13's own TCPStore server, in one run.
#
#   scripts/bench_store.sh [--only 1 64 256 1000 10000] [--json FILE]
#
# Needs root and a build (scripts/build.sh: build/launcher/gculaunch,
# build/rendezvous/store_load and store_floor) plus Debian's python3-torch (1.13).  Everything runs inside a
# private network namespace (loopback only) where net.core.somaxconn and the SYN backlog are
# raised, so a 10,000-client connect storm does not pay SYN retransmits.  The whole run is
# bounded (14 minutes at most; about 5 to 10 in practice); each phase of each case has its
# own deadline and is reported as TIMEOUT if it overruns.  Nothing is asserted: it prints
# numbers (see scripts/bench_store.py for what each one means).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
build=${BUILD_DIR:-$top/build}

if [[ "${_GCULAUNCH_BENCH_NETNS:-}" != 1 ]]; then
  if [[ $(id -u) != 0 ]]; then
    echo "bench_store.sh: needs root (a private network namespace and its sysctls)" >&2
    exit 2
  fi
  for f in "$build/launcher/gculaunch" "$build/rendezvous/store_load" \
           "$build/rendezvous/store_floor"; do
    [[ -x "$f" ]] || { echo "bench_store.sh: $f is missing (run scripts/build.sh)" >&2; exit 2; }
  done
  exec unshare --net env _GCULAUNCH_BENCH_NETNS=1 "$0" "$@"
fi

ip link set lo up
sysctl -qw net.core.somaxconn=65535
sysctl -qw net.ipv4.tcp_max_syn_backlog=65535 || echo "bench_store.sh: SYN backlog not raised" >&2
sysctl -qw net.ipv4.ip_local_port_range="1024 65535" || true
sysctl -qw net.ipv4.tcp_tw_reuse=1 || true

exec timeout --kill-after=10 840 /usr/bin/python3 "$here/bench_store.py" \
  --gculaunch "$build/launcher/gculaunch" --store-load "$build/rendezvous/store_load" \
  --store-floor "$build/rendezvous/store_floor" \
  --torch-python /usr/bin/python3 "$@"
