/* Runs every clinformer kernel once on small shapes, with tails that do not
 * fill a work-group, and checks the results against the host.  tests/
 * oclgrind.sh runs it under oclgrind, which reports invalid accesses, data
 * races and uninitialised reads.  Exit 0 when all results match. */
#include "internal.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void
expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "oclgrind_driver: %s does not match\n", what);
        failures++;
    }
}

static cl_mem
upload(clf_context *ctx, const float *data, size_t n)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->context,
                              CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              n * sizeof(float), (void *)data, &err);
    if (m == NULL) {
        fprintf(stderr, "oclgrind_driver: clCreateBuffer failed (%d)\n", err);
        exit(1);
    }
    return m;
}

static void
download(clf_context *ctx, cl_mem m, float *data, size_t n)
{
    if (clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0, n * sizeof(float),
                            data, 0, NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "oclgrind_driver: read failed\n");
        exit(1);
    }
}

static void
fill(float *a, size_t n, unsigned seed)
{
    size_t i;

    for (i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

int
main(void)
{
    clf_context *ctx = NULL;
    enum { ROWS = 5, COLS = 7, LD = 9, HEADS = 2, DH = 3, SLOTS = 4, B = 3 };
    float y[ROWS * LD + 2], y0[ROWS * LD + 2], bias[HEADS * DH];
    float e[HEADS * SLOTS * LD], rs[HEADS * SLOTS];
    float kb[B * SLOTS * HEADS * DH], kb0[B * SLOTS * HEADS * DH];
    float s[3 + 6 * 5], sref[6 * 5];
    double sm[6 * 5];
    cl_mem my, mb, me, mr, mk, ms;
    size_t i, r, c;
    int rc;

    rc = clf_context_create(&ctx, NULL);
    if (rc == 0)
        rc = clf_context_build(ctx);
    if (rc != 0) {
        fprintf(stderr, "oclgrind_driver: %s: %s\n%s\n", clf_strerror(rc),
                clf_last_error(), ctx ? clf_context_build_log(ctx) : "");
        clf_context_destroy(ctx);
        return 1;
    }

    /* add_bias on a strided sub-block starting at offset 2. */
    fill(y, sizeof y / sizeof y[0], 1);
    fill(bias, HEADS * DH, 2);
    memcpy(y0, y, sizeof y);
    my = upload(ctx, y, sizeof y / sizeof y[0]);
    mb = upload(ctx, bias, HEADS * DH);
    clf__add_bias(ctx, my, 2, ROWS - 1, HEADS * DH, LD, mb);
    download(ctx, my, y, sizeof y / sizeof y[0]);
    for (r = 0; r < ROWS - 1; r++)
        for (c = 0; c < HEADS * DH; c++)
            y0[2 + r * LD + c] += bias[c];
    expect(memcmp(y, y0, sizeof y) == 0, "add_bias");

    /* rowsum of the first COLS columns of an LD-wide E. */
    fill(e, HEADS * SLOTS * LD, 3);
    me = upload(ctx, e, HEADS * SLOTS * LD);
    memset(rs, 0, sizeof rs);
    mr = upload(ctx, rs, HEADS * SLOTS);
    clf__rowsum(ctx, me, HEADS * SLOTS, COLS, LD, mr);
    download(ctx, mr, rs, HEADS * SLOTS);
    for (r = 0; r < HEADS * SLOTS; r++) {
        float acc = 0.0f;
        for (c = 0; c < COLS; c++)
            acc += e[r * LD + c];
        expect(fabsf(acc - rs[r]) < 1e-5f, "rowsum");
    }

    /* add_rowsum_bias, per-head rowsum and bias. */
    fill(kb, sizeof kb / sizeof kb[0], 4);
    memcpy(kb0, kb, sizeof kb);
    mk = upload(ctx, kb, sizeof kb / sizeof kb[0]);
    clf__add_rowsum_bias(ctx, mk, B, SLOTS, HEADS, DH, mr, 1, mb, 1);
    download(ctx, mk, kb, sizeof kb / sizeof kb[0]);
    for (i = 0; i < sizeof kb / sizeof kb[0]; i++) {
        size_t col = i % (HEADS * DH), slot = (i / (HEADS * DH)) % SLOTS;
        size_t h = col / DH;
        float want = kb0[i] + rs[h * SLOTS + slot] * bias[col];
        expect(fabsf(want - kb[i]) < 1e-5f, "add_rowsum_bias");
    }

    /* softmax at offset 3, with a fully masked row and huge logits. */
    fill(s, sizeof s / sizeof s[0], 5);
    for (c = 0; c < 5; c++)
        s[3 + 5 * 2 + c] = -INFINITY;
    s[3 + 5 * 4 + 1] = 1e4f;
    s[3 + 5 * 4 + 3] = -1e4f;
    memcpy(sref, s + 3, sizeof sref);
    ms = upload(ctx, s, sizeof s / sizeof s[0]);
    clf__softmax_rows(ctx, ms, 3, 6, 5);
    download(ctx, ms, s, sizeof s / sizeof s[0]);
    ref_softmax(sref, 6, 5, sm);
    for (i = 0; i < 30; i++)
        expect(fabs(s[3 + i] - sm[i]) < 1e-6, "softmax");

    clReleaseMemObject(my);
    clReleaseMemObject(mb);
    clReleaseMemObject(me);
    clReleaseMemObject(mr);
    clReleaseMemObject(mk);
    clReleaseMemObject(ms);
    clf_context_destroy(ctx);
    if (failures == 0)
        printf("oclgrind_driver: all kernels match\n");
    return failures == 0 ? 0 : 1;
}
