/* clinformer command-line tool: options from each command's table, parsed
 * with getopt_long and printed as the command's --help. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's val for --help; a table entry i gets CLI_VAL_BASE + i. */
#define CLI_VAL_HELP 1
#define CLI_VAL_BASE 256
#define CLI_MAX_OPTIONS 64

void
cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "clinformer %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static size_t
option_count(const struct cli_option *opts)
{
    size_t n = 0;

    while (opts != NULL && opts[n].name != NULL)
        n++;
    return n;
}

/* Prints one option: "  --name VALUE" padded to 21 columns, then its help,
 * whose later lines are indented to the same column. */
static void
help_line(FILE *to, const char *name, const char *metavar, const char *help)
{
    int w = fprintf(to, "  --%s%s%s", name, metavar ? " " : "",
                    metavar ? metavar : "");
    const char *p;

    if (w >= 21) {
        fputc('\n', to);
        w = 0;
    }
    fprintf(to, "%*s", 21 - w, "");
    for (p = help; *p != '\0'; p++) {
        fputc(*p, to);
        if (*p == '\n')
            fprintf(to, "%21s", "");
    }
    fputc('\n', to);
}

void
cli_help(const struct cli_command *cmd, FILE *to)
{
    const struct cli_option *o;

    fprintf(to, "Usage: clinformer %s%s%s%s\n\n", cmd->name,
            cmd->options[0].name != NULL ? " [OPTIONS]" : "",
            cmd->args[0] ? " " : "", cmd->args);
    fputs(cmd->about != NULL ? cmd->about : cmd->summary, to);
    fputs("\nOptions:\n", to);
    for (o = cmd->options; o->name != NULL; o++)
        help_line(to, o->name, o->metavar, o->help);
    help_line(to, "help", NULL, "show this text");
    fputc('\n', to);
    fputs(cli_epilogue, to);
}

/* The option's name as written in arg ("--name=value" -> "--name"). */
static void
written_name(const char *arg, char *buf, size_t size)
{
    size_t len = strcspn(arg, "=");

    if (len >= size)
        len = size - 1;
    memcpy(buf, arg, len);
    buf[len] = '\0';
}

/* Names the commands other than `cmd` that take option `name` in buf;
 * returns how many there are. */
static int
owners_of(const struct cli_command *cmd, const char *name, char *buf,
          size_t size)
{
    const struct cli_command *c;
    const struct cli_option *o;
    size_t used = 0;
    int count = 0;

    buf[0] = '\0';
    if (strncmp(name, "--", 2) != 0)
        return 0;
    for (c = cli_commands; c->name != NULL; c++)
        for (o = c->options; c != cmd && o->name != NULL; o++)
            if (strcmp(o->name, name + 2) == 0 && used < size) {
                int w = snprintf(buf + used, size - used, "%s%s",
                                 count ? " and " : "", c->name);
                used += w > 0 ? (size_t)w : 0;
                count++;
            }
    return count;
}

/* Reports what getopt_long rejected: argv[optind - 1] or -optopt. */
static int
unknown_option(const struct cli_command *cmd, const char *arg, int optopt_)
{
    const struct cli_option *o;
    char name[64], others[256];

    if (optopt_ > ' ' && optopt_ < 127)
        snprintf(name, sizeof name, "-%c", optopt_);
    else
        written_name(arg, name, sizeof name);
    for (o = cmd->options; o->name != NULL; o++)
        if (o->metavar == NULL && strncmp(name, "--", 2) == 0 &&
            strcmp(o->name, name + 2) == 0 && strchr(arg, '=') != NULL) {
            cli_error(cmd->name, "%s takes no value", name);
            return CLI_USAGE;
        }
    if (owners_of(cmd, name, others, sizeof others) > 0)
        cli_error(cmd->name,
                  "%s is an option of %s, not of %s\n"
                  "Try 'clinformer %s --help'.",
                  name, others, cmd->name, cmd->name);
    else
        cli_error(cmd->name,
                  "unknown or ambiguous option %s\n"
                  "Try 'clinformer %s --help'.",
                  name, cmd->name);
    return CLI_USAGE;
}

