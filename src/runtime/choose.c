/* Choosing between kernels that compute the same thing.  One mechanism
 * for every kind of choice the floors above register (CLF_CHOICE_KIND:
 * the softmax variants, who runs the GEMMs, the way of attention's steps
 * 3-5, the half-weight GEMMs), each with its candidates: a winner per
 * kind and shape bucket, taken from a forced name (clf_context_force_kernel or
 * CLINFORMER_KERNELS), else from the device's store in the cache
 * directory, else timed now and stored, so that a later process on the
 * same device and driver runs the same kernels without timing.  The store
 * is a small text file read as hostile input and replaced atomically. */
#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAGIC "clinformer kernel choices 1"
/* The store is bounded by size, not by a count of entries: it keeps the
 * most recently used entries that fit in STORE_MAX_BYTES (a reader refuses
 * a larger file) and drops the least recently used first.  "Used" means
 * timed, read from the store, or looked up by a forward; a store's line
 * order is its recency order, most recent first. */
#define STORE_MAX_BYTES 65536
/* Choices a context keeps in memory, past what the store holds too, so
 * that a shape is timed once per context; past this many the least
 * recently used is forgotten. */
#define CONTEXT_MAX_ENTRIES 8192

/* Besides the choices, the store keeps each device's measured throughput
 * for a sharded forward's split: "throughput BUCKET RATE" lines, entries
 * of this pseudo-kind (RATE, a positive integer, in the winner field). */
#define KIND_RATE CLF_MAX_ROLES
/* A rate is positions (B*n) a second, stored as an integer from
 * 1 to RATE_MAX: what clf__rate_record writes, so a stored rate outside
 * it was not measured here and is ignored (timed again). */
#define RATE_MAX 2000000000UL
static const char rate_kind[] = "throughput";

/* The registry, by role id: the kind each role is of, and the role's
 * index in its kind (0: the kind's first, whose id is the kind's).  Filled
 * when the library is loaded, before any context is made; read without
 * the lock after. */
static const struct clf__choice_kind *role_kind[CLF_MAX_ROLES];
static int role_index[CLF_MAX_ROLES];
static int nroles;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether kind k can be registered beside those already: well formed and
 * named apart from them (the store and CLINFORMER_KERNELS name it). */
static int
registrable(const struct clf__choice_kind *k)
{
    int i;

    if (k == NULL || k->name == NULL || k->candidates == NULL ||
        k->labels == NULL || k->count < 1 || k->count > CLF_MAX_CANDIDATES ||
        k->roles < 1 || k->roles > CLF_MAX_ROLES - nroles)
        return 0;
    for (i = 0; i < nroles; i++)
        if (role_index[i] == 0 && strcmp(role_kind[i]->name, k->name) == 0)
            return 0;
    return 1;
}

int
clf__choice_register(const struct clf__choice_kind *kind)
{
    int id = -1, i;

    pthread_mutex_lock(&registry_lock);
    for (i = 0; i < nroles && id < 0; i++)
        if (role_kind[i] == kind && role_index[i] == 0)
            id = i; /* registered already */
    if (id < 0 && registrable(kind)) {
        id = nroles;
        for (i = 0; i < kind->roles; i++) {
            role_kind[id + i] = kind;
            role_index[id + i] = i;
        }
        nroles += kind->roles;
    }
    pthread_mutex_unlock(&registry_lock);
    return id;
}

/* The kind whose id is `kind`, or NULL. */
static const struct clf__choice_kind *
kind_at(int kind)
{
    return kind >= 0 && kind < nroles && role_index[kind] == 0 ? role_kind[kind]
                                                               : NULL;
}

int
clf__choice_role_kind(int role)
{
    return role >= 0 && role < nroles ? role - role_index[role] : -1;
}

/* The kinds' ids in the listing's order (rank, then registration); their
 * number. */
static int
kinds_ranked(int *ids)
{
    int n = 0, i, j;

    for (i = 0; i < nroles; i++) {
        if (role_index[i] != 0)
            continue;
        for (j = n; j > 0 && role_kind[ids[j - 1]]->rank > role_kind[i]->rank;
             j--)
            ids[j] = ids[j - 1];
        ids[j] = i;
        n++;
    }
    return n;
}

double
clf__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *
clf__choice_kind_name(int kind)
{
    return kind_at(kind) != NULL ? kind_at(kind)->name : "?";
}

const char *
clf__choice_name(int kind, int candidate)
{
    const struct clf__choice_kind *k = kind_at(kind);

    if (k == NULL || candidate < 0 || candidate >= k->count)
        return "?";
    return k->candidates[candidate];
}

int
clf__choice_count(int kind)
{
    return kind_at(kind) != NULL ? kind_at(kind)->count : 0;
}

/* The kind called `name` (len bytes), or -1. */
static int
kind_of(const char *name, size_t len)
{
    int i;

    for (i = 0; i < nroles; i++)
        if (role_index[i] == 0 && strlen(role_kind[i]->name) == len &&
            strncmp(role_kind[i]->name, name, len) == 0)
            return i;
    return -1;
}

