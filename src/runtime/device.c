/* Enumerating OpenCL devices and describing them. */
#include "runtime/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a string property, truncating it to cap bytes when it is longer. */
static void
get_str(cl_device_id dev, cl_device_info what, char *buf, size_t cap)
{
    size_t len = 0;
    char *tmp;

    buf[0] = '\0';
    if (clGetDeviceInfo(dev, what, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return;
    tmp = malloc(len + 1);
    if (tmp == NULL)
        return;
    if (clGetDeviceInfo(dev, what, len, tmp, NULL) == CL_SUCCESS) {
        tmp[len] = '\0';
        snprintf(buf, cap, "%s", tmp);
    }
    free(tmp);
}

static int
has_extension(cl_device_id dev, const char *ext)
{
    size_t len = 0;
    char *list;
    int found;

    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &len) !=
            CL_SUCCESS ||
        len == 0)
        return 0;
    list = malloc(len + 1);
    if (list == NULL)
        return 0;
    found = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, len, list, NULL) ==
        CL_SUCCESS) {
        list[len] = '\0';
        found = strstr(list, ext) != NULL;
    }
    free(list);
    return found;
}

int
clf__device_info_fill(cl_platform_id platform, unsigned platform_index,
                      cl_device_id dev, unsigned index, clf_device_info *info)
{
    cl_device_type type = 0;
    cl_uint u = 0;
    cl_ulong ul = 0;
    cl_device_fp_config fp = 0;

    memset(info, 0, sizeof *info);
    info->index = index;
    info->platform_index = platform_index;
    if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof info->platform,
                          info->platform, NULL) != CL_SUCCESS)
        info->platform[0] = '\0';
    info->platform[sizeof info->platform - 1] = '\0';
    get_str(dev, CL_DEVICE_NAME, info->name, sizeof info->name);
    get_str(dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    get_str(dev, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    get_str(dev, CL_DEVICE_VERSION, info->version, sizeof info->version);
    get_str(dev, CL_DEVICE_OPENCL_C_VERSION, info->c_version,
            sizeof info->c_version);
    if (clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) ==
        CL_SUCCESS) {
        info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
        info->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    }
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL) ==
        CL_SUCCESS)
        info->compute_units = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u,
                        NULL) == CL_SUCCESS)
        info->max_clock_mhz = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul, NULL) ==
        CL_SUCCESS)
        info->global_mem = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul,
                        NULL) == CL_SUCCESS)
        info->max_alloc = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul, NULL) ==
        CL_SUCCESS)
        info->local_mem = ul;
    info->fp16 = has_extension(dev, "cl_khr_fp16");
    info->fp64 = has_extension(dev, "cl_khr_fp64");
    if (!info->fp64 && clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG,
                                       sizeof fp, &fp, NULL) == CL_SUCCESS)
        info->fp64 = fp != 0;
    return 0;
}

static int
ci_contains(const char *hay, const char *needle)
{
    size_t hn = strlen(hay), nn = strlen(needle), i, j;

    if (nn == 0 || nn > hn)
        return nn == 0;
    for (i = 0; i + nn <= hn; i++) {
        for (j = 0; j < nn; j++)
            if (tolower((unsigned char)hay[i + j]) !=
                tolower((unsigned char)needle[j]))
                break;
        if (j == nn)
            return 1;
    }
    return 0;
}

/* Known platforms: a piece of the platform name or vendor, and the short
 * name it gives (the first row that matches wins; see clf_device_info). */
static const struct {
    const char *piece, *short_name;
} known_platforms[] = {
    {"Portable Computing Language", "pocl"},
    {"pocl", "pocl"},
    {"rusticl", "rusticl"},
    {"Clover", "clover"},
    {"NVIDIA", "nvidia"},
    {"Advanced Micro Devices", "amd"},
    {"AMD", "amd"},
    {"Intel", "intel"},
    {"Apple", "apple"},
    {"Oclgrind", "oclgrind"},
};