/* A decimal number of digits only: no sign, space or empty text, which
 * strtoull would take (" 5", "+5", and "-1" as a huge value).  Returns 0
 * with *out set, or -1 when text is not one or exceeds max. */
static int
digits_at_most(const char *text, unsigned long long max,
               unsigned long long *out)
{
    unsigned long long x = 0;
    const char *p = text;

    if (*p == '\0')
        return -1;
    for (; *p != '\0'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (*p < '0' || *p > '9' || d > max || x > (max - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
}

static int
set_size(const char *cmd, const struct cli_option *o, const char *v,
         size_t *out)
{
    unsigned long long x = 0;
    unsigned long long max = o->max != 0 ? o->max : SIZE_MAX;

    if (digits_at_most(v, max, &x) != 0 || x == 0) {
        if (o->max != 0)
            cli_error(cmd,
                      "--%s wants a positive integer up to %zu, got "
                      "\"%s\"",
                      o->name, o->max, v);
        else
            cli_error(cmd,
                      "--%s wants a positive integer below 2^%d, got "
                      "\"%s\"",
                      o->name, (int)(sizeof(size_t) * 8), v);
        return CLI_USAGE;
    }
    *out = (size_t)x;
    return 0;
}

int
cli_list_parse(const char *cmd, const char *option, const char *item,
               const char *text, unsigned long long max, size_t **out,
               size_t *count)
{
    const char *p = text;
    size_t n = 1, i;
    char entry[32];

    for (; *p != '\0'; p++)
        n += *p == ',';
    *out = calloc(n, sizeof **out);
    if (*out == NULL) {
        cli_error(cmd, "%s: out of host memory", option);
        return CLI_ERROR;
    }
    for (p = text, i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        unsigned long long x = 0;
        /* Each entry alone, so that "1,2," is an empty third entry and
         * "1, 2" an entry " 2", both named as they were written. */
        int ok = len < sizeof entry;
        if (ok) {
            memcpy(entry, p, len);
            entry[len] = '\0';
            ok = digits_at_most(entry, max, &x) == 0 && x > 0;
        }
        if (!ok) {
            if (len == 0)
                cli_error(cmd, "%s \"%s\": entry %zu is empty, not a valid %s",
                          option, text, i + 1, item);
            else
                cli_error(cmd,
                          "%s \"%s\": \"%.*s\" is not a valid %s (a "
                          "positive integer up to %llu)",
                          option, text, (int)len, p, item, max);
            free(*out);
            *out = NULL;
            return CLI_USAGE;
        }
        (*out)[i] = (size_t)x;
        p += len + (p[len] == ',');
    }
    *count = n;
    return 0;
}

int
cli_exclusive(const char *cmd, const char *a, int a_given, const char *b,
              int b_given, const char *why)
{
    if (!a_given || !b_given)
        return 0;
    cli_error(cmd, "%s and %s exclude each other: %s", a, b, why);
    return CLI_USAGE;
}

static int
set_double(const char *cmd, const struct cli_option *o, const char *v,
           double *out)
{
    char *end;
    double x = strtod(v, &end);
    int ok = o->type == CLI_SECONDS ? x > 0.0 : x >= 0.0;

    /* Decimal only: strtod also takes leading space, a sign, hex, "inf"
     * and "nan", none of which a user means here. */
    if (!((*v >= '0' && *v <= '9') || *v == '.') || strpbrk(v, "xX") ||
        *end != '\0' || !ok || x > 1e300) {
        cli_error(cmd, "--%s wants %s, got \"%s\"", o->name,
                  o->type == CLI_SECONDS ? "seconds > 0"
                                         : "a non-negative number",
                  v);
        return CLI_USAGE;
    }
    *out = x;
    return 0;
}

static int
set_choice(const char *cmd, const struct cli_option *o, const char *v, int *out)
{
    const struct cli_choice *c;

    for (c = o->choices; c->name != NULL; c++)
        if (strcmp(c->name, v) == 0) {
            *out = c->value;
            return 0;
        }
    fprintf(stderr, "clinformer %s: --%s wants", cmd, o->name);
    for (c = o->choices; c->name != NULL; c++)
        fprintf(stderr, "%s %s",
                c == o->choices ? ""
                : c[1].name     ? ","
                                : " or",
                c->name);
    fprintf(stderr, ", got \"%s\"\n", v);
    return CLI_USAGE;
}

static int
set_value(const struct cli_command *cmd, const struct cli_option *o,
          const char *v, void *opts)
{
    char *field = (char *)opts + o->offset;

    switch (o->type) {
    case CLI_FLAG:
        *(int *)(void *)field = o->flag;
        return 0;
    case CLI_STRING:
    case CLI_PATH:
    case CLI_OUTPUT:
        /* An empty value is an unset variable in a script, not a name:
         * refused here rather than failing late as "clinformer: : ...". */
        if (*v == '\0') {
            cli_error(cmd->name, "--%s wants %s, got \"\"", o->name,
                      o->type == CLI_STRING ? "a value" : "a file name");
            return CLI_USAGE;
        }
        *(const char **)(void *)field = v;
        return 0;
    case CLI_SIZE:
        return set_size(cmd->name, o, v, (size_t *)(void *)field);
    case CLI_SECONDS:
    case CLI_NONNEG:
        return set_double(cmd->name, o, v, (double *)(void *)field);
    case CLI_CHOICE:
        return set_choice(cmd->name, o, v, (int *)(void *)field);
    }
    return CLI_USAGE;
}

/* getopt_long's table for `cmd`: one entry per option, then --help. */
static void
long_options(const struct cli_command *cmd, struct option *lo, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        lo[i].name = cmd->options[i].name;
        lo[i].has_arg =
            cmd->options[i].type == CLI_FLAG ? no_argument : required_argument;
        lo[i].flag = NULL;
        lo[i].val = CLI_VAL_BASE + (int)i;
    }
    memset(&lo[n], 0, 2 * sizeof lo[n]);
    lo[n].name = "help";
    lo[n].val = CLI_VAL_HELP;
}

static int
check_positional(const struct cli_command *cmd, int argc, char **argv,
                 int first)
{
    size_t got = (size_t)(argc - first);
    int i;

    if (got == cmd->positional) {
        /* The positional arguments are file names (compare's A and B). */
        for (i = first; i < argc; i++)
            if (argv[i][0] == '\0') {
                cli_error(cmd->name,
                          "needs %s, got an empty argument\n"
                          "Try 'clinformer %s --help'.",
                          cmd->args, cmd->name);
                return CLI_USAGE;
            }
        return 0;
    }
    if (got > cmd->positional)
        cli_error(cmd->name,
                  "unexpected argument \"%s\"\n"
                  "Try 'clinformer %s --help'.",
                  argv[first + (int)cmd->positional], cmd->name);
    else
        cli_error(cmd->name, "needs %s\nTry 'clinformer %s --help'.", cmd->args,
                  cmd->name);
    return CLI_USAGE;
}

int
cli_parse(const struct cli_command *cmd, int argc, char **argv, void *opts,
          int *first)
{
    struct option lo[CLI_MAX_OPTIONS + 2];
    size_t n = option_count(cmd->options);
    int c, rc;

    if (n > CLI_MAX_OPTIONS) {
        cli_error(cmd->name, "too many options in its table");
        return CLI_ERROR;
    }
    long_options(cmd, lo, n);
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        if (c == CLI_VAL_HELP) {
            cli_help(cmd, stdout);
            return CLI_HELP_SHOWN;
        }
        if (c == ':') {
            char name[64];
            written_name(argv[optind - 1], name, sizeof name);
            cli_error(cmd->name, "%s needs a value", name);
            return CLI_USAGE;
        }
        if (c < CLI_VAL_BASE || c >= CLI_VAL_BASE + (int)n)
            return unknown_option(cmd, argv[optind - 1], optopt);
        rc = set_value(cmd, &cmd->options[c - CLI_VAL_BASE], optarg, opts);
        if (rc != 0)
            return rc;
    }
    *first = optind;
    return check_positional(cmd, argc, argv, optind);
}