static int
candidate_of(int kind, const char *name, size_t len)
{
    const struct clf__choice_kind *k = kind_at(kind);
    int i;

    for (i = 0; i < k->count; i++)
        if (strlen(k->candidates[i]) == len &&
            strncmp(k->candidates[i], name, len) == 0)
            return i;
    return -1;
}

/* "a, b or c" of the kinds (kind < 0) or of one kind's candidates. */
static void
list_names(char *buf, size_t cap, int kind)
{
    int ids[CLF_MAX_ROLES];
    int count = kind < 0 ? kinds_ranked(ids) : kind_at(kind)->count, i;
    size_t len = 0;

    buf[0] = '\0';
    for (i = 0; i < count && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                i == 0           ? ""
                                : i == count - 1 ? " or "
                                                 : ", ",
                                kind < 0 ? kind_at(ids[i])->name
                                         : kind_at(kind)->candidates[i]);
}

/* Parses kind=name for `what` (a variable's name, for messages); stores
 * the kind and candidate. */
static int
parse_pair(const char *what, const char *s, size_t len, int *kind,
           int *candidate)
{
    const char *eq = memchr(s, '=', len);
    char valid[128];

    *kind = eq != NULL ? kind_of(s, (size_t)(eq - s)) : -1;
    if (*kind < 0) {
        list_names(valid, sizeof valid, -1);
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "%s: \"%.*s\" names no kernel choice; expected "
                         "KIND=NAME with KIND %s",
                         what, (int)(len > 64 ? 64 : len), s, valid);
    }
    *candidate = candidate_of(*kind, eq + 1, len - (size_t)(eq + 1 - s));
    if (*candidate < 0) {
        list_names(valid, sizeof valid, *kind);
        return clf__fail(
            CLF_EINVALID_ARGUMENT, "%s: \"%.*s\" is no %s kernel; expected %s",
            what, (int)(len > 64 ? 64 : len), s, kind_at(*kind)->name, valid);
    }
    return 0;
}

/* CLINFORMER_KERNELS=kind=name,...: the candidate forced for `kind`, or -1.
 * Every entry is checked, so a typo fails whatever kind is looked up. */
static int
env_forced(int kind, int *candidate)
{
    const char *v = getenv("CLINFORMER_KERNELS");
    const char *s, *end;
    int k, c;

    *candidate = -1;
    if (v == NULL)
        return 0;
    for (s = v; *s != '\0'; s = *end ? end + 1 : end) {
        end = strchr(s, ',');
        if (end == NULL)
            end = s + strlen(s);
        if (end == s)
            continue;
        CLF_TRY(parse_pair("CLINFORMER_KERNELS", s, (size_t)(end - s), &k, &c));
        if (k == kind)
            *candidate = c;
    }
    return 0;
}

int
clf__choice_env_check(void)
{
    int c;

    return env_forced(0, &c);
}

CLF_EXTERN int
clf_context_force_kernel(clf_context *ctx, const char *kind, const char *name)
{
    char pair[96];
    int k, c, n;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (kind == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "kind is NULL");
    n = snprintf(pair, sizeof pair, "%s=%s", kind, name ? name : "");
    if (n < 0 || (size_t)n >= sizeof pair)
        return clf__fail(CLF_EINVALID_ARGUMENT, "kind or name is too long");
    if (name == NULL) {
        k = kind_of(kind, strlen(kind));
        if (k < 0)
            return parse_pair("kind", pair, (size_t)n, &k, &c);
        clf__lock(ctx);
        ctx->forced[k] = -1;
        clf__unlock(ctx);
        return 0;
    }
    CLF_TRY(parse_pair("kind=name", pair, (size_t)n, &k, &c));
    clf__lock(ctx);
    ctx->forced[k] = c;
    clf__unlock(ctx);
    return 0;
}

/* ---------------------------------------------------------- the store */

static uint64_t kernels_key;
static pthread_once_t kernels_key_once = PTHREAD_ONCE_INIT;

/* A hash of the library's kernel sources and their -D constants. */
static void
hash_kernels(void)
{
    uint64_t h = clf__hash64(CLF_KERNEL_PARAM_OPTIONS,
                             strlen(CLF_KERNEL_PARAM_OPTIONS), 0);
    size_t i;

    for (i = 0; i < CLF_KERNEL_FILES; i++)
        h = clf__hash64(clf__kernel_sources[i],
                        strlen(clf__kernel_sources[i]) + 1, h);
    kernels_key = h;
}

/* The store's path for ctx's device, and the key line that must match;
 * path "" when there is no cache directory. */
