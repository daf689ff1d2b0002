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
                        const char *const *send, const uint64_t *send_size, dm_flock_buf *recv_bufs,
                        int local_status)
{
    memset(x, 0, sizeof *x);
    x->recv_buf = recv_bufs;
    x->comm = comm;
    x->tag = tag;
    x->nb = *nb;
    for (int k = 0; k < 2; k++) {
        x->hs_recv[k] = x->hs_send[k] = x->data_send[k] = x->data_recv[k] = MPI_REQUEST_NULL;
    }
    x->active = 1;
    int rc = local_status;
    for (int k = 0; k < nb->n; k++) {
        uint64_t sz = local_status < 0 ? ERR_FLAG : send_size[k];
        if (sz != ERR_FLAG && (sz % UNIT || sz / UNIT > (uint64_t)2147483647)) {
            /* MPI counts are ints: the neighbour learns the failure from the handshake, as for a
             * local one (was an assertion that stopped this rank alone) */
            if (rc == DM_OK)
                rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: a %llu-byte exchange message to rank %d (at most 16 GiB: use "
                            "more ranks)", (unsigned long long)sz, nb->rank[k]);
            sz = ERR_FLAG;
        }
        x->send_size[k] = sz;
        x->send_buf[k] = send[k];
        if (MPI_Irecv(&x->recv_size[k], 1, MPI_UINT64_T, nb->rank[k], tag, comm, &x->hs_recv[k]) != MPI_SUCCESS ||
            MPI_Isend(&x->send_size[k], 1, MPI_UINT64_T, nb->rank[k], tag, comm, &x->hs_send[k]) != MPI_SUCCESS)
            return DM_ERR(DM_ERR_MPI, "flock: posting the exchange handshake failed");
        /* the data goes out at once: the receiver matches it once it knows the size */
        if (x->send_size[k] == ERR_FLAG || x->send_size[k] == 0) continue;
        if (MPI_Isend(send[k], (int)(x->send_size[k] / UNIT), MPI_UINT64_T, nb->rank[k], tag + 1, comm,
                      &x->data_send[k]) != MPI_SUCCESS)
            return DM_ERR(DM_ERR_MPI, "flock: MPI_Isend failed");
    }
    return rc;
}

/* Takes neighbour k's data message and drops it: a receive of no bytes, which ends in a
 * truncation that the communicator reports for this call instead of aborting. The sender sent the
 * message without waiting, so neither side is left waiting for it. */
static void drop_message(dm_flock_xchg *x, int k)
{
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(x->comm, &eh);
    MPI_Comm_set_errhandler(x->comm, MPI_ERRORS_RETURN);
    uint64_t sink = 0;
    MPI_Recv(&sink, 0, MPI_UINT64_T, x->nb.rank[k], x->tag + 1, x->comm, MPI_STATUS_IGNORE);
    MPI_Comm_set_errhandler(x->comm, eh);
    MPI_Errhandler_free(&eh);
}

/* Records (again) the message of neighbour k's failed data receive (code: its recv_err). */
static int recv_error(const dm_flock_xchg *x, int k, int code)
{
    const unsigned long long n = (unsigned long long)x->recv_size[k];
    if (code == DM_ERR_FORMAT) return DM_ERR(code, "flock: exchange size %llu not a multiple of 8 or too large", n);
    if (code == DM_ERR_NOMEM)
        return DM_ERR(code, "flock: out of memory for a %llu-byte message from rank %d", n, x->nb.rank[k]);
    return DM_ERR(code, "flock: MPI_Irecv of %llu bytes from rank %d failed", n, x->nb.rank[k]);
}

/* Posts the data receive of neighbour k once its size arrived (once: a failure is kept in
 * recv_err[k] for end()). */
