/* Neighbour-slice exchanges of the sliced-space decomposition (DESIGN.md section 7, "Sliced
 * space across ranks"): the non-blocking exchange with the two neighbour slices, the halo
 * messages (own boids within the margin of a slice edge, with their vectors) and the migration
 * of boids that left the slice. Used by both backends (the CUDA backend stages through host
 * memory). Reference: none beyond the design; tests/flock/test_flock_mpi.c checks that the result
 * does not depend on the number of ranks and that every document has exactly one owner. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/timer.h"
#include "flock/flock_impl.h"

/* Messages travel as 8-byte units so that counts fit an int up to 16 GiB per message. */
#define UNIT 8
static const uint64_t ERR_FLAG = UINT64_MAX;

int dm_flock_xchg_begin(dm_flock_xchg *x, MPI_Comm comm, const dm_flock_nbrs *nb, int tag,
                        const char *const *send, const uint64_t *send_size, int local_status)
{
    memset(x, 0, sizeof *x);
    x->comm = comm;
    x->tag = tag;
    x->nb = *nb;
    for (int k = 0; k < 2; k++) {
        x->hs_recv[k] = x->hs_send[k] = x->data_send[k] = x->data_recv[k] = MPI_REQUEST_NULL;
    }
    x->active = 1;
    int rc = local_status;
    for (int k = 0; k < nb->n; k++) {
        x->send_size[k] = local_status < 0 ? ERR_FLAG : send_size[k];
        x->send_buf[k] = send[k];
        if (MPI_Irecv(&x->recv_size[k], 1, MPI_UINT64_T, nb->rank[k], tag, comm, &x->hs_recv[k]) != MPI_SUCCESS ||
            MPI_Isend(&x->send_size[k], 1, MPI_UINT64_T, nb->rank[k], tag, comm, &x->hs_send[k]) != MPI_SUCCESS)
            return DM_ERR(DM_ERR_MPI, "flock: posting the exchange handshake failed");
        /* the data goes out at once: the receiver matches it once it knows the size */
        if (x->send_size[k] == ERR_FLAG || x->send_size[k] == 0) continue;
        DM_ASSERT(x->send_size[k] % UNIT == 0 && x->send_size[k] / UNIT <= (uint64_t)2147483647);
        if (MPI_Isend(send[k], (int)(x->send_size[k] / UNIT), MPI_UINT64_T, nb->rank[k], tag + 1, comm,
                      &x->data_send[k]) != MPI_SUCCESS)
            return DM_ERR(DM_ERR_MPI, "flock: MPI_Isend failed");
    }
    return rc;
}

/* Posts the data receive of neighbour k once its size arrived. */
static int post_recv(dm_flock_xchg *x, int k)
{
    x->posted[k] = 1;
    if (x->recv_size[k] == ERR_FLAG || x->recv_size[k] == 0) return DM_OK;
    if (x->recv_size[k] % UNIT || x->recv_size[k] / UNIT > (uint64_t)2147483647)
        return DM_ERR(DM_ERR_FORMAT, "flock: exchange size %llu not a multiple of 8 or too large",
                      (unsigned long long)x->recv_size[k]);
    x->recv_buf[k] = dm_malloc(x->recv_size[k]);
    /* the sender sends anyway: receiving into nothing is impossible, so fail the job */
    DM_ASSERT(x->recv_buf[k] != NULL || !"out of memory during a neighbour exchange");
    if (MPI_Irecv(x->recv_buf[k], (int)(x->recv_size[k] / UNIT), MPI_UINT64_T, x->nb.rank[k], x->tag + 1, x->comm,
                  &x->data_recv[k]) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "flock: MPI_Irecv failed");
    return DM_OK;
}