static void
store_path(const clf_context *ctx, char *path, size_t cap, char *key,
           size_t key_cap)
{
    char dir[1024];
    uint64_t h;

    /* The GEMM tuning in force is part of the key: tuning changes what
     * CLBlast's GEMMs cost, so choices made before it are made again; so
     * are the library's kernel sources and their -D constants, since
     * changed kernels change what the candidates cost. */
    pthread_once(&kernels_key_once, hash_kernels);
    snprintf(key, key_cap,
             "key %s|%s|%s|%s|%s|clinformer %s|tuning %s|kernels %016llx",
             ctx->info.platform, ctx->info.name, ctx->info.vendor,
             ctx->info.driver, ctx->info.version, CLF_VERSION_STRING,
             ctx->tuned, (unsigned long long)kernels_key);
    /* Control characters would break the line format. */
    for (h = 0; key[h] != '\0'; h++)
        if ((unsigned char)key[h] < 0x20 || key[h] == 0x7f)
            key[h] = '?';
    h = clf__hash64(key, strlen(key), 0x636c66636866ULL);
    clf__cache_dir(dir, sizeof dir);
    path[0] = '\0';
    if (dir[0] != '\0' && snprintf(path, cap, "%s/choices-%016llx.txt", dir,
                                   (unsigned long long)h) >= (int)cap)
        path[0] = '\0';
}

static struct clf__choice_entry *
find_entry(clf_context *ctx, int kind, const char *bucket)
{
    size_t i;

    for (i = 0; i < ctx->nchoices; i++)
        if (ctx->choice_list[i].kind == kind &&
            strcmp(ctx->choice_list[i].bucket, bucket) == 0)
            return &ctx->choice_list[i];
    return NULL;
}

/* Room for a new entry: the list grown, or, at CONTEXT_MAX_ENTRIES (or
 * out of memory), the least recently used entry's place. */
static struct clf__choice_entry *
new_entry(clf_context *ctx)
{
    struct clf__choice_entry *l;
    size_t cap = ctx->choice_cap ? 2 * ctx->choice_cap : 8, i, old = 0;

    if (ctx->nchoices < ctx->choice_cap)
        return &ctx->choice_list[ctx->nchoices++];
    if (cap <= CONTEXT_MAX_ENTRIES &&
        (l = realloc(ctx->choice_list, cap * sizeof *l)) != NULL) {
        ctx->choice_list = l;
        ctx->choice_cap = cap;
        return &ctx->choice_list[ctx->nchoices++];
    }
    if (ctx->nchoices == 0)
        return NULL;
    for (i = 1; i < ctx->nchoices; i++)
        if (ctx->choice_list[i].used < ctx->choice_list[old].used)
            old = i;
    return &ctx->choice_list[old];
}

/* Adds or updates an entry.  used: its recency stamp. */
static struct clf__choice_entry *
add_entry(clf_context *ctx, int kind, const char *bucket, int winner,
          clf_choice_source source, long long used)
{
    struct clf__choice_entry *e = find_entry(ctx, kind, bucket);

    if (e == NULL) {
        if ((e = new_entry(ctx)) == NULL)
            return NULL;
        memset(e, 0, sizeof *e);
        e->kind = kind;
        snprintf(e->bucket, sizeof e->bucket, "%s", bucket);
    }
    e->winner = winner;
    e->source = source;
    e->used = used;
    return e;
}

/* A bucket is 1 to CLF_BUCKET_MAX-1 of [a-z0-9.]. */
static int
bucket_ok(const char *b)
{
    size_t i;

    for (i = 0; b[i] != '\0'; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
              b[i] == '.'))
            return 0;
    return i > 0 && i < CLF_BUCKET_MAX;
}

/* The times of a line's last field into ms: one per candidate of kind,
 * comma-separated, each a positive number of ms, "-" (did not apply) or
 * "x" (failed).  Returns 0, or -1 for anything else. */
static int
parse_times(int kind, char *text, double *ms)
{
    double v[CLF_MAX_CANDIDATES];
    char *t = text, *end;
    int i, n = clf__choice_count(kind);

    for (i = 0; i < n; i++) {
        if (*t == '-' || *t == 'x') {
            v[i] = *t == '-' ? 0.0 : -1.0;
            end = t + 1;
        } else if (*t >= '0' && *t <= '9') {
            v[i] = strtod(t, &end);
            if (!(v[i] > 0.0) || !isfinite(v[i]))
                return -1;
        } else {
            return -1;
        }
        if (*end != (i + 1 < n ? ',' : '\0'))
            return -1;
        t = end + 1;
    }
    for (i = 0; i < n; i++)
        ms[i] = v[i];
    return 0;
}

/* A "throughput bucket rate" line's rate. */
static void
parse_rate(clf_context *ctx, const char *bucket, const char *rate)
{
    char *end;
    unsigned long v = strtoul(rate, &end, 10);

    if (*end == '\0' && v > 0 && v <= RATE_MAX &&
        find_entry(ctx, KIND_RATE, bucket) == NULL)
        add_entry(ctx, KIND_RATE, bucket, (int)v, CLF_SOURCE_STORED,
                  --ctx->choice_floor);
}

