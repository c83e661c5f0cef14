/* Kernel choices: forcing by API and environment, errors that list the
 * valid names, the device's store written by one context and read by a
 * fresh one without timing, and stores that are corrupt, of another
 * device, or not regular files, ignored. */
#include "internal.h"
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* A fresh cache directory for the test, and no forcing from outside. */
static void
fresh_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/clf_choice_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    unsetenv("CLINFORMER_KERNELS");
}

static void
drop_dir(void)
{
    tu_clear_dir(dir);
    rmdir(dir);
    tu_cache_dir_restore();
}

/* The path of the one store in dir (choices-HASH.txt, not its lock
 * choices-HASH.txt.lock nor a temporary file), or "". */
static void
store_file(char *path, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t len;

    path[0] = '\0';
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        len = strlen(e->d_name);
        if (strncmp(e->d_name, "choices-", 8) == 0 && len > 4 &&
            strcmp(e->d_name + len - 4, ".txt") == 0)
            snprintf(path, cap, "%s/%s", dir, e->d_name);
    }
    closedir(d);
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(choice_force_is_used)
{
    clf_context *ctx = NULL;
    int v = -1;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "softmax", "group"), 0);
    ck_assert_int_eq(clf__softmax_resolve(ctx, 100, 100, &v), 0);
    ck_assert_int_eq(v, CLF_SOFTMAX_GROUP);
    ck_assert_int_eq(ctx->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_FORCED);
    /* The environment wins over the API. */
    setenv("CLINFORMER_KERNELS", "gemm=blocked,softmax=vector", 1);
    ck_assert_int_eq(clf__softmax_resolve(ctx, 100, 100, &v), 0);
    ck_assert_int_eq(v, CLF_SOFTMAX_VECTOR);
    ck_assert_int_eq(clf__gemm_resolve(ctx, CLF_ROLE_PROJ, 100, 64, 64, 1, &v),
                     0);
    ck_assert_int_eq(v, CLF_GEMM_BLOCKED);
    unsetenv("CLINFORMER_KERNELS");
    /* Lifting the force: nothing stored, so it is timed. */
    ck_assert_int_eq(clf_context_force_kernel(ctx, "softmax", NULL), 0);
    ck_assert_int_eq(clf_context_build(ctx), 0);
    ck_assert_int_eq(clf__softmax_resolve(ctx, 100, 100, &v), 0);
    ck_assert_int_eq(ctx->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_TIMED);
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(ctx), "gemm: blocked (forced)"));
    clf_context_destroy(ctx);
    drop_dir();
}
END_TEST

/* A forced fused, streaming or GEMM path is what the forward runs. */
START_TEST(choice_forced_attend_runs)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d;
    clf_attention *att = NULL;
    float x[2 * 8 * 32], y[2 * 8 * 32], y2[2 * 8 * 32];
    size_t i;

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 8;
    d.k = 4;
    for (i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = (float)((i * 37) % 19) * 0.1f - 0.9f;
    ck_assert_int_eq(clf_attention_create(&att, ctx, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 5), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", "fused"), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 8, y), 0);
    ck_assert_int_eq(clf__attention_last_fused(att), 1);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", "gemm"), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 8, y2), 0);
    ck_assert_int_eq(clf__attention_last_fused(att), 0);
    ck_assert_int_eq(clf__attention_last_flash(att), 0);
    /* Both ways compute the same attention (float rounding apart). */
    for (i = 0; i < sizeof y / sizeof *y; i++)
        ck_assert_float_eq_tol(y[i], y2[i], 1e-5f);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", "flash"), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 8, y), 0);
    ck_assert_int_eq(clf__attention_last_flash(att), 1);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", NULL), 0);
    for (i = 0; i < sizeof y / sizeof *y; i++)
        ck_assert_float_eq_tol(y[i], y2[i], 1e-5f);
    clf_attention_destroy(att);
}
END_TEST

START_TEST(choice_unknown_names_list_valid_ones)
{
    clf_context *ctx = tu_context();
    int v;

    ASSERT_FAILS(clf_context_force_kernel(ctx, "gemm", "openblas"),
                 CLF_EINVALID_ARGUMENT, "clblast, blocked, tiled or split");
    ASSERT_FAILS(clf_context_force_kernel(ctx, "softmax", "fast"),
                 CLF_EINVALID_ARGUMENT, "scalar, vector or group");
    ASSERT_FAILS(clf_context_force_kernel(ctx, "speed", "fast"),
                 CLF_EINVALID_ARGUMENT, "softmax, gemm, attend or halfgemm");
    ASSERT_FAILS(clf_context_force_kernel(ctx, "speed", NULL),
                 CLF_EINVALID_ARGUMENT, "softmax, gemm, attend or halfgemm");
    ASSERT_FAILS(clf_context_force_kernel(NULL, "gemm", "blocked"),
                 CLF_ENULL_ARGUMENT, "ctx");
    setenv("CLINFORMER_KERNELS", "softmax=group,attend=fast", 1);
    ASSERT_FAILS(clf__softmax_resolve(ctx, 10, 10, &v), CLF_EINVALID_ARGUMENT,
                 "gemm, fused, flash or flashwg");
    setenv("CLINFORMER_KERNELS", "softmax", 1);
    ASSERT_FAILS(clf__softmax_resolve(ctx, 10, 10, &v), CLF_EINVALID_ARGUMENT,
                 "CLINFORMER_KERNELS");
    unsetenv("CLINFORMER_KERNELS");
}
END_TEST

/* One context times and stores; a fresh one reads the store, times
 * nothing and takes the same kernel. */
START_TEST(choice_store_is_read_by_a_fresh_context)
{
    clf_context *a = NULL, *b = NULL;
    clf_kernel_choice kc;
    char path[512];
    struct stat st;
    int va = -1, vb = -1;
    size_t count = 0;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    ck_assert_int_eq(clf_context_build(a), 0);
    ck_assert_int_eq(clf__gemm_resolve(a, CLF_ROLE_PROJ, 300, 64, 64, 1, &va),
                     0);
    ck_assert_int_eq(a->last_source[CLF_KIND_GEMM], CLF_SOURCE_TIMED);
    store_file(path, sizeof path);
    ck_assert_str_ne(path, "");
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0600);

    ck_assert_int_eq(clf_context_create(&b, NULL), 0);
    ck_assert_int_eq(clf_context_kernel_choice_count(b, &count), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_int_eq(clf_context_kernel_choice(b, 0, &kc), 0);
    ck_assert_str_eq(kc.kind, "gemm");
    ck_assert_str_eq(kc.bucket, "m512.n64.k64");
    ck_assert_str_eq(kc.name, clf__choice_name(CLF_KIND_GEMM, va - 1));
    ck_assert_int_eq(kc.source, CLF_SOURCE_STORED);
    ASSERT_FAILS(clf_context_kernel_choice(b, 1, &kc), CLF_EINVALID_ARGUMENT,
                 "index 1");
    /* Same bucket, another size in it: no timing (b has no kernels built,
     * so timing would have to build them). */
    ck_assert_int_eq(clf__gemm_resolve(b, CLF_ROLE_PROJ, 400, 64, 64, 1, &vb),
                     0);
    ck_assert_int_eq(vb, va);
    ck_assert_int_eq(b->last_source[CLF_KIND_GEMM], CLF_SOURCE_STORED);
    ck_assert_ptr_null(b->program);
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(b), "(stored m512.n64.k64: "));
    clf_context_destroy(b);
    clf_context_destroy(a);
    drop_dir();
}
END_TEST