static int post_recv(dm_flock_xchg *x, int k)
{
    x->posted[k] = 1;
    if (x->recv_size[k] == ERR_FLAG || x->recv_size[k] == 0) return DM_OK;
    int code = DM_OK;
    if (x->recv_size[k] % UNIT || x->recv_size[k] / UNIT > (uint64_t)2147483647) {
        code = DM_ERR_FORMAT;
    } else {
        char *buf = dm_flock_buf_reserve(&x->recv_buf[k], x->recv_size[k]);
        if (!buf) {
            /* the sender sends anyway: its message is dropped, the job fails */
            drop_message(x, k);
            code = DM_ERR_NOMEM;
        } else if (MPI_Irecv(buf, (int)(x->recv_size[k] / UNIT), MPI_UINT64_T, x->nb.rank[k], x->tag + 1,
                             x->comm, &x->data_recv[k]) != MPI_SUCCESS) {
            code = DM_ERR_MPI;
        }
    }
    x->recv_err[k] = code;
    return code == DM_OK ? DM_OK : recv_error(x, k, code);
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
                (void)post_recv(x, k); /* a failure is kept for end() */
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
        if (!x->posted[k]) post_recv(x, k);
        /* its message again: others may have been recorded since progress() met it */
        if (x->recv_err[k] != DM_OK && rc == DM_OK) rc = recv_error(x, k, x->recv_err[k]);
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
        recv_size[k] = x->recv_size[k] == ERR_FLAG ? 0 : x->recv_size[k];
        recv[k] = recv_size[k] ? x->recv_buf[k].p : NULL;
        if (x->recv_size[k] == ERR_FLAG && rc == DM_OK) {
            rc = DM_ERR(DM_ERR_MPI, "flock: neighbour rank %d failed", x->nb.rank[k]);
            dm_error_mark_remote();
        }
    }
    return rc;
}

/* Forgets what the neighbours hold (after a failed exchange: the next messages carry every
 * vector). */
static void halo_cache_reset(dm_flock_sim *s)
{
    dm_flock_idmap_clear(&s->halo_sent[0]);
    dm_flock_idmap_clear(&s->halo_sent[1]);
    s->halo_sent_base[0] = s->halo_sent_base[1] = 0;
    s->dep_n = 0;
}

static int departures_cache(dm_flock_sim *s)
{
    if (!s->dep_n) return DM_OK;
    size_t n = s->dep_n;
    s->dep_n = 0;
    /* only a removal compacts the own pool, and departures_keep copies at once before one */
    DM_ASSERT(s->own.compactions == s->dep_compactions);
    dm_timer_start("flock.comm.halo_pack.departed");
    int rc = dm_flock_store_append_vectors(&s->halo, &s->own, (const uint64_t *)s->dep_id.p,
                                           (const uint64_t *)s->dep_voff.p, (const uint32_t *)s->dep_vlen.p, n);
    dm_timer_stop("flock.comm.halo_pack.departed");
    return rc;
}

/* The departures' vectors (a migration, before they leave the own store): their places in the own
 * pool are noted, to be copied into the halo store by the next halo exchange (departures_cache),
 * which overlaps the copies with the messages; when this removal compacts the own pool they are
 * copied at once. */
static int departures_keep(dm_flock_sim *s, const dm_flock_sel *sel)
{
    /* (a halo exchange always runs between two migrations; were it not, the earlier list is kept
     * first) */
    DM_TRY(departures_cache(s));
    const dm_flock_store *o = &s->own;
    size_t n = sel->n ? sel->n : 1, nnz = 0;
    uint64_t *id = dm_flock_buf_reserve(&s->dep_id, sizeof *id * n);
    uint64_t *voff = dm_flock_buf_reserve(&s->dep_voff, sizeof *voff * n);
    uint32_t *vlen = dm_flock_buf_reserve(&s->dep_vlen, sizeof *vlen * n);
    if (!id || !voff || !vlen) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    for (size_t k = 0; k < sel->n; k++) {
        uint32_t i = sel->idx[k];
        id[k] = o->id[i];
        voff[k] = o->voff[i];
        vlen[k] = o->vlen[i];
        nnz += o->vlen[i];
    }
    s->dep_n = sel->n;
    s->dep_compactions = o->compactions;
    if (!dm_flock_store_removal_compacts(o, nnz)) return DM_OK;
    s->dep_n = 0;
    return dm_flock_store_append_vectors(&s->halo, o, id, voff, vlen, sel->n);
}

/* Packs the selected own boids into one message per neighbour (those with sel->dirs[j] &
 * dir_mask), in the sim's message buffers of that kind (0 halo, 1 migration). The vectors of the
 * documents sent to that neighbour by the last halo message are left out (it holds them in its
 * halo store). halo: the documents of this message become the new "sent" set; migration (after
 * this iteration's halo exchange): a migrant was in the halo just sent unless it moved further
 * than the margin, so its vector usually stays home. */