/* One "kind bucket name [times]" line; anything else is ignored. */
static void
parse_line(clf_context *ctx, char *line)
{
    char *kind = strtok(line, " "), *bucket = strtok(NULL, " ");
    char *name = strtok(NULL, " "), *times = strtok(NULL, " ");
    double ms[CLF_MAX_CANDIDATES] = {0};
    struct clf__choice_entry *e;
    int k, c;

    if (kind == NULL || bucket == NULL || name == NULL ||
        strtok(NULL, " ") != NULL || !bucket_ok(bucket))
        return;
    if (strcmp(kind, rate_kind) == 0) {
        if (times == NULL)
            parse_rate(ctx, bucket, name);
        return;
    }
    k = kind_of(kind, strlen(kind));
    if (k < 0 || (c = candidate_of(k, name, strlen(name))) < 0 ||
        (times != NULL && parse_times(k, times, ms) != 0))
        return;
    /* Lines come most recent first; each is older than every entry this
     * context has used. */
    if (find_entry(ctx, k, bucket) == NULL &&
        (e = add_entry(ctx, k, bucket, c, CLF_SOURCE_STORED,
                       --ctx->choice_floor)) != NULL)
        memcpy(e->ms, ms, sizeof e->ms);
}

/* The cache directory exists, belongs to the user and only the user may
 * write it (created 0700 when missing); else the store is neither read
 * nor written, as another user could have planted it. */
static int
store_dir_private(void)
{
    char dir[1024];

    clf__cache_dir(dir, sizeof dir);
    return dir[0] != '\0' && clf__dir_private(dir) == 0;
}

/* Merges the stored entries of the device into ctx (entries ctx already
 * has win); a store of another device, version or format is ignored. */
static void
store_load(clf_context *ctx)
{
    char path[1100], key[1200], *text, *line, *next;
    size_t klen, len;

    store_path(ctx, path, sizeof path, key, sizeof key);
    /* A link, FIFO or oversized file at the store's name is not read: the
     * choices are timed again (clf_context_choice_get shows them timed). */
    if (path[0] == '\0' || !store_dir_private() ||
        clf__file_read_cache(path, "kernel choice store", STORE_MAX_BYTES,
                             &text, &len) != 0)
        return;
    klen = strlen(key);
    if (strncmp(text, STORE_MAGIC "\n", sizeof STORE_MAGIC) == 0 &&
        strncmp(text + sizeof STORE_MAGIC, key, klen) == 0 &&
        text[sizeof STORE_MAGIC + klen] == '\n') {
        for (line = text + sizeof STORE_MAGIC + klen + 1; *line; line = next) {
            next = strchr(line, '\n');
            if (next == NULL)
                break; /* an unfinished last line */
            *next++ = '\0';
            parse_line(ctx, line);
        }
    }
    free(text);
}

static int
more_recent_first(const void *a, const void *b)
{
    const struct clf__choice_entry *x =
        *(const struct clf__choice_entry *const *)a;
    const struct clf__choice_entry *y =
        *(const struct clf__choice_entry *const *)b;

    return x->used < y->used ? 1 : x->used > y->used ? -1 : 0;
}

/* One entry's line into buf (cap bytes): its kind, bucket and winner,
 * and the time each candidate took when it was timed (so that a choice
 * timed under load shows it); its length, or cap or more when it does not
 * fit. */
static size_t
entry_line(const struct clf__choice_entry *e, char *buf, size_t cap)
{
    int len, i;

    if (e->kind == KIND_RATE)
        len = snprintf(buf, cap, "%s %s %d\n", rate_kind, e->bucket, e->winner);
    else
        len = snprintf(buf, cap, "%s %s %s", clf__choice_kind_name(e->kind),
                       e->bucket, clf__choice_name(e->kind, e->winner));
    for (i = 0; e->kind != KIND_RATE && i < clf__choice_count(e->kind) &&
                len > 0 && (size_t)len < cap;
         i++)
        len += e->ms[i] > 0.0
                   ? snprintf(buf + len, cap - (size_t)len, "%c%.4g",
                              i ? ',' : ' ', e->ms[i])
                   : snprintf(buf + len, cap - (size_t)len, "%c%c",
                              i ? ',' : ' ', e->ms[i] < 0.0 ? 'x' : '-');
    if (e->kind != KIND_RATE && len > 0 && (size_t)len < cap)
        len += snprintf(buf + len, cap - (size_t)len, "\n");
    return len < 0 ? cap : (size_t)len;
}

/* The whole store as text, NULL when out of memory: the entries most
 * recently used first, as many as fit in STORE_MAX_BYTES. */
static char *
store_text(const clf_context *ctx, const char *key)
{
    const struct clf__choice_entry **order;
    char *buf = malloc(STORE_MAX_BYTES + 1), line[CLF_BUCKET_MAX + 128];
    size_t len, i, l;
    int head;

    order = malloc((ctx->nchoices + 1) * sizeof *order);
    head = buf == NULL ? -1
                       : snprintf(buf, STORE_MAX_BYTES + 1, "%s\n%s\n",
                                  STORE_MAGIC, key);
    if (order == NULL || head < 0 || head > STORE_MAX_BYTES) {
        free(order);
        free(buf);
        return NULL;
    }
    len = (size_t)head;
    for (i = 0; i < ctx->nchoices; i++)
        order[i] = &ctx->choice_list[i];
    qsort(order, ctx->nchoices, sizeof *order, more_recent_first);
    for (i = 0; i < ctx->nchoices; i++) {
        l = entry_line(order[i], line, sizeof line);
        if (l >= sizeof line || len + l > STORE_MAX_BYTES)
            break; /* this and every older entry are dropped */
        memcpy(buf + len, line, l + 1);
        len += l;
    }
    free(order);
    return buf;
}

