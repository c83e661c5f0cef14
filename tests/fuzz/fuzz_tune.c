/* libFuzzer target: the tune file parser and the checks of the Xgemm and
 * XgemmDirect parameters, over arbitrary bytes.  Whatever the input, the parser
 * must return 0 or -1 with a terminated reason, and what it accepts must pass
 * the parameter checks on their own. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct clf__limits lim = {256, {256, 256}, 32768};
    static struct clf__tune_file tf;
    char why[400];
    char *copy = malloc(size ? size : 1); /* exact size: ASan sees overreads */

    if (copy == NULL)
        return 0;
    if (size)
        memcpy(copy, data, size);
    if (clf__tune_parse(copy, size, &lim, &tf, why, sizeof why) == 0) {
        if (tf.have_best &&
            clf__tune_check_xgemm(tf.best, &lim, why, sizeof why) != 0)
            abort();
        if (tf.ntried > CLF_TUNE_MAX_TRIED ||
            tf.ndirect_tried > CLF_TUNE_MAX_DIRECT)
            abort();
        if (tf.have_direct &&
            clf__tune_check_direct(tf.direct, &lim, why, sizeof why) != 0)
            abort();
    } else if (memchr(why, '\0', sizeof why) == NULL || why[0] == '\0') {
        abort();
    }
    free(copy);
    return 0;
}
