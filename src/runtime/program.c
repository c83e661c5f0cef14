/* Building the kernels, and the on-disk cache of program binaries.
 *
 * A cache entry is one file named by a 64-bit hash of everything that
 * determines the binary: platform, device, driver, library version, kernel
 * source and build options.  The file holds a header (magic, full key hash,
 * payload length, payload hash) before the binary, so a truncated or
 * corrupted file is detected before the driver sees it.  Entries are written
 * to a temporary file and renamed into place, so readers never see a partial
 * entry. */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* OpenCL C 1.2, and the constants host and kernels share (kernel_params.h)
 * as -D options; the cache key hashes this string, so a changed constant
 * never loads a stale binary. */
#define BUILD_OPTIONS "-cl-std=CL1.2" CLF_KERNEL_PARAM_OPTIONS
#define CACHE_MAGIC "CLFBIN01"
#define CACHE_MAX ((size_t)256 << 20) /* entries larger are refused */

/* Everything below expands the registry (kernels.h). */
#define KERNEL_NAME(id, name) #name,
static const char *const kernel_names[CLF_K_COUNT] = {
    CLF_KERNEL_REGISTRY(CLF_REGISTRY_SKIP_FILE, KERNEL_NAME)};
#undef KERNEL_NAME

#define FILE_NAME(stem) #stem ".cl",
#define FILE_NAME_APART(stem, ext) #stem ".cl",
const char *const clf__kernel_files[CLF_KERNEL_FILES] = {
    CLF_KERNEL_REGISTRY(FILE_NAME, CLF_REGISTRY_SKIP_KERNEL)
        CLF_KERNEL_REGISTRY_APART(FILE_NAME_APART)};
#undef FILE_NAME
#undef FILE_NAME_APART

#define FILE_SOURCE(stem) clf__cl_##stem,
#define FILE_SOURCE_APART(stem, ext) clf__cl_##stem,
const char *const clf__kernel_sources[CLF_KERNEL_FILES] = {
    CLF_KERNEL_REGISTRY(FILE_SOURCE, CLF_REGISTRY_SKIP_KERNEL)
        CLF_KERNEL_REGISTRY_APART(FILE_SOURCE_APART)};
#undef FILE_SOURCE
#undef FILE_SOURCE_APART

#define FILE_NEEDS(stem) NULL,
#define FILE_NEEDS_APART(stem, ext) #ext,
const char *const clf__kernel_needs[CLF_KERNEL_FILES] = {
    CLF_KERNEL_REGISTRY(FILE_NEEDS, CLF_REGISTRY_SKIP_KERNEL)
        CLF_KERNEL_REGISTRY_APART(FILE_NEEDS_APART)};
#undef FILE_NEEDS
#undef FILE_NEEDS_APART

uint64_t
clf__hash64(const void *data, size_t len, uint64_t seed)
{
    /* FNV-1a, 64-bit. */
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL ^ seed;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Concatenates the kernel sources, from CLINFORMER_KERNEL_DIR when set:
 * the main program's, or only those files[i] != 0 marks when files is not
 * NULL. */
static int
load_sources_of(const unsigned char *files, char **out)
{
    const char *const *embedded = clf__kernel_sources;
    const char *dir = getenv("CLINFORMER_KERNEL_DIR");
    char *parts[CLF_KERNEL_FILES] = {NULL};
    size_t total = 1, i, len;
    char *src;
    int rc = 0;

    for (i = 0; i < CLF_KERNEL_FILES; i++) {
        if (files != NULL ? !files[i] : clf__kernel_needs[i] != NULL)
            continue;
        if (dir != NULL && *dir != '\0') {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, clf__kernel_files[i]);
            /* A kernel file is small; a FIFO or device is refused. */
            rc = clf__file_read_all(path, "CLINFORMER_KERNEL_DIR file",
                                    (size_t)16 << 20, &parts[i], &len);
            if (rc != 0)
                goto done;
        }
        total += strlen(parts[i] ? parts[i] : embedded[i]) + 1;
    }
    src = malloc(total);
    if (src == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto done;
    }
    src[0] = '\0';
    for (i = 0; i < CLF_KERNEL_FILES; i++) {
        if (files != NULL ? !files[i] : clf__kernel_needs[i] != NULL)
            continue;
        strcat(src, parts[i] ? parts[i] : embedded[i]);
        strcat(src, "\n");
    }
    *out = src;
done:
    for (i = 0; i < CLF_KERNEL_FILES; i++)
        free(parts[i]);
    return rc;
}