/* Replaces the store with ctx's entries (after merging what another
 * process stored meanwhile): a new file in the same directory, created
 * exclusively, synced, then renamed over the old.  Best effort: a store
 * that cannot be written only means timing again next time. */
static void
store_save(clf_context *ctx)
{
    char path[1100], key[1200], *text;

    store_path(ctx, path, sizeof path, key, sizeof key);
    if (path[0] == '\0' || !store_dir_private())
        return;
    store_load(ctx);
    if ((text = store_text(ctx, key)) == NULL)
        return;
    (void)clf__file_write_atomic(path, text, strlen(text));
    free(text);
}

/* The store's lock: processes (and contexts) about to time the same
 * device's choices take it in turn, so the second one reads the first's
 * winners instead of timing its own (concurrent first runs would
 * otherwise pick different kernels and differ in the last bits).  A
 * holder that does not let go within LOCK_WAIT_S (a process stopped in
 * a debugger) is not waited for: the choice is timed here, as without a
 * cache directory. */
#define LOCK_WAIT_S 120.0

static int
store_lock_open(const char *store)
{
    char path[1100];
    double t0 = clf__now_s();
    int fd;

    if (snprintf(path, sizeof path, "%s.lock", store) >= (int)sizeof path)
        return -1;
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const struct timespec pause = {0, 5000000}; /* 5 ms */

        if ((errno != EWOULDBLOCK && errno != EINTR) ||
            clf__now_s() - t0 > LOCK_WAIT_S) {
            close(fd);
            return -1;
        }
        nanosleep(&pause, NULL);
    }
    return fd;
}

/* Takes the lock (nested: only the outermost take waits for it) and
 * reads what the store holds now. */
static void
store_lock(clf_context *ctx)
{
    char path[1100], key[1200];

    if (ctx->store_locks++ > 0)
        return;
    ctx->store_lock_fd = -1;
    store_path(ctx, path, sizeof path, key, sizeof key);
    if (path[0] == '\0' || !store_dir_private())
        return;
    ctx->store_lock_fd = store_lock_open(path);
    store_load(ctx);
}

void
clf__choice_release(clf_context *ctx)
{
    if (ctx->store_locks == 0 || --ctx->store_locks > 0)
        return;
    if (ctx->store_lock_fd >= 0)
        close(ctx->store_lock_fd); /* lets the lock go */
    ctx->store_lock_fd = -1;
}

/* Reads the store once; again, with what this context knew dropped, when
 * the key changed since (clf_tune applied new parameters). */
static void
store_ensure_loaded(clf_context *ctx)
{
    char path[1100], key[1200];
    uint64_t h;

    store_path(ctx, path, sizeof path, key, sizeof key);
    h = clf__hash64(key, strlen(key), 0);
    if (ctx->choices_loaded && h != ctx->choice_key) {
        ctx->nchoices = 0;
        ctx->choices_loaded = 0;
    }
    if (!ctx->choices_loaded) {
        ctx->choices_loaded = 1;
        ctx->choice_key = h;
        store_load(ctx);
    }
}

/* ------------------------------------------------------- resolution */

/* A role's name in clf_context_kernel_choices. */
static const char *
role_label(int role)
{
    return role_kind[role]->labels[role_index[role]];
}

/* Whether role is registered: CLF_EINVALID_ARGUMENT otherwise. */
static int
role_check(int role)
{
    if (role < 0 || role >= nroles)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "kernel choice role %d is not registered", role);
    return 0;
}