/* Intel ships separate GPU, FPGA and CPU platforms. */
static const char *
intel_kind(const char *name)
{
    if (ci_contains(name, "Graphics"))
        return "intel-gpu";
    if (ci_contains(name, "FPGA"))
        return "intel-fpga";
    return "intel-cpu";
}

/* The first word of text, lower case, letters and digits only. */
static void
first_word(const char *text, char *buf, size_t cap)
{
    size_t n = 0;

    while (*text == ' ')
        text++;
    for (; *text != '\0' && *text != ' ' && n + 1 < cap; text++)
        if (isalnum((unsigned char)*text))
            buf[n++] = (char)tolower((unsigned char)*text);
    buf[n] = '\0';
}

void
clf__platform_short(const char *name, const char *vendor, char *buf, size_t cap)
{
    const char *texts[2];
    size_t t, k;

    texts[0] = name;
    texts[1] = vendor;
    for (t = 0; t < 2; t++) {
        for (k = 0; k < sizeof known_platforms / sizeof known_platforms[0];
             k++) {
            const char *s = known_platforms[k].short_name;
            if (!ci_contains(texts[t], known_platforms[k].piece))
                continue;
            snprintf(buf, cap, "%s",
                     strcmp(s, "intel") == 0 ? intel_kind(name) : s);
            return;
        }
    }
    first_word(*name != '\0' ? name : vendor, buf, cap);
    if (buf[0] == '\0')
        snprintf(buf, cap, "platform");
}

/* The process's devices, enumerated once: OpenCL runtimes (PoCL among
 * them) are not safe against concurrent first enumeration, and the list
 * does not change while a process runs. */
static struct {
    pthread_once_t once;
    int status;        /* 0, or why discovery failed */
    char message[256]; /* the detail of a failure, for every caller */
    size_t count;
    struct clf__device *devices;
    clf_device_info *infos; /* the same devices' descriptions, contiguous */
} found = {PTHREAD_ONCE_INIT, 0, "", 0, NULL, NULL};

static int
discover_fail(int status, const char *message)
{
    found.status = status;
    snprintf(found.message, sizeof found.message, "%s", message);
    return status;
}

/* Room for one more device in found.devices. */
static int
discover_grow(size_t *cap)
{
    size_t ncap = *cap ? 2 * *cap : 8;
    struct clf__device *g;

    if (found.count < *cap)
        return 0;
    g = realloc(found.devices, ncap * sizeof *g);
    if (g == NULL)
        return discover_fail(CLF_ENO_MEMORY, "out of host memory");
    found.devices = g;
    *cap = ncap;
    return 0;
}

/* Appends the devices of platform p, named "<short>:<i>". */
static int
discover_platform(cl_platform_id plat, unsigned p, const char *short_name,
                  size_t *cap)
{
    cl_uint ndev = 0, d;
    cl_device_id *devs;

    if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &ndev) !=
            CL_SUCCESS ||
        ndev == 0)
        return 0;
    devs = calloc(ndev, sizeof *devs);
    if (devs == NULL)
        return discover_fail(CLF_ENO_MEMORY, "out of host memory");
    if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, ndev, devs, NULL) !=
        CL_SUCCESS)
        ndev = 0;
    for (d = 0; d < ndev && discover_grow(cap) == 0; d++) {
        struct clf__device *dev = &found.devices[found.count];
        dev->platform = plat;
        dev->device = devs[d];
        clf__device_info_fill(plat, p, devs[d], (unsigned)found.count,
                              &dev->info);
        snprintf(dev->info.stable_name, sizeof dev->info.stable_name, "%s:%u",
                 short_name, (unsigned)d);
        found.count++;
    }
    free(devs);
    return found.status;
}