/* Choices stored under other GEMM tuning parameters are made again. */
START_TEST(choice_new_tuning_times_again)
{
    clf_context *a = NULL;
    int v = -1;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    ck_assert_int_eq(clf_context_build(a), 0);
    ck_assert_int_eq(clf__softmax_resolve(a, 50, 50, &v), 0);
    ck_assert_int_eq(a->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_TIMED);
    ck_assert_int_eq(clf__softmax_resolve(a, 50, 50, &v), 0);
    ck_assert_int_eq(a->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_TIMED);
    snprintf(a->tuned, sizeof a->tuned, "Xgemm MWG=64");
    ck_assert_int_eq(clf__softmax_resolve(a, 50, 50, &v), 0);
    ck_assert_int_eq(a->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_TIMED);
    ck_assert_str_eq(a->last_bucket[CLF_KIND_SOFTMAX], "r64.c64");
    a->tuned[0] = '\0';
    ck_assert_int_eq(clf__softmax_resolve(a, 50, 50, &v), 0);
    ck_assert_int_eq(a->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_STORED);
    clf_context_destroy(a);
    drop_dir();
}
END_TEST

/* Counts the entries a fresh context reads from dir. */
static size_t
entries_read(void)
{
    clf_context *c = NULL;
    size_t count = 99;

    ck_assert_int_eq(clf_context_create(&c, NULL), 0);
    ck_assert_int_eq(clf_context_kernel_choice_count(c, &count), 0);
    clf_context_destroy(c);
    return count;
}

/* The store's key names the kernel sources the choices were timed with
 * (a hash of them and their -D constants): a store written by a library
 * with other kernels is not read. */
START_TEST(choice_store_of_other_kernels_is_ignored)
{
    clf_context *a = NULL;
    char path[512], text[4096], *k;
    FILE *f;
    size_t len;
    int v;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    ck_assert_int_eq(clf_context_build(a), 0);
    ck_assert_int_eq(clf__softmax_resolve(a, 64, 64, &v), 0);
    clf_context_destroy(a);
    store_file(path, sizeof path);
    ck_assert_str_ne(path, "");
    ck_assert_uint_eq(entries_read(), 1);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    k = strstr(text, "|kernels ");
    ck_assert_ptr_nonnull(k);
    k += strlen("|kernels ");
    ck_assert_uint_eq(strspn(k, "0123456789abcdef"), 16);
    *k = *k == '0' ? '1' : '0';
    write_file(path, text);
    ck_assert_uint_eq(entries_read(), 0);
    drop_dir();
}
END_TEST

