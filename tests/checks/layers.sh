#!/usr/bin/env bash
# checks.layers: the include rules of cmake/layers.cmake hold, and their check can fail.
#
# The build runs cmake/check_includes.cmake for every library target; this check proves
# that checker from the outside:
#   1. every .h/.cc of base/, rendezvous/, etcd/, launcher/, tests/ and bench/ passes it;
#   2. in a throw-away tree laid out like the repository, each wrong-way include fails
#      it with a message naming the file, the line and the rule (what the layer may
#      include, as cmake/layers.cmake lists it), while a file with allowed includes passes;
#   3. a quoted include that names no file of the project fails it, and so do a file
#      outside every layer and an include that belongs to no group.
set -euo pipefail

die() {
  echo "layers: error: $*" >&2
  exit 1
}

src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
checker=$src/cmake/check_includes.cmake
[[ -f $checker && -f $src/cmake/layers.cmake ]] ||
  die "no cmake/check_includes.cmake or cmake/layers.cmake under $src (set GCULAUNCH_SOURCE_DIR to the repository)"
command -v cmake >/dev/null || die "cmake not found (install it with scripts/bootstrap.sh)"

work=$(mktemp -d "${TMPDIR:-/tmp}/gculaunch-layers.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# run_check ROOT FILE...: runs the checker over the FILEs (absolute paths) with ROOT as the
# source root.  Sets `status` and `out`, the output with every run of whitespace made one
# space (CMake wraps long error messages).
run_check() {
  local root=$1
  shift
  (IFS=';' && printf '%s' "$*" >"$work/list")
  status=0
  out=$(cmake -DROOT="$root" -DLIST="$work/list" -P "$checker" 2>&1) || status=$?
  out=$(tr -s ' \t\n' ' ' <<<"$out")
}

# allowed LAYER: what cmake/layers.cmake lets LAYER include, as the checker prints it.
cat >"$work/allowed.cmake" <<'EOF'
include("${SRC}/cmake/layers.cmake")
list(JOIN GCULAUNCH_LAYER_ALLOW_${LAYER} ", " text)
message("${text}")
EOF
allowed() {
  local text
  text=$(cmake -DSRC="$src" -DLAYER="$1" -P "$work/allowed.cmake" 2>&1)
  [[ -n $text ]] || die "cmake/layers.cmake lists nothing for layer '$1'"
  printf '%s' "$text"
}

# expect_failure WHAT FILE MESSAGE...: the checker fails on FILE (relative to the fake tree)
# and prints every MESSAGE.
expect_failure() {
  local what=$1 file=$2
  shift 2
  run_check "$tree" "$tree/$file"
  ((status != 0)) || die "$what: the check accepted $file (cmake/check_includes.cmake lets it through)"
  local message
  for message in "$@"; do
    [[ $out == *"$message"* ]] ||
      die "$what: the check of $file does not say \"$message\"; it said: $out"
  done
  echo "layers: ok: $what fails ($file)"
}

# ---- 1. the real tree ----
mapfile -t files < <(cd -- "$src" && find base rendezvous etcd launcher tests bench -type f \
  \( -name '*.h' -o -name '*.cc' \) | LC_ALL=C sort)
# Not `printf | grep -q`: grep leaves at the first match, and printf's SIGPIPE would then fail
# the pipeline under pipefail, now and then.
for dir in base rendezvous etcd launcher tests bench; do
  found=0
  for f in "${files[@]}"; do [[ $f == "$dir/"* ]] && { found=1 && break; }; done
  ((found)) || die "found no .h or .cc file under $src/$dir"
done
run_check "$src" "${files[@]/#/$src/}"
((status == 0)) || die "the tree breaks cmake/layers.cmake (fix the includes it names): $out"
echo "layers: ok: ${#files[@]} files of base/, rendezvous/, etcd/, launcher/, tests/ and bench/ pass"

# ---- 2. wrong-way includes in a throw-away tree ----
tree=$work/tree
# Copies of the real headers the includes below name: a quoted include must name a file.
for header in base/error.h rendezvous/server.h etcd/gateway.h launcher/frontend/cli.h \
  launcher/cluster/coordinator.h launcher/cluster/etcd/etcd_seat.h; do
  mkdir -p "$tree/$(dirname "$header")"
  cp -- "$src/$header" "$tree/$header"
done
put() {
  mkdir -p "$tree/$(dirname "$1")"
  cat >"$tree/$1"
}

put launcher/frontend/ok.cc <<'EOF'
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "launcher/frontend/cli.h"
EOF
put launcher/cluster/ok.cc <<'EOF'
#include <sys/types.h>

#include <boost/asio/post.hpp>

#include "launcher/cluster/coordinator.h"
#include "rendezvous/server.h"
EOF
put launcher/cluster/etcd/ok.cc <<'EOF'
// A backend's folder uses the rest of the cluster layer and its own client.
#include "etcd/gateway.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/etcd/etcd_seat.h"
EOF
run_check "$tree" "$tree/launcher/frontend/ok.cc" "$tree/launcher/cluster/ok.cc" \
  "$tree/launcher/cluster/etcd/ok.cc"
((status == 0)) || die "files with allowed includes fail the check: $out"
echo "layers: ok: files with allowed includes pass"

put launcher/frontend/x.cc <<'EOF'
// The front end is pure: no Asio, no Boost.Process.
#include <string>

#include "base/error.h"
#include <boost/asio.hpp>
#  include <boost/process/v2.hpp>
EOF
frontend=$(allowed frontend)
expect_failure "Asio and Boost.Process in launcher/frontend/" launcher/frontend/x.cc \
  "launcher/frontend/x.cc:5: layer 'frontend' may not include boost/asio.hpp (asio); it may include: $frontend" \
  "launcher/frontend/x.cc:6: layer 'frontend' may not include boost/process/v2.hpp (process); it may include: $frontend"

put rendezvous/y.cc <<'EOF'
#include "rendezvous/server.h"
#include "launcher/frontend/cli.h"
EOF
expect_failure "the launcher in rendezvous/" rendezvous/y.cc \
  "rendezvous/y.cc:2: layer 'rendezvous' may not include launcher/frontend/cli.h (frontend); it may include: $(allowed rendezvous)"

put rendezvous/store.cc <<'EOF'
#include <string>
#include <boost/asio/io_context.hpp>
EOF
expect_failure "Asio in the store (the codec layer)" rendezvous/store.cc \
  "rendezvous/store.cc:2: layer 'codec' may not include boost/asio/io_context.hpp (asio); it may include: $(allowed codec)"

put etcd/v.cc <<'EOF'
// The etcd client knows nothing of the TCPStore or the launcher, and logs nothing itself.
#include "etcd/gateway.h"
#include "rendezvous/server.h"
#include <spdlog/spdlog.h>
EOF
expect_failure "the TCPStore server and spdlog in etcd/" etcd/v.cc \
  "etcd/v.cc:3: layer 'etcd' may not include rendezvous/server.h (rendezvous); it may include: $(allowed etcd)" \
  "etcd/v.cc:4: layer 'etcd' may not include spdlog/spdlog.h (spdlog); it may include: $(allowed etcd)"

put base/z.h <<'EOF'
#pragma once

#include <vector>

#include "rendezvous/server.h"
EOF
expect_failure "rendezvous/ in base/" base/z.h \
  "base/z.h:5: layer 'base' may not include rendezvous/server.h (rendezvous); it may include: $(allowed base)"

put launcher/run/w.cc <<'EOF'
#include <boost/asio/post.hpp>
#include "launcher/cluster/coordinator.h"
EOF
expect_failure "launcher/cluster/ in launcher/run/" launcher/run/w.cc \
  "launcher/run/w.cc:2: layer 'run' may not include launcher/cluster/coordinator.h (cluster); it may include: $(allowed run)"

put launcher/cluster/t.cc <<'EOF'
// Outside its folder the cluster layer reaches a backend through the backends' table only.
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/etcd/etcd_seat.h"
#include "etcd/gateway.h"
EOF
expect_failure "a backend's folder and its client in the rest of launcher/cluster/" \
  launcher/cluster/t.cc \
  "launcher/cluster/t.cc:3: layer 'cluster' may not include launcher/cluster/etcd/etcd_seat.h (cluster_etcd); it may include: $(allowed cluster)" \
  "launcher/cluster/t.cc:4: layer 'cluster' may not include etcd/gateway.h (etcd); it may include: $(allowed cluster)"

# ---- 3. includes and files the matrix does not know ----
put launcher/run/v.cc <<'EOF'
#include <string>
#include "launcher/run/no_such_file.h"
EOF
expect_failure "a quoted include of a missing file" launcher/run/v.cc \
  "launcher/run/v.cc:2: #include \"launcher/run/no_such_file.h\" names no file of the project"

put base/u.h <<'EOF'
#pragma once
#include <QtCore/QString>
EOF
expect_failure "an include of no group" base/u.h \
  "base/u.h:2: #include QtCore/QString belongs to no group of cmake/layers.cmake"

put misc/q.cc <<'EOF'
#include <string>
EOF
expect_failure "a file outside every layer" misc/q.cc \
  "misc/q.cc: not inside any layer of cmake/layers.cmake"

echo "layers: all checks passed"
