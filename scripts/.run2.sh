#!/usr/bin/env bash
out=$1; set -uo pipefail
mkdir -p /tmp/r && cd "$(dirname "$0")/.."
t0=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/r/conf.log 2>&1 && cmake --build build-gpu -j 64 --target bench_flock test_flock_gpu test_flock_mpi > /tmp/r/build.log 2>&1 || { tail -40 /tmp/r/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s, warnings $(grep -c warning /tmp/r/build.log)"
export DOCMINE_TUNE=off
(cd build-gpu && ctest -R "flock_gpu|flock_mpi" -j 3 --output-on-failure > /tmp/r/ctest.log 2>&1); grep -E "Test #|tests passed|Failed" /tmp/r/ctest.log
(DOCMINE_FLOCK_TRACE=/tmp/r/trace bench/flock/weak_scaling.sh build-gpu /tmp/r/weak 1000000 200 "1 2 4" > /tmp/r/weak.log 2>&1) &
wp=$!
wait $wp
tail -5 /tmp/r/weak.log
for t in memcheck racecheck; do
  DOCMINE_SANITIZER=$t timeout 200 compute-sanitizer --tool $t --report-api-errors no --error-exitcode 99 build-gpu/tests/flock/test_flock_gpu > /tmp/r/san-$t.log 2>&1; echo "sanitizer $t np1 rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests " /tmp/r/san-$t.log | head -3
done
DOCMINE_SANITIZER=memcheck timeout 200 mpiexec -n 2 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/flock/test_flock_gpu > /tmp/r/san-memcheck-np2.log 2>&1; echo "sanitizer memcheck np2 rc=$?"; grep -E "ERROR SUMMARY|tests " /tmp/r/san-memcheck-np2.log | head -3
tar czf $out/r2.tgz -C /tmp/r .