static int
load_sources(char **out)
{
    return load_sources_of(NULL, out);
}

/* The cache directory, or "" when caching is off or no home is known. */
void
clf__cache_dir(char *buf, size_t cap)
{
    const char *env = getenv("CLINFORMER_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");

    buf[0] = '\0';
    if (env != NULL && *env != '\0') {
        if (strcmp(env, "off") != 0)
            snprintf(buf, cap, "%s", env);
    } else if (xdg != NULL && *xdg != '\0') {
        snprintf(buf, cap, "%s/clinformer", xdg);
    } else if (home != NULL && *home != '\0') {
        snprintf(buf, cap, "%s/.cache/clinformer", home);
    }
}

static uint64_t
cache_key(const clf_context *ctx, const char *options, const char *src)
{
    uint64_t h = 0;
    const char *fields[8];
    size_t i;

    fields[0] = ctx->info.platform;
    fields[1] = ctx->info.name;
    fields[2] = ctx->info.vendor;
    fields[3] = ctx->info.driver;
    fields[4] = ctx->info.version;
    fields[5] = CLF_VERSION_STRING;
    fields[6] = options;
    fields[7] = src;
    for (i = 0; i < 8; i++) {
        h = clf__hash64(fields[i], strlen(fields[i]) + 1, h);
    }
    return h;
}

struct cache_header {
    char magic[8];
    uint64_t key;
    uint64_t length;
    uint64_t checksum;
};

int
clf__cache_entry_check(const void *data, size_t len, uint64_t key,
                       size_t *payload_off, size_t *payload_len)
{
    struct cache_header hdr;
    const unsigned char *p = data;

    if (len < sizeof hdr || len > CACHE_MAX)
        return -1;
    memcpy(&hdr, p, sizeof hdr);
    if (memcmp(hdr.magic, CACHE_MAGIC, 8) != 0 || hdr.key != key ||
        hdr.length != len - sizeof hdr || hdr.length == 0 ||
        hdr.checksum != clf__hash64(p + sizeof hdr, hdr.length, key))
        return -1;
    *payload_off = sizeof hdr;
    *payload_len = hdr.length;
    return 0;
}

/* The directory of a cache entry must be private (owned by the user, not
 * writable by others): an entry others could plant is never loaded. */
static int
cache_dir_trusted(const char *path)
{
    char dir[4200];
    const char *slash = strrchr(path, '/');

    if (slash == NULL || (size_t)(slash - path) >= sizeof dir)
        return 0;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    return clf__dir_private(dir[0] ? dir : "/") == 0;
}

/* Returns a binary for key, or NULL when absent or invalid (counted as a
 * reject when a file existed).  The whole entry is checked before the
 * driver sees it: size limit, magic, key, payload length against the file
 * size, payload checksum. */
static unsigned char *
cache_load(clf_context *ctx, const char *path, uint64_t key, size_t *len)
{
    size_t flen = 0, off = 0;
    char *data = NULL;
    unsigned char *bin;
    struct stat st;

    if (lstat(path, &st) != 0)
        return NULL;
    if (!cache_dir_trusted(path) ||
        clf__file_read_cache(path, "kernel cache entry", CACHE_MAX, &data,
                             &flen) != 0)
        goto reject;
    if (clf__cache_entry_check(data, flen, key, &off, len) != 0)
        goto reject;
    bin = malloc(*len);
    if (bin == NULL)
        goto reject;
    memcpy(bin, data + off, *len);
    free(data);
    return bin;
reject:
    ctx->stats.cache_rejects++;
    free(data);
    return NULL;
}

