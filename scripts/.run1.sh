#!/usr/bin/env bash
# session 5 run 1: lagged agreement + trace, flock weak scaling on 4 GPUs
out=$1; set -uo pipefail
mkdir -p /tmp/r && cd "$(dirname "$0")/.."
nvidia-smi -L; which nsys ncu 2>&1; ls /usr/local/cuda/bin | grep -i -E "nsys|ncu" 
t0=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/r/conf.log 2>&1 && cmake --build build-gpu -j 64 --target bench_flock test_flock_gpu test_flock_mpi > /tmp/r/build.log 2>&1 || { tail -40 /tmp/r/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s, warnings $(grep -c warning /tmp/r/build.log)"
(cd build-gpu && ctest -R "flock_gpu|flock_mpi" -j 2 --output-on-failure > /tmp/r/ctest.log 2>&1); tail -15 /tmp/r/ctest.log
DOCMINE_FLOCK_TRACE=/tmp/r/trace bench/flock/weak_scaling.sh build-gpu /tmp/r/weak 1000000 200 "1 2 4" > /tmp/r/weak.log 2>&1
grep -E "^(step|communication|  |run |weak)" /tmp/r/weak/flock_weak_4.txt; tail -5 /tmp/r/weak.log
tar czf $out/r1.tgz -C /tmp/r .