static int pack_selected(dm_flock_sim *s, const dm_flock_sel *sel, char **send, uint64_t *size, uint64_t *count_out,
                         int halo)
{
    const dm_flock_store *o = &s->own;
    size_t nn = sel->n ? sel->n : 1;
    uint32_t *idx = dm_flock_buf_reserve(&s->pack_idx, sizeof *idx * nn);
    uint8_t *with = dm_flock_buf_reserve(&s->pack_with, nn);
    /* the selection's states (when given), in message order: read in order, not from the store */
    double *state = sel->state ? dm_flock_buf_reserve(&s->pack_state, 4 * sizeof *state * nn) : NULL;
    if (!idx || !with || (sel->state && !state)) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory packing a message");
    int rc = DM_OK;
    for (int k = 0; k < s->nb.n && rc == DM_OK; k++) {
        size_t cnt = 0;
        for (size_t j = 0; j < sel->n; j++)
            if (sel->dirs[j] & s->nb.dir_mask[k]) {
                DM_ASSERT(sel->idx[j] < o->n);
                if (state) memcpy(state + 4 * cnt, sel->state + 4 * j, 4 * sizeof *state);
                idx[cnt++] = sel->idx[j];
            }
        /* which of them the neighbour holds: a lookup (a cache miss) a boid, in parallel */
        const dm_flock_idmap *sent = &s->halo_sent[k];
        const size_t sent_base = s->halo_sent_base[k];
        uint64_t nnz = 0, nvec = 0, returned = 0;
        const long nl = (long)cnt;
#pragma omp parallel for schedule(static) num_threads(dm_threads_upto(o->copy_threads)) \
    reduction(+ : nnz, nvec, returned)
        for (long c = 0; c < nl; c++) {
            uint32_t i = idx[c];
            uint32_t e = dm_flock_idmap_get(sent, o->id[i]);
            int v = e == UINT32_MAX;
            if (!v && e >= sent_base) returned++;
            with[c] = (uint8_t)v;
            if (v) {
                nnz += o->vlen[i];
                nvec++;
            }
        }
        if (halo) s->stats.halo_returned += returned;
        dm_flock_msg_layout l;
        dm_flock_msg_layout_of(&l, cnt, nnz);
        send[k] = dm_flock_buf_reserve(&s->xsend[halo ? 0 : 1][k], l.total);
        if (!send[k]) {
            rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a %zu-byte message", l.total);
            break;
        }
        dm_flock_msg_pack(send[k], o, idx, cnt, with, state);
        size[k] = l.total;
        if (count_out) *count_out += cnt;
        if (!halo) s->stats.migrated_vectors += nvec;
        if (halo) {
            /* the message's ids are what the neighbour holds from now on */
            s->stats.halo_vectors += nvec;
            dm_timer_start("flock.comm.halo_pack.index");
            s->halo_sent[k].threads = o->copy_threads;
            rc = dm_flock_idmap_build(&s->halo_sent[k], (const uint64_t *)(send[k] + l.id), cnt);
            s->halo_sent_base[k] = cnt;
            dm_timer_stop("flock.comm.halo_pack.index");
        }
    }
    if (rc != DM_OK && halo) halo_cache_reset(s);
    return rc;
}

/* The own boids with dir(i) != 0, ascending, into the sim's selection scratch. mode 0: halo
 * directions on a plane of height H; 1: departures to the slices of a plane of height H. */
static int select_host(dm_flock_sim *s, int mode, double H, dm_flock_sel *sel)
{
    const dm_flock_store *o = &s->own;
    uint8_t *d = dm_flock_buf_reserve(&s->sel_dirs, o->n ? o->n : 1);
    uint32_t *idx = dm_flock_buf_reserve(&s->sel_idx, sizeof *idx * (o->n ? o->n : 1));
    if (!d || !idx) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    const long n = (long)o->n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        int v;
        if (mode == 0) {
            v = dm_flock_halo_dirs(s, o->y[i], H);
        } else {
            v = dm_flock_departure_hd(dm_flock_slice_of(s, o->y[i], H), s->rank, s->size);
            /* the speed cap is below the thinnest slice: a boid moves at most one slice */
            DM_ASSERT(v >= 0);
        }
        d[i] = (uint8_t)v;
    }
    /* compacted in place (the list is never ahead of the scan) */
    size_t m = 0;
    for (size_t i = 0; i < o->n; i++)
        if (d[i]) {
            idx[m] = (uint32_t)i;
            d[m++] = d[i];
        }
    sel->idx = idx;
    sel->dirs = d;
    sel->n = m;
    sel->state = NULL; /* the store's, current on the host */
    return DM_OK;
}

int dm_flock_halo_exchange_begin(dm_flock_sim *s, dm_flock_xchg *x, int local_status)
{
    return dm_flock_halo_exchange_begin_sel(s, x, local_status, NULL);
}

