/* The MPI entry points when built without MPI (./configure without
 * --with-mpi): they exist, link nothing of MPI and say why they fail. */
#include "parallel/parallel.h"

CLF_EXTERN int
clf_mpi_available(void)
{
    return 0;
}

CLF_EXTERN int
clf_model_forward_mpi(clf_model *m, const float *x, const long long *ids,
                      size_t batch, size_t seq_len, float *y,
                      const clf_forward_opts *opts)
{
    (void)m;
    (void)x;
    (void)ids;
    (void)batch;
    (void)seq_len;
    (void)y;
    (void)opts;
    return clf__fail(CLF_EUNSUPPORTED, "clinformer was built without MPI; "
                                       "configure with --with-mpi");
}
