/* The multi-species flocking model, written once for the CPU reference (flock_cpu.c) and the CUDA
 * kernels (flock_kernels.cuh): per-iteration parameters, torus geometry, the uniform grid's cell
 * arithmetic, the exact cosine similarity of two sparse term-sorted vectors, one neighbour's
 * contribution to a boid's forces and the velocity/position update. Reference: DESIGN.md
 * section 7 ("Multi-species flocking"); these functions *are* the model.
 *
 * Order independence. A boid's new state must not depend on the order in which its neighbours
 * are visited (grid order, slice layout, halo arriving later, GPU threads), so that trajectories
 * are bit-identical for any number of ranks and on resume. Every sum over neighbours is therefore
 * accumulated in 64-bit fixed point (integer addition is associative): each contribution is
 * rounded once, to nearest, to a multiple of 2^-DM_FLOCK_FIX_BITS, and the sums are converted
 * back to double exactly. The dot product of two vectors is summed the same way (products of
 * unit-vector weights rounded to 2^-DM_FLOCK_DOT_BITS), so any split of a dot product over
 * threads gives the same bits. Nothing here uses fused multiply-add implicitly: the CUDA sources
 * are compiled with -fmad=false, so CPU and CUDA evaluate the same IEEE operations.
 *
 * Plain C11 when included from .c files; DM_HD functions are host+device under nvcc. */
#ifndef DM_FLOCK_MODEL_H
#define DM_FLOCK_MODEL_H

#include <math.h>
#include <stdint.h>

#include "common/hd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fixed point of the force sums: 2^-32 resolution, |sum| < 2^31 plane units. */
#define DM_FLOCK_FIX_BITS 32
#define DM_FLOCK_FIX_SCALE 4294967296.0           /* 2^32 */
#define DM_FLOCK_FIX_INV (1.0 / 4294967296.0)
#define DM_FLOCK_FIX_MAX 1073741824.0             /* a single contribution is clamped to 2^30 */
/* The largest documents x radius (checked when a simulation starts): a boid's cohesion and
 * alignment sums add at most one offset (< r) or velocity (<= v_max < r) per other document, so
 * they stay below 2^30 plane units, half the fixed point's range (see dm_flock_acc_add). */
#define DM_FLOCK_DOCS_RADIUS_MAX 1073741824.0     /* 2^30 */
/* Fixed point of dot products of unit vectors: |partial sums| <= 1 (Cauchy-Schwarz). */
#define DM_FLOCK_DOT_BITS 61
#define DM_FLOCK_DOT_SCALE 2305843009213693952.0  /* 2^61 */
#define DM_FLOCK_DOT_INV (1.0 / 2305843009213693952.0)

/* Everything one iteration needs; computed on the host from the options and the iteration
 * number only (so resume and every rank agree), then passed by value to kernels. */
typedef struct dm_flock_params {
    double r, r2;             /* interaction radius and its square */
    double dmin2;             /* separation softening: squared distances below count as this */
    double threshold;         /* similar when cosine >= threshold */
    double w_sep, w_dis;      /* separation weights: similar / dissimilar neighbours */
    double w_ali, w_coh;      /* alignment and cohesion weights (similar neighbours) */
    double vmax, vmax2;       /* speed cap */
    double W, H;              /* plane during this iteration */
    double half_W, half_H;
    double W1, H1;            /* plane after this iteration (shrinking) */
    double ratio_x, ratio_y;  /* W1 / W, H1 / H: positions are scaled by these after the move */
    int C, R;                 /* grid columns and rows over the whole plane (>= 3 each) */
    double cw, ch;            /* cell width and height (> r) */
} dm_flock_params;

/* One boid's accumulated neighbour contributions (fixed point, see above). */
typedef struct dm_flock_acc {
    int64_t sep_s[2];  /* sum over similar neighbours of (p_x - p_i) / |p_x - p_i|^2 */
    int64_t sep_d[2];  /* the same over dissimilar neighbours */
    int64_t vel[2];    /* sum of similar neighbours' velocities */
    int64_t off[2];    /* sum of similar neighbours' offsets p_i - p_x (minimum image) */
    int32_t n_sim, n_dis;
} dm_flock_acc;

DM_HD void dm_flock_acc_zero(dm_flock_acc *a)
{
    a->sep_s[0] = a->sep_s[1] = a->sep_d[0] = a->sep_d[1] = 0;
    a->vel[0] = a->vel[1] = a->off[0] = a->off[1] = 0;
    a->n_sim = a->n_dis = 0;
}

/* Round to nearest (ties to even) to a 64-bit integer: identical on host and device. */
DM_HD int64_t dm_flock_rint64(double v)
{
#if defined(__CUDA_ARCH__)
    return __double2ll_rn(v);
#else
    return (int64_t)llrint(v);
#endif
}