static void
cache_store(clf_context *ctx, cl_program prog, const char *dir,
            const char *path, uint64_t key)
{
    size_t len = 0;
    unsigned char *bin = NULL, *payload;
    struct cache_header hdr;

    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof len, &len,
                         NULL) != CL_SUCCESS ||
        len == 0)
        return;
    if (len > CACHE_MAX - sizeof hdr)
        return;
    bin = malloc(sizeof hdr + len);
    if (bin == NULL)
        return;
    payload = bin + sizeof hdr;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof payload, &payload,
                         NULL) != CL_SUCCESS)
        goto done;
    if (clf__dir_private(dir) != 0)
        goto done;
    memcpy(hdr.magic, CACHE_MAGIC, 8);
    hdr.key = key;
    hdr.length = len;
    hdr.checksum = clf__hash64(bin + sizeof hdr, len, key);
    memcpy(bin, &hdr, sizeof hdr);
    /* A fresh temporary file renamed into place: a symlink planted at
     * either name is never written through. */
    if (clf__file_write_atomic(path, bin, sizeof hdr + len) == 0)
        ctx->stats.cache_writes++;
done:
    free(bin);
}

static void
keep_log(clf_context *ctx, cl_program prog)
{
    size_t len = 0;
    char *log;

    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL,
                              &len) != CL_SUCCESS)
        return;
    log = malloc(len + 1);
    if (log == NULL)
        return;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, len, log,
                              NULL) != CL_SUCCESS)
        len = 0;
    log[len] = '\0';
    free(ctx->build_log);
    ctx->build_log = log;
}

static int
create_kernels(clf_context *ctx)
{
    int i;
    cl_int err;

    for (i = 0; i < CLF_K_COUNT; i++) {
        ctx->kernels[i] = clCreateKernel(ctx->program, kernel_names[i], &err);
        if (ctx->kernels[i] == NULL)
            return clf__fail(err, "kernel %s: clCreateKernel failed (%d)",
                             kernel_names[i], err);
        ctx->kernel_wg[i] = clf__kernel_wg(ctx, ctx->kernels[i]);
        if (ctx->kernel_wg[i] == 0)
            ctx->kernel_wg[i] = 1;
        if (clGetKernelWorkGroupInfo(
                ctx->kernels[i], ctx->device,
                CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                sizeof ctx->kernel_multiple[i], &ctx->kernel_multiple[i],
                NULL) != CL_SUCCESS ||
            ctx->kernel_multiple[i] == 0)
            ctx->kernel_multiple[i] = 1;
    }
    return 0;
}

static void
release_program(clf_context *ctx)
{
    int i;

    for (i = 0; i < CLF_K_COUNT; i++) {
        if (ctx->kernels[i] != NULL)
            clReleaseKernel(ctx->kernels[i]);
        ctx->kernels[i] = NULL;
    }
    if (ctx->program != NULL)
        clReleaseProgram(ctx->program);
    ctx->program = NULL;
}

/* Tries the cache entry; returns 0 with ctx->program built, or -1. */
static int
try_cached(clf_context *ctx, const char *path, uint64_t key)
{
    size_t len = 0;
    unsigned char *bin = cache_load(ctx, path, key, &len);
    const unsigned char *binp = bin;
    cl_int err, status = CL_SUCCESS;

    if (bin == NULL)
        return -1;
    ctx->program = clCreateProgramWithBinary(ctx->context, 1, &ctx->device,
                                             &len, &binp, &status, &err);
    free(bin);
    if (ctx->program == NULL || err != CL_SUCCESS || status != CL_SUCCESS ||
        clBuildProgram(ctx->program, 1, &ctx->device, BUILD_OPTIONS, NULL,
                       NULL) != CL_SUCCESS ||
        create_kernels(ctx) != 0) {
        release_program(ctx);
        ctx->stats.cache_rejects++;
        return -1;
    }
    ctx->stats.cache_loads++;
    return 0;
}

