/* clinformer: the command-line tool.  main() looks the command up in
 * cli_commands and hands it its arguments; each command parses its own
 * options from its table (see cli.h). */
#include "cli.h"
#include "suite.h"

#include <string.h>

static int help_main(const struct cli_command *cmd, int argc, char **argv);
static int version_main(const struct cli_command *cmd, int argc, char **argv);
static int bench_main(const struct cli_command *cmd, int argc, char **argv);

static const struct cli_option no_options[] = {
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

const struct cli_command cli_commands[] = {
    {"devices", "", "list OpenCL platforms and devices\n",
     "List the OpenCL platforms and devices, with vendor, driver, compute\n"
     "units, memory, OpenCL C version and fp16/fp64 support.\n",
     cli_devices_options, 0, cli_devices_main},
    {"demo", "",
     "list devices, run the golden example of the design\n"
     "(full 25.7521, compressed 27.2636) on the device,\n"
     "then one layer (D=512, h=8, k=256) in Linformer and\n"
     "full mode, printing times and their relative\n"
     "difference\n",
     "List the devices, run the golden example of the design (full attention\n"
     "25.7521, compressed 27.2636) on the device, then one layer (D=512, h=8,\n"
     "k=256, or k=n when --seq-len is shorter) in Linformer and full mode,\n"
     "printing times and the relative difference of their outputs.\n",
     cli_demo_options, 0, cli_demo_main},
    {"check-lookahead", "",
     "audit a layer configuration for look-ahead: for\n"
     "each tested position t, replace every input after t\n"
     "with random values and check that outputs at\n"
     "positions <= t do not change, bit for bit; prints\n"
     "PASS, or FAIL with the first position that moved\n"
     "(random weights of the given shape)\n",
     "Audit a layer configuration (random weights of the given shape) for\n"
     "look-ahead: for each tested position t, replace every input after t\n"
     "with random values and check that the outputs at positions <= t do not\n"
     "change, bit for bit.  Prints PASS (exit 0), or FAIL (exit 3) with the\n"
     "first position that moved.\n",
     cli_lookahead_options, 0, cli_lookahead_main},
    {"run", "",
     "run a trained model: --weights M.safetensors\n"
     "--input X.npy --output Y.npy (float32 (B, n, D) or\n"
     "(n, D); an LM takes int token ids (B, n) and writes\n"
     "logits (B, n, vocab))\n",
     "Run a trained model from a safetensors file on a .npy input: float32\n"
     "(B, n, D) or (n, D), or for an LM int token ids (B, n) or (n).  Writes\n"
     "float32 (B, n, D), or logits (B, n, vocab), to --output.\n",
     cli_run_options, 0, cli_run_main},
    {"stream", "",
     "feed a trained model its input --chunk M positions\n"
     "at a time in prefix-safe causal mode (--block B, or\n"
     "--full); prints each append's latency (median, p99)\n"
     "and the state's memory; --check compares with the\n"
     "whole-sequence causal forward\n",
     "Feed a trained model (as clinformer run loads it) its input --chunk M\n"
     "positions at a time, as a stream (clf_stream_*), in prefix-safe causal\n"
     "Linformer (--block B) or causal full attention (--full).  Prints the\n"
     "appends' latency (median, p99) and the state's memory, writes the\n"
     "outputs to --output, and with --check compares them with the\n"
     "whole-sequence causal forward (MATCH exit 0, DIFFER exit 3).\n",
     cli_stream_options, 0, cli_stream_main},
    {"compare", "A.npy B.npy",
     "max |A - B| relative to max |B| (absolute when B\n"
     "is all zeros); exit 0 when within --tol (default\n"
     "1e-5), 3 otherwise\n",
     "Print max |A - B| relative to max |B| of two float32 .npy files of the\n"
     "same shape (when B is all zeros, max |A - B| itself is held to the\n"
     "tolerance), then MATCH (exit 0) when it is within --tol, else DIFFER\n"
     "(exit 3).  Arrays without elements MATCH.\n",
     cli_compare_options, 2, cli_compare_main},
    {"bench", "...", "the bench suite (clinformer bench --help)\n", NULL,
     no_options, 0, bench_main},
    {"tune", "",
     "time CLBlast GEMM parameters and the tiled GEMM's\n"
     "tile sizes on real forwards of a layer (--d-model,\n"
     "--heads, --k, --seq-len, default 512, 8, 256, 2048)\n"
     "for --budget seconds (default 120) and store the\n"
     "fastest for this device; later clinformer runs\n"
     "apply them; rerun to resume\n",
     "Time CLBlast GEMM parameters (its Xgemm kernel's, its XgemmDirect\n"
     "kernel's with every GEMM direct, its direct/indirect switch), then the\n"
     "tiled GEMM kernel's tile and vector sizes (a few sets valid for the\n"
     "device), on real forwards of one layer for --budget seconds and store\n"
     "the fastest for this device; every later context on it applies them.\n"
     "Rerun to resume where the last run stopped.\n",
     cli_tune_options, 0, cli_tune_main},
    {"verify", "",
     "check this device: every attention way, GEMM way and\n"
     "softmax forced in turn, in every mode, padded and\n"
     "not, float and half weights, at odd shapes, against\n"
     "a double-precision reference, with guard bands\n"
     "around every buffer and a bitwise repeat, for\n"
     "--budget seconds (default 180); prints a reproducer\n"
     "for each failure\n",
     "Check the device: every attention way, GEMM way and softmax forced in\n"
     "turn, in Linformer, full, causal and causal-full mode, with and without\n"
     "padding, float and half weights, at odd shapes (n, k and d_h multiples\n"
     "of no tile, n = 1, k > n, 48 short sequences, a head of 67), each\n"
     "against a double-precision reference on the host (max |y - ref| /\n"
     "max |ref| within 1e-4; 2e-3 for half weights whose products may run in\n"
     "binary16), every device buffer with a guard band whose damage names the\n"
     "kernel, and the same input run twice giving the same bits.  Cases run\n"
     "in a spread order until --budget runs out.  Each failure prints the\n"
     "clinformer run and compare commands that reproduce it, its files\n"
     "written under --save.  Exit 0 when none failed, 3 otherwise.\n",
     cli_verify_options, 0, cli_verify_main},
    {"help", "[COMMAND]", "show this text, or a command's options\n",
     "Show the commands, or the options of COMMAND.\n", no_options, 0,
     help_main},
    {"version", "", "print the library version\n",
     "Print the library version.\n", no_options, 0, version_main},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL}};