int dm_flock_halo_exchange_begin_sel(dm_flock_sim *s, dm_flock_xchg *x, int local_status, const dm_flock_sel *given)
{
    double W, H;
    dm_flock_plane_at(s, s->iteration, &W, &H);
    char *send[2] = {NULL, NULL};
    uint64_t size[2] = {0, 0};
    int rc = local_status;
    dm_timer_start("flock.comm");
    dm_timer_start("flock.comm.halo_pack");
    dm_flock_sel sel = {NULL, NULL, 0, NULL};
    if (rc == DM_OK && s->nb.n) {
        if (given) sel = *given;
        else rc = select_host(s, 0, H, &sel);
    }
    if (rc == DM_OK && s->nb.n) rc = pack_selected(s, &sel, send, size, &s->stats.halo_sent, 1);
    rc = dm_flock_xchg_begin(x, s->comm, &s->nb, 100, (const char *const *)send, size, s->xrecv[0], rc);
    /* while the messages travel: the vectors the neighbours leave out because they came from here */
    int rd = departures_cache(s);
    if (rc == DM_OK) rc = rd;
    dm_timer_stop("flock.comm.halo_pack");
    dm_timer_stop("flock.comm");
    return rc;
}

int dm_flock_halo_exchange_end(dm_flock_sim *s, dm_flock_xchg *x)
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
    return dm_flock_migrate_host_sel(s, H1, local_status, info, NULL);
}

int dm_flock_migrate_host_sel(dm_flock_sim *s, double H1, int local_status, dm_flock_migration *info,
                              const dm_flock_sel *given)
{
    int rc = local_status;
    if (info) memset(info, 0, sizeof *info);
    dm_flock_store *o = &s->own;
    char *send[2] = {NULL, NULL}, *recv[2] = {NULL, NULL};
    uint64_t size[2] = {0, 0}, rsize[2] = {0, 0};
    dm_timer_start("flock.comm");
    dm_timer_start("flock.comm.mig_pack");
    dm_flock_sel sel = {NULL, NULL, 0, NULL};
    if (rc == DM_OK && s->size > 1) {
        if (given) sel = *given;
        else rc = select_host(s, 1, H1, &sel);
    }
    if (rc == DM_OK && s->size > 1) rc = pack_selected(s, &sel, send, size, NULL, 0);
    /* the moves' lists before the exchange starts, which tells the neighbours this rank's status */
    if (rc == DM_OK && s->size > 1 && info && sel.n) {
        info->moved_dst = dm_malloc(sizeof *info->moved_dst * sel.n);
        info->moved_src = dm_malloc(sizeof *info->moved_src * sel.n);
        if (!info->moved_dst || !info->moved_src) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    dm_timer_stop("flock.comm.mig_pack");
    if (s->size > 1) {
        s->stats.migrations++;
        dm_flock_xchg x;
        dm_timer_start("flock.comm.mig_wait");
        int rb = dm_flock_xchg_begin(&x, s->comm, &s->nb, 200, (const char *const *)send, size, s->xrecv[1], rc);
        if (rc == DM_OK) rc = rb;
        dm_timer_stop("flock.comm.mig_wait");
        /* the departures' vectors stay here for the next halo's unpack, whose senders leave them
         * out (see the arrivals below); then the departures leave the own store */
        dm_timer_start("flock.comm.mig_pack");
        if (rc == DM_OK && sel.n) rc = departures_keep(s, &sel);
        if (rc == DM_OK)
            rc = dm_flock_store_remove_list(o, sel.idx, sel.n, info ? info->moved_dst : NULL,
                                            info ? info->moved_src : NULL, info ? &info->n_moved : NULL);
        if (info) info->n_kept = o->n;
        dm_timer_stop("flock.comm.mig_pack");
        dm_timer_start("flock.comm.mig_wait");
        int re = dm_flock_xchg_end(&x, recv, rsize);
        dm_timer_stop("flock.comm.mig_wait");
        if (rc == DM_OK) rc = re;
        for (int k = 0; k < s->nb.n; k++) {
            if (rc == DM_OK && recv[k] && rsize[k]) {
                size_t before = o->n;
                rc = dm_flock_msg_unpack_cached(o, recv[k], rsize[k], &s->halo);
                s->stats.migrated_in += o->n - before;
                /* the sender kept the arrivals' vectors (above): the next halo message to it
                 * leaves them out, as those of the documents the last one carried */
                if (rc == DM_OK) rc = dm_flock_idmap_add(&s->halo_sent[k], o->id + before, o->n - before);
            }
        }
        if (rc != DM_OK) halo_cache_reset(s);
    } else if (info) {
        info->n_kept = o->n;
    }
    s->stats.migrated_out += sel.n;
    dm_timer_stop("flock.comm");
    return rc;
}
