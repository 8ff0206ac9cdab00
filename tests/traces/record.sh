#!/usr/bin/env bash
# record.sh - records the golden TCPStore traces anew (tests/traces/README.md).
#
#   tests/traces/record.sh [--short] [--out DIR] [--torch2-root DIR] [--only GLOB]
#
# Drives real torch 1.13 (/usr/bin/python3) and torch 2.6 (the trixie root, through
# scripts/in_root.sh) clients and servers through recorder.py's proxy and writes NAME.jsonl
# and NAME.txt per scenario into DIR (default: this directory).  --short records only one
# set + get per torch version (short-torch1.13.*, short-torch2.6.*), for
# tests/integration/test_trace_recorder.py.  --only records the scenarios whose names match
# the shell pattern GLOB (e.g. 'ops-*').
#
# Runs itself in a new network namespace with only lo up (`unshare -n`, needs root), so the
# TCPStore servers, which bind the wildcard address, are reachable on loopback only.  Every
# process it starts is stopped by its pid.  Takes 1.5 to 2 minutes (--short: about 15 s).
set -euo pipefail
prog=record.sh
die() { printf '%s: error: %s\n' "$prog" "$*" >&2; exit 1; }

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
src=$(cd -- "$here/../.." && pwd -P)
short=0
only='*'
out=$here
root=${GCULAUNCH_CACHE_DIR:-$HOME/.cache/gculaunch}/torch2-trixie
while [[ $# -gt 0 ]]; do
  case $1 in
    --short) short=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --torch2-root) root=${2:?--torch2-root needs a directory}; shift ;;
    --only) only=${2:?--only needs a pattern}; shift ;;
    *) die "unknown argument '$1' (usage: record.sh [--short] [--out DIR] [--torch2-root DIR] [--only GLOB])" ;;
  esac
  shift
done

if [[ "${_RECORD_IN_NETNS:-}" != 1 ]]; then
  [[ $EUID -eq 0 ]] || die "needs root (a private network namespace); run it with sudo"
  command -v unshare >/dev/null || die "unshare is missing (apt-get install util-linux)"
  args=(--out "$out" --torch2-root "$root" --only "$only")
  [[ $short == 1 ]] && args+=(--short)
  _RECORD_IN_NETNS=1 exec unshare --net -- "$BASH" "${BASH_SOURCE[0]}" "${args[@]}"
fi

# ---- inside the private network namespace ----------------------------------------------
ip link set lo up || die "cannot bring up lo in the new network namespace (iproute2 missing?)"
py113=(/usr/bin/python3)
py26=("$src/scripts/in_root.sh" "$root" /usr/bin/python3)
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
  die "/usr/bin/python3 has no torch (apt-get install python3-torch, scripts/bootstrap.sh)"
[[ -x "$root/usr/bin/python3" || "$only" != '*' ]] ||
  die "no torch 2.6 root at $root (make it with scripts/make_torch2_root.sh, or pass --torch2-root)"
mkdir -p "$out"
out=$(cd -- "$out" && pwd -P)
work=$(mktemp -d /tmp/gculaunch-traces.XXXXXX)
cd "$here"  # in_root.sh shows the current directory inside the root: the drivers are here

pids=()
cleanup() {
  local status=$? pid
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [[ $status == 0 ]]; then
    rm -rf "$work"
  else
    printf '%s: logs and partial traces kept in %s\n' "$prog" "$work" >&2
  fi
}
trap cleanup EXIT

