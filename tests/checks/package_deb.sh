#!/usr/bin/env bash
# The Debian package: build it with CPack, inspect it with dpkg-deb, stage a
# `cmake --install`, and install the .deb into a Debian bullseye root (glibc
# 2.31: older than the build machine) to run gculaunch from there.
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
[[ -f "$deb" ]] || fail "expected $deb; cpack made: $(ls "$work/out")"

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
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/man/man1/gculaunch.1.gz | gzip -dc |
  grep -q '^\.TH GCULAUNCH 1' || fail "the man page is not a gzipped roff page"

# ---- cmake --install, staged ----
DESTDIR=$work/stage cmake --install "$build" --prefix /usr/local >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }
for path in /usr/local/bin/gculaunch /usr/local/share/gculaunch/devices/enflame-gcu.yaml \
            /usr/local/share/man/man1/gculaunch.1.gz /etc/gculaunch/devices/README; do
  [[ -e "$work/stage$path" ]] || fail "cmake --install did not install $path"
done

# ---- install into Debian bullseye and run it there ----
root=$(bash "$src/scripts/make_test_root.sh" bullseye "$cache/bullseye-root" python3-minimal)
mkdir -p "$work/upper" "$work/ovl-work" "$work/merged"
cp "$deb" "$work/package.deb"
cat >"$work/in-root.sh" <<'INNER'
set -euo pipefail
work=$1 root=$2
mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/ovl-work" "$work/merged"
m=$work/merged
cp "$work/package.deb" "$m/tmp/gculaunch.deb"
echo "== debian $(cat "$m/etc/debian_version")"
chroot "$m" dpkg -i /tmp/gculaunch.deb
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
chroot "$m" dpkg -r gculaunch
[[ ! -e "$m/usr/bin/gculaunch" ]] && echo "binary removed"
[[ -e "$m/etc/gculaunch/devices/README" ]] && echo "conffile kept"
INNER
if ! unshare --mount --propagation private -- bash "$work/in-root.sh" "$work" "$root" \
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
grep -qx "conffile kept" <<<"$log" || fail "dpkg -r removed the conffile: $log"
[[ ! -e "$root/usr/bin/gculaunch" ]] || fail "the cached bullseye root was changed"
echo "package_deb: ok ($deb, installed and run on Debian $(cat "$root/etc/debian_version"))"