DM_HD int64_t dm_flock_fix(double v)
{
    if (v > DM_FLOCK_FIX_MAX) v = DM_FLOCK_FIX_MAX;
    if (v < -DM_FLOCK_FIX_MAX) v = -DM_FLOCK_FIX_MAX;
    return dm_flock_rint64(v * DM_FLOCK_FIX_SCALE);
}
DM_HD double dm_flock_unfix(int64_t v) { return (double)v * DM_FLOCK_FIX_INV; }

/* Minimum-image displacement along an axis of length L: d in [-L/2, L/2]. */
DM_HD double dm_flock_min_image(double d, double L, double half)
{
    if (d > half) return d - L;
    if (d < -half) return d + L;
    return d;
}

/* Wraps a coordinate that is at most one length L outside [0, L) back into [0, L). */
DM_HD double dm_flock_wrap(double v, double L)
{
    if (v >= L) v -= L;
    else if (v < 0.0) v += L;
    if (v >= L || v < 0.0) v = 0.0; /* -tiny + L rounding to L */
    return v;
}

/* Grid cell column / row of a coordinate in [0, L) with n cells of size cs. */
DM_HD int dm_flock_cell(double v, double cs, int n)
{
    int c = (int)(v / cs);
    if (c < 0) c = 0;
    if (c >= n) c = n - 1;
    return c;
}

/* Unit-vector dot product (fixed point, order independent) of two term-sorted sparse rows. */
DM_HD int64_t dm_flock_dot_fix(const uint32_t *ca, const float *va, uint32_t na, const uint32_t *cb,
                               const float *vb, uint32_t nb)
{
    int64_t s = 0;
    uint32_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint32_t a = ca[i], b = cb[j];
        if (a < b) i++;
        else if (a > b) j++;
        else {
            s += dm_flock_rint64((double)va[i] * (double)vb[j] * DM_FLOCK_DOT_SCALE);
            i++;
            j++;
        }
    }
    return s;
}

/* Cosine similarity of two unit vectors from their fixed-point dot product. */
DM_HD double dm_flock_cos_from_fix(int64_t dot) { return (double)dot * DM_FLOCK_DOT_INV; }

/* Cosines come from single-precision unit vectors (each weight within 2^-24 of its exact value), so
 * a vector's cosine with itself is 1 only within about 2^-23. A pair is similar when its cosine is
 * at least T less this slack: T = 1 groups documents whose vectors are identical. */
#define DM_FLOCK_COS_SLACK (1.0 / 1048576.0) /* 2^-20 */

DM_HD int dm_flock_is_similar(int64_t dot, double threshold)
{
    return dm_flock_cos_from_fix(dot) >= threshold - DM_FLOCK_COS_SLACK;
}

/* ---- slices (shared by the host exchange and the device selection kernels) ------------------ */

/* The slice owning coordinate y on a plane of height H: the largest k with cut[k] H <= y
 * (cut[0] = 0 < cut[1] < ... < cut[P] = 1). */
