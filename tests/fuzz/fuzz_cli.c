/* fuzz_cli.c - a libFuzzer harness for the command-line layer: the y0 CSV reader, the number-list
 * parser of --y0 and --save ts:, and the argument parsers of clnode-solve and clnode-compare
 * (getopt_long and every option's value). Nothing is solved and no device is opened.
 *
 * Input: a selector byte, then
 *   0: y0 text: one byte for N (1..16), one for the header mode, then the file's bytes;
 *   1: a number list (the rest, up to a NUL);
 *   2: clnode-solve's arguments, separated by NUL bytes;
 *   3: clnode-compare's arguments, separated by NUL bytes;
 *   4: an .npz archive (the --in reader, tools/arrays/npz.c) and the .npy image of each member.
 * Built with -Dfuzz=true by clang (-fsanitize=fuzzer,address,undefined); run by the fuzz-cli
 * benchmark (tests/fuzz/run.sh). Leaks count as findings. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "npz.h"
#include "args.h"
#include "compare.h" /* clnode-compare's argument parser (tools/clnode-compare/args.c) */
#include "tool_problem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Splits the bytes at NUL into argv (argv[0] = prog); returns argc, or 0 when out of memory. */
static int make_argv(const char *prog, const uint8_t *data, size_t size, char **buf, char ***argv)
{
    *buf = malloc(size + 1);
    size_t n = 2;
    for (size_t i = 0; i < size; ++i)
        n += data[i] == 0;
    *argv = calloc(n + 1, sizeof(char *));
    if (!*buf || !*argv) {
        free(*buf);
        free(*argv);
        return 0;
    }
    memcpy(*buf, data, size);
    (*buf)[size] = '\0';
    int argc = 0;
    (*argv)[argc++] = (char *)prog;
    if (size)
        for (char *p = *buf;;) {
            (*argv)[argc++] = p;
            p += strlen(p);
            if (p >= *buf + size)
                break;
            ++p;
        }
    (*argv)[argc] = NULL;
    return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned sel = data[0] % 5;
    ++data;
    --size;
    char err[256];
    switch (sel) {
    case 0: {
        if (size < 2)
            return 0;
        const size_t N = 1 + data[0] % 16;
        const tool_header_mode mode = (tool_header_mode)(data[1] % 3);
        /* an exact-size copy: ASan sees any read past the text */
        char *text = malloc(size - 2 ? size - 2 : 1);
        if (!text)
            return 0;
        memcpy(text, data + 2, size - 2);
        double *v = NULL;
        size_t rows = 0;
        int note = 0;
        if (tool_parse_y0_text(text, size - 2, N, mode, &v, &rows, &note, err, sizeof err) == 0) {
            if (!v || rows == 0)
                abort(); /* success promises at least one state */
            for (size_t i = 0; i < rows * N; ++i)
                if (!isfinite(v[i]))
                    abort(); /* only finite states pass */
        }
        free(v);
        free(text);
        break;
    }
    case 1: {
        char *s = malloc(size + 1);
        if (!s)
            return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        double *v = NULL;
        size_t n = 0;
        if (tool_parse_list(s, "--y0", &v, &n, err, sizeof err) == 0)
            for (size_t i = 0; i < n; ++i)
                if (!isfinite(v[i]))
                    abort();
        free(v);
        free(s);
        break;
    }
    case 2: {
        char *buf, **argv;
        const int argc = make_argv("clnode-solve", data, size, &buf, &argv);
        if (!argc)
            return 0;
        tool_prog = "clnode-solve";
        solve_args a;
        solve_args_parse(&a, argc, argv);
        solve_args_free(&a);
        free(argv);
        free(buf);
        break;
    }
    case 4: {
        /* an exact-size copy: ASan sees any read past the archive */
        unsigned char *img = malloc(size ? size : 1);
        if (!img)
            return 0;
        memcpy(img, data, size);
        cln_npz_entry e[CLN_NPZ_MAX_MEMBERS];
        size_t n = 0;
        if (cln_npz_parse(img, size, e, &n, err, sizeof err) == 0)
            for (size_t i = 0; i < n; ++i) {
                if (e[i].data < img || e[i].size > size || e[i].data + e[i].size > img + size)
                    abort(); /* entries lie inside the archive */
                cln_npy_header h;
                if (cln_npy_parse(e[i].data, (size_t)e[i].size, &h, err, sizeof err) == 0 &&
                    h.count < (1u << 20)) {
                    double *v = malloc(h.count ? h.count * sizeof(double) : 1);
                    if (v)
                        cln_npy_decode(e[i].data, &h, v);
                    free(v);
                }
            }
        free(img);
        break;
    }
    default: {
        char *buf, **argv;
        const int argc = make_argv("clnode-compare", data, size, &buf, &argv);
        if (!argc)
            return 0;
        tool_prog = COMPARE_PROG;
        static compare c;
        memset(&c, 0, sizeof c);
        tool_problem_defaults(&c.pb);
        compare_parse_args(&c, argc, argv);
        compare_free_list(c.devices, c.ndev);
        tool_problem_free(&c.pb);
        free(argv);
        free(buf);
        break;
    }
    }
    return 0;
}
