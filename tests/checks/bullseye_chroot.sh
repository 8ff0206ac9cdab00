#!/usr/bin/env bash
# gculaunch must run inside old training images.  This check builds (once,
# cached) a Debian bullseye root (glibc 2.31, Python 3.9) with debootstrap and
# runs the built binary inside it: --version, a --dry-run, a real 2-process
# launch of a trivial Python worker, and the store resolving "localhost"
# (host-name lookup in the static binary reads the root's /etc/hosts).
set -euo pipefail
bin=${GCULAUNCH_BIN:?GCULAUNCH_BIN is not set}
src=${GCULAUNCH_SOURCE_DIR:?GCULAUNCH_SOURCE_DIR is not set}
cache=${GCULAUNCH_CACHE_DIR:?GCULAUNCH_CACHE_DIR is not set}

fail() { echo "bullseye_chroot: FAIL: $*" >&2; exit 1; }

root=$("$src/scripts/make_test_root.sh" bullseye "$cache/bullseye-root" python3-minimal | tail -n 1)
[[ -f "$root/.gculaunch-root-ok" ]] || fail "no bullseye root at $root"

# Each run gets its own work directory inside the root.
work=$(mktemp -d "$root/tmp/gl-XXXXXX")
inner=${work#"$root"}
trap 'rm -rf --one-file-system -- "$work"' EXIT
install -m 755 "$bin" "$work/gculaunch"
cat >"$work/worker.py" <<'PY'
import os, sys
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank%s.txt" % os.environ["RANK"])
with open(out, "w") as f:
    f.write("%s %s %s %s\n" % (os.environ["RANK"], os.environ["WORLD_SIZE"],
                               os.environ["LOCAL_RANK"], sys.version.split()[0]))
print("worker rank", os.environ["RANK"], "ok")
PY

# in_root CMD...: run CMD inside the root with /proc and /dev, in a private
# mount namespace (the mounts vanish with it).  unshare, bash and chroot each
# exec the next, so CMD ends up with the pid that started unshare.
enter_root='root=$1; shift
  mount --rbind /proc "$root/proc" && mount --rbind /dev "$root/dev" || exit 125
  exec chroot "$root" "$@"'
in_root() {
  unshare --mount --propagation private -- bash -c "$enter_root" in_root "$root" "$@"
}

glibc=$(in_root /usr/bin/ldd --version)
glibc=${glibc%%$'\n'*}
grep -q '2\.31' <<<"$glibc" || fail "the root's C library is not 2.31: $glibc"

out=$(in_root "$inner/gculaunch" --version) || fail "--version exited $?"
grep -q '^gculaunch ' <<<"$out" || fail "--version printed: $out"

json=$(in_root "$inner/gculaunch" --dry-run --format json --nproc-per-node 2 --device cpu \
  --master-port 29511 "$inner/worker.py") || fail "--dry-run exited $?"
python3 - "$json" <<'PY' || fail "dry-run JSON is wrong: $json"
import json, sys
d = json.loads(sys.argv[1])
assert d["nproc_per_node"] == 2 and d["world_size"] == 2, d
assert [r["env"]["RANK"] for r in d["ranks"]] == ["0", "1"], d["ranks"]
assert d["ranks"][0]["argv"][0] == "/usr/bin/python3", d["ranks"][0]["argv"]
PY

in_root env -i PATH=/usr/bin:/bin HOME=/root "$inner/gculaunch" --standalone \
  --nproc-per-node 2 --device cpu "$inner/worker.py" >"$work/launch.out" 2>&1 ||
  { cat "$work/launch.out" >&2; fail "the 2-process launch failed"; }
for r in 0 1; do
  line=$(cat "$work/rank$r.txt" 2>/dev/null) || fail "rank $r wrote nothing"
  read -r rank world local pyver <<<"$line"
  [[ "$rank" == "$r" && "$world" == 2 && "$local" == "$r" ]] || fail "rank $r saw: $line"
  [[ "$pyver" == 3.9.* ]] || fail "rank $r ran on Python $pyver, not the root's 3.9"
done
grep -q 'worker rank 1 ok' "$work/launch.out" || fail "rank output missing: $(cat "$work/launch.out")"

# Name resolution in the static binary: the store binds "localhost", which
# only the root's /etc/hosts can resolve.
# The exec makes $! the store's own pid, so that the TERM below reaches it.
(exec unshare --mount --propagation private -- bash -c "$enter_root" in_root "$root" \
  "$inner/gculaunch" store --host localhost --port 0) >"$work/store.out" 2>&1 &
store_pid=$!
for _ in $(seq 100); do
  grep -q 'listening on' "$work/store.out" && break
  sleep 0.05
done
kill -TERM "$store_pid" 2>/dev/null || true
store_status=0
wait "$store_pid" || store_status=$?
grep -qE '^listening on localhost:[0-9]+' "$work/store.out" ||
  fail "the store did not resolve localhost: $(cat "$work/store.out")"
[[ "$store_status" == 0 ]] ||
  fail "the store did not stop cleanly on SIGTERM (status $store_status): $(cat "$work/store.out")"

echo "bullseye_chroot: ok ($glibc)"