const char cli_epilogue[] =
    "Environment: CLINFORMER_DEVICE, CLINFORMER_CACHE_DIR (\"off\" disables\n"
    "the kernel binary cache and stored tuning), CLINFORMER_KERNEL_DIR (load\n"
    "cl/*.cl from there), CLINFORMER_TUNE=off (ignore stored GEMM tuning),\n"
    "CLINFORMER_KERNELS=softmax=NAME,gemm=NAME,attend=NAME,halfgemm=NAME\n"
    "(force kernel choices instead of the stored or timed ones; softmax:\n"
    "scalar, vector, group; gemm: clblast, blocked, tiled, split; attend:\n"
    "gemm, fused, flash, flashwg; halfgemm: widen, native, the latter only "
    "where\n"
    "the device has cl_khr_fp16 and its self-test passes, else it widens),\n"
    "CLINFORMER_LIMITS=wg=N,local=BYTES,fp16=0 (any of them: run as on a\n"
    "device whose kernels take at most N work-items a group, with BYTES of\n"
    "local memory, without cl_khr_fp16).\n"
    "Exit status: 0 on success (check-lookahead: PASS; compare: MATCH), 1 on\n"
    "an error (the message names it; a failed kernel build prints its log),\n"
    "2 on a usage error, before a device is opened (an unknown option or\n"
    "one of another command, a missing, empty or invalid value, options that\n"
    "exclude each other, sizes whose product overflows, an output path that\n"
    "is refused), 3 when check-lookahead FAILs, compare finds the arrays\n"
    "DIFFER or verify finds a failing case.  An output FILE of - is standard\n"
    "output.\n";

const struct cli_command *
cli_command_find(const char *name)
{
    const struct cli_command *c;

    for (c = cli_commands; c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

/* The top-level help: every command with its summary. */
static void
usage(FILE *to)
{
    const struct cli_command *c;

    fputs("Usage: clinformer COMMAND [OPTIONS]\n"
          "\n"
          "Linformer attention on any OpenCL device.\n"
          "\n"
          "Commands:\n",
          to);
    for (c = cli_commands; c->name != NULL; c++) {
        const char *p = c->summary;
        int w = fprintf(to, "  %s%s%s", c->name, c->positional ? " " : "",
                        c->positional ? c->args : "");
        fprintf(to, "%*s", w < 21 ? 21 - w : 2, "");
        for (; *p != '\0'; p++) {
            fputc(*p, to);
            if (*p == '\n' && p[1] != '\0')
                fprintf(to, "%21s", "");
        }
    }
    fputs("\nOptions: 'clinformer COMMAND --help' or 'clinformer help "
          "COMMAND'.\n\n",
          to);
    fputs(cli_epilogue, to);
}

static int
bench_main(const struct cli_command *cmd, int argc, char **argv)
{
    (void)cmd;
    return clf_bench_main(argc, argv);
}

static int
help_main(const struct cli_command *cmd, int argc, char **argv)
{
    const struct cli_command *c;
    char *bench_help[] = {"bench", "--help", NULL};

    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0) {
        cli_help(cmd, stdout);
        return 0;
    }
    c = cli_command_find(argv[1]);
    if (c == NULL || argc > 2) {
        cli_error(cmd->name, "no command \"%s\"\nTry 'clinformer help'.",
                  argv[c == NULL ? 1 : 2]);
        return CLI_USAGE;
    }
    if (c->main == bench_main)
        return clf_bench_main(2, bench_help);
    cli_help(c, stdout);
    return 0;
}

static int
version_main(const struct cli_command *cmd, int argc, char **argv)
{
    int first, rc = cli_parse(cmd, argc, argv, NULL, &first);

    if (rc != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    printf("clinformer %s\n", clf_version());
    return 0;
}

int
main(int argc, char **argv)
{
    const struct cli_command *c;
    const char *name = argc >= 2 ? argv[1] : NULL;

    if (name == NULL) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        name = "help";
    else if (strcmp(name, "--version") == 0)
        name = "version";
    c = cli_command_find(name);
    if (c == NULL) {
        fprintf(stderr,
                "clinformer: unknown command \"%s\"\nTry 'clinformer "
                "help'.\n",
                name);
        return CLI_USAGE;
    }
    return c->main(c, argc - 1, argv + 1);
}
