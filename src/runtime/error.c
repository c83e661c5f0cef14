/* Status codes, their names and messages, and the per-thread detail text. */
#include "runtime/runtime.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* The calling thread's most recent detail and the status it was set for
 * (0: none yet), so a status is never shown with another one's detail. */
static _Thread_local char last_error[1024];
static _Thread_local int last_status;

int
clf__fail(int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    last_status = status;
    /* An empty detail would print as nothing: the status's own sentence. */
    if (last_error[0] == '\0')
        snprintf(last_error, sizeof last_error, "%s", clf_strerror(status));
    return status;
}

CLF_EXTERN const char *
clf_last_error(void)
{
    return last_status != 0 ? last_error : "no failure on this thread yet";
}

CLF_EXTERN const char *
clf_error_message(int status)
{
    if (status != 0 && status == last_status)
        return last_error;
    return clf_strerror(status);
}

/* OpenCL's and CLBlast's codes, so a status from either reads well. */
#define CLF_FOREIGN_MAP(XX)                                                    \
    XX(CL_DEVICE_NOT_FOUND, -1, "OpenCL: device not found")                    \
    XX(CL_DEVICE_NOT_AVAILABLE, -2, "OpenCL: device not available")            \
    XX(CL_COMPILER_NOT_AVAILABLE, -3, "OpenCL: compiler not available")        \
    XX(CL_MEM_OBJECT_ALLOCATION_FAILURE, -4,                                   \
       "OpenCL: device memory allocation failed")                              \
    XX(CL_OUT_OF_RESOURCES, -5, "OpenCL: out of device resources")             \
    XX(CL_OUT_OF_HOST_MEMORY, -6, "OpenCL: out of host memory")                \
    XX(CL_PROFILING_INFO_NOT_AVAILABLE, -7, "OpenCL: profiling info missing")  \
    XX(CL_MEM_COPY_OVERLAP, -8, "OpenCL: copy regions overlap")                \
    XX(CL_IMAGE_FORMAT_MISMATCH, -9, "OpenCL: image formats differ")           \
    XX(CL_IMAGE_FORMAT_NOT_SUPPORTED, -10, "OpenCL: image format unsupported") \
    XX(CL_BUILD_PROGRAM_FAILURE, -11,                                          \
       "OpenCL: kernel build failed (see the build log)")                      \
    XX(CL_MAP_FAILURE, -12, "OpenCL: mapping a buffer failed")                 \
    XX(CL_MISALIGNED_SUB_BUFFER_OFFSET, -13,                                   \
       "OpenCL: sub-buffer offset misaligned")                                 \
    XX(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, -14,                      \
       "OpenCL: an event waited on failed")                                    \
    XX(CL_COMPILE_PROGRAM_FAILURE, -15, "OpenCL: program compilation failed")  \
    XX(CL_LINKER_NOT_AVAILABLE, -16, "OpenCL: linker not available")           \
    XX(CL_LINK_PROGRAM_FAILURE, -17, "OpenCL: program link failed")            \
    XX(CL_DEVICE_PARTITION_FAILED, -18, "OpenCL: device partition failed")     \
    XX(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, -19,                                  \
       "OpenCL: kernel argument info not available")                           \
    XX(CL_INVALID_VALUE, -30, "OpenCL: invalid value")                         \
    XX(CL_INVALID_DEVICE_TYPE, -31, "OpenCL: invalid device type")             \
    XX(CL_INVALID_PLATFORM, -32, "OpenCL: invalid platform")                   \
    XX(CL_INVALID_DEVICE, -33, "OpenCL: invalid device")                       \
    XX(CL_INVALID_CONTEXT, -34, "OpenCL: invalid context")                     \
    XX(CL_INVALID_QUEUE_PROPERTIES, -35, "OpenCL: invalid queue properties")   \
    XX(CL_INVALID_COMMAND_QUEUE, -36, "OpenCL: invalid command queue")         \
    XX(CL_INVALID_HOST_PTR, -37, "OpenCL: invalid host pointer")               \
    XX(CL_INVALID_MEM_OBJECT, -38, "OpenCL: invalid memory object")            \
    XX(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, -39,                                \
       "OpenCL: invalid image format descriptor")                              \
    XX(CL_INVALID_IMAGE_SIZE, -40, "OpenCL: invalid image size")               \
    XX(CL_INVALID_SAMPLER, -41, "OpenCL: invalid sampler")                     \
    XX(CL_INVALID_BINARY, -42, "OpenCL: invalid program binary")               \
    XX(CL_INVALID_BUILD_OPTIONS, -43, "OpenCL: invalid build options")         \
    XX(CL_INVALID_PROGRAM, -44, "OpenCL: invalid program")                     \
    XX(CL_INVALID_PROGRAM_EXECUTABLE, -45, "OpenCL: program not built")        \
    XX(CL_INVALID_KERNEL_NAME, -46, "OpenCL: no kernel of that name")          \
    XX(CL_INVALID_KERNEL_DEFINITION, -47, "OpenCL: invalid kernel definition") \
    XX(CL_INVALID_KERNEL, -48, "OpenCL: invalid kernel")                       \
    XX(CL_INVALID_ARG_INDEX, -49, "OpenCL: invalid kernel argument index")     \
    XX(CL_INVALID_ARG_VALUE, -50, "OpenCL: invalid kernel argument value")     \
    XX(CL_INVALID_ARG_SIZE, -51, "OpenCL: invalid kernel argument size")       \
    XX(CL_INVALID_KERNEL_ARGS, -52, "OpenCL: kernel arguments not set")        \
    XX(CL_INVALID_WORK_DIMENSION, -53, "OpenCL: invalid work dimension")       \
    XX(CL_INVALID_WORK_GROUP_SIZE, -54, "OpenCL: invalid work-group size")     \
    XX(CL_INVALID_WORK_ITEM_SIZE, -55, "OpenCL: invalid work-item size")       \
    XX(CL_INVALID_GLOBAL_OFFSET, -56, "OpenCL: invalid global offset")         \
    XX(CL_INVALID_EVENT_WAIT_LIST, -57, "OpenCL: invalid event wait list")     \
    XX(CL_INVALID_EVENT, -58, "OpenCL: invalid event")                         \
    XX(CL_INVALID_OPERATION, -59, "OpenCL: invalid operation")                 \
    XX(CL_INVALID_GL_OBJECT, -60, "OpenCL: invalid GL object")                 \
    XX(CL_INVALID_BUFFER_SIZE, -61, "OpenCL: invalid buffer size")             \
    XX(CL_INVALID_MIP_LEVEL, -62, "OpenCL: invalid mip level")                 \
    XX(CL_INVALID_GLOBAL_WORK_SIZE, -63, "OpenCL: invalid global work size")   \
    XX(CL_INVALID_PROPERTY, -64, "OpenCL: invalid property")                   \
    XX(CL_INVALID_IMAGE_DESCRIPTOR, -65, "OpenCL: invalid image descriptor")   \
    XX(CL_INVALID_COMPILER_OPTIONS, -66, "OpenCL: invalid compiler options")   \
    XX(CL_INVALID_LINKER_OPTIONS, -67, "OpenCL: invalid linker options")       \
    XX(CL_INVALID_DEVICE_PARTITION_COUNT, -68,                                 \
       "OpenCL: invalid device partition count")                               \
    XX(CL_PLATFORM_NOT_FOUND_KHR, -1001, "OpenCL: no platform (ICD) found")    \
    XX(CLBlastNotImplemented, -1024, "CLBlast: not implemented")               \
    XX(CLBlastInvalidMatrixA, -1022,                                           \
       "CLBlast: matrix A is not a valid buffer")                              \
    XX(CLBlastInvalidMatrixB, -1021,                                           \
       "CLBlast: matrix B is not a valid buffer")                              \
    XX(CLBlastInvalidMatrixC, -1020,                                           \
       "CLBlast: matrix C is not a valid buffer")                              \
    XX(CLBlastInvalidDimension, -1017, "CLBlast: a GEMM dimension is zero")    \
    XX(CLBlastInvalidLeadDimA, -1016, "CLBlast: leading dimension of A")       \
    XX(CLBlastInvalidLeadDimB, -1015, "CLBlast: leading dimension of B")       \
    XX(CLBlastInvalidLeadDimC, -1014, "CLBlast: leading dimension of C")       \
    XX(CLBlastInsufficientMemoryA, -1011, "CLBlast: buffer A too small")       \
    XX(CLBlastInsufficientMemoryB, -1010, "CLBlast: buffer B too small")       \
    XX(CLBlastInsufficientMemoryC, -1009, "CLBlast: buffer C too small")       \
    XX(CLBlastInsufficientMemoryTemp, -2050, "CLBlast: temp buffer too small") \
    XX(CLBlastInvalidBatchCount, -2049, "CLBlast: batch count not positive")   \
    XX(CLBlastInvalidOverrideKernel, -2048, "CLBlast: invalid override")       \
    XX(CLBlastMissingOverrideParameter, -2047, "CLBlast: missing parameter")   \
    XX(CLBlastInvalidLocalMemUsage, -2046, "CLBlast: not enough local memory") \
    XX(CLBlastNoHalfPrecision, -2045, "CLBlast: no half precision")            \
    XX(CLBlastNoDoublePrecision, -2044, "CLBlast: no double precision")        \
    XX(CLBlastDatabaseError, -2041, "CLBlast: device not in its database")     \
    XX(CLBlastUnknownError, -2040, "CLBlast: unknown error")                   \
    XX(CLBlastUnexpectedError, -2039, "CLBlast: unexpected error")

