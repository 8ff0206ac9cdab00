#!/usr/bin/env bash
# The etcd client's TLS in an old training image: the fully static gculaunch_etcd_probe (the
# etcd client with OpenSSL linked in; tests/support/helpers/etcd_probe.cc) runs inside the
# cached Debian bullseye root (glibc 2.31, no openssl.cnf, no CA store) against an etcd serving
# https:// on loopback with a CA this check makes with Debian's openssl. It must verify the
# server with the CA file alone, ignore an OpenSSL configuration that would break a normal
# OpenSSL start, and refuse the server without the CA (the check can fail).
set -euo pipefail
probe=${GCULAUNCH_ETCD_PROBE:?GCULAUNCH_ETCD_PROBE is not set}
src=${GCULAUNCH_SOURCE_DIR:?GCULAUNCH_SOURCE_DIR is not set}
cache=${GCULAUNCH_CACHE_DIR:?GCULAUNCH_CACHE_DIR is not set}

fail() { echo "etcd_tls_oldroot: FAIL: $*" >&2; exit 1; }

[[ -x "$probe" ]] || fail "$probe is not executable (build the gculaunch_etcd_probe target)"
readelf -d "$probe" 2>&1 | grep -q 'There is no dynamic section' || fail "$probe is not static"
command -v etcd >/dev/null && command -v openssl >/dev/null ||
  fail "etcd or openssl is missing: run scripts/bootstrap.sh as root"

root=$("$src/scripts/make_test_root.sh" bullseye "$cache/bullseye-root" python3-minimal | tail -n 1)
[[ -f "$root/.gculaunch-root-ok" ]] || fail "no bullseye root at $root"

work=$(mktemp -d "$root/tmp/gl-tls-XXXXXX")
inner=${work#"$root"}
etcd_pid=
cleanup() {
  if [[ -n "$etcd_pid" ]]; then
    kill -TERM "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  rm -rf --one-file-system -- "$work"
}
trap cleanup EXIT
install -m 755 "$probe" "$work/probe"

# The test CA, a server certificate it signed for IP 127.0.0.1, and a second CA.
(
  cd "$work"
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
  for ca in ca other-ca; do
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $ca.key
    openssl req -x509 -new -key $ca.key -out $ca.pem -days 2 -subj "/CN=$ca"
  done
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key
  openssl req -new -key server.key -out server.csr -subj /CN=etcd-server
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile server.ext -out server.pem
) >"$work/openssl.log" 2>&1 || fail "openssl could not make the test CA: $(cat "$work/openssl.log")"

# An OpenSSL configuration that stops a normal OpenSSL start (a provider module that does not
# exist, with diagnostics on): the client must not read it.
cat >"$work/broken.cnf" <<'EOF'
config_diagnostics = 1
openssl_conf = init
[init]
providers = providers
[providers]
missing = missing
[missing]
module = /nonexistent/missing-provider.so
activate = 1
EOF

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
client=$(free_port)
peer=$(free_port)
metrics=$(free_port)
etcd --name tls --data-dir "$work/etcd-data" \
  --listen-client-urls "https://127.0.0.1:$client" --advertise-client-urls "https://127.0.0.1:$client" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "tls=http://127.0.0.1:$peer" --listen-metrics-urls "http://127.0.0.1:$metrics" \
  --cert-file "$work/server.pem" --key-file "$work/server.key" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
healthy=
for _ in $(seq 150); do
  if python3 - "$metrics" 2>/dev/null <<'PY'; then healthy=1; break; fi
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=1).read()
sys.exit(0 if b'"health":"true"' in body else 1)
PY
  kill -0 "$etcd_pid" 2>/dev/null || fail "etcd exited: $(cat "$work/etcd.log")"
  sleep 0.1
done
[[ -n "$healthy" ]] || fail "etcd did not become healthy within 15 s: $(tail -5 "$work/etcd.log")"

enter_root='root=$1; shift
  mount --rbind /proc "$root/proc" && mount --rbind /dev "$root/dev" || exit 125
  exec chroot "$root" "$@"'
in_root() {
  unshare --mount --propagation private -- bash -c "$enter_root" in_root "$root" "$@"
}
endpoint="https://127.0.0.1:$client"

[[ -e "$root/usr/lib/ssl/openssl.cnf" ]] && fail "the root has an openssl.cnf: the check expects none"
out=$(in_root /usr/bin/env -i "$inner/probe" "$endpoint" "$inner/ca.pem") ||
  fail "with the CA file, in the old root: $out"
[[ "$out" == "probe: ok" ]] || fail "with the CA file: $out"

out=$(in_root /usr/bin/env -i OPENSSL_CONF="$inner/broken.cnf" "$inner/probe" "$endpoint" \
  "$inner/ca.pem") || fail "with a broken OPENSSL_CONF, the client read it: $out"

# The self-checks: without the CA (the root has no CA store) and with another CA, refused.
if out=$(in_root /usr/bin/env -i "$inner/probe" "$endpoint"); then
  fail "without a CA file the server was trusted: $out"
fi
grep -q 'TLS handshake failed: certificate verify failed' <<<"$out" || fail "without a CA file: $out"
if out=$(in_root /usr/bin/env -i "$inner/probe" "$endpoint" "$inner/other-ca.pem"); then
  fail "a CA that did not sign the server was accepted: $out"
fi
grep -q 'unable to get local issuer certificate (certificate /CN=etcd-server issued by /CN=ca)' \
  <<<"$out" || fail "with another CA: $out"

echo "etcd_tls_oldroot: ok ($(stat -c %s "$probe") bytes, glibc of the root: $(in_root /usr/bin/ldd --version | head -n 1))"