START_TEST(choice_bad_stores_are_ignored)
{
    clf_context *a = NULL;
    char path[512], head[2048], text[4096], *big;
    FILE *f;
    int v;
    size_t len, i;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(a, "gemm", "clblast"), 0);
    ck_assert_int_eq(clf_context_build(a), 0);
    ck_assert_int_eq(clf__softmax_resolve(a, 64, 64, &v), 0);
    clf_context_destroy(a);
    store_file(path, sizeof path);
    ck_assert_str_ne(path, "");
    ck_assert_uint_eq(entries_read(), 1);
    /* The first two lines: format and device key. */
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    len = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[len] = '\0';
    *(strchr(strchr(head, '\n') + 1, '\n') + 1) = '\0';

    /* Unknown kinds, names, bad buckets, extra fields, a missing newline:
     * those lines are skipped, the good one is kept. */
    snprintf(text, sizeof text,
             "%ssoftmax r64.c64 turbo\nspeed r64.c64 scalar\n"
             "softmax R64/../x scalar\nsoftmax r64.c64 scalar extra\n"
             "gemm m64.n64.k64 blocked\nattend n1.l1.h1.d16.kv1 fused",
             head);
    write_file(path, text);
    ck_assert_uint_eq(entries_read(), 1);
    /* Another device or version: the key differs, all ignored. */
    snprintf(text, sizeof text,
             "clinformer kernel choices 1\nkey other device\n"
             "gemm m64.n64.k64 blocked\n");
    write_file(path, text);
    ck_assert_uint_eq(entries_read(), 0);
    /* Garbage and binary. */
    write_file(path, "\x01\x02garbage\n\n\n");
    ck_assert_uint_eq(entries_read(), 0);
    /* Too large. */
    big = malloc(70000 + sizeof head);
    ck_assert_ptr_nonnull(big);
    strcpy(big, head);
    for (i = strlen(big); i < 70000; i++)
        big[i] = i % 30 == 29 ? '\n' : 'x';
    big[i] = '\0';
    strcat(big, "gemm m64.n64.k64 blocked\n");
    write_file(path, big);
    free(big);
    ck_assert_uint_eq(entries_read(), 0);
    /* Not a regular file: a link to a good store is not followed. */
    snprintf(text, sizeof text, "%sgemm m64.n64.k64 blocked\n", head);
    snprintf(head, sizeof head, "%s/elsewhere", dir);
    write_file(head, text);
    ck_assert_int_eq(remove(path), 0);
    ck_assert_int_eq(symlink(head, path), 0);
    ck_assert_uint_eq(entries_read(), 0);
    ck_assert_int_eq(remove(path), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_uint_eq(entries_read(), 0);
    rmdir(path);
    /* A FIFO is refused at once, not waited on. */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(10);
    ck_assert_uint_eq(entries_read(), 0);
    alarm(0);
    ck_assert_int_eq(remove(path), 0);
    /* A store in a directory others may write is not read. */
    write_file(path, text);
    ck_assert_uint_eq(entries_read(), 1);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_uint_eq(entries_read(), 0);
    ck_assert_int_eq(chmod(dir, 0700), 0);
    drop_dir();
}
END_TEST

/* A stored throughput is what clf__rate_record writes, 1 to 2e9 rows a
 * second; a rate outside it is ignored, to be measured again. */
START_TEST(choice_implausible_throughput_is_ignored)
{
    static const char *const bad[] = {
        "0", "2000000001", "2147483647", "99999999999999999999", "-5", "1e3"};
    clf_context *a = NULL;
    char path[512], head[2048], text[4096];
    FILE *f;
    size_t len, i;
    int v;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    ck_assert_int_eq(clf_context_build(a), 0);
    ck_assert_int_eq(clf__softmax_resolve(a, 64, 64, &v), 0);
    clf_context_destroy(a);
    store_file(path, sizeof path);
    ck_assert_str_ne(path, "");
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    len = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[len] = '\0';
    *(strchr(strchr(head, '\n') + 1, '\n') + 1) = '\0';
    snprintf(text, sizeof text, "%sthroughput shard.enc.d8 2000000000\n", head);
    write_file(path, text);
    ck_assert_uint_eq(entries_read(), 1);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%sthroughput shard.enc.d8 %s\n", head,
                 bad[i]);
        write_file(path, text);
        ck_assert_msg(entries_read() == 0, "rate %s was trusted", bad[i]);
    }
    drop_dir();
}
END_TEST

/* A bucket of 40 characters for shape i, so that lines are long. */
static void
long_bucket(char *b, size_t cap, int i)
{
    snprintf(b, cap, "r%06d.c8.padpadpadpadpadpadpadpadpad", i);
}

/* The store has no entry cap: 600 shapes (past the 256 it once kept)
 * are all stored, and a fresh context (another process) times none of
 * them. */
START_TEST(choice_many_shapes_are_remembered)
{
    clf_context *a = NULL, *b = NULL;
    const double ms[3] = {1.0, 2.0, 3.0};
    char bucket[CLF_BUCKET_MAX];
    int i, w = -1;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    clf__lock(a);
    for (i = 0; i < 600; i++) {
        long_bucket(bucket, sizeof bucket, i);
        clf__choice_record(a, CLF_KIND_SOFTMAX, bucket, i % 3, ms);
    }
    clf__unlock(a);
    clf_context_destroy(a);
    ck_assert_uint_eq(entries_read(), 600);
    ck_assert_int_eq(clf_context_create(&b, NULL), 0);
    clf__lock(b);
    for (i = 0; i < 600; i++) {
        long_bucket(bucket, sizeof bucket, i);
        ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_SOFTMAX, bucket, &w),
                         1);
        ck_assert_int_eq(w, i % 3);
        ck_assert_int_eq(b->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_STORED);
    }
    clf__unlock(b);
    clf_context_destroy(b);
    drop_dir();
}
END_TEST

/* Past the store's size (64 KiB), the least recently used entries are
 * dropped first: an old entry looked up again survives, the oldest ones
 * untouched since go, the file stays readable and within its bound. */
