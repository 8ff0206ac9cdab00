#!/usr/bin/env bash
# checks.fuzz_codec: builds the libFuzzer target over the TCPStore decoder and store
# (tests/fuzz) with clang in its own build tree ($GCULAUNCH_BUILD_DIR/fuzz), seeds it with
# every connection of the golden traces (tests/traces/*.jsonl), and runs it for a bounded
# time.  Fails on any crash, sanitizer report, leak or violated check (libFuzzer exits
# non-zero and saves the input).
#
#   FUZZ_SECONDS=20 (default) bounds the run; the whole check takes well under 2 minutes.
set -euo pipefail
src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${GCULAUNCH_BUILD_DIR:-$src/build}/fuzz
seconds=${FUZZ_SECONDS:-20}

die() { echo "fuzz_codec: $*" >&2; exit 1; }
command -v clang++ >/dev/null || die "clang++ is missing (scripts/bootstrap.sh installs clang and libclang-rt-14-dev)"

cmake -S "$src" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGCULAUNCH_FUZZ=ON -DGCULAUNCH_STATIC=OFF >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log" >&2; die "configuring the clang build failed"; }
cmake --build "$build" --target codec_fuzz -j "${JOBS:-2}" >"$build.build.log" 2>&1 \
  || { tail -50 "$build.build.log" >&2; die "building codec_fuzz failed"; }

# Seed corpus: each trace connection's client bytes, behind a 4-byte control header
# (default limits, auto dialect, no second connection, no attempt change, no cuts).
corpus=$build/corpus
rm -rf "$corpus" "$build/artifacts"
mkdir -p "$corpus" "$build/artifacts"
python3 - "$src/tests/traces" "$corpus" <<'PY'
import glob, json, os, sys
traces, out = sys.argv[1], sys.argv[2]
n = 0
for path in sorted(glob.glob(os.path.join(traces, "*.jsonl"))):
    conns = {}
    for line in open(path):
        e = json.loads(line)
        if e.get("kind") == "chunk" and e.get("dir") == "c2s":
            conns.setdefault(e["conn"], bytearray()).extend(bytes.fromhex(e["hex"]))
    for conn, data in conns.items():
        with open(os.path.join(out, "seed-%03d" % n), "wb") as f:
            f.write(bytes([0, 255, 0, 0]) + bytes(data))
        n += 1
if n < 40:
    sys.exit("fuzz_codec: only %d seeds from %s" % (n, traces))
print("fuzz_codec: %d seeds" % n)
PY

cd "$build"
./tests/fuzz/codec_fuzz -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=4096 -timeout=10 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$corpus" 2>"$build/fuzz.log" \
  || { tail -60 "$build/fuzz.log" >&2; die "codec_fuzz found a failure (inputs in $build/artifacts)"; }
grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$build/fuzz.log" | tail -2
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz.log")
[[ -n "$runs" && "$runs" -gt 1000 ]] || die "codec_fuzz ran only '${runs:-?}' inputs"
echo "fuzz_codec: ok, $runs inputs in ${seconds}s, no failure"
