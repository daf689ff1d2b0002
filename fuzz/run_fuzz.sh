#!/bin/sh
# Builds the preprocess fuzz targets with clang (libFuzzer + ASan + UBSan) and runs each for the
# given number of seconds (default 600), in parallel jobs limited to JOBS (default 1).
# usage: fuzz/run_fuzz.sh [SECONDS] [TARGET...]     (targets: readers tokenizer stemmers stream vectors)
# Results: build-fuzz/fuzz-<target>.log, crashes as build-fuzz/crash-*; exit 1 when any target failed.
set -eu
SECS=${1:-600}
[ $# -gt 0 ] && shift
TARGETS=${*:-"readers tokenizer stemmers stream vectors"}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build-fuzz}
CC=clang cmake -S "$SRC" -B "$BUILD" -DDOCMINE_FUZZ=ON -DDOCMINE_CUDA=OFF -DDOCMINE_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
for t in $TARGETS; do cmake --build "$BUILD" -j2 --target "fuzz_$t" >/dev/null; done
fail=0
for t in $TARGETS; do
  mkdir -p "$BUILD/corpus-$t"
  seeds="$SRC/fuzz/corpus/$t"
  [ -d "$seeds" ] || seeds=
  echo "fuzz_$t: ${SECS}s"
  if (cd "$BUILD" && ./fuzz/fuzz_$t -max_total_time="$SECS" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
        -artifact_prefix="$BUILD/crash-$t-" "$BUILD/corpus-$t" $seeds >"$BUILD/fuzz-$t.log" 2>&1); then
    echo "  ok: $(grep -E '^#[0-9]+.*(DONE|pulse)' "$BUILD/fuzz-$t.log" | tail -1)"
  else
    echo "  FAILED: see $BUILD/fuzz-$t.log"; fail=1
  fi
done
exit $fail