int
clf__program_build(clf_context *ctx)
{
    char *src = NULL;
    char dir[4096], path[4200];
    uint64_t key;
    cl_int err;
    int rc;

    rc = load_sources(&src);
    if (rc != 0)
        return rc;
    key = cache_key(ctx, BUILD_OPTIONS, src);
    clf__cache_dir(dir, sizeof dir);
    if (snprintf(path, sizeof path, "%s/%016llx.clbin", dir,
                 (unsigned long long)key) >= (int)sizeof path)
        dir[0] = '\0'; /* a path too long to use: no caching */
    if (dir[0] != '\0' && try_cached(ctx, path, key) == 0) {
        free(src);
        return 0;
    }

    ctx->program = clCreateProgramWithSource(ctx->context, 1,
                                             (const char **)&src, NULL, &err);
    if (ctx->program == NULL) {
        rc = clf__fail(err, "clCreateProgramWithSource failed (%d)", err);
        goto fail;
    }
    err = clBuildProgram(ctx->program, 1, &ctx->device, BUILD_OPTIONS, NULL,
                         NULL);
    keep_log(ctx, ctx->program);
    if (err != CL_SUCCESS) {
        rc = clf__fail(err,
                       "kernel build failed on \"%s\" (%d); see "
                       "clf_context_build_log()",
                       ctx->info.name, err);
        goto fail;
    }
    ctx->build_log[0] = '\0';
    ctx->stats.source_builds++;
    rc = create_kernels(ctx);
    if (rc != 0)
        goto fail;
    if (dir[0] != '\0')
        cache_store(ctx, ctx->program, dir, path, key);
    free(src);
    return 0;

fail:
    free(src);
    release_program(ctx);
    return rc;
}

int
clf__launch_1d(clf_context *ctx, enum clf__kernel_id id, size_t items)
{
    size_t local = ctx->kernel_multiple[id];
    size_t global;
    cl_int err;

    if (items == 0)
        return 0;
    /* A few multiples per group, never past the kernel's limit. */
    while (local * 2 <= ctx->kernel_wg[id] && local * 2 <= 256)
        local *= 2;
    if (local > ctx->kernel_wg[id])
        local = ctx->kernel_wg[id];
    global = (items + local - 1) / local * local;
    err = clf__enqueue_nd(ctx, ctx->kernels[id], 1, &global, &local);
    if (err != CL_SUCCESS)
        return clf__fail(err, "kernel %s: enqueue of %zu items failed (%d)",
                         kernel_names[id], items, err);
    return 0;
}

/* A program from a cache entry built with `options`, or NULL. */
static cl_program
program_from_cache(clf_context *ctx, const char *path, uint64_t key,
                   const char *options)
{
    size_t len = 0;
    unsigned char *bin = cache_load(ctx, path, key, &len);
    const unsigned char *binp = bin;
    cl_int err = CL_SUCCESS, status = CL_SUCCESS;
    cl_program prog;

    if (bin == NULL)
        return NULL;
    prog = clCreateProgramWithBinary(ctx->context, 1, &ctx->device, &len, &binp,
                                     &status, &err);
    free(bin);
    if (prog != NULL && (err != CL_SUCCESS || status != CL_SUCCESS ||
                         clBuildProgram(prog, 1, &ctx->device, options, NULL,
                                        NULL) != CL_SUCCESS)) {
        clReleaseProgram(prog);
        prog = NULL;
    }
    if (prog == NULL)
        ctx->stats.cache_rejects++;
    else
        ctx->stats.cache_loads++;
    return prog;
}

/* A program of the registry's files marked in files (indexed as
 * clf__kernel_files). */