/* Short names of platforms 0..nplat-1: later duplicates get "-2", ... */
#define SHORT_CAP 40
static void
short_names(const cl_platform_id *plats, cl_uint nplat,
            char (*shorts)[SHORT_CAP])
{
    char name[128], vendor[128];
    cl_uint p, q;

    for (p = 0; p < nplat; p++) {
        if (clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name,
                              NULL) != CL_SUCCESS)
            name[0] = '\0';
        if (clGetPlatformInfo(plats[p], CL_PLATFORM_VENDOR, sizeof vendor,
                              vendor, NULL) != CL_SUCCESS)
            vendor[0] = '\0';
        name[sizeof name - 1] = vendor[sizeof vendor - 1] = '\0';
        clf__platform_short(name, vendor, shorts[p], SHORT_CAP - 8);
    }
    /* From the last down, so the earlier names compared are still bare. */
    for (p = nplat; p-- > 1;) {
        unsigned same = 1;
        for (q = 0; q < p; q++)
            same += strcmp(shorts[q], shorts[p]) == 0;
        if (same > 1) {
            size_t len = strlen(shorts[p]);
            snprintf(shorts[p] + len, SHORT_CAP - len, "-%u", same);
        }
    }
}

/* The platforms in ICD order, calloc'd; 0 or a failure status. */
static int
discover_platforms(cl_platform_id **plats, cl_uint *nplat)
{
    char msg[64];
    cl_int err = clGetPlatformIDs(0, NULL, nplat);

    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && *nplat == 0))
        return discover_fail(CLF_ENO_DEVICE,
                             "no OpenCL platform found (is an ICD such as "
                             "pocl-opencl-icd installed?)");
    if (err == CL_SUCCESS) {
        *plats = calloc(*nplat, sizeof **plats);
        if (*plats == NULL)
            return discover_fail(CLF_ENO_MEMORY, "out of host memory");
        err = clGetPlatformIDs(*nplat, *plats, NULL);
    }
    if (err == CL_SUCCESS)
        return 0;
    snprintf(msg, sizeof msg, "clGetPlatformIDs failed (%d)", (int)err);
    return discover_fail(err, msg);
}

static void
discover(void)
{
    cl_platform_id *plats = NULL;
    char(*shorts)[SHORT_CAP] = NULL;
    cl_uint nplat = 0, p;
    size_t cap = 0, i;

    if (discover_platforms(&plats, &nplat) == 0) {
        shorts = calloc(nplat, sizeof *shorts);
        if (shorts == NULL)
            discover_fail(CLF_ENO_MEMORY, "out of host memory");
        else
            short_names(plats, nplat, shorts);
    }
    for (p = 0; p < nplat && found.status == 0; p++)
        discover_platform(plats[p], p, shorts[p], &cap);
    free(plats);
    free(shorts);
    if (found.status == 0 && found.count == 0)
        discover_fail(CLF_ENO_DEVICE,
                      "OpenCL platforms exist but expose no device");
    if (found.status == 0) {
        found.infos = calloc(found.count, sizeof *found.infos);
        if (found.infos == NULL)
            discover_fail(CLF_ENO_MEMORY, "out of host memory");
    }
    for (i = 0; found.infos != NULL && i < found.count; i++)
        found.infos[i] = found.devices[i].info;
}

int
clf__devices(const struct clf__device **list, size_t *count)
{
    int rc = pthread_once(&found.once, discover);

    if (rc != 0)
        return clf__fail(CLF_EUNSUPPORTED, "pthread_once failed (%d)", rc);
    if (found.status != 0)
        return clf__fail(found.status, "%s", found.message);
    *list = found.devices;
    *count = found.count;
    return 0;
}