int
clf__choice_lookup(clf_context *ctx, int role, const char *bucket, int *winner)
{
    const int kind = clf__choice_role_kind(role);
    struct clf__choice_entry *e;
    int c, i;

    CLF_TRY(role_check(role));
    CLF_TRY(env_forced(kind, &c));
    if (c < 0)
        c = ctx->forced[kind];
    if (c >= 0) {
        *winner = c;
        ctx->last[role] = c;
        ctx->last_source[role] = CLF_SOURCE_FORCED;
        ctx->last_bucket[role][0] = '\0';
        ctx->last_why[role] = NULL;
        for (i = 0; i < CLF_MAX_CANDIDATES; i++)
            ctx->last_check_ms[role][i] = 0.0;
        return 1;
    }
    store_ensure_loaded(ctx);
    e = find_entry(ctx, kind, bucket);
    if (e == NULL) {
        /* Another process may be timing it: wait for it and read. */
        store_lock(ctx);
        if ((e = find_entry(ctx, kind, bucket)) == NULL)
            return 0; /* timed here; the caller calls clf__choice_release */
        clf__choice_release(ctx);
    }
    e->used = ++ctx->choice_clock;
    if (ctx->check_stored && e->source == CLF_SOURCE_STORED && !e->checked) {
        /* timed again by the caller; its record keeps the stored winner */
        e->checked = 1;
        ctx->checking_kind = kind;
        snprintf(ctx->checking_bucket, CLF_BUCKET_MAX, "%s", bucket);
        store_lock(ctx);
        return 0;
    }
    *winner = e->winner;
    ctx->last[role] = e->winner;
    ctx->last_source[role] = e->source;
    ctx->last_why[role] = NULL;
    snprintf(ctx->last_bucket[role], CLF_BUCKET_MAX, "%s", bucket);
    /* the times shown with it are this entry's, not those of the role's
     * last timing (another bucket) */
    for (i = 0; i < CLF_MAX_CANDIDATES; i++) {
        ctx->last_ms[role][i] = e->ms[i];
        ctx->last_check_ms[role][i] = e->checked ? e->check_ms[i] : 0.0;
    }
    return 1;
}

/* The record of a check (clf_context_check_kernel_choices): the times now
 * beside the stored ones; the stored winner stays, in the store too. */
static int
record_check(clf_context *ctx, int role, const char *bucket, const double *ms)
{
    const int kind = clf__choice_role_kind(role);
    struct clf__choice_entry *e = find_entry(ctx, kind, bucket);
    int i;

    ctx->checking_kind = -1;
    if (e == NULL)
        return -1;
    ctx->last[role] = e->winner;
    ctx->last_source[role] = e->source;
    ctx->last_why[role] = NULL;
    snprintf(ctx->last_bucket[role], CLF_BUCKET_MAX, "%s", bucket);
    for (i = 0; i < CLF_MAX_CANDIDATES; i++) {
        e->check_ms[i] = i < clf__choice_count(kind) ? ms[i] : 0.0;
        ctx->last_ms[role][i] = e->ms[i];
        ctx->last_check_ms[role][i] = e->check_ms[i];
    }
    return e->winner;
}

int
clf__choice_record(clf_context *ctx, int role, const char *bucket, int winner,
                   const double *ms)
{
    const int kind = clf__choice_role_kind(role);
    struct clf__choice_entry *e;
    int i, kept;

    if (role_check(role) != 0)
        return winner;
    if (ctx->checking_kind == kind &&
        strcmp(ctx->checking_bucket, bucket) == 0 &&
        (kept = record_check(ctx, role, bucket, ms)) >= 0)
        return kept;
    e = add_entry(ctx, kind, bucket, winner, CLF_SOURCE_TIMED,
                  ++ctx->choice_clock);
    for (i = 0; i < CLF_MAX_CANDIDATES; i++)
        ctx->last_check_ms[role][i] = 0.0;
    ctx->last[role] = winner;
    ctx->last_source[role] = CLF_SOURCE_TIMED;
    ctx->last_why[role] = NULL;
    snprintf(ctx->last_bucket[role], CLF_BUCKET_MAX, "%s", bucket);
    for (i = 0; i < clf__choice_count(kind); i++)
        ctx->last_ms[role][i] = ms[i];
    if (e == NULL)
        return winner;
    for (i = 0; i < clf__choice_count(kind); i++)
        e->ms[i] = ms[i];
    store_save(ctx);
    return winner;
}

size_t
clf__pow2_bucket(size_t x, size_t cap)
{
    size_t b = 1;

    while (b < x && b < cap)
        b *= 2;
    return b;
}

CLF_EXTERN int
clf_context_kernel_choice_count(clf_context *ctx, size_t *count)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (count == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "count is NULL");
    clf__lock(ctx);
    store_ensure_loaded(ctx);
    *count = ctx->nchoices;
    clf__unlock(ctx);
    return 0;
}

CLF_EXTERN int
clf_context_kernel_choice(clf_context *ctx, size_t index,
                          clf_kernel_choice *out)
{
    const struct clf__choice_entry *e;
    int i;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    clf__lock(ctx);
    store_ensure_loaded(ctx);
    if (index >= ctx->nchoices) {
        size_t n = ctx->nchoices;
        clf__unlock(ctx);
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "index %zu is past the %zu kernel choices", index, n);
    }
    e = &ctx->choice_list[index];
    memset(out, 0, sizeof *out);
    out->kind =
        e->kind == KIND_RATE ? rate_kind : clf__choice_kind_name(e->kind);
    out->name = e->kind == KIND_RATE ? "measured"
                                     : clf__choice_name(e->kind, e->winner);
    snprintf(out->bucket, sizeof out->bucket, "%s", e->bucket);
    out->source = e->source;
    for (i = 0; i < CLF_MAX_CANDIDATES; i++)
        out->ms[i] = e->ms[i];
    if (e->kind == KIND_RATE)
        out->ms[0] = e->winner; /* the rate */
    clf__unlock(ctx);
    return 0;
}