CLF_EXTERN const char *
clf_strerror(int status)
{
    switch (status) {
    case CLF_OK:
        return "success";
#define XX(name, value, msg)                                                   \
    case value:                                                                \
        return msg;
        CLF_ERRNO_MAP(XX)
        CLF_FOREIGN_MAP(XX)
#undef XX
    default:
        break;
    }
    if (status < 0 && status > -1000)
        return "OpenCL error";
    if (status <= -1000 && status > -4000)
        return "CLBlast error";
    return "unknown status";
}

CLF_EXTERN const char *
clf_status_name(int status)
{
    switch (status) {
    case CLF_OK:
        return "CLF_OK";
#define XX(name, value, msg)                                                   \
    case value:                                                                \
        return "CLF_E" #name;
        CLF_ERRNO_MAP(XX)
#undef XX
#define XX(name, value, msg)                                                   \
    case value:                                                                \
        return #name;
        CLF_FOREIGN_MAP(XX)
#undef XX
    default:
        return "UNKNOWN_STATUS";
    }
}

CLF_EXTERN const char *
clf_version(void)
{
    return CLF_VERSION_STRING;
}

int
clf__mul(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int
clf__mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t ab;

    if (clf__mul(a, b, &ab) != 0)
        return -1;
    return clf__mul(ab, c, out);
}

int
clf__add(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}

void
clf__format_shape(char *buf, size_t cap, const size_t *shape, size_t ndim,
                  int python)
{
    size_t i, used = 0;
    int n;

    n = snprintf(buf, cap, python ? "(" : "[");
    for (i = 0; i < ndim && n >= 0 && (size_t)n < cap - used; i++) {
        used += (size_t)n;
        n = snprintf(buf + used, cap - used, i == 0 ? "%zu" : ", %zu",
                     shape[i]);
    }
    if (n >= 0 && (size_t)n < cap - used) {
        used += (size_t)n;
        snprintf(buf + used, cap - used, "%s",
                 python ? (ndim == 1 ? ",)" : ")") : "]");
    }
}