# Every started process is remembered; stop PID sends SIGTERM, waits up to 10 s, then KILLs.
stop() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# wait_ready FILE PID WHAT: the first line of FILE, once it exists (60 s at most).
wait_ready() {
  local file=$1 pid=$2 what=$3 i
  for ((i = 0; i < 600; i++)); do
    [[ -s "$file" ]] && { head -1 "$file"; return 0; }
    kill -0 "$pid" 2>/dev/null || { tail -20 "$work"/*.log >&2; die "$what exited before it was ready"; }
    sleep 0.1
  done
  die "$what was not ready within 60 s"
}

# server PYTHON...: a real TCPStore server; sets $server_pid, $server_port, $server_info.
n=0
server() {
  n=$((n + 1))
  "$@" recorder.py server --ready "$work/server.$n" >"$work/server.$n.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  local line
  line=$(wait_ready "$work/server.$n" "$server_pid" "the TCPStore server ($*)")
  server_port=${line%% *}
  server_info=${line#* }
}

# proxy NAME DECODE UPSTREAM_PORT: sets $proxy_pid, $proxy_port, $control_port.
proxy() {
  n=$((n + 1))
  /usr/bin/python3 recorder.py proxy --upstream "127.0.0.1:$3" --out "$work/$1.jsonl" \
    --decode "$2" --ready "$work/proxy.$n" >"$work/proxy.$n.log" 2>&1 &
  proxy_pid=$!
  pids+=("$proxy_pid")
  local line
  line=$(wait_ready "$work/proxy.$n" "$proxy_pid" "the recording proxy")
  read -r proxy_port control_port <<<"$line"
}

note() {  # note [--id ID] TEXT
  /usr/bin/python3 recorder.py note --control "$control_port" "$@" >/dev/null
}

# finish NAME: ends the proxy, stops the server, moves NAME.jsonl to $out, writes NAME.txt.
finish() {
  /usr/bin/python3 recorder.py end --control "$control_port" >/dev/null
  wait "$proxy_pid" || die "the proxy for $1 failed: $(tail -5 "$work/proxy.$n.log")"
  [[ -n "${server_pid:-}" ]] && stop "$server_pid"
  server_pid=
  mv "$work/$1.jsonl" "$out/$1.jsonl"
  /usr/bin/python3 recorder.py decode "$out/$1.jsonl" >"$out/$1.txt"
  printf '%s: %s: %s records\n' "$prog" "$1" "$(wc -l <"$out/$1.jsonl")"
}

# run LOG TIMEOUT COMMAND...: one driver, in the foreground, bounded in time.
run() {
  local log=$1 limit=$2
  shift 2
  if ! timeout -s KILL "$limit" "$@" >"$work/$log.log" 2>&1; then
    tail -30 "$work/$log.log" >&2
    kill -USR1 "$proxy_pid" 2>/dev/null && sleep 0.5  # the proxy's stacks, into its log
    die "$log failed (log above)"
  fi
}

# ops NAME DECODE PYTHON...: the ops (or --short) driver against a server of the
# same version.
ops() {
  local name=$1 decode=$2
  shift 2
  # shellcheck disable=SC2053  # $only is a pattern
  [[ $name == $only ]] || return 0
  server "$@"
  proxy "$name" "$decode" "$server_port"
  note --id server "SERVER: $server_info TCPStore server"
  local extra=()
  [[ $short == 1 ]] && extra=(--short)
  run "$name" 300 "$@" drive_ops.py "$proxy_port" "$control_port" "${extra[@]}"
  finish "$name"
}

# gloo NAME hosted|agent DECODE PYTHON...: a 3-rank gloo job; with `agent` every rank is a client
# of an external store, with `hosted` rank 0 hosts it and ranks 1 and 2 reach it through
# the proxy.
gloo() {
  local name=$1 mode=$2 decode=$3 rank rank_port upstream
  shift 3
  # shellcheck disable=SC2053  # $only is a pattern
  [[ $name == $only ]] || return 0
  local env=(MASTER_ADDR=127.0.0.1 WORLD_SIZE=3 USE_LIBUV=0 TORCHELASTIC_RESTART_COUNT=0
    GLOO_SOCKET_IFNAME=lo)
  if [[ $mode == agent ]]; then
    server "$@"
    upstream=$server_port
    env+=(TORCHELASTIC_USE_AGENT_STORE=True)
  else
    server_pid=
    upstream=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    env+=(TORCHELASTIC_USE_AGENT_STORE=False)
  fi
  proxy "$name" "$decode" "$upstream"
  if [[ $mode == agent ]]; then
    note --id server "SERVER: $server_info TCPStore server; 3 gloo ranks, every one a client (TORCHELASTIC_USE_AGENT_STORE=True)"
  else
    note --id server "SERVER: rank 0's own TCPStore server; ranks 1 and 2 reach it through the proxy, rank 0 directly (not recorded)"
  fi
  local ranks=()
  for rank in 0 1 2; do
    rank_port=$proxy_port
    [[ $mode == hosted && $rank == 0 ]] && rank_port=$upstream
    env "${env[@]}" RANK="$rank" MASTER_PORT="$rank_port" timeout -s KILL 120 "$@" drive_gloo.py \
      >"$work/$name.rank$rank.log" 2>&1 &
    ranks+=($!)
    pids+=($!)
    # Rank 0 first: in the hosted job its server must listen before the others connect.
    [[ $rank == 0 ]] && sleep 1
  done
  for rank in 0 1 2; do
    wait "${ranks[$rank]}" ||
      { tail -20 "$work/$name.rank$rank.log" >&2; die "$name: rank $rank failed (log above)"; }
  done
  finish "$name"
}

# cross NAME DECODE SERVER_PYTHON... -- CLIENT_PYTHON...
cross() {
  local name=$1 decode=$2
  shift 2
  # shellcheck disable=SC2053  # $only is a pattern
  [[ $name == $only ]] || return 0
  local server_cmd=()
  while [[ $1 != -- ]]; do server_cmd+=("$1"); shift; done
  shift
  server "${server_cmd[@]}"
  proxy "$name" "$decode" "$server_port"
  note --id server "SERVER: $server_info TCPStore server"
  run "$name" 120 "$@" drive_cross.py "$proxy_port" "$control_port"
  finish "$name"
}

start=$SECONDS
if [[ $short == 1 ]]; then
  ops short-torch1.13 v1 "${py113[@]}"
  ops short-torch2.6 v2 "${py26[@]}"
else
  ops ops-torch1.13 v1 "${py113[@]}"
  ops ops-torch2.6 v2 "${py26[@]}"
  gloo gloo3-agent-store-torch1.13 agent v1 "${py113[@]}"
  gloo gloo3-rank0-hosted-torch1.13 hosted v1 "${py113[@]}"
  gloo gloo3-agent-store-torch2.6 agent v2 "${py26[@]}"
  gloo gloo3-rank0-hosted-torch2.6 hosted v2 "${py26[@]}"
  # Decoded in the client's dialect: what the client meant, which the server misread.
  cross cross-client2.6-server1.13 v2 "${py113[@]}" -- "${py26[@]}"
  cross cross-client1.13-server2.6 v1 "${py26[@]}" -- "${py113[@]}"
fi
printf '%s: done in %d s, traces in %s\n' "$prog" $((SECONDS - start)) "$out"
