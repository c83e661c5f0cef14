/* GEMM parameters shipped with clinformer for devices that CLBlast 1.5.3's
 * database lacks (src/tune/tune.h).  Each entry is the tune file record
 * that `clinformer tune` stored on that device, with the run that measured
 * it; none is copied from elsewhere or guessed.  A device matches by its
 * platform name, device name and driver version, exactly.  The entries go
 * through the same checks as a tune file (clf__tune_parse), and a user's
 * own tune file for the device takes the place of its entry. */
#include "tune/tune.h"

#include <string.h>

static const struct clf__tune_shipped shipped[] = {
    /* bench/RESULTS.md section 15: clinformer tune --budget 82 (D 512,
     * h 8, k 256, n 2048), 13 of 198 Xgemm sets in the budget; 0.537 ms a
     * forward against CLBlast's defaults' 0.550 ms. */
    {"NVIDIA CUDA", "NVIDIA H200", "580.159.04",
     "best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=128 NDIMB=8 "
     "NDIMC=8 NWG=128 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=4\n",
     "clinformer tune on this device, 2026-12-04: 0.537 ms a forward "
     "against 0.550 ms with CLBlast's defaults"},
};

const struct clf__tune_shipped *
clf__tune_shipped_at(size_t i)
{
    return i < sizeof shipped / sizeof shipped[0] ? &shipped[i] : NULL;
}

const struct clf__tune_shipped *
clf__tune_shipped_for(const clf_device_info *info)
{
    const struct clf__tune_shipped *s;
    size_t i;

    for (i = 0; (s = clf__tune_shipped_at(i)) != NULL; i++)
        if (strcmp(s->platform, info->platform) == 0 &&
            strcmp(s->device, info->name) == 0 &&
            strcmp(s->driver, info->driver) == 0)
            return s;
    return NULL;
}
