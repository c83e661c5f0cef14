/* Weights whose transposes the blocked GEMM keeps.  The blocked kernel
 * reads B untransposed, so a GEMM that reads a weight transposed (X W^T,
 * W stored as PyTorch does) first copies W^T into the scratch buffer: four
 * copies a layer's forward, a fixed cost that was 16% of the forward at
 * n = 1024 on PoCL.  A weight's owner that changes the buffer only through
 * its own calls registers it here; the blocked way then copies each part
 * of it it reads transposed once, keeps the copy and reads that.  The
 * owner says when the contents change and before it releases the buffer,
 * which drops the copies.  Buffers nobody registered (workspaces, the
 * context's widened half weights, whose contents change every forward)
 * are copied every time, as before.  The registry is its own state of
 * the context; gemm.c hands in the transpose that makes a copy. */
#include "gemm/gemm.h"

#include <stdlib.h>

/* One registered buffer's part read transposed: n x k from off with
 * leading dimension ld, its transpose t (k x n, packed); t NULL where the
 * buffer has no copy yet. */
struct kept {
    cl_mem w;
    size_t off, n, k, ld;
    cl_mem t;
};

/* The context's registry. */
struct kept_state {
    struct kept *e;
    size_t count, cap;
};

static void
drop(struct kept *e)
{
    if (e->t != NULL)
        clReleaseMemObject(e->t);
    if (e->w != NULL)
        clReleaseMemObject(e->w);
}

static void
release_state(clf_context *ctx, void *state)
{
    struct kept_state *st = state;
    size_t i;

    (void)ctx;
    for (i = 0; i < st->count; i++)
        drop(&st->e[i]);
    free(st->e);
    st->e = NULL;
    st->count = st->cap = 0;
}

static const char state_key = 0;

static struct kept_state *
kept_state(clf_context *ctx)
{
    return clf__feature(ctx, &state_key, sizeof(struct kept_state), NULL,
                        release_state);
}

/* The registry where something was registered, else NULL: forgetting,
 * counting and the blocked GEMM's lookup never make it. */
static struct kept_state *
kept_find(const clf_context *ctx)
{
    return clf__feature_find(ctx, &state_key);
}

/* Appends an entry for w (retained: a released buffer's handle may be
 * reused for another, so the entry holds w alive until forgotten). */
static int
append(struct kept_state *st, cl_mem w, struct kept **out)
{
    struct kept *e;

    if (st->count == st->cap) {
        const size_t cap = st->cap ? 2 * st->cap : 8;
        struct kept *grown = realloc(st->e, cap * sizeof *grown);
        if (grown == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        st->e = grown;
        st->cap = cap;
    }
    e = &st->e[st->count++];
    e->w = w;
    e->off = e->n = e->k = e->ld = 0;
    e->t = NULL;
    clRetainMemObject(w);
    *out = e;
    return 0;
}

static void
forget_locked(struct kept_state *st, cl_mem w)
{
    size_t i = 0;

    while (i < st->count) {
        if (st->e[i].w != w) {
            i++;
            continue;
        }
        drop(&st->e[i]);
        st->e[i] = st->e[--st->count];
    }
}

int
clf__gemm_keep(clf_context *ctx, cl_mem w)
{
    struct kept_state *st;
    struct kept *e;
    int rc;

    if ((st = kept_state(ctx)) == NULL)
        return CLF_ENO_MEMORY;
    clf__lock(ctx);
    forget_locked(st, w);
    rc = append(st, w, &e);
    clf__unlock(ctx);
    return rc;
}

void
clf__gemm_forget(clf_context *ctx, cl_mem w)
{
    struct kept_state *st;

    if (w == NULL || (st = kept_find(ctx)) == NULL)
        return;
    clf__lock(ctx);
    forget_locked(st, w);
    clf__unlock(ctx);
}

size_t
clf__gemm_kept_bytes(clf_context *ctx, cl_mem w)
{
    struct kept_state *st;
    size_t i, bytes = 0;

    if (w == NULL || (st = kept_find(ctx)) == NULL)
        return 0;
    clf__lock(ctx);
    for (i = 0; i < st->count; i++)
        if (st->e[i].w == w && st->e[i].t != NULL)
            bytes += st->e[i].n * st->e[i].k * sizeof(float);
    clf__unlock(ctx);
    return bytes;
}

size_t
clf__gemm_kept_count(clf_context *ctx)
{
    const struct kept_state *st = kept_find(ctx);

    return st != NULL ? st->count : 0;
}

/* The entry of w's part (off, n, k, ld): the one with that copy, else a
 * registered entry without one, else a new entry; NULL in *out when w is
 * not registered. */
static int
find(struct kept_state *st, cl_mem w, size_t off, size_t n, size_t k, size_t ld,
     struct kept **out)
{
    struct kept *blank = NULL;
    size_t i;
    int seen = 0;

    *out = NULL;
    for (i = 0; i < st->count; i++) {
        struct kept *e = &st->e[i];
        if (e->w != w)
            continue;
        seen = 1;
        if (e->t != NULL && e->off == off && e->n == n && e->k == k &&
            e->ld == ld) {
            *out = e;
            return 0;
        }
        if (e->t == NULL)
            blank = e;
    }
    if (!seen)
        return 0;
    if (blank != NULL) {
        *out = blank;
        return 0;
    }
    return append(st, w, out);
}

int
clf__gemm_kept_copy(clf_context *ctx, cl_mem b, size_t off, size_t n, size_t k,
                    size_t ld, clf__kept_fill_fn fill, cl_mem *t)
{
    struct kept_state *st;
    struct kept *e;
    cl_int err;
    int rc;

    *t = NULL;
    if ((st = kept_find(ctx)) == NULL || st->count == 0)
        return 0;
    CLF_TRY(find(st, b, off, n, k, ld, &e));
    if (e == NULL)
        return 0;
    if (e->t == NULL) {
        cl_mem m =
            clf__mem_create(ctx, CL_MEM_READ_WRITE, n * k * sizeof(float), NULL,
                            &err, "transposed weight");
        if (m == NULL)
            return clf__fail(err,
                             "transposed weight: clCreateBuffer of %zu "
                             "bytes failed (%d)",
                             n * k * sizeof(float), err);
        rc = fill(ctx, b, off, n, k, ld, m);
        if (rc != 0) {
            clReleaseMemObject(m);
            return rc;
        }
        e->off = off, e->n = n, e->k = k, e->ld = ld;
        e->t = m;
    }
    *t = e->t;
    return 0;
}
