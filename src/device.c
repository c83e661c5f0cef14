/* Enumerating OpenCL devices and describing them. */
#include "internal.h"

#include <ctype.h>
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
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u,
                        NULL) == CL_SUCCESS)
        info->compute_units = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u,
                        NULL) == CL_SUCCESS)
        info->max_clock_mhz = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul,
                        NULL) == CL_SUCCESS)
        info->global_mem = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul,
                        NULL) == CL_SUCCESS)
        info->max_alloc = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul,
                        NULL) == CL_SUCCESS)
        info->local_mem = ul;
    info->fp16 = has_extension(dev, "cl_khr_fp16");
    info->fp64 = has_extension(dev, "cl_khr_fp64");
    if (!info->fp64 &&
        clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp,
                        NULL) == CL_SUCCESS)
        info->fp64 = fp != 0;
    return 0;
}

/* The process's devices, enumerated once: OpenCL runtimes (PoCL among
 * them) are not safe against concurrent first enumeration, and the list
 * does not change while a process runs. */
static struct {
    pthread_once_t once;
    int status;         /* 0, or why discovery failed */
    char message[256];  /* the detail of a failure, for every caller */
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

/* Appends the devices of one platform; returns 0 or a failure status. */
static int
discover_platform(cl_platform_id plat, unsigned p, size_t *cap)
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
    for (d = 0; d < ndev; d++) {
        size_t n = found.count;
        if (n == *cap) {
            size_t ncap = *cap ? 2 * *cap : 8;
            struct clf__device *g =
                realloc(found.devices, ncap * sizeof *g);
            if (g != NULL)
                found.devices = g;
            if (g == NULL) {
                free(devs);
                return discover_fail(CLF_ENO_MEMORY, "out of host memory");
            }
            *cap = ncap;
        }
        found.devices[n].platform = plat;
        found.devices[n].device = devs[d];
        clf__device_info_fill(plat, p, devs[d], (unsigned)n,
                              &found.devices[n].info);
        found.count++;
    }
    free(devs);
    return 0;
}

static void
discover(void)
{
    cl_uint nplat = 0, p;
    cl_platform_id *plats;
    size_t cap = 0, i;
    cl_int err;

    err = clGetPlatformIDs(0, NULL, &nplat);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && nplat == 0)) {
        discover_fail(CLF_ENO_DEVICE, "no OpenCL platform found (is an ICD "
                                      "such as pocl-opencl-icd installed?)");
        return;
    }
    plats = err == CL_SUCCESS ? calloc(nplat, sizeof *plats) : NULL;
    if (err == CL_SUCCESS && plats == NULL) {
        discover_fail(CLF_ENO_MEMORY, "out of host memory");
        return;
    }
    if (err == CL_SUCCESS)
        err = clGetPlatformIDs(nplat, plats, NULL);
    if (err != CL_SUCCESS) {
        char msg[64];
        snprintf(msg, sizeof msg, "clGetPlatformIDs failed (%d)", (int)err);
        discover_fail(err, msg);
        free(plats);
        return;
    }
    for (p = 0; p < nplat && found.status == 0; p++)
        discover_platform(plats[p], p, &cap);
    free(plats);
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

int
clf__device_select(const clf_device_info *infos, size_t n, const char *sel,
                   size_t *chosen)
{
    size_t i;

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
                             "device index %lu out of range (%zu devices)",
                             idx, n);
        *chosen = idx;
        return 0;
    }
    for (i = 0; i < n; i++) {
        if ((ci_contains(sel, "gpu") && strlen(sel) == 3 && infos[i].is_gpu) ||
            (ci_contains(sel, "cpu") && strlen(sel) == 3 && infos[i].is_cpu) ||
            ci_contains(infos[i].name, sel) ||
            ci_contains(infos[i].platform, sel)) {
            *chosen = i;
            return 0;
        }
    }
    return clf__fail(CLF_EDEVICE_NOT_FOUND,
                     "no OpenCL device matches selector \"%s\" (try an index, "
                     "cpu, gpu, or part of a name from 'clinformer devices')",
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
    memcpy(infos, found.infos, (n < cap ? n : cap) * sizeof *infos);
    *count = n;
    return 0;
}