static int
all_digits(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* The first GPU, else the first CPU, else the first device. */
static size_t
default_device(const clf_device_info *infos, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (infos[i].is_gpu)
            return i;
    for (i = 0; i < n; i++)
        if (infos[i].is_cpu)
            return i;
    return 0;
}

/* The stable name matches sel: "pocl:0", or the platform part alone. */
static int
stable_name_is(const char *stable, const char *sel)
{
    const char *colon = strrchr(stable, ':');
    size_t plen = colon != NULL ? (size_t)(colon - stable) : strlen(stable);
    size_t i;

    if (stable[0] == '\0')
        return 0;
    for (i = 0; sel[i] != '\0' && stable[i] != '\0'; i++)
        if (tolower((unsigned char)sel[i]) != tolower((unsigned char)stable[i]))
            return 0;
    /* The whole name, or the platform part of a platform's first device. */
    return (sel[i] == '\0' && stable[i] == '\0') ||
           (sel[i] == '\0' && i == plen && strcmp(colon, ":0") == 0);
}

/* Rule `rule` of clf_context_create's list (2 to 5) for one device. */
static int
matches(const clf_device_info *info, const char *sel, int rule)
{
    switch (rule) {
    case 2:
        return (strlen(sel) == 3 && ci_contains(sel, "gpu") && info->is_gpu) ||
               (strlen(sel) == 3 && ci_contains(sel, "cpu") && info->is_cpu);
    case 3:
        return stable_name_is(info->stable_name, sel);
    case 4:
        return ci_contains(info->platform, sel);
    default:
        return ci_contains(info->name, sel);
    }
}

int
clf__device_select(const clf_device_info *infos, size_t n, const char *sel,
                   size_t *chosen)
{
    size_t i;
    int rule;

    if (n == 0)
        return clf__fail(CLF_ENO_DEVICE, "no OpenCL device");
    if (sel == NULL || *sel == '\0') {
        *chosen = default_device(infos, n);
        return 0;
    }
    if (all_digits(sel)) {
        unsigned long idx = strtoul(sel, NULL, 10);
        if (idx >= n)
            return clf__fail(CLF_EDEVICE_NOT_FOUND,
                             "device index %lu out of range (%zu devices)", idx,
                             n);
        *chosen = idx;
        return 0;
    }
    /* Rule by rule, so that an earlier rule wins over any later one. */
    for (rule = 2; rule <= 5; rule++)
        for (i = 0; i < n; i++)
            if (matches(&infos[i], sel, rule)) {
                *chosen = i;
                return 0;
            }
    return clf__fail(CLF_EDEVICE_NOT_FOUND,
                     "no OpenCL device matches selector \"%s\" (try an index, "
                     "cpu, gpu, a stable name such as pocl:0, or part of a "
                     "platform or device name from 'clinformer devices')",
                     sel);
}

int
clf__device_find(const char *selector, struct clf__device *out)
{
    const struct clf__device *list = NULL;
    size_t count = 0, chosen = 0;

    CLF_TRY(clf__devices(&list, &count));
    CLF_TRY(clf__device_select(found.infos, count, selector, &chosen));
    *out = list[chosen];
    return 0;
}

void
clf__device_describe(cl_platform_id platform, cl_device_id device,
                     clf_device_info *info)
{
    const struct clf__device *list = NULL;
    size_t count = 0, i;

    if (clf__devices(&list, &count) == 0)
        for (i = 0; i < count; i++)
            if (list[i].device == device) {
                *info = list[i].info;
                return;
            }
    clf__device_info_fill(platform, 0, device, 0, info);
}

CLF_EXTERN int
clf_devices_list(clf_device_info *infos, size_t cap, size_t *count)
{
    const struct clf__device *list = NULL;
    size_t n = 0;

    if (count == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "count is NULL");
    if (infos == NULL && cap > 0)
        return clf__fail(CLF_ENULL_ARGUMENT, "infos is NULL but cap is %zu",
                         cap);
    *count = 0;
    CLF_TRY(clf__devices(&list, &n));
    if (cap > 0)
        memcpy(infos, found.infos, (n < cap ? n : cap) * sizeof *infos);
    *count = n;
    return 0;
}

/* One "name=value" of CLINFORMER_LIMITS: 0, or -1 when it is not one. */
static int
cap_item(struct clf__caps *caps, const char *item, size_t len)
{
    char buf[64], *end;
    unsigned long long v;

    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, item, len);
    buf[len] = '\0';
    if (strncmp(buf, "fp16=", 5) == 0) {
        if (strcmp(buf + 5, "0") != 0)
            return -1;
        caps->no_fp16 = 1;
        return 0;
    }
    end = strchr(buf, '=');
    if (end == NULL || !isdigit((unsigned char)end[1]))
        return -1;
    errno = 0;
    v = strtoull(end + 1, &end, 10);
    if (*end != '\0' || errno != 0 || v == 0)
        return -1;
    if (strncmp(buf, "wg=", 3) == 0)
        caps->wg = (size_t)v;
    else if (strncmp(buf, "local=", 6) == 0)
        caps->local_mem = v;
    else
        return -1;
    return 0;
}