CLF_EXTERN int
clf_context_check_kernel_choices(clf_context *ctx, int on)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    clf__lock(ctx);
    ctx->check_stored = on != 0;
    clf__unlock(ctx);
    return 0;
}

CLF_EXTERN const char *
clf_kernel_candidate_name(const char *kind, int index)
{
    int k = kind != NULL ? kind_of(kind, strlen(kind)) : -1;

    return k < 0 || index < 0 || index >= clf__choice_count(k)
               ? NULL
               : clf__choice_name(k, index);
}

CLF_EXTERN int
clf_context_forget_kernel_choices(clf_context *ctx, size_t *dropped)
{
    char path[1100], key[1200], *text;
    size_t n = 0, i, kept = 0;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    clf__lock(ctx);
    store_ensure_loaded(ctx);
    store_lock(ctx);
    store_load(ctx); /* what other processes stored meanwhile, too */
    for (i = 0; i < ctx->nchoices; i++) {
        if (ctx->choice_list[i].kind == KIND_RATE) {
            ctx->choice_list[kept++] = ctx->choice_list[i];
            continue;
        }
        n++;
    }
    ctx->nchoices = kept;
    store_path(ctx, path, sizeof path, key, sizeof key);
    if (path[0] != '\0' && store_dir_private() &&
        (text = store_text(ctx, key)) != NULL) {
        (void)clf__file_write_atomic(path, text, strlen(text));
        free(text);
    }
    clf__choice_release(ctx);
    clf__unlock(ctx);
    if (dropped != NULL)
        *dropped = n;
    return 0;
}

int
clf__rate_lookup(clf_context *ctx, const char *bucket, double *rate)
{
    struct clf__choice_entry *e;

    clf__lock(ctx);
    store_ensure_loaded(ctx);
    e = find_entry(ctx, KIND_RATE, bucket);
    if (e != NULL) {
        e->used = ++ctx->choice_clock;
        *rate = e->winner;
    }
    clf__unlock(ctx);
    return e != NULL;
}

void
clf__rate_record(clf_context *ctx, const char *bucket, double rate)
{
    int v = rate < 1.0                ? 1
            : rate > (double)RATE_MAX ? (int)RATE_MAX
                                      : (int)rate;

    if (!bucket_ok(bucket))
        return;
    clf__lock(ctx);
    store_ensure_loaded(ctx);
    if (add_entry(ctx, KIND_RATE, bucket, v, CLF_SOURCE_TIMED,
                  ++ctx->choice_clock) != NULL)
        store_save(ctx);
    clf__unlock(ctx);
}

/* ----------------------------------------------------------- timing */

cl_mem
clf__timing_buffer(clf_context *ctx, size_t floats, unsigned seed, int *rc)
{
    float *host = malloc((floats ? floats : 1) * sizeof *host);
    cl_mem m;
    cl_int err;
    size_t i;

    if (host == NULL) {
        *rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        return NULL;
    }
    /* Values of order one, no zeros or infinities to take a fast path. */
    for (i = 0; i < floats; i++)
        host[i] = (float)((i * 7 + seed) % 101) * 0.01f - 0.505f;
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       (floats ? floats : 1) * sizeof(float), host, &err);
    free(host);
    if (m == NULL)
        *rc = clf__fail(err, "timing buffer of %zu bytes failed (%d)",
                        floats * sizeof(float), err);
    return m;
}

/* One run of variant v in round `round`, to its clFinish, in *ms. */
static int
time_one(clf_context *ctx, clf__variant_fn run, void *user, int v, int round,
         double *ms)
{
    const double t0 = clf__now_s();
    cl_int err;

    CLF_TRY(run(ctx, v, user));
    if (ctx->timing_hook != NULL)
        ctx->timing_hook(ctx->timing_hook_user, v, round);
    if ((err = clFinish(ctx->queue)) != CL_SUCCESS)
        return clf__fail(err, "timing: clFinish failed (%d)", err);
    *ms = (clf__now_s() - t0) * 1e3;
    return 0;
}

int
clf__time_variants(clf_context *ctx, int count, clf__variant_fn run, void *user,
                   int reps, double *ms)
{
    int v, rep, best = -1, rc = 0;

    for (v = 0; v < count; v++)
        ms[v] = 0.0;
    clf__launch_pause(ctx, 1);
    /* Round 0 pays any lazy compilation and is not kept; the variants take
     * turns in every round, so that a change in the machine's load falls
     * on all of them alike. */
    for (rep = 0; rep <= reps; rep++)
        for (v = 0; v < count; v++) {
            double dt = 0.0;
            int st;
            if (ms[v] < 0.0)
                continue; /* failed before */
            if ((st = time_one(ctx, run, user, v, rep, &dt)) != 0) {
                ms[v] = -1.0;
                rc = st;
                continue;
            }
            if (rep > 0 && (ms[v] == 0.0 || dt < ms[v]))
                ms[v] = dt;
        }
    clf__launch_pause(ctx, 0);
    for (v = 0; v < count; v++)
        if (ms[v] > 0.0 && (best < 0 || ms[v] < ms[best]))
            best = v;
    return best >= 0 ? best : rc;
}

