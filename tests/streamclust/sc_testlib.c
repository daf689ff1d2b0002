/* Helpers shared by the streamclust tests (sc_testlib.h). Reference: none. */
#include "sc_testlib.h"

#include <CUnit/CUnit.h>
#include <string.h>

#include "common/status.h"

int sc_sweep_run(void *sweep)
{
    sc_sweep *w = sweep;
    return dm_sc_run(&w->r, &w->o, NULL);
}

void sc_sweep_release(void *sweep, int rc)
{
    (void)rc;
    dm_sc_result_free(&((sc_sweep *)sweep)->r);
}

void sc_sweep_check_after(sc_sweep *w)
{
    int rc = sc_sweep_run(w);
    CU_ASSERT_EQUAL(rc, DM_OK);
    if (rc == DM_OK) {
        CU_ASSERT_EQUAL(w->r.k, w->r0.k);
        CU_ASSERT_EQUAL(w->r.total_cost, w->r0.total_cost);
        CU_ASSERT_EQUAL(memcmp(w->r.labels, w->r0.labels, (size_t)w->r0.n_local * sizeof(int)), 0);
    }
    dm_sc_result_free(&w->r);
    dm_sc_result_free(&w->r0);
}