void dm_flock_xchg_progress(dm_flock_xchg *x)
{
    if (!x || !x->active) return;
    for (int k = 0; k < x->nb.n; k++) {
        int flag = 0;
        if (!x->size_known[k]) {
            MPI_Test(&x->hs_recv[k], &flag, MPI_STATUS_IGNORE);
            if (flag) {
                x->size_known[k] = 1;
                if (post_recv(x, k) != DM_OK) x->posted[k] = 0; /* end() reports it */
            }
        }
        if (x->data_recv[k] != MPI_REQUEST_NULL) MPI_Test(&x->data_recv[k], &flag, MPI_STATUS_IGNORE);
        if (x->data_send[k] != MPI_REQUEST_NULL) MPI_Test(&x->data_send[k], &flag, MPI_STATUS_IGNORE);
    }
}

int dm_flock_xchg_end(dm_flock_xchg *x, char **recv, uint64_t *recv_size)
{
    DM_ASSERT(x->active);
    int rc = DM_OK;
    for (int k = 0; k < x->nb.n; k++) {
        if (!x->size_known[k]) {
            if (MPI_Wait(&x->hs_recv[k], MPI_STATUS_IGNORE) != MPI_SUCCESS && rc == DM_OK)
                rc = DM_ERR(DM_ERR_MPI, "flock: exchange handshake failed");
            x->size_known[k] = 1;
        }
        if (!x->posted[k]) {
            int r = post_recv(x, k);
            if (rc == DM_OK) rc = r;
        }
    }
    x->active = 0;
    MPI_Request all[6];
    MPI_Status st[6];
    int na = 0;
    for (int k = 0; k < x->nb.n; k++) {
        all[na++] = x->hs_send[k];
        all[na++] = x->data_send[k];
        all[na++] = x->data_recv[k];
    }
    if (na && MPI_Waitall(na, all, st) != MPI_SUCCESS && rc == DM_OK)
        rc = DM_ERR(DM_ERR_MPI, "flock: exchange failed");
    for (int k = 0; k < x->nb.n; k++) {
        recv[k] = x->recv_buf[k];
        recv_size[k] = x->recv_size[k] == ERR_FLAG ? 0 : x->recv_size[k];
        if (x->recv_size[k] == ERR_FLAG && rc == DM_OK) {
            rc = DM_ERR(DM_ERR_MPI, "flock: neighbour rank %d failed", x->nb.rank[k]);
            dm_error_mark_remote();
        }
    }
    return rc;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int u64_sorted_has(const uint64_t *v, size_t n, uint64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == id;
}

/* Forgets what the neighbours hold (after a failed exchange: the next messages carry every
 * vector). */
static void halo_cache_reset(dm_flock_sim *s)
{
    s->halo_sent_n[0] = s->halo_sent_n[1] = 0;
}

/* Packs the own boids selected per neighbour (sel(i) & dir_mask) into one message each. The
 * vectors of the documents sent to that neighbour by the last halo message are left out (it holds
 * them in its halo store). halo: the documents of this message become the new "sent" list;
 * migration (after this iteration's halo exchange): a migrant was in the halo just sent unless it
 * moved further than the margin, so its vector usually stays home. */
static int pack_selected(dm_flock_sim *s, const uint8_t *dirs, char **send, uint64_t *size, uint64_t *count_out,
                         int halo)
{
    const dm_flock_store *o = &s->own;
    size_t nn = o->n ? o->n : 1;
    uint32_t *idx = dm_malloc(sizeof *idx * nn);
    uint8_t *with = dm_malloc(nn);
    if (!idx || !with) {
        dm_free(idx);
        dm_free(with);
        return DM_ERR(DM_ERR_NOMEM, "flock: out of memory packing a message");
    }
    int rc = DM_OK;
    for (int k = 0; k < s->nb.n && rc == DM_OK; k++) {
        size_t cnt = 0;
        uint64_t nnz = 0, nvec = 0;
        for (size_t i = 0; i < o->n; i++)
            if (dirs[i] & s->nb.dir_mask[k]) {
                int v = !u64_sorted_has(s->halo_sent_ids[k], s->halo_sent_n[k], o->id[i]);
                with[cnt] = (uint8_t)v;
                if (v) {
                    nnz += o->vlen[i];
                    nvec++;
                }
                idx[cnt++] = (uint32_t)i;
            }
        dm_flock_msg_layout l;
        dm_flock_msg_layout_of(&l, cnt, nnz);
        send[k] = dm_malloc(l.total);
        if (!send[k]) {
            rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a %zu-byte message", l.total);
            break;
        }
        dm_flock_msg_pack(send[k], o, idx, cnt, with);
        size[k] = l.total;
        if (count_out) *count_out += cnt;
        if (!halo) s->stats.migrated_vectors += nvec;
        if (halo) {
            s->stats.halo_vectors += nvec;
            if (cnt > s->halo_sent_cap[k]) {
                uint64_t *q = dm_realloc(s->halo_sent_ids[k], sizeof *q * (cnt + cnt / 2 + 64));
                if (!q) {
                    rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
                    break;
                }
                s->halo_sent_ids[k] = q;
                s->halo_sent_cap[k] = cnt + cnt / 2 + 64;
            }
            for (size_t j = 0; j < cnt; j++) s->halo_sent_ids[k][j] = o->id[idx[j]];
            qsort(s->halo_sent_ids[k], cnt, sizeof *s->halo_sent_ids[k], u64_cmp);
            s->halo_sent_n[k] = cnt;
        }
    }
    if (rc != DM_OK && halo) halo_cache_reset(s);
    dm_free(idx);
    dm_free(with);
    return rc;
}

int dm_flock_halo_exchange_begin(dm_flock_sim *s, dm_flock_xchg *x, char **send, int local_status)
{
    return dm_flock_halo_exchange_begin_dirs(s, x, send, local_status, NULL);
}

int dm_flock_halo_exchange_begin_dirs(dm_flock_sim *s, dm_flock_xchg *x, char **send, int local_status,
                                      const uint8_t *given)
{
    double W, H;
    dm_flock_plane_at(s, s->iteration, &W, &H);
    send[0] = send[1] = NULL;
    uint64_t size[2] = {0, 0};
    int rc = local_status;
    dm_timer_start("flock.comm");
    dm_timer_start("flock.comm.halo_pack");
    if (rc == DM_OK && s->nb.n && given) {
        rc = pack_selected(s, given, send, size, &s->stats.halo_sent, 1);
    } else if (rc == DM_OK && s->nb.n) {
        uint8_t *dirs = dm_malloc(s->own.n ? s->own.n : 1);
        if (!dirs) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        else {
            const long n = (long)s->own.n;
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) dirs[i] = (uint8_t)dm_flock_halo_dirs(s, s->own.y[i], H);
            rc = pack_selected(s, dirs, send, size, &s->stats.halo_sent, 1);
            dm_free(dirs);
        }
    }
    rc = dm_flock_xchg_begin(x, s->comm, &s->nb, 100, (const char *const *)send, size, rc);
    dm_timer_stop("flock.comm.halo_pack");
    dm_timer_stop("flock.comm");
    return rc;
}