START_TEST(choice_store_drops_least_recently_used)
{
    clf_context *a = NULL, *b = NULL;
    const double ms[3] = {1.0, 2.0, 3.0};
    char bucket[CLF_BUCKET_MAX], path[512];
    struct stat st;
    size_t count = 0;
    int i, w = -1;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    clf__lock(a);
    for (i = 0; i < 1400; i++) {
        long_bucket(bucket, sizeof bucket, i);
        clf__choice_record(a, CLF_KIND_SOFTMAX, bucket, i % 3, ms);
        if (i >= 10) { /* shape 5 keeps being used */
            long_bucket(bucket, sizeof bucket, 5);
            ck_assert_int_eq(
                clf__choice_lookup(a, CLF_KIND_SOFTMAX, bucket, &w), 1);
        }
    }
    clf__unlock(a);
    clf_context_destroy(a);
    store_file(path, sizeof path);
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert_int_le(st.st_size, 65536);
    ck_assert_int_eq(clf_context_create(&b, NULL), 0);
    ck_assert_int_eq(clf_context_kernel_choice_count(b, &count), 0);
    ck_assert_uint_gt(count, 600);
    ck_assert_uint_lt(count, 1400);
    clf__lock(b);
    long_bucket(bucket, sizeof bucket, 1399);
    ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_SOFTMAX, bucket, &w), 1);
    long_bucket(bucket, sizeof bucket, 5);
    ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_SOFTMAX, bucket, &w), 1);
    ck_assert_int_eq(w, 5 % 3);
    long_bucket(bucket, sizeof bucket, 0);
    ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_SOFTMAX, bucket, &w), 0);
    clf__choice_release(b);
    long_bucket(bucket, sizeof bucket, 1400 - (int)count);
    ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_SOFTMAX, bucket, &w), 0);
    clf__choice_release(b);
    long_bucket(bucket, sizeof bucket, 1401 - (int)count);
    ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_SOFTMAX, bucket, &w), 1);
    clf__unlock(b);
    clf_context_destroy(b);
    drop_dir();
}
END_TEST

/* ------------------------------------------------------- GEMM roles */

/* Every GEMM way the context knows, rewritten by the role its bucket
 * names (the projections' buckets name none), as if stored so. */
static void
store_role_ways(clf_context *ctx, const int way[CLF_ROLE_COUNT])
{
    static const char *const prefix[CLF_ROLE_COUNT] = {"", "comp.", "score.",
                                                       "weigh.", "ffn."};
    size_t i;
    int r, role;

    for (i = 0; i < ctx->nchoices; i++) {
        struct clf__choice_entry *e = &ctx->choice_list[i];
        if (e->kind != CLF_KIND_GEMM)
            continue;
        role = CLF_ROLE_PROJ;
        for (r = 1; r < CLF_ROLE_COUNT; r++)
            if (strncmp(e->bucket, prefix[r], strlen(prefix[r])) == 0)
                role = r;
        e->winner = way[role] - 1;
        e->source = CLF_SOURCE_STORED;
    }
}

/* The suite's context as a fresh process's (no store read or written, no
 * choice known, no way pinned). */
static clf_context *
fresh_context(void)
{
    clf_context *ctx = tu_context();

    unsetenv("CLINFORMER_KERNELS");
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    ctx->nchoices = 0;
    ctx->choices_loaded = 1;
    clf__gemm_pin(ctx, CLF_GEMM_UNDECIDED);
    ck_assert_int_eq(clf_context_build(ctx), 0);
    return ctx;
}

static void
assert_listed(clf_context *ctx, const char *want)
{
    ck_assert_msg(strstr(clf_context_kernel_choices(ctx), want) != NULL,
                  "\"%s\" not in \"%s\"", want,
                  clf_context_kernel_choices(ctx));
}

/* Load planted on one candidate's runs: a delay after the launch of the
 * candidate `victim` in rounds 1..rounds, before its clFinish. */
struct planted {
    int victim, rounds;
    double ms; /* the delay */
};

static void
plant(void *user, int v, int round)
{
    const struct planted *p = user;
    struct timespec ts;

    ts.tv_sec = (time_t)(p->ms / 1e3);
    ts.tv_nsec = (long)((p->ms - 1e3 * (double)ts.tv_sec) * 1e6);
    if (v == p->victim && round >= 1 && round <= p->rounds)
        nanosleep(&ts, NULL);
}

/* A delay that dwarfs every candidate's time of the 512^3 projection GEMM
 * on this device (as the fresh context's timing just gave them in kc):
 * 200 ms on a CPU runtime, more where the GEMM itself takes that long
 * (rusticl on llvmpipe takes most of a second). */
static double
planted_ms(const clf_kernel_choice *kc)
{
    double top = 0.0;
    int i;

    for (i = 0; i < 3; i++)
        if (kc->ms[i] > top)
            top = kc->ms[i];
    return 200.0 + 4.0 * top;
}

/* A burst of load on the fastest candidate's runs in one round does not
 * move the GEMM choice: the candidates take turns in every round and each
 * keeps its best; the same load on every round of it does (the test can
 * fail).  The stored times show what the choice saw. */
START_TEST(choice_survives_a_burst_of_load)
{
    clf_context *ctx = fresh_context();
    struct planted p = {0, 0, 0.0};
    int quiet = -1, burst = -1, always = -1;
    clf_kernel_choice kc;

    ck_assert_int_eq(
        clf__gemm_resolve(ctx, CLF_ROLE_PROJ, 512, 512, 512, 1, &quiet), 0);
    ck_assert_int_eq(clf_context_kernel_choice(ctx, 0, &kc), 0);
    p.ms = planted_ms(&kc);
    p.victim = quiet - 1;
    ctx->timing_hook = plant;
    ctx->timing_hook_user = &p;
    p.rounds = 1; /* of the 2 kept */
    ctx->nchoices = 0;
    ck_assert_int_eq(
        clf__gemm_resolve(ctx, CLF_ROLE_PROJ, 512, 512, 512, 1, &burst), 0);
    ck_assert_int_eq(burst, quiet);
    ck_assert_int_eq(clf_context_kernel_choice(ctx, 0, &kc), 0);
    ck_assert(kc.ms[quiet - 1] > 0.0 && kc.ms[quiet - 1] < p.ms);
    p.rounds = 2;
    ctx->nchoices = 0;
    ck_assert_int_eq(
        clf__gemm_resolve(ctx, CLF_ROLE_PROJ, 512, 512, 512, 1, &always), 0);
    ck_assert_int_ne(always, quiet);
    ck_assert_int_eq(clf_context_kernel_choice(ctx, 0, &kc), 0);
    ck_assert(kc.ms[quiet - 1] >= p.ms);
    ctx->timing_hook = NULL;
    ctx->timing_hook_user = NULL;
    ctx->nchoices = 0;
    unsetenv("CLINFORMER_CACHE_DIR");
    tu_cache_dir_restore();
}
END_TEST

