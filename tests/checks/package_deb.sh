#!/usr/bin/env bash
# The Debian packages: build them with CPack, inspect them with dpkg-deb, stage a
# `cmake --install`, and install the .debs into a Debian bullseye root (glibc
# 2.31: older than the build machine) to run gculaunch from there.  The packaged
# and the `--strip`-installed executables must be stripped, with the build's build
# id; gculaunch-dbg (and `cmake --install --component dbg`) must hold the build's
# debug file at /usr/lib/debug/.build-id/, and it must resolve an address.
#
# The bullseye root is the cached one of scripts/make_test_root.sh (created on
# first use); it is used through an overlay in a private mount namespace, so
# the cache itself never changes.
set -euo pipefail
build=${GCULAUNCH_BUILD_DIR:?GCULAUNCH_BUILD_DIR is not set}
src=${GCULAUNCH_SOURCE_DIR:?GCULAUNCH_SOURCE_DIR is not set}
cache=${GCULAUNCH_CACHE_DIR:?GCULAUNCH_CACHE_DIR is not set}
bin=${GCULAUNCH_BIN:?GCULAUNCH_BIN is not set}

fail() { echo "package_deb: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf --one-file-system "$work"' EXIT

version=$("$bin" --version | awk '{print $2}')
[[ -n "$version" ]] || fail "gculaunch --version printed no version"

# ---- build the package ----
if ! (cd "$build" && cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log" >&2
  fail "cpack failed"
fi
deb=$work/out/gculaunch_${version}_amd64.deb
dbg_deb=$work/out/gculaunch-dbg_${version}_amd64.deb
[[ -f "$deb" && -f "$dbg_deb" ]] || fail "expected $deb and $dbg_deb; cpack made: $(ls "$work/out")"

# ---- the build's debug file ----
build_id() { readelf -n "$1" | sed -n 's/^ *Build ID: \([0-9a-f]*\)$/\1/p'; }
id=$(build_id "$bin")
[[ $id =~ ^[0-9a-f]{40}$ ]] || fail "$bin has no sha1 build id: '$id'"
[[ $(build_id "$bin.debug") == "$id" ]] || fail "$bin.debug is missing or not of $bin's build id $id"
# stripped PATH: no symbol table, no DWARF, but the build id and a debuglink to gculaunch.debug
# whose CRC is the build's debug file's.
stripped() {
  local sections
  sections=$(readelf -SW "$1")
  ! grep -qE '\] \.(symtab|debug_[a-z_]+) ' <<<"$sections" || fail "$2 is not stripped: $sections"
  [[ $(build_id "$1") == "$id" ]] || fail "$2's build id $(build_id "$1") is not the build's $id"
  objcopy --dump-section .gnu_debuglink="$work/debuglink" "$1" "$work/dumped" 2>/dev/null ||
    fail "$2 has no .gnu_debuglink"
  rm -f "$work/dumped"
  python3 - "$work/debuglink" "$bin.debug" <<'PY' || fail "$2's debuglink does not name $bin.debug"
import struct, sys, zlib
link = open(sys.argv[1], "rb").read()
name = link[:link.index(b"\0")]
crc = struct.unpack("<I", link[-4:])[0]
assert name == b"gculaunch.debug", name
assert crc == zlib.crc32(open(sys.argv[2], "rb").read()), "CRC"
PY
}
# resolves DEBUG_FILE: addr2line finds main's file and line from main's address alone.
resolves() {
  local addr where
  addr=$(nm "$1" | awk '$2 == "T" && $3 == "main" { print $1 }')
  [[ -n "$addr" ]] || fail "$1 has no symbol main"
  where=$(addr2line -f -e "$1" "0x$addr")
  grep -qx 'main' <<<"$where" && grep -q 'main\.cc:[0-9]' <<<"$where" ||
    fail "addr2line with $1 did not resolve main at 0x$addr: $where"
}
resolves "$bin.debug"

# ---- contents ----
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/contents"
expected=(
  /usr/bin/gculaunch
  /usr/share/gculaunch/devices/enflame-gcu.yaml
  /usr/share/gculaunch/devices/nvidia-cuda.yaml
  /usr/share/gculaunch/devices/cpu.yaml
  /usr/share/gculaunch/devices/README.md
  /usr/share/gculaunch/examples/t20-8card.yaml
  /usr/share/gculaunch/examples/t20-2node-16card.yaml
  /usr/share/man/man1/gculaunch.1.gz
  /usr/share/bash-completion/completions/gculaunch
  /usr/share/doc/gculaunch/command-line.md
  /usr/share/doc/gculaunch/troubleshooting.md
  /etc/gculaunch/devices/README
)
for path in "${expected[@]}"; do
  grep -qxF "$path" "$work/contents" || fail "$path is not in the package: $(cat "$work/contents")"
done
for profile in "$src"/configs/devices/*.yaml; do
  grep -qxF "/usr/share/gculaunch/devices/${profile##*/}" "$work/contents" ||
    fail "device profile ${profile##*/} is not in the package"
done
grep -qxF /usr/share/gculaunch/scripts/start_multinode_platform.sh "$work/contents" ||
  fail "packaging/start_multinode_platform.sh is not in the package"
unexpected=$(grep -vE '^/(usr/(bin|share/(gculaunch|man|bash-completion|doc))|etc/gculaunch)(/|$)|^/(usr|usr/share|etc)?/?$' "$work/contents" || true)
[[ -z "$unexpected" ]] || fail "unexpected paths in the package: $unexpected"

[[ $(dpkg-deb -f "$deb" Package) == gculaunch ]] || fail "Package field"
[[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "Version field"
[[ $(dpkg-deb -f "$deb" Architecture) == amd64 ]] || fail "Architecture field"
[[ -z $(dpkg-deb -f "$deb" Depends) ]] || fail "the package has dependencies: $(dpkg-deb -f "$deb" Depends)"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qxF /etc/gculaunch/devices/README ||
  fail "/etc/gculaunch/devices/README is not a conffile"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/gculaunch >"$work/gculaunch.packaged"
readelf -d "$work/gculaunch.packaged" 2>&1 | grep -q 'There is no dynamic section' ||
  fail "the packaged executable is not static"
stripped "$work/gculaunch.packaged" "the packaged executable"

# ---- the debug package ----
dbg_path=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
dbg_files=$(dpkg-deb -c "$dbg_deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./|/|')
[[ $dbg_files == "$dbg_path" ]] || fail "gculaunch-dbg should hold only $dbg_path: $dbg_files"
[[ $(dpkg-deb -f "$dbg_deb" Depends) == "gculaunch (= $version)" ]] ||
  fail "gculaunch-dbg's Depends: $(dpkg-deb -f "$dbg_deb" Depends)"
dpkg-deb --fsys-tarfile "$dbg_deb" | tar -xO ".$dbg_path" >"$work/gculaunch.debug"
cmp -s "$work/gculaunch.debug" "$bin.debug" || fail "gculaunch-dbg's file is not $bin.debug"
resolves "$work/gculaunch.debug"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/man/man1/gculaunch.1.gz | gzip -dc |
  grep -q '^\.TH GCULAUNCH 1' || fail "the man page is not a gzipped roff page"

# ---- cmake --install, staged ----
DESTDIR=$work/stage cmake --install "$build" --prefix /usr/local >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }
for path in /usr/local/bin/gculaunch /usr/local/share/gculaunch/devices/enflame-gcu.yaml \
            /usr/local/share/man/man1/gculaunch.1.gz /etc/gculaunch/devices/README; do
  [[ -e "$work/stage$path" ]] || fail "cmake --install did not install $path"
done
[[ ! -e "$work/stage/usr/local/lib" ]] || fail "a plain cmake --install installed the debug file"
DESTDIR=$work/strip cmake --install "$build" --prefix /usr/local --strip >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install --strip failed"; }
stripped "$work/strip/usr/local/bin/gculaunch" "the executable of cmake --install --strip"
DESTDIR=$work/dbg cmake --install "$build" --prefix /usr/local --component dbg >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install --component dbg failed"; }
# Below the prefix: /usr/local/lib/debug/... (the package's prefix is /usr).
[[ $(cd "$work/dbg" && find . -type f) == "./usr/local${dbg_path#/usr}" ]] ||
  fail "cmake --install --component dbg installed: $(cd "$work/dbg" && find . -type f)"

# ---- install into Debian bullseye and run it there ----
root=$(bash "$src/scripts/make_test_root.sh" bullseye "$cache/bullseye-root" python3-minimal)
mkdir -p "$work/upper" "$work/ovl-work" "$work/merged"
cp "$deb" "$work/package.deb"
cp "$dbg_deb" "$work/package-dbg.deb"
cat >"$work/in-root.sh" <<'INNER'
set -euo pipefail
work=$1 root=$2 dbg_path=$3
mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/ovl-work" "$work/merged"
m=$work/merged
cp "$work/package.deb" "$m/tmp/gculaunch.deb"
cp "$work/package-dbg.deb" "$m/tmp/gculaunch-dbg.deb"
echo "== debian $(cat "$m/etc/debian_version")"
chroot "$m" dpkg -i /tmp/gculaunch.deb /tmp/gculaunch-dbg.deb
[[ -f "$m$dbg_path" ]] && echo "debug file installed"
echo "== version"
chroot "$m" /usr/bin/gculaunch --version
echo "== site profile"
cat >"$m/etc/gculaunch/devices/site.yaml" <<'YAML'
name: site-cpu
aliases: [site]
backend: gloo
YAML
set +e
chroot "$m" /usr/bin/gculaunch check --device site --python /usr/bin/python3 --standalone --format json
echo "== check exit $?"
set -e
echo "== remove"
chroot "$m" dpkg -r gculaunch-dbg gculaunch
[[ ! -e "$m/usr/bin/gculaunch" ]] && echo "binary removed"
[[ ! -e "$m$dbg_path" ]] && echo "debug file removed"
[[ -e "$m/etc/gculaunch/devices/README" ]] && echo "conffile kept"
INNER
if ! unshare --mount --propagation private -- bash "$work/in-root.sh" "$work" "$root" "$dbg_path" \
    >"$work/root.log" 2>&1; then
  cat "$work/root.log" >&2
  fail "installing into the bullseye root failed"
fi
log=$(cat "$work/root.log")
grep -qx "== debian 11\..*" <<<"$log" || fail "not a bullseye root: $log"
grep -qx "gculaunch $version" <<<"$log" || fail "gculaunch --version did not run in bullseye: $log"
grep -q '"device": "site-cpu"' <<<"$log" || fail "the /etc profile was not used: $log"
grep -q '"evidence": "/usr/bin/python3 (--python)"' <<<"$log" || fail "no interpreter check: $log"
grep -qx "== check exit 1" <<<"$log" || fail "check should fail (no torch in bullseye): $log"
grep -q "import torch failed" <<<"$log" || fail "the probe did not run in bullseye: $log"
grep -qx "binary removed" <<<"$log" || fail "dpkg -r left the binary: $log"
grep -qx "debug file installed" <<<"$log" || fail "gculaunch-dbg did not install $dbg_path: $log"
grep -qx "debug file removed" <<<"$log" || fail "dpkg -r left $dbg_path: $log"
grep -qx "conffile kept" <<<"$log" || fail "dpkg -r removed the conffile: $log"
[[ ! -e "$root/usr/bin/gculaunch" ]] || fail "the cached bullseye root was changed"
echo "package_deb: ok ($deb, installed and run on Debian $(cat "$root/etc/debian_version"))"
