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
#include "runtime/foreign_status.def"
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
#include "runtime/foreign_status.def"
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