/* A new context that records one choice (into the store of fresh_dir). */
static clf_context *
with_choice(int role, const char *bucket, int winner, const double *ms)
{
    clf_context *ctx = NULL;

    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    clf__lock(ctx);
    clf__choice_record(ctx, role, bucket, winner, ms);
    clf__unlock(ctx);
    return ctx;
}

/* Checking stored choices (clf_context_check_kernel_choices) times each
 * again once and lists the times now beside the stored ones, saying when
 * another candidate now beats the stored winner by 1.5x (here the stored
 * one's runs carry a planted delay, planted_ms); the forward keeps the stored
 * winner and the store keeps it too. */
START_TEST(choice_check_times_stored_choices_again)
{
    clf_context *a = NULL, *b = NULL;
    /* as if timed under load; split does not take K = 512 */
    const double ms[4] = {0.01, 50.0, 50.0, 0.0};
    struct planted p = {0, 2, 0.0};
    clf_kernel_choice kc;
    int v = -1;

    ck_assert_int_eq(
        clf__gemm_resolve(fresh_context(), CLF_ROLE_PROJ, 512, 512, 512, 1, &v),
        0);
    ck_assert_int_eq(clf_context_kernel_choice(tu_context(), 0, &kc), 0);
    p.ms = planted_ms(&kc);
    tu_context()->nchoices = 0;
    fresh_dir();
    clf_context_destroy(with_choice(CLF_KIND_GEMM, "m512.n512.k512", 0, ms));
    ck_assert_int_eq(clf_context_create(&b, NULL), 0);
    ck_assert_int_eq(clf_context_build(b), 0);
    ck_assert_int_eq(clf_context_check_kernel_choices(b, 1), 0);
    b->timing_hook = plant;
    b->timing_hook_user = &p;
    ck_assert_int_eq(clf__gemm_resolve(b, CLF_ROLE_PROJ, 512, 512, 512, 1, &v),
                     0);
    ck_assert_int_eq(v, CLF_GEMM_CLBLAST); /* the stored winner runs */
    assert_listed(b, "gemm: clblast (stored m512.n512.k512: clblast 0.01 ms, "
                     "blocked 50.00 ms, tiled 50.00 ms; now: clblast ");
    assert_listed(b, "x faster than the stored clblast: clinformer tune "
                     "--choices re-times)");
    /* once per choice and context: found again, not timed again */
    b->timing_hook = NULL;
    ck_assert_int_eq(clf__gemm_resolve(b, CLF_ROLE_PROJ, 512, 512, 512, 1, &v),
                     0);
    ck_assert_int_eq(v, CLF_GEMM_CLBLAST);
    assert_listed(b, "now: clblast ");
    clf_context_destroy(b);
    /* the store still holds the stored winner, and a context that does
     * not check lists no times now */
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    ck_assert_int_eq(clf__gemm_resolve(a, CLF_ROLE_PROJ, 512, 512, 512, 1, &v),
                     0);
    ck_assert_int_eq(v, CLF_GEMM_CLBLAST);
    ck_assert_ptr_null(strstr(clf_context_kernel_choices(a), "now:"));
    ck_assert_int_eq(clf_context_check_kernel_choices(NULL, 1),
                     CLF_ENULL_ARGUMENT);
    clf_context_destroy(a);
    drop_dir();
}
END_TEST

/* The store keeps each candidate's time with the winner, and a fresh
 * context reads them back; a line whose times are not one per candidate
 * (positive, "-" or "x") is not trusted.  Forgetting the choices empties
 * the store: the next forward times them again. */