int dm_flock_halo_exchange_end(dm_flock_sim *s, dm_flock_xchg *x, char **send)
{
    char *recv[2] = {NULL, NULL};
    uint64_t rsize[2] = {0, 0};
    dm_timer_start("flock.comm");
    dm_timer_start("flock.comm.halo_wait");
    int rc = dm_flock_xchg_end(x, recv, rsize);
    dm_timer_stop("flock.comm.halo_wait");
    dm_timer_start("flock.comm.halo_unpack");
    /* the new halo reuses the vectors of the previous one that the neighbours left out */
    if (rc == DM_OK) rc = dm_flock_halo_unpack(&s->halo, recv, rsize, s->nb.n);
    if (rc != DM_OK) {
        dm_flock_store_clear(&s->halo);
        halo_cache_reset(s);
    }
    for (int k = 0; k < s->nb.n; k++) {
        dm_free(recv[k]);
        dm_free(send[k]);
        send[k] = NULL;
    }
    dm_timer_stop("flock.comm.halo_unpack");
    dm_timer_stop("flock.comm");
    s->halo_valid = rc == DM_OK;
    return rc;
}

void dm_flock_migration_free(dm_flock_migration *m)
{
    dm_free(m->moved_dst);
    dm_free(m->moved_src);
    memset(m, 0, sizeof *m);
}