static int
build_files(clf_context *ctx, const unsigned char *files, const char *options,
            cl_program *out)
{
    char *src = NULL, dir[4096], path[4200];
    cl_program prog = NULL;
    uint64_t key;
    cl_int err;
    size_t i;

    *out = NULL;
    for (i = 0; i < (size_t)CLF_KERNEL_FILES; i++)
        if (files[i] && clf__kernel_needs[i] != NULL &&
            !clf__device_has_extension(ctx, clf__kernel_needs[i]))
            return clf__fail(CLF_EUNSUPPORTED,
                             "%s needs %s, which device \"%s\" does not "
                             "report",
                             clf__kernel_files[i], clf__kernel_needs[i],
                             ctx->info.name);
    CLF_TRY(load_sources_of(files, &src));
    key = cache_key(ctx, options, src);
    clf__cache_dir(dir, sizeof dir);
    if (snprintf(path, sizeof path, "%s/%016llx.clbin", dir,
                 (unsigned long long)key) >= (int)sizeof path)
        dir[0] = '\0';
    if (dir[0] != '\0' &&
        (*out = program_from_cache(ctx, path, key, options)) != NULL) {
        free(src);
        return 0;
    }
    prog = clCreateProgramWithSource(ctx->context, 1, (const char **)&src, NULL,
                                     &err);
    free(src);
    if (prog == NULL)
        return clf__fail(err, "clCreateProgramWithSource failed (%d)", err);
    err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
    keep_log(ctx, prog);
    if (err != CL_SUCCESS) {
        clReleaseProgram(prog);
        return clf__fail(err,
                         "kernel build (%s) failed on \"%s\" (%d); see "
                         "clf_context_build_log()",
                         options, ctx->info.name, err);
    }
    ctx->build_log[0] = '\0';
    ctx->stats.source_builds++;
    if (dir[0] != '\0')
        cache_store(ctx, prog, dir, path, key);
    *out = prog;
    return 0;
}

/* Each part's files (CLF_FILE_<stem>), ended by -1. */
#define PART_FILE(stem) CLF_FILE_##stem,
#define PART_LIST(id, files) static const int part_##id[] = {files - 1};
CLF_PROGRAM_PARTS(PART_LIST, PART_FILE)
#undef PART_LIST
#define PART_PTR(id, files) part_##id,
static const int *const part_files[CLF_PART_COUNT] = {
    CLF_PROGRAM_PARTS(PART_PTR, CLF_REGISTRY_SKIP_FILE)};
#undef PART_PTR
#undef PART_FILE

int
clf__program_build_part(clf_context *ctx, enum clf__program_part part,
                        const char *options, cl_program *out)
{
    unsigned char files[CLF_KERNEL_FILES] = {0};
    const int *f;

    *out = NULL;
    if ((int)part < 0 || part >= CLF_PART_COUNT)
        return clf__fail(CLF_EINVALID_ARGUMENT, "program part %d unknown",
                         (int)part);
    for (f = part_files[part]; *f >= 0; f++)
        files[*f] = 1;
    return build_files(ctx, files, options, out);
}

int
clf__program_part_file(enum clf__program_part part, size_t i)
{
    size_t j;

    if ((int)part < 0 || part >= CLF_PART_COUNT)
        return -1;
    for (j = 0; j < i && part_files[part][j] >= 0; j++)
        ;
    return part_files[part][j];
}

void
clf__kernel_options(const char *const *over, const size_t *val, size_t n,
                    char *buf, size_t cap)
{
    static const char *const names[] = {
#define NAME(name, value) #name,
        CLF_KERNEL_PARAMS(NAME)
#undef NAME
    };
    static const size_t values[] = {
#define VALUE(name, value) value,
        CLF_KERNEL_PARAMS(VALUE)
#undef VALUE
    };
    size_t len = (size_t)snprintf(buf, cap, "-cl-std=CL1.2"), i, j;

    for (i = 0; i < sizeof names / sizeof names[0] && len < cap; i++) {
        size_t v = values[i];

        for (j = 0; j < n; j++)
            if (strcmp(names[i], over[j]) == 0)
                v = val[j];
        len += (size_t)snprintf(buf + len, cap - len, " -D%s=%zu", names[i], v);
    }
}

int
clf__run_1d(clf_context *ctx, enum clf__kernel_id id, size_t items,
            const struct clf__arg *args, size_t n)
{
    cl_int err = CL_SUCCESS;
    size_t i;
    int rc;

    clf__lock(ctx);
    for (i = 0; i < n && err == CL_SUCCESS; i++)
        err = clSetKernelArg(ctx->kernels[id], (cl_uint)i, args[i].size,
                             args[i].value);
    rc = err != CL_SUCCESS
             ? clf__fail(err, "clSetKernelArg %d failed (%d)", (int)i - 1, err)
             : clf__launch_1d(ctx, id, items);
    clf__unlock(ctx);
    return rc;
}