START_TEST(choice_store_keeps_times_and_forgets)
{
    clf_context *a = NULL, *b = NULL;
    const double ms[4] = {1.5, -1.0, 0.25, 0.0};
    clf_kernel_choice kc;
    char path[512], text[2048];
    size_t count = 0, dropped = 0;
    FILE *f;
    int w = -1;

    fresh_dir();
    a = with_choice(CLF_KIND_GEMM, "m64.n64.k64", 2, ms);
    ck_assert_int_eq(clf_context_create(&b, NULL), 0);
    ck_assert_int_eq(clf_context_kernel_choice_count(b, &count), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_int_eq(clf_context_kernel_choice(b, 0, &kc), 0);
    ck_assert_str_eq(kc.name, "tiled");
    ck_assert(kc.ms[0] == 1.5 && kc.ms[1] == -1.0 && kc.ms[2] == 0.25 &&
              kc.ms[3] == 0.0);
    ck_assert_str_eq(clf_kernel_candidate_name("gemm", 2), "tiled");
    ck_assert_str_eq(clf_kernel_candidate_name("gemm", 3), "split");
    ck_assert_ptr_null(clf_kernel_candidate_name("gemm", 4));
    ck_assert_ptr_null(clf_kernel_candidate_name("pool", 0));
    clf__lock(b);
    ck_assert_int_eq(clf__choice_lookup(b, CLF_KIND_GEMM, "m64.n64.k64", &w),
                     1);
    clf__unlock(b);
    ck_assert_ptr_nonnull(strstr(clf_context_kernel_choices(b),
                                 "(stored m64.n64.k64: clblast 1.50 ms, "
                                 "blocked failed, tiled 0.25 ms)"));
    clf_context_destroy(b);
    /* times of another count, or not numbers: the line is not read */
    store_file(path, sizeof path);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    ck_assert_ptr_nonnull(
        strstr(text, "gemm m64.n64.k64 tiled 1.5,x,0.25,-\n"));
    {
        static const char *const bad[] = {"1.5,x,0.25",  "1.5,x,0.25,-,1",
                                          "1.5,y,2,-",   "0,1,2,-",
                                          "1.5,x,nan,-", "1.5,,2,-"};
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char *at = strstr(text, "tiled ");
            ck_assert_ptr_nonnull(at);
            f = fopen(path, "w");
            ck_assert_ptr_nonnull(f);
            fprintf(f, "%.*stiled %s\n", (int)(at - text), text, bad[i]);
            fclose(f);
            ck_assert_int_eq(clf_context_create(&b, NULL), 0);
            ck_assert_int_eq(clf_context_kernel_choice_count(b, &count), 0);
            ck_assert_msg(count == 0, "times \"%s\" were trusted", bad[i]);
            clf_context_destroy(b);
        }
    }
    /* forgotten: a's choice gone from the store */
    ck_assert_int_eq(clf_context_forget_kernel_choices(a, &dropped), 0);
    ck_assert_uint_eq(dropped, 1);
    ck_assert_int_eq(clf_context_kernel_choice_count(a, &count), 0);
    ck_assert_uint_eq(count, 0);
    ck_assert_int_eq(clf_context_create(&b, NULL), 0);
    ck_assert_int_eq(clf_context_kernel_choice_count(b, &count), 0);
    ck_assert_uint_eq(count, 0);
    ck_assert_int_eq(clf_context_forget_kernel_choices(NULL, NULL),
                     CLF_ENULL_ARGUMENT);
    clf_context_destroy(b);
    clf_context_destroy(a);
    drop_dir();
}
END_TEST

/* A choice found again for an earlier shape is listed with that shape's
 * times, not with those of the role's last timing (another shape): the
 * listing once said "clblast (timed A: clblast 0.08 ms, tiled 0.05 ms)"
 * with B's times beside A's winner. */
START_TEST(choice_listing_shows_the_found_entry_times)
{
    clf_context *a = NULL;
    const double ms_a[3] = {1.0, 2.0, 3.0}, ms_b[3] = {6.0, 5.0, 4.0};
    int w = -1;

    fresh_dir();
    ck_assert_int_eq(clf_context_create(&a, NULL), 0);
    clf__lock(a);
    clf__choice_record(a, CLF_KIND_SOFTMAX, "r64.c8", 0, ms_a);
    clf__choice_record(a, CLF_KIND_SOFTMAX, "r128.c8", 2, ms_b);
    ck_assert_int_eq(clf__choice_lookup(a, CLF_KIND_SOFTMAX, "r64.c8", &w), 1);
    ck_assert_int_eq(w, 0);
    clf__unlock(a);
    assert_listed(a, "softmax: scalar (timed r64.c8: scalar 1.00 ms, "
                     "vector 2.00 ms, group 3.00 ms)");
    clf_context_destroy(a);
    drop_dir();
}
END_TEST

/* Two roles of one forward take different ways: the projections the
 * blocked kernel, the compression and the weighted sum the tiled one, the
 * scores CLBlast, each as its own bucket says; the output stays the
 * reference's. */
START_TEST(choice_roles_of_a_forward_take_their_own_ways)
{
    clf_context *ctx = fresh_context();
    const int way[CLF_ROLE_COUNT] = {CLF_GEMM_BLOCKED, CLF_GEMM_TILED,
                                     CLF_GEMM_CLBLAST, CLF_GEMM_TILED,
                                     CLF_GEMM_CLBLAST};
    const size_t B = 2, n = 64, D = 64, count = B * n * D;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    clf_attention_desc d;
    struct layer l;
    size_t blocked, tiled;

    memset(&d, 0, sizeof d);
    d.d_model = D, d.heads = 4, d.max_seq_len = n, d.k = 16;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    ck_assert_ptr_eq(tu_tiled_fit(ctx), ctx);
    layer_make(&l, &d, 601);
    clf__attention_set_attend(l.att, CLF_ATTEND_GEMM);
    tu_fill(x, count, 602, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_forward(l.att, x, B, n, y), 0); /* timed */
    ck_assert_int_eq(clf__attention_compress_first(l.att, B, n), 1);
    store_role_ways(ctx, way);
    blocked = clf__gemm_state(ctx)->blocked_calls;
    tiled = clf__tiled_state(ctx)->calls;
    ck_assert_int_eq(clf_attention_forward(l.att, x, B, n, y), 0);
    /* Q, K, V, output projections: 4 blocked GEMMs, no more (the scores
     * are CLBlast's); E X and the weighted sum: tiled. */
    ck_assert_uint_eq(clf__gemm_state(ctx)->blocked_calls - blocked, 4);
    ck_assert_uint_ge(clf__tiled_state(ctx)->calls - tiled, 2);
    assert_listed(ctx, "gemm: blocked (stored m128.n64.k64");
    assert_listed(ctx, "gemm[comp]: tiled (stored comp.m16.n64.k64.b2");
    assert_listed(ctx, "gemm[score]: clblast (stored score.");
    assert_listed(ctx, "gemm[weigh]: tiled (stored weigh.");
    ref_attention(&l.ref, 0, x, B, n, ref);
    tu_assert_close(y, ref, count, 1e-4, "roles in their own ways");
    layer_free(&l);
    free(x);
    free(y);
    free(ref);
    unsetenv("CLINFORMER_CACHE_DIR");
}
END_TEST

