/* clinformer verify (cli/verify.c, cli/verify_case.c): every attention
 * way, GEMM way and softmax forced in turn, in every mode, with and
 * without padding, float and half weights, at odd shapes, against the
 * double-precision reference (bench/reference.c), with guard bands around
 * every device buffer and a bitwise repeat. */
#ifndef CLINFORMER_CLI_VERIFY_H
#define CLINFORMER_CLI_VERIFY_H

#include "cli.h"

/* Tolerances on max |y - ref| / max |ref|: float32 weights, and half
 * weights against the reference fed the same weights rounded to binary16
 * (widened to float32 before each GEMM); half weights whose products may
 * run in binary16 (halfgemm native on a device with cl_khr_fp16). */
#define VERIFY_TOL 1e-4
#define VERIFY_TOL_NATIVE 2e-3

/* A shape: B sequences of n positions of a layer of width D, `heads`
 * heads of dh, max_seq_len N, k slots (kc in causal Linformer, a multiple
 * of ceil(N / block)). */
struct verify_shape {
    const char *name;
    size_t B, n, N, D, heads, dh, k, block, kc;
};

enum verify_mode {
    VERIFY_LINFORMER,
    VERIFY_FULL,
    VERIFY_CAUSAL,
    VERIFY_CAUSAL_FULL,
    VERIFY_MODES
};

/* One case: the shape, mode, padding, weight precision and the kernel
 * choices forced (a CLINFORMER_KERNELS value). */
struct verify_case {
    size_t id;
    const struct verify_shape *shape;
    int mode, padded, half;
    char kernels[96];
};

enum verify_status {
    VERIFY_PASS,
    VERIFY_FAIL,
    VERIFY_REFUSED, /* the library refused the case with CLF_EUNSUPPORTED */
    VERIFY_NOT_RUN
};

/* What one case gave. */
struct verify_result {
    enum verify_status status;
    double rel_error, tol, seconds;
    int compared;     /* both forwards ran: rel_error, repeat_same hold */
    int repeat_same;  /* the second forward gave the same bits */
    char ran[256];    /* the kernels launched, comma-separated */
    char error[512];  /* why it failed or was refused, or "" */
    char repro[3072]; /* the reproducer line of a failure, or "" */
};

/* The settings of the run the cases share. */
struct verify_env {
    clf_context *ctx;
    const char *device; /* --device as given, or NULL */
    const char *save;   /* where a failure's files go */
    unsigned long long seed;
    clf_device_info info;
    int fp16; /* the device has cl_khr_fp16 */
};

const char *verify_mode_name(int mode);

/* Runs case c (fresh data from env->seed and c->id) and fills *r. */
void verify_run_case(const struct verify_env *env, const struct verify_case *c,
                     struct verify_result *r);

#endif