DM_HD int dm_flock_slice_hd(const double *cut, int P, double y, double H)
{
    int lo = 0, hi = P - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        double b = cut[mid] * H;
        if (b <= y) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Halo directions of a boid at y of the slice [lo, hi) on a plane of height H: bit 0 within the
 * margin of the lower edge, bit 1 of the upper edge. A boid may have left the slice since the last
 * migration (dm_flock_options.migrate_every): it counts from the nearer side on the torus, so one
 * that crossed the seam at y = 0 below slice 0 goes to the slice below (the last), not above. */
DM_HD int dm_flock_halo_dirs_hd(double y, double lo, double hi, double margin, double H)
{
    if (y < lo && (y + H) - hi < lo - y) y += H;
    else if (y >= hi && (lo + H) - y < y - hi) y -= H;
    return (y - lo < margin ? 1 : 0) | (hi - y < margin ? 2 : 0);
}

/* Direction bits of a boid of slice `rank` now owned by slice `owner`: 0 when it stayed, 1 below,
 * 2 above, 3 the only neighbour (P == 2); -1 when the owner is not a neighbour (it moved further
 * than one slice: a broken invariant). */
DM_HD int dm_flock_departure_hd(int owner, int rank, int P)
{
    if (owner == rank) return 0;
    int below = (rank - 1 + P) % P, above = (rank + 1) % P;
    if (owner != below && owner != above) return -1;
    return P == 2 ? 3 : owner == below ? 1 : 2;
}

/* Squared minimum-image distance and offset (p_i - p_x) of neighbour i from boid x. */
DM_HD double dm_flock_offset(const dm_flock_params *p, double xx, double xy, double ix, double iy,
                             double *dx, double *dy)
{
    *dx = dm_flock_min_image(ix - xx, p->W, p->half_W);
    *dy = dm_flock_min_image(iy - xy, p->H, p->half_H);
    return *dx * *dx + *dy * *dy;
}

/* a + b modulo 2^64: a sum of contributions in any order, whose partial sums may leave the range
 * of int64 (defined behaviour, where signed overflow is not); the result is the exact sum
 * whenever that lies in the range. */
DM_HD int64_t dm_flock_sum(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* Adds neighbour i (offset dx, dy = p_i - p_x, squared distance d2 < r^2, velocity vix, viy) to
 * boid x's sums.
 * Range: an offset is below r and a velocity at most v_max < r, so with at most N - 1 neighbours
 * the cohesion and alignment sums stay below N r <= DM_FLOCK_DOCS_RADIUS_MAX = 2^30 plane units
 * (checked when the simulation starts). A separation term is |d| / max(d2, (min_dist r)^2), at
 * most 1 / (min_dist r) (reached at d = min_dist r; closer neighbours push less, coincident ones
 * not at all), so its sums could only reach 2^31 with more than
 * 2^31 min_dist r neighbours (10^8 at the defaults) within min_dist r of one boid, which the
 * separation itself prevents; should it happen the sums wrap (dm_flock_sum) instead of
 * overflowing, identically on every backend. */
DM_HD void dm_flock_acc_add(dm_flock_acc *a, const dm_flock_params *p, double dx, double dy, double d2,
                            double vix, double viy, int similar)
{
    double d2c = d2 > p->dmin2 ? d2 : p->dmin2;
    int64_t sx = dm_flock_fix(-dx / d2c), sy = dm_flock_fix(-dy / d2c);
    if (similar) {
        a->sep_s[0] = dm_flock_sum(a->sep_s[0], sx);
        a->sep_s[1] = dm_flock_sum(a->sep_s[1], sy);
        a->vel[0] = dm_flock_sum(a->vel[0], dm_flock_fix(vix));
        a->vel[1] = dm_flock_sum(a->vel[1], dm_flock_fix(viy));
        a->off[0] = dm_flock_sum(a->off[0], dm_flock_fix(dx));
        a->off[1] = dm_flock_sum(a->off[1], dm_flock_fix(dy));
        a->n_sim++;
    } else {
        a->sep_d[0] = dm_flock_sum(a->sep_d[0], sx);
        a->sep_d[1] = dm_flock_sum(a->sep_d[1], sy);
        a->n_dis++;
    }
}

/* The update of one boid from its sums:
 *   F  = w_sep sep_S + w_dis sep_D + [n_S > 0] (w_ali (mean_S v - v) + w_coh mean_S (p_i - p))
 *   v' = v + F, clamped to |v'| <= vmax;  p' = wrap((p + v') * ratio) on the next plane.
 * Finite: every sum is below 2^31 in magnitude (an int64 at 2^-32) and every weight at most DM_FLOCK_WEIGHT_MAX =
 * 10^6 (checked when the simulation starts), and |v| <= vmax (so is every initial velocity; a
 * checkpoint's above it is refused), so |F| < 10^17 and |v'|^2 < 10^35, far from the double
 * range: the clamp never meets inf (whose inf * 0 would make the position NaN).
 * Returns 1 when the boid crossed the torus seam in y (for the tests' statistics), else 0. */
DM_HD int dm_flock_update(const dm_flock_params *p, const dm_flock_acc *a, double *x, double *y,
                          double *vx, double *vy)
{
    double fx = p->w_sep * dm_flock_unfix(a->sep_s[0]) + p->w_dis * dm_flock_unfix(a->sep_d[0]);
    double fy = p->w_sep * dm_flock_unfix(a->sep_s[1]) + p->w_dis * dm_flock_unfix(a->sep_d[1]);
    if (a->n_sim > 0) {
        double inv = 1.0 / (double)a->n_sim;
        fx += p->w_ali * (dm_flock_unfix(a->vel[0]) * inv - *vx) + p->w_coh * (dm_flock_unfix(a->off[0]) * inv);
        fy += p->w_ali * (dm_flock_unfix(a->vel[1]) * inv - *vy) + p->w_coh * (dm_flock_unfix(a->off[1]) * inv);
    }
    double nvx = *vx + fx, nvy = *vy + fy;
    double s2 = nvx * nvx + nvy * nvy;
    if (s2 > p->vmax2) {
        double f = p->vmax / sqrt(s2);
        nvx *= f;
        nvy *= f;
    }
    double nx = (*x + nvx) * p->ratio_x, ny = (*y + nvy) * p->ratio_y;
    int seam = ny >= p->H1 || ny < 0.0;
    *x = dm_flock_wrap(nx, p->W1);
    *y = dm_flock_wrap(ny, p->H1);
    *vx = nvx;
    *vy = nvy;
    return seam;
}

#ifdef __cplusplus
}
#endif
#endif