/* A forward of the encoder fixture through m (2 x 10 x 16); its output
 * into y. */
static void
encoder_forward(clf_model *m, float *y)
{
    char path[1200];
    const char *top = getenv("top_srcdir");
    clf_array x;

    snprintf(path, sizeof path, "%s/tests/data/lucidrains_encoder_x.npy",
             top ? top : ".");
    ck_assert_msg(clf_npy_load(path, &x) == 0, "%s", clf_last_error());
    ck_assert_uint_eq(x.count, 2 * 10 * 16);
    ck_assert_msg(
        clf_model_forward(m, x.data, x.shape[0], x.shape[1], y, NULL) == 0,
        "%s", clf_last_error());
    clf_array_free(&x);
}

static clf_model *
encoder_model(clf_context *ctx)
{
    char path[1200];
    clf_model *m = NULL;
    const char *top = getenv("top_srcdir");

    snprintf(path, sizeof path, "%s/tests/data/lucidrains_encoder.safetensors",
             top ? top : ".");
    ck_assert_msg(clf_model_load(&m, ctx, path, NULL) == 0, "%s",
                  clf_last_error());
    return m;
}

/* Another thread's forwards, whose plans time and take ways of their own
 * (a layer of another shape, every way stored as the tiled one). */
struct other {
    struct layer l;
    int status;
};

static void *
other_forwards(void *arg)
{
    struct other *o = arg;
    float x[2 * 24 * 32], y[2 * 24 * 32];
    int i;

    tu_fill(x, 2 * 24 * 32, 611, -1.0f, 1.0f);
    for (i = 0; i < 20 && o->status == 0; i++)
        o->status = clf_attention_forward(o->l.att, x, 2, 24, y);
    return NULL;
}

/* A model's feed-forward GEMMs run the way of their own role (here the
 * blocked kernel, 2 GEMMs in each of the 2 layers), never the attention
 * plans' (CLBlast here) nor what another thread's plans choose meanwhile;
 * the output is bit for bit the model's alone. */
START_TEST(choice_feed_forward_takes_its_own_way)
{
    clf_context *ctx = fresh_context();
    const int way[CLF_ROLE_COUNT] = {CLF_GEMM_CLBLAST, CLF_GEMM_CLBLAST,
                                     CLF_GEMM_CLBLAST, CLF_GEMM_CLBLAST,
                                     CLF_GEMM_BLOCKED};
    const int tiled[CLF_ROLE_COUNT] = {CLF_GEMM_TILED, CLF_GEMM_TILED,
                                       CLF_GEMM_TILED, CLF_GEMM_TILED,
                                       CLF_GEMM_TILED};
    clf_model *m = encoder_model(ctx);
    static float alone[2 * 10 * 16], y[2 * 10 * 16];
    struct other o;
    clf_attention_desc d;
    pthread_t tid;
    size_t blocked, e;
    int i;

    memset(&o, 0, sizeof o);
    memset(&d, 0, sizeof d);
    d.d_model = 32, d.heads = 2, d.max_seq_len = 24, d.k = 8;
    layer_make(&o.l, &d, 610);
    clf__attention_set_attend(o.l.att, CLF_ATTEND_GEMM);
    other_forwards(&o); /* times its shapes' ways */
    ck_assert_int_eq(o.status, 0);
    store_role_ways(ctx, tiled);
    encoder_forward(m, alone); /* times the model's */
    store_role_ways(ctx, way);
    for (e = 0; e < ctx->nchoices; e++) /* the other layer's: tiled again */
        if (ctx->choice_list[e].kind == CLF_KIND_GEMM &&
            strstr(ctx->choice_list[e].bucket, "k32") != NULL)
            ctx->choice_list[e].winner = CLF_GEMM_TILED - 1;
    blocked = clf__gemm_state(ctx)->blocked_calls;
    encoder_forward(m, alone);
    ck_assert_uint_eq(clf__gemm_state(ctx)->blocked_calls - blocked, 4);
    assert_listed(ctx, "gemm[ffn]: blocked (stored ffn.m32.n64.k16");
    assert_listed(ctx, "gemm: clblast (stored m32.n16.k16");
    ck_assert_int_eq(pthread_create(&tid, NULL, other_forwards, &o), 0);
    for (i = 0; i < 20; i++) {
        encoder_forward(m, y);
        ck_assert_msg(memcmp(y, alone, sizeof y) == 0,
                      "forward %d beside another thread's differs", i);
    }
    ck_assert_int_eq(pthread_join(tid, NULL), 0);
    ck_assert_int_eq(o.status, 0);
    clf_model_destroy(m);
    layer_free(&o.l);
    unsetenv("CLINFORMER_CACHE_DIR");
}
END_TEST

/* Forced by the environment, every role of a model's forward says so on
 * its own line. */
