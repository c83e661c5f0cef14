/* The runtime's kernels and programs (program.c): the kernel and file
 * enums the registry (kernels.h) expands to, the embedded sources, the
 * builds of the main program and of the programs built apart, their
 * cache on disk, and the 1-D launch helper.  Included by runtime.h. */
#ifndef CLF_RUNTIME_PROGRAM_H
#define CLF_RUNTIME_PROGRAM_H

#include "clinformer.h"
#include "runtime/kernel_params.h"
#include "runtime/kernels.h"
#include <stdint.h>

/* The kernels, one program built from the files of the registry
 * (kernels.h): CLF_K_<ID> for each KERNEL(ID, name) line. */
#define CLF_KERNEL_ENUM_ENTRY(id, name) CLF_K_##id,
enum clf__kernel_id {
    CLF_KERNEL_REGISTRY(CLF_REGISTRY_SKIP_FILE, CLF_KERNEL_ENUM_ENTRY)
        CLF_K_COUNT
};
#undef CLF_KERNEL_ENUM_ENTRY

/* program.c: build or load the kernels of ctx. */
int clf__program_build(clf_context *ctx);
uint64_t clf__hash64(const void *data, size_t len, uint64_t seed);
void clf__cache_dir(char *buf, size_t cap);
/* program.c: checks a whole cache entry in memory (magic, key, payload
 * length against len, checksum, size limit): 0 with the payload's offset
 * and length, or -1. */
int clf__cache_entry_check(const void *data, size_t len, uint64_t key,
                           size_t *payload_off, size_t *payload_len);

/* One kernel argument: its size and where its value is. */
struct clf__arg {
    size_t size;
    const void *value;
};
#define CLF_ARG(var)                                                           \
    {                                                                          \
        sizeof(var), &(var)                                                    \
    }
/* The whole call of a simple kernel: under the context lock (kernel
 * arguments are shared by its threads), sets kernel id's arguments 0..n-1
 * to args and enqueues it as clf__launch_1d does.  CLF_RUN_1D passes an
 * array's length. */
int clf__run_1d(clf_context *ctx, enum clf__kernel_id id, size_t items,
                const struct clf__arg *args, size_t n);
#define CLF_RUN_1D(ctx, id, items, args)                                       \
    clf__run_1d((ctx), (id), (items), (args), sizeof(args) / sizeof((args)[0]))
/* Enqueue one kernel over a 1-D range of `items` work-items, rounding the
 * global size up to the work-group size (kernels guard their tail). */
int clf__launch_1d(clf_context *ctx, enum clf__kernel_id id, size_t items);

/* program.c: the build options of every program ("-cl-std=CL1.2" and a
 * -D option for each entry of kernel_params.h), with the entries named in
 * over[0 .. n - 1] given the values val[] instead; truncated to cap. */
void clf__kernel_options(const char *const *over, const size_t *val, size_t n,
                         char *buf, size_t cap);
/* The programs built apart (kernels.h, CLF_PROGRAM_PARTS). */
#define CLF_PART_ID(id, files) CLF_PART_##id,
enum clf__program_part {
    CLF_PROGRAM_PARTS(CLF_PART_ID, CLF_REGISTRY_SKIP_FILE) CLF_PART_COUNT
};
#undef CLF_PART_ID
/* program.c: program part built with `options` in place of the usual ones
 * and cached on disk as the main program is (the options are part of the
 * key); a file that needs an extension the device lacks is refused,
 * naming both. */
int clf__program_build_part(clf_context *ctx, enum clf__program_part part,
                            const char *options, cl_program *out);
/* The index in clf__kernel_files of part's i-th file, -1 past its last. */
int clf__program_part_file(enum clf__program_part part, size_t i);

/* The embedded kernel sources, clf__cl_<stem> for each FILE(stem) of the
 * registry (generated from cl/ at build time). */
#define CLF_KERNEL_SOURCE_DECL(stem) extern const char clf__cl_##stem[];
#define CLF_KERNEL_SOURCE_DECL_APART(stem, ext)                                \
    extern const char clf__cl_##stem[];
CLF_KERNEL_REGISTRY(CLF_KERNEL_SOURCE_DECL, CLF_REGISTRY_SKIP_KERNEL)
CLF_KERNEL_REGISTRY_APART(CLF_KERNEL_SOURCE_DECL_APART)
#undef CLF_KERNEL_SOURCE_DECL
#undef CLF_KERNEL_SOURCE_DECL_APART

/* program.c: every kernel file, those of the main program in build order
 * (CLF_KERNEL_MAIN_FILES of them) then those built apart
 * (CLINFORMER_KERNEL_DIR holds files of these names), their embedded
 * texts, and the extension each needs (NULL: none, part of the main
 * program). */
#define CLF_KERNEL_FILE_COUNT(stem) +1
#define CLF_KERNEL_FILE_COUNT_APART(stem, ext) +1
enum {
    CLF_KERNEL_MAIN_FILES =
        0 CLF_KERNEL_REGISTRY(CLF_KERNEL_FILE_COUNT, CLF_REGISTRY_SKIP_KERNEL),
    CLF_KERNEL_FILES = CLF_KERNEL_MAIN_FILES +
                       0 CLF_KERNEL_REGISTRY_APART(CLF_KERNEL_FILE_COUNT_APART)
};
#undef CLF_KERNEL_FILE_COUNT
#undef CLF_KERNEL_FILE_COUNT_APART
/* Each file's index in those tables, CLF_FILE_<stem>. */
#define CLF_KERNEL_FILE_ID(stem) CLF_FILE_##stem,
#define CLF_KERNEL_FILE_ID_APART(stem, ext) CLF_FILE_##stem,
enum clf__kernel_file {
    CLF_KERNEL_REGISTRY(CLF_KERNEL_FILE_ID, CLF_REGISTRY_SKIP_KERNEL)
        CLF_KERNEL_REGISTRY_APART(CLF_KERNEL_FILE_ID_APART)
};
#undef CLF_KERNEL_FILE_ID
#undef CLF_KERNEL_FILE_ID_APART
extern const char *const clf__kernel_files[CLF_KERNEL_FILES];
extern const char *const clf__kernel_sources[CLF_KERNEL_FILES];
extern const char *const clf__kernel_needs[CLF_KERNEL_FILES];

#endif /* CLF_RUNTIME_PROGRAM_H */
