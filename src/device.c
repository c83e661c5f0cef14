/* Enumerating OpenCL devices and describing them. */
#include "internal.h"

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

CLF_EXTERN int
clf_devices_list(clf_device_info *infos, size_t cap, size_t *count)
{
    cl_uint nplat = 0;
    cl_platform_id *plats = NULL;
    size_t total = 0;
    cl_uint p;
    cl_int err;

    if (count == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "count is NULL");
    if (infos == NULL && cap > 0)
        return clf__fail(CLF_ENULL_ARGUMENT, "infos is NULL but cap is %zu",
                         cap);
    *count = 0;
    err = clGetPlatformIDs(0, NULL, &nplat);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && nplat == 0))
        return clf__fail(CLF_ENO_DEVICE,
                         "no OpenCL platform found (is an ICD such as "
                         "pocl-opencl-icd installed?)");
    if (err != CL_SUCCESS)
        return clf__fail(err, "clGetPlatformIDs failed (%d)", err);
    plats = calloc(nplat, sizeof *plats);
    if (plats == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    err = clGetPlatformIDs(nplat, plats, NULL);
    if (err != CL_SUCCESS) {
        free(plats);
        return clf__fail(err, "clGetPlatformIDs failed (%d)", err);
    }
    for (p = 0; p < nplat; p++) {
        cl_uint ndev = 0;
        cl_device_id *devs;
        cl_uint d;

        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev) !=
                CL_SUCCESS ||
            ndev == 0)
            continue;
        devs = calloc(ndev, sizeof *devs);
        if (devs == NULL) {
            free(plats);
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        }
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, devs, NULL) ==
            CL_SUCCESS) {
            for (d = 0; d < ndev; d++, total++)
                if (total < cap)
                    clf__device_info_fill(plats[p], p, devs[d],
                                          (unsigned)total, &infos[total]);
        }
        free(devs);
    }
    free(plats);
    *count = total;
    if (total == 0)
        return clf__fail(CLF_ENO_DEVICE, "OpenCL platforms exist but expose "
                                         "no device");
    return 0;
}
