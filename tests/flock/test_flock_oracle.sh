#!/usr/bin/env bash
# flock's dynamics against an independent pure-Python oracle (flock_oracle.py, written from
# DESIGN.md section 7, flock_model.h and flock.h): positions and velocities of the CPU backend
# after 1, 2, 5, 10 and 30 iterations (from the RNG's initial state and from crafted checkpoints:
# cell edges, the torus seam, coincident boids, identical and empty documents, slice edges on 2
# and 3 ranks, the smallest plane, one document), the pairs within r of the report, with the pair
# cache on and off; the separation softening as documented, a checkpoint velocity above the cap
# refused.
set -euo pipefail
dm=$1; mpiexec=$2
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
python3 "$here/flock_oracle.py" check "$dm" "$mpiexec" "$t"
