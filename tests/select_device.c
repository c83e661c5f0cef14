/* Prints the device that a selector picks, as
 * "<flat index> <stable name> <platform> / <device name>", for
 * tests/test_icd_order.sh.  Exit 0 when a context could be created, 1 with
 * the library's message on stderr otherwise. */
#include "clinformer.h"

#include <stdio.h>

int
main(int argc, char **argv)
{
    clf_context *ctx = NULL;
    clf_device_info d;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: select_device SELECTOR\n");
        return 2;
    }
    rc = clf_context_create(&ctx, argv[1]);
    if (rc == 0)
        rc = clf_context_device_info(ctx, &d);
    if (rc != 0) {
        fprintf(stderr, "select_device: %s: %s (%s)\n", argv[1],
                clf_last_error(), clf_status_name(rc));
        clf_context_destroy(ctx);
        return 1;
    }
    printf("%u %s %s / %s\n", d.index, d.stable_name, d.platform, d.name);
    clf_context_destroy(ctx);
    return 0;
}