int
clf__caps_from_env(struct clf__caps *caps)
{
    const char *v = getenv("CLINFORMER_LIMITS"), *p, *comma;

    memset(caps, 0, sizeof *caps);
    if (v == NULL || v[0] == '\0')
        return 0;
    for (p = v;; p = comma + 1) {
        comma = strchr(p, ',');
        if (cap_item(caps, p, comma ? (size_t)(comma - p) : strlen(p)) != 0)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "CLINFORMER_LIMITS=\"%s\": expected a comma "
                             "list of wg=N, local=BYTES (N, BYTES > 0) and "
                             "fp16=0",
                             v);
        if (comma == NULL)
            return 0;
    }
}

void
clf__caps_apply(clf_context *ctx)
{
    if (ctx->caps.local_mem != 0 && ctx->caps.local_mem < ctx->info.local_mem)
        ctx->info.local_mem = ctx->caps.local_mem;
    if (ctx->caps.no_fp16)
        ctx->info.fp16 = 0;
}

size_t
clf__kernel_wg(const clf_context *ctx, cl_kernel k)
{
    size_t wg = 0;

    if (k == NULL ||
        clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                 sizeof wg, &wg, NULL) != CL_SUCCESS)
        return 0;
    if (ctx->caps.wg != 0 && wg > ctx->caps.wg)
        wg = ctx->caps.wg;
    return wg;
}

void
clf__device_limits(const clf_context *ctx, struct clf__limits *lim)
{
    size_t items[3] = {0, 0, 0};

    memset(lim, 0, sizeof *lim);
    lim->local_mem = ctx->info.local_mem;
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                        sizeof lim->max_wg, &lim->max_wg, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                        sizeof items, items, NULL) != CL_SUCCESS)
        lim->max_wg = 0; /* nothing fits: nothing is applied */
    lim->max_item[0] = items[0];
    lim->max_item[1] = items[1];
    if (ctx->caps.wg != 0 && lim->max_wg > ctx->caps.wg)
        lim->max_wg = ctx->caps.wg;
}

int
clf__device_has_extension(clf_context *ctx, const char *name)
{
    size_t len = 0, n = strlen(name);
    const char *p;
    char *ext;
    int has = 0;

    if (ctx->caps.no_fp16 && strcmp(name, "cl_khr_fp16") == 0)
        return 0; /* CLINFORMER_LIMITS */
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_EXTENSIONS, 0, NULL, &len) !=
            CL_SUCCESS ||
        (ext = calloc(len + 1, 1)) == NULL)
        return 0;
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_EXTENSIONS, len, ext, NULL) ==
        CL_SUCCESS)
        for (p = strstr(ext, name); p != NULL && !has; p = strstr(p + 1, name))
            has = (p == ext || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ');
    free(ext);
    return has;
}

size_t
clf__loop_limit(const clf_context *ctx)
{
    return ci_contains(ctx->info.name, "llvmpipe") ? CLF_LLVMPIPE_LOOP_LIMIT
                                                   : 0;
}

int
clf__limits_check(const struct clf__limits *lim, const struct clf__footprint *f,
                  char *why, size_t cap)
{
    if (f->nx * f->ny > lim->max_wg || f->nx > lim->max_item[0] ||
        f->ny > lim->max_item[1]) {
        snprintf(why, cap,
                 "a work-group of %s=%zu x %s=%zu exceeds the device's %zu "
                 "(%zu x %zu)",
                 f->x, f->nx, f->y, f->ny, lim->max_wg, lim->max_item[0],
                 lim->max_item[1]);
        return -1;
    }
    if (f->local > lim->local_mem) {
        snprintf(why, cap,
                 "%llu bytes of local memory for %s exceed the device's %llu",
                 f->local, f->tiles, lim->local_mem);
        return -1;
    }
    return 0;
}
