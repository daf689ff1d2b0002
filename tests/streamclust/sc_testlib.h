/* Helpers shared by the streamclust tests: the allocation sweeps' run (testutil.h's dm_test_sweep)
 * of a whole dm_sc_run on the options o over MPI_COMM_WORLD. Reference: none (test support). */
#ifndef DM_SC_TESTLIB_H
#define DM_SC_TESTLIB_H

#include "streamclust/streamclust.h"

typedef struct sc_sweep {
    dm_sc_options o;
    dm_sc_result r0, r; /* the reference (the counting run's result) and a run's */
} sc_sweep;
/* dm_test_sweep's run (dm_sc_run into r) and release (r freed) */
int sc_sweep_run(void *sweep);
void sc_sweep_release(void *sweep, int rc);
/* The run after the sweep (nothing is left broken): DM_OK with r0's k, total cost and labels
 * (CUnit assertions); r0 is freed. */
void sc_sweep_check_after(sc_sweep *w);

#endif