START_TEST(choice_every_role_is_listed)
{
    clf_context *ctx = fresh_context();
    clf_model *m = encoder_model(ctx);
    static float y[2 * 10 * 16];
    static const char *const lines[] = {
        "softmax: vector (forced)",    "gemm: tiled (forced)",
        "gemm[comp]: tiled (forced)",  "gemm[score]: tiled (forced)",
        "gemm[weigh]: tiled (forced)", "gemm[ffn]: tiled (forced)",
        "attend: gemm (forced)"};
    size_t i;

    setenv("CLINFORMER_KERNELS", "gemm=tiled,softmax=vector,attend=gemm", 1);
    encoder_forward(m, y);
    unsetenv("CLINFORMER_KERNELS");
    for (i = 0; i < sizeof lines / sizeof lines[0]; i++)
        assert_listed(ctx, lines[i]);
    clf_model_destroy(m);
    unsetenv("CLINFORMER_CACHE_DIR");
}
END_TEST

/* The runtime knows the kinds only as the floors register them: the
 * library's four are there when it is loaded, each owned by its floor's
 * accessor; a kind registered here is forced by the API and the
 * environment, listed by its own labels, named in the errors and kept
 * apart from a second kind of the same name; a full registry and an
 * unregistered role fail with an error rather than writing past it. */
START_TEST(choice_kinds_are_registered_by_their_floors)
{
    static const char *const names[] = {"one", "two"};
    static const char *const labels[] = {"probe", "probe[x]"};
    static const struct clf__choice_kind probe = {"probe", names, 2, labels,
                                                  2,       99,    0};
    static const struct clf__choice_kind twin = {"probe", names, 2, labels,
                                                 1,       99,    0};
    static const struct clf__choice_kind big = {"big",         names, 2, labels,
                                                CLF_MAX_ROLES, 99,    0};
    clf_context *ctx = fresh_context();
    int id, w = -1;

    ck_assert_int_ge(CLF_KIND_SOFTMAX, 0);
    ck_assert_int_ge(CLF_KIND_GEMM, 0);
    ck_assert_int_ge(CLF_KIND_ATTEND, 0);
    ck_assert_int_ge(CLF_KIND_HALFGEMM, 0);
    ck_assert_str_eq(clf__choice_kind_name(CLF_KIND_ATTEND), "attend");
    ck_assert_str_eq(clf__choice_name(CLF_KIND_GEMM, CLF_GEMM_TILED - 1),
                     "tiled");
    ck_assert_int_eq(clf__choice_role_kind(CLF_KIND_GEMM + CLF_ROLE_FFN),
                     CLF_KIND_GEMM);
    ck_assert_ptr_null(clf_kernel_candidate_name("probe", 0));

    id = clf__choice_register(&probe);
    ck_assert_int_ge(id, 0);
    ck_assert_int_eq(clf__choice_register(&probe), id);
    ck_assert_int_eq(clf__choice_register(&twin), -1);
    ck_assert_int_eq(clf__choice_register(&big), -1);
    ck_assert_str_eq(clf_kernel_candidate_name("probe", 1), "two");
    ck_assert_int_eq(clf__choice_role_kind(id + 1), id);

    ck_assert_int_eq(clf_context_force_kernel(ctx, "probe", "two"), 0);
    clf__lock(ctx);
    ck_assert_int_eq(clf__choice_lookup(ctx, id + 1, "b1", &w), 1);
    clf__unlock(ctx);
    ck_assert_int_eq(w, 1);
    assert_listed(ctx, "probe[x]: two (forced)");
    ck_assert_ptr_null(strstr(clf_context_kernel_choices(ctx), "probe:"));

    ck_assert_int_ne(clf_context_force_kernel(ctx, "probe", "three"), 0);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "one or two"));
    setenv("CLINFORMER_KERNELS", "prob=one", 1);
    clf__lock(ctx);
    ck_assert_int_eq(clf__choice_lookup(ctx, id, "b1", &w),
                     CLF_EINVALID_ARGUMENT);
    clf__unlock(ctx);
    unsetenv("CLINFORMER_KERNELS");
    ck_assert_ptr_nonnull(
        strstr(clf_last_error(), "softmax, gemm, attend, halfgemm or probe"));

    clf__lock(ctx);
    ck_assert_int_eq(clf__choice_lookup(ctx, -1, "b1", &w),
                     CLF_EINVALID_ARGUMENT);
    clf__unlock(ctx);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not registered"));
    ck_assert_int_eq(clf_context_force_kernel(ctx, "probe", NULL), 0);
    ctx->last[id + 1] = -1;
    unsetenv("CLINFORMER_CACHE_DIR");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("choice");
    TCase *tc = tcase_create("choice");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, choice_force_is_used);
    tcase_add_test(tc, choice_forced_attend_runs);
    tcase_add_test(tc, choice_unknown_names_list_valid_ones);
    tcase_add_test(tc, choice_store_is_read_by_a_fresh_context);
    tcase_add_test(tc, choice_store_keeps_times_and_forgets);
    tcase_add_test(tc, choice_survives_a_burst_of_load);
    tcase_add_test(tc, choice_check_times_stored_choices_again);
    tcase_add_test(tc, choice_bad_stores_are_ignored);
    tcase_add_test(tc, choice_implausible_throughput_is_ignored);
    tcase_add_test(tc, choice_new_tuning_times_again);
    tcase_add_test(tc, choice_store_of_other_kernels_is_ignored);
    tcase_add_test(tc, choice_many_shapes_are_remembered);
    tcase_add_test(tc, choice_store_drops_least_recently_used);
    tcase_add_test(tc, choice_roles_of_a_forward_take_their_own_ways);
    tcase_add_test(tc, choice_feed_forward_takes_its_own_way);
    tcase_add_test(tc, choice_every_role_is_listed);
    tcase_add_test(tc, choice_listing_shows_the_found_entry_times);
    tcase_add_test(tc, choice_kinds_are_registered_by_their_floors);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