int dm_flock_migrate_host(dm_flock_sim *s, double H1, int local_status, dm_flock_migration *info)
{
    return dm_flock_migrate_host_dirs(s, H1, local_status, info, NULL);
}

int dm_flock_migrate_host_dirs(dm_flock_sim *s, double H1, int local_status, dm_flock_migration *info,
                               const uint8_t *given)
{
    int rc = local_status;
    if (info) memset(info, 0, sizeof *info);
    dm_flock_store *o = &s->own;
    uint8_t *dirs = NULL, *keep = NULL;
    char *send[2] = {NULL, NULL}, *recv[2] = {NULL, NULL};
    uint64_t size[2] = {0, 0}, rsize[2] = {0, 0};
    dm_timer_start("flock.comm");
    dm_timer_start("flock.comm.mig_pack");
    if (rc == DM_OK && s->size > 1) {
        dirs = dm_calloc(o->n ? o->n : 1, 1);
        keep = dm_malloc(o->n ? o->n : 1);
        if (!dirs || !keep) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    uint64_t moved = 0;
    if (rc == DM_OK && s->size > 1) {
        const long n = (long)o->n;
#pragma omp parallel for schedule(static) reduction(+ : moved)
        for (long i = 0; i < n; i++) {
            if (given) { /* the owners were decided elsewhere (the device) */
                dirs[i] = given[i];
                keep[i] = given[i] == 0;
                moved += given[i] != 0;
                continue;
            }
            int d = dm_flock_departure_hd(dm_flock_slice_of(s, o->y[i], H1), s->rank, s->size);
            /* the speed cap is below the thinnest slice: a boid moves at most one slice */
            DM_ASSERT(d >= 0);
            keep[i] = d == 0;
            dirs[i] = (uint8_t)d;
            moved += d != 0;
        }
        rc = pack_selected(s, dirs, send, size, NULL, 0);
        if (rc == DM_OK && info && moved) {
            info->moved_dst = dm_malloc(sizeof *info->moved_dst * (size_t)moved);
            info->moved_src = dm_malloc(sizeof *info->moved_src * (size_t)moved);
            if (!info->moved_dst || !info->moved_src) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        }
        if (rc == DM_OK)
            rc = dm_flock_store_remove(o, keep, info ? info->moved_dst : NULL, info ? info->moved_src : NULL,
                                       info ? &info->n_moved : NULL);
    }
    if (info) info->n_kept = o->n;
    dm_timer_stop("flock.comm.mig_pack");
    if (s->size > 1) {
        dm_flock_xchg x;
        dm_timer_start("flock.comm.mig_wait");
        int rb = dm_flock_xchg_begin(&x, s->comm, &s->nb, 200, (const char *const *)send, size, rc);
        int re = dm_flock_xchg_end(&x, recv, rsize);
        dm_timer_stop("flock.comm.mig_wait");
        if (rc == DM_OK) rc = rb != DM_OK ? rb : re;
        for (int k = 0; k < s->nb.n; k++) {
            if (rc == DM_OK && recv[k] && rsize[k]) {
                size_t before = o->n;
                rc = dm_flock_msg_unpack_cached(o, recv[k], rsize[k], &s->halo);
                s->stats.migrated_in += o->n - before;
            }
            dm_free(recv[k]);
            dm_free(send[k]);
        }
    }
    s->stats.migrated_out += moved;
    dm_free(dirs);
    dm_free(keep);
    dm_timer_stop("flock.comm");
    return rc;
}
