#!/usr/bin/env bash
# The gculaunch executable must start inside old training images (glibc 2.27,
# Ubuntu 18.04 era): it must need no shared library at all (fully static) or,
# failing that, only the C library with no symbol version above GLIBC_2.27.
set -euo pipefail
bin=${GCULAUNCH_BIN:?GCULAUNCH_BIN is not set}
max_glibc=2.27

fail() { echo "static_binary: FAIL: $*" >&2; exit 1; }

[[ -x "$bin" ]] || fail "$bin is not executable"
dyn=$(readelf -d "$bin" 2>&1 || true)
if grep -q 'There is no dynamic section' <<<"$dyn"; then
  readelf -l "$bin" | grep -q 'INTERP' && fail "$bin has a program interpreter but no dynamic section"
  echo "static_binary: $bin is fully static ($(stat -c %s "$bin") bytes)"
else
  needed=$(grep -oP 'Shared library: \[\K[^]]+' <<<"$dyn" || true)
  for lib in $needed; do
    case "$lib" in
      libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-x86-64.so.2) ;;
      *) fail "$bin needs the shared library $lib (only the C library is allowed)";;
    esac
  done
  newest=$(objdump -T "$bin" | grep -oP 'GLIBC_\K[0-9.]+' | sort -V | tail -n 1)
  if [[ -n "$newest" ]] && [[ "$(printf '%s\n%s\n' "$newest" "$max_glibc" | sort -V | tail -n 1)" != "$max_glibc" ]]; then
    fail "$bin needs GLIBC_$newest, newer than $max_glibc: $(objdump -T "$bin" | grep "GLIBC_$newest" | head -3)"
  fi
  echo "static_binary: $bin needs only the C library, newest symbol GLIBC_${newest:-none}"
fi
# The check itself must be able to fail: a dynamic build of a tiny program
# that uses a 2.34 symbol has to be rejected by the same logic.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stdio.h>\nint main(void){puts("x");return 0;}\n' >"$probe/p.c"
gcc -o "$probe/p" "$probe/p.c"
readelf -d "$probe/p" | grep -q 'There is no dynamic section' && fail "self-check: a dynamic probe looked static"
newest=$(objdump -T "$probe/p" | grep -oP 'GLIBC_\K[0-9.]+' | sort -V | tail -n 1)
[[ "$(printf '%s\n%s\n' "$newest" "$max_glibc" | sort -V | tail -n 1)" != "$max_glibc" ]] ||
  fail "self-check: the probe's GLIBC_$newest was not recognised as newer than $max_glibc"
echo "static_binary: ok"
