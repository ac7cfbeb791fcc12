/* probe_cache.c - GEMM probe results kept across processes, so that the first solve of a process
 * costs little more than the solve.
 *
 * One small text file per (device, precision, GEMM mode) under $XDG_CACHE_HOME/clnode (else
 * ~/.cache/clnode). Its first line is the key: the library's version and build (the size and
 * modification time of the library file that holds this code), the backend and the backend's
 * cache_id (the device, its driver and their versions); the file name is a hash of the key
 * without the build, so that a rebuilt library overwrites its file rather than adding one. A file
 * whose key differs in any character, or that does not parse completely, is ignored and
 * rewritten by the next measurement: a new driver, device or library build measures again. Files
 * are written atomically (core/atomic_file.h: each process its own temporary name, renamed), so
 * two processes storing at once each leave a whole file. CLNODE_PROBE_CACHE=0 turns the cache
 * off (nothing read, nothing written); a backend with an empty cache_id is never cached. Every
 * failure of the cache is silent: the probes then simply run. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/probe_cache.h"
#include "core/atomic_file.h"

#define PC_KEY_MAX 1024
#define PC_VERSION 1 /* of the file format */

static int pc_enabled(void)
{
    const char *e = getenv("CLNODE_PROBE_CACHE");
    return !(e && (strcmp(e, "0") == 0 || strcmp(e, "off") == 0 || strcmp(e, "no") == 0));
}

/* The cache folder ("" when neither XDG_CACHE_HOME nor HOME is set). */
static void pc_dir(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    out[0] = '\0';
    if (xdg && xdg[0] == '/')
        snprintf(out, cap, "%s/clnode", xdg);
    else if (home && home[0])
        snprintf(out, cap, "%s/.cache/clnode", home);
}

/* mkdir -p for the cache folder (its parents may not exist yet). */
static int pc_mkdirs(const char *dir)
{
    char tmp[1024];
    const size_t len = strlen(dir);
    if (len == 0 || len >= sizeof tmp)
        return -1;
    memcpy(tmp, dir, len + 1);
    for (char *p = tmp + 1; *p; ++p)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static void pc_key(const clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                   char *key, size_t cap)
{
    const cln_backend *be = ctx->backend;
    char build[320] = "unknown build";
    Dl_info info;
    struct stat stt;
    if (dladdr((void *)(uintptr_t)pc_key, &info) && info.dli_fname) {
        char *real = realpath(info.dli_fname, NULL);
        const char *file = real ? real : info.dli_fname;
        if (stat(file, &stt) == 0)
            snprintf(build, sizeof build, "%.250s %lld %lld", file, (long long)stt.st_size,
                     (long long)stt.st_mtime);
        free(real);
    }
    snprintf(key, cap, "clnode %s (%s) | %s | %s | %s %s", CLNODE_VERSION_STRING, build,
             be->ops->name, be->cache_id, clnode_precision_name(prec), clnode_gemm_mode_name(mode));
    for (char *p = key; *p; ++p)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* FNV-1a, 64 bits: the file name of a key. */
static uint64_t pc_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; ++s) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* The file of a device, precision and mode: a hash of everything in the key but the library
 * build, so that a new build replaces its predecessor's file instead of adding one. */
static int pc_path(const clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                   const char *dir, char *out, size_t cap)
{
    char slot[PC_KEY_MAX];
    snprintf(slot, sizeof slot, "%s | %s | %s %s", ctx->backend->ops->name, ctx->backend->cache_id,
             clnode_precision_name(prec), clnode_gemm_mode_name(mode));
    const int n =
        snprintf(out, cap, "%s/probe-%016llx.txt", dir, (unsigned long long)pc_hash(slot));
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int cln_probe_cache_load(const clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                         clnode_probe_result *out)
{
    if (!pc_enabled() || !ctx->backend->cache_id[0])
        return 0;
    char dir[1024], path[1200], key[PC_KEY_MAX], line[PC_KEY_MAX + 2];
    pc_dir(dir, sizeof dir);
    if (!dir[0])
        return 0;
    pc_key(ctx, prec, mode, key, sizeof key);
    if (pc_path(ctx, prec, mode, dir, path, sizeof path) != 0)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = 0;
    clnode_probe_result r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    int version = 0, cls = 0;
    if (fgets(line, sizeof line, f) && strcspn(line, "\n") == strlen(key) &&
        strncmp(line, key, strlen(key)) == 0 &&
        fscanf(f,
               "version %d\nidentity_exact %d\nidentity_bits %la\nidentity_mismatches %ld\n"
               "outer_exact %d\nouter_mismatches %ld\nrandom_bits %la\nrange_ok %d\n"
               "denormals %d\ngemm_class %d\nunit_roundoff %la\n",
               &version, &r.identity_exact, &r.identity_bits, &r.identity_mismatches,
               &r.outer_exact, &r.outer_mismatches, &r.random_bits, &r.range_ok, &r.denormals, &cls,
               &r.unit_roundoff) == 11 &&
        version == PC_VERSION && cls >= CLNODE_GEMM_CLASS_UNKNOWN &&
        cls <= CLNODE_GEMM_CLASS_BF16) {
        r.precision = prec;
        r.gemm_mode = mode;
        r.gemm_class = (clnode_gemm_class)cls;
        *out = r;
        ok = 1;
    }
    fclose(f);
    return ok;
}

void cln_probe_cache_store(const clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                           const clnode_probe_result *r)
{
    if (!pc_enabled() || !ctx->backend->cache_id[0])
        return;
    char dir[1024], path[1200], key[PC_KEY_MAX];
    pc_dir(dir, sizeof dir);
    if (!dir[0] || pc_mkdirs(dir) != 0)
        return;
    pc_key(ctx, prec, mode, key, sizeof key);
    if (pc_path(ctx, prec, mode, dir, path, sizeof path) != 0)
        return;
    cln_atomic_file a; /* a temporary file of this process's own, renamed over the file */
    if (cln_atomic_open(&a, path, cln_atomic_new_mode(), 0, NULL) != 0)
        return;
    FILE *f = cln_atomic_stream(&a, "w");
    if (!f) {
        cln_atomic_abort(&a);
        return;
    }
    fprintf(f,
            "%s\nversion %d\nidentity_exact %d\nidentity_bits %a\nidentity_mismatches %ld\n"
            "outer_exact %d\nouter_mismatches %ld\nrandom_bits %a\nrange_ok %d\ndenormals %d\n"
            "gemm_class %d\nunit_roundoff %a\n",
            key, PC_VERSION, r->identity_exact, r->identity_bits, r->identity_mismatches,
            r->outer_exact, r->outer_mismatches, r->random_bits, r->range_ok, r->denormals,
            (int)r->gemm_class, r->unit_roundoff);
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad || cln_atomic_commit(&a, path) != 0) {
        cln_atomic_abort(&a);
        cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL, "probe cache: cannot write %s", path);
        return;
    }
    cln_log(ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL, "probe cache: stored %s", path);
}

void cln_probe_preload(clnode_context *ctx)
{
    for (int pi = 0; pi < 2; ++pi)
        for (int mi = 0; mi < 2; ++mi)
            ctx->probe_file_ok[pi][mi] = (unsigned char)cln_probe_cache_load(
                ctx, pi ? CLNODE_FP64 : CLNODE_FP32, mi ? CLNODE_GEMM_TF32 : CLNODE_GEMM_STRICT,
                &ctx->probe_file[pi][mi]);
}