void
clf__choice_fixed(clf_context *ctx, int role, int winner, const char *why)
{
    if (role_check(role) != 0)
        return;
    ctx->last[role] = winner;
    ctx->last_source[role] = CLF_SOURCE_NONE;
    ctx->last_bucket[role][0] = '\0';
    ctx->last_why[role] = why;
}

/* A role never resolved, or run in its only way: "not chosen yet", or
 * "gemm (WHY)". */
static void
describe_untimed(char *buf, size_t cap, const clf_context *ctx, int role)
{
    const int c = ctx->last[role];

    if (c < 0 || ctx->last_why[role] == NULL)
        snprintf(buf, cap, "not chosen yet");
    else
        snprintf(buf, cap, "%s (%s)",
                 clf__choice_name(clf__choice_role_kind(role), c),
                 ctx->last_why[role]);
}

/* A checked stored choice (clf_context_check_kernel_choices): "; now:
 * clblast 1.10 ms, ..." and, where another candidate now runs in less
 * than two thirds of the stored winner's time, what to do about it. */
static void
describe_check(char *buf, size_t cap, const clf_context *ctx, int role)
{
    const int kind = clf__choice_role_kind(role), c = ctx->last[role];
    const double *now = ctx->last_check_ms[role];
    const char *sep = "; now: ";
    size_t len = 0;
    int i, best = -1;

    buf[0] = '\0';
    for (i = 0; i < clf__choice_count(kind) && len < cap; i++) {
        if (!(now[i] > 0.0))
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s %.2f ms", sep,
                                clf__choice_name(kind, i), now[i]);
        sep = ", ";
        if (best < 0 || now[i] < now[best])
            best = i;
    }
    if (best >= 0 && best != c && now[c] > 0.0 && now[best] * 1.5 < now[c] &&
        len < cap)
        snprintf(buf + len, cap - len,
                 "; %s is now %.1fx faster than the stored %s: clinformer "
                 "tune --choices re-times",
                 clf__choice_name(kind, best), now[c] / now[best],
                 clf__choice_name(kind, c));
}

/* One role for clf_context_kernel_choices: "gemm: blocked (timed
 * m1024.n512.k512: clblast 1.20 ms, blocked 0.80 ms)". */
static void
describe(char *buf, size_t cap, const clf_context *ctx, int role)
{
    static const char *const sources[] = {"not chosen yet", "stored", "timed",
                                          "forced"};
    const int kind = clf__choice_role_kind(role), c = ctx->last[role];
    const double *ms = ctx->last_ms[role];
    const char *sep = ": ";
    size_t len = strlen(buf);
    int i;

    if (len >= cap)
        return;
    len += (size_t)snprintf(buf + len, cap - len, "%s%s: ", len ? "; " : "",
                            role_label(role));
    if (len >= cap)
        return;
    if (c < 0 || ctx->last_why[role] != NULL) {
        describe_untimed(buf + len, cap - len, ctx, role);
        return;
    }
    len += (size_t)snprintf(
        buf + len, cap - len, "%s (%s%s%s", clf__choice_name(kind, c),
        sources[ctx->last_source[role]], ctx->last_bucket[role][0] ? " " : "",
        ctx->last_bucket[role]);
    for (i = 0; ctx->last_source[role] != CLF_SOURCE_FORCED &&
                i < clf__choice_count(kind) && len < cap;
         i++) {
        if (ms[i] == 0.0)
            continue; /* did not apply, or stored without times */
        len += ms[i] < 0.0
                   ? (size_t)snprintf(buf + len, cap - len, "%s%s failed", sep,
                                      clf__choice_name(kind, i))
                   : (size_t)snprintf(buf + len, cap - len, "%s%s %.2f ms", sep,
                                      clf__choice_name(kind, i), ms[i]);
        sep = ", ";
    }
    if (len < cap)
        describe_check(buf + len, cap - len, ctx, role);
    len = strlen(buf);
    if (len < cap)
        snprintf(buf + len, cap - len, ")");
}

CLF_EXTERN const char *
clf_context_kernel_choices(clf_context *ctx)
{
    /* The kinds by rank, each kind's roles in order; a role only once a
     * plan resolved it, but for the kinds listed from the start. */
    int ids[CLF_MAX_ROLES];
    int i, n = kinds_ranked(ids), role;

    if (ctx == NULL)
        return "";
    clf__lock(ctx);
    ctx->choices[0] = '\0';
    for (i = 0; i < n; i++)
        for (role = ids[i]; role < ids[i] + kind_at(ids[i])->roles; role++)
            if (ctx->last[role] >= 0 ||
                (role == ids[i] && kind_at(role)->listed))
                describe(ctx->choices, sizeof ctx->choices, ctx, role);
    clf__unlock(ctx);
    return ctx->choices;
}
