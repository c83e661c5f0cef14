/* clinformer command-line tool: what the command files share.
 *
 * Each command declares its options once, in a table of struct cli_option;
 * cli_parse() reads the command line with getopt_long from that table into
 * the command's own options struct, and cli_help() prints the command's
 * --help from the same table, so parsing and help cannot drift. */
#ifndef CLINFORMER_CLI_H
#define CLINFORMER_CLI_H

#include "clinformer.h"

#include <stddef.h>
#include <stdio.h>

/* Exit statuses of every command. */
enum {
    CLI_OK = 0,         /* success (check-lookahead: PASS; compare: MATCH) */
    CLI_ERROR = 1,      /* a runtime failure; the message names it */
    CLI_USAGE = 2,      /* a usage error: bad option, value or argument */
    CLI_DIFFER = 3,     /* check-lookahead FAIL, compare DIFFER, verify
                           found a failing case */
    CLI_HELP_SHOWN = -1 /* cli_parse() printed --help: exit 0 */
};

/* How cli_parse() stores an option's value at `offset` in the command's
 * options struct. */
enum cli_type {
    CLI_FLAG,    /* int, set to `flag` */
    CLI_STRING,  /* const char *, pointing into argv; not empty */
    CLI_PATH,    /* const char *, a file read; not empty */
    CLI_OUTPUT,  /* const char *, a file written; not empty, "-" is
                    standard output (cli_is_stdout) */
    CLI_SIZE,    /* size_t, a positive integer up to `max` (0: SIZE_MAX) */
    CLI_SECONDS, /* double > 0 */
    CLI_NONNEG,  /* double >= 0 */
    CLI_CHOICE   /* int, the value of the entry of `choices` named */
};

struct cli_choice {
    const char *name;
    int value;
};

/* One option of a command.  Adding an option to a command is one entry in
 * its table (plus using the field it sets). */
struct cli_option {
    const char *name; /* without the leading "--" */
    enum cli_type type;
    size_t offset;       /* of the field set, in the command's struct */
    const char *metavar; /* of the value in --help; NULL for a flag */
    const char *help;    /* lines after the first start with '\n' */
    int flag;            /* CLI_FLAG: the value stored */
    size_t max;          /* CLI_SIZE: the largest value (0: no limit) */
    const struct cli_choice *choices; /* CLI_CHOICE: ended by a NULL name */
};

struct cli_command {
    const char *name;
    const char *args;    /* positional arguments in the usage line, or "" */
    const char *summary; /* for `clinformer --help`; lines end with '\n' */
    const char *about;   /* for `clinformer CMD --help`, or NULL */
    const struct cli_option *options; /* ended by an entry with NULL name */
    size_t positional; /* how many positional arguments it takes */
    int (*main)(const struct cli_command *cmd, int argc, char **argv);
};

/* Parses argv[1..argc-1] of `cmd` (argv[0] is the command's name) into
 * `opts`; the positional arguments are left in argv[*first..argc-1].
 * Returns 0, CLI_HELP_SHOWN after printing --help, or CLI_USAGE after
 * printing an error that names the option and the command. */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, void *opts,
              int *first);

/* Parses `text`, the value of `option`, as a comma list of integers 1 to
 * max, digits only (no sign, space or empty entry), into a new array *out
 * of *count entries (free it).  Returns 0, or CLI_USAGE after printing an
 * error that quotes the entry refused and calls it no valid `item`. */
int cli_list_parse(const char *cmd, const char *option, const char *item,
                   const char *text, unsigned long long max, size_t **out,
                   size_t *count);

/* Refuses options given together: when both `a` and `b` are set, prints
 * "A and B exclude each other: WHY" and returns CLI_USAGE; else 0. */
int cli_exclusive(const char *cmd, const char *a, int a_given, const char *b,
                  int b_given, const char *why);

/* Prints the command's usage, description and options table. */
void cli_help(const struct cli_command *cmd, FILE *to);

/* Every command, ended by an entry with a NULL name. */
extern const struct cli_command cli_commands[];

/* Looks a command up by name; NULL if there is none. */
const struct cli_command *cli_command_find(const char *name);

/* The text about the environment and exit statuses that ends every help. */
extern const char cli_epilogue[];

/* Prints "clinformer: WHAT: ERROR (NAME): DETAIL" and, when ctx holds the
 * log of a failed kernel build, the log.  Returns CLI_ERROR. */
int cli_fail(clf_context *ctx, const char *what, int rc);

/* Creates a context on selector and applies the device's stored GEMM
 * tuning (process-wide: the tool owns its process), printing a warning
 * when the stored file was ignored; on failure prints why and returns
 * CLI_ERROR with *ctx NULL. */
int cli_context(clf_context **ctx, const char *selector);

/* Destroys a context that cli_context made, printing first the warnings
 * it gained since (a tune file's CLBlast parameters dropped after a
 * failure). */
void cli_context_done(clf_context *ctx);

/* Several devices: a --device value that is "all" or a comma list. */
int cli_is_device_list(const char *selector);

/* Creates a group over a device list (clf_group_create), applies each
 * device's stored GEMM tuning as cli_context does, and sets the split
 * (enum clf_shard_by); on failure prints why and returns CLI_ERROR with
 * *g NULL. */
int cli_group(clf_group **g, const char *devices, int shard_by);

/* "devices: pocl:0, pocl:1; split by positions over 2" of the last
 * forward. */
void cli_print_split(const clf_group *g);

/* --shard-by's values: seq, batch, auto. */
extern const struct cli_choice cli_shard_choices[];

/* "kernel choices: ..." of the last plan, each with where it came from;
 * verbose adds one line per choice ("gemm[proj] = tiled (timed ...)", a
 * line per GEMM role) and every stored or timed choice the device has. */
void cli_print_choices(clf_context *ctx, int verbose);
/* A stored choice's kind as listed: "gemm[ROLE]" for a GEMM (the role from
 * the bucket's first word: comp, score, weigh, ffn; proj without one),
 * else the kind itself. */
void cli_choice_kind(const clf_kernel_choice *c, char *buf, size_t cap);
/* "clblast 1.20 ms, blocked 0.80 ms" from c->ms ("" when none known). */
void cli_choice_times(const clf_kernel_choice *c, char *buf, size_t cap);
/* The context's launch log as a table on stdout. */
void cli_print_launches(clf_context *ctx);

/* Prints "clinformer CMD: MESSAGE" to stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* *out = a * b; returns -1 instead when the product overflows size_t. */
int cli_mul(size_t a, size_t b, size_t *out);

/* *out = the product of the `count` sizes times `elem`; returns -1 instead
 * when it overflows size_t. */
int cli_bytes(const size_t *sizes, size_t count, size_t elem, size_t *out);

/* Monotonic seconds. */
double cli_now(void);

int cli_cmp_double(const void *a, const void *b);

/* A file the command reads, and the option that named it. */
struct cli_file {
    const char *option, *path;
};

/* Checks that `path` may be written as an output: "-" (standard output),
 * or a path that does not exist or is
 * a regular file (not a link, device, FIFO or directory), and it is not
 * the same file (device and inode) as any of the `count` inputs (NULL paths
 * are skipped).  Prints an error naming `option` and returns CLI_USAGE
 * when refused. */
int cli_output_check(const char *cmd, const char *option, const char *path,
                     const struct cli_file *inputs, size_t count);

/* Whether an output option's value is "-", standard output. */
int cli_is_stdout(const char *path);

/* For a command whose output is "-": keeps standard output for the data
 * (cli_npy_write) and sends everything printed to stdout from now on to
 * stderr, so the two never mix.  Returns 0, or CLI_ERROR (printed). */
int cli_stdout_for_data(const char *cmd);

/* Writes len bytes to the standard output that cli_stdout_for_data()
 * kept; 0, or -1 (nothing kept, or the write failed). */
int cli_data_write(const void *data, size_t len);

/* Writes a version 1 .npy of little-endian float32 to `path` atomically:
 * a new temporary file in the same directory (O_EXCL | O_NOFOLLOW), fsync,
 * rename over `path`; for "-", to the standard output that
 * cli_stdout_for_data() kept.  Prints an error and returns CLI_ERROR on
 * failure. */
int cli_npy_write(const char *path, const float *data, const size_t *shape,
                  size_t ndim);

/* clinformer run --mpi (cli/mpi.c).  cli_mpi_begin initialises MPI,
 * sends the stdout of ranks other than 0 to /dev/null and, unless *device
 * or CLINFORMER_DEVICE names one, sets *device to this local rank's device;
 * without MPI built in it prints why and returns CLI_USAGE.  The others do
 * nothing special until it has succeeded: cli_mpi_rank() is 0,
 * cli_mpi_same_file() 0 and cli_mpi_load_npy() is clf_npy_load() printing
 * its error.  Under MPI, cli_mpi_same_file() compares the file's checksum
 * across ranks (an error naming each rank that differs or cannot read it),
 * and cli_mpi_load_npy() reads on rank 0 and gives every rank the array
 * (whole 0: its shape and type, with a one-element placeholder of data);
 * both fail on every rank together.  cli_mpi_devices() prints on rank 0
 * the device of every rank.  cli_mpi_end(rc) finalises MPI and
 * returns rc, or after a failure of this rank alone prints which rank
 * failed and ends every rank (MPI_Abort). */
int cli_mpi_begin(const char **device);
int cli_mpi_rank(void);
int cli_mpi_same_file(const char *option, const char *path);
/* Under MPI, compares count options (names without "--", values as
 * "--NAME VALUE" lines, "" when not given) with rank 0's; a rank whose
 * value differs prints the option, itself and both values.  Fails on every
 * rank together; 0 without MPI. */
int cli_mpi_same_options(const char *const *names, const char *const *values,
                         size_t count);
int cli_mpi_load_npy(const char *path, clf_array *a, int whole);
void cli_mpi_devices(clf_context *ctx);
int cli_mpi_end(int rc);

/* The commands (one file each, or a few per file). */
int cli_devices_main(const struct cli_command *cmd, int argc, char **argv);
int cli_list_devices(int kernels);
int cli_demo_main(const struct cli_command *cmd, int argc, char **argv);
int cli_lookahead_main(const struct cli_command *cmd, int argc, char **argv);
int cli_run_main(const struct cli_command *cmd, int argc, char **argv);
int cli_stream_main(const struct cli_command *cmd, int argc, char **argv);
int cli_compare_main(const struct cli_command *cmd, int argc, char **argv);
int cli_tune_main(const struct cli_command *cmd, int argc, char **argv);
int cli_verify_main(const struct cli_command *cmd, int argc, char **argv);

extern const struct cli_option cli_devices_options[];
extern const struct cli_option cli_demo_options[];
extern const struct cli_option cli_lookahead_options[];
extern const struct cli_option cli_run_options[];
extern const struct cli_option cli_stream_options[];
extern const struct cli_option cli_compare_options[];
extern const struct cli_option cli_tune_options[];
extern const struct cli_option cli_verify_options[];

#endif
