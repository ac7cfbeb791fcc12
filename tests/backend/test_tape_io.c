/* test_tape_io.c - a kept solution as bytes and back (clnode_solution_tape_export and
 * clnode_solution_tape_import, clnode/gradient.h; the layout of doc/gradient.md):
 *   - the round trip: an adaptive solve of an MLP with a time input, conditioning inputs and an
 *     output scale, saving t0, shared save times inside per-trajectory intervals (a first save
 *     time other than 0), every step and t1, kept at checkpoint_every 3, fp32 and fp64, and one
 *     with per-trajectory save times backwards in time: the imported solution answers every
 *     accessor as the exported one but for the saved values and final states, which the tape does
 *     not hold (NULL, rows of states refused), and its gradient and tangents are the exported
 *     one's bit for bit, from a buffer at an odd address with bytes after the tape;
 *   - the bytes: the size the header states, the checksum as doc/gradient.md defines it;
 *   - the refusals, each by name: a buffer shorter than the header or than the tape, no magic,
 *     the other byte order, another version (1, which held the saved values, and a later one), a
 *     changed byte (checksum), the offsets or the solver
 *     constants changed with the checksum made again, another model's parameters or form, a
 *     solution without a tape, a buffer too small for the export;
 *   - no crash: every byte of a tape changed in turn (the checksum made again, so that the
 *     structural checks meet it), every prefix of it: each import refused or a solution whose
 *     reverse pass runs (under the sanitizers in CI).
 * argv[1] is the device (meson passes "host"). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_device.h"
#include "test_problem.h"
#include "test_util.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

enum {
    TN = 2,
    TK = 1,
    TH = 8,
    TB = 5,
    TTS = 4
};

static double g_w0[TH * (TN + 1 + TK)], g_b0[TH], g_w1[TN * TH], g_b1[TN];
static const double g_scale[TN] = {0.9, -0.7};

static void params_init(void)
{
    uint32_t x = 77u;
    for (size_t i = 0; i < sizeof g_w0 / sizeof g_w0[0]; ++i)
        g_w0[i] = 0.7 * test_lcg(&x);
    for (size_t i = 0; i < TH; ++i)
        g_b0[i] = 0.2 * test_lcg(&x);
    for (size_t i = 0; i < sizeof g_w1 / sizeof g_w1[0]; ++i)
        g_w1[i] = 0.5 * test_lcg(&x);
    for (size_t i = 0; i < TN; ++i)
        g_b1[i] = 0.1 * test_lcg(&x);
}

/* The model: [y, t, c] -> tanh -> linear, times a scale per component; `w00` its first weight,
 * `last_bias` whether its last layer has a bias. */
static clnode_model *model_form(double w00, int last_bias)
{
    double w0[sizeof g_w0 / sizeof g_w0[0]];
    memcpy(w0, g_w0, sizeof w0);
    w0[0] = w00;
    size_t sizes[3] = {TN + 1 + TK, TH, TN};
    const double *ws[2] = {w0, g_w1}, *bs[2] = {g_b0, last_bias ? g_b1 : NULL};
    clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.time_input = 1;
    d.num_inputs = TK;
    d.out_scale = g_scale;
    d.out_scale_size = TN;
    clnode_model *m = NULL;
    if (clnode_model_create(g_ctx, &d, &m) != CLNODE_OK)
        fail_msg("model: %s", clnode_context_last_error(g_ctx));
    return m;
}

static clnode_model *model_of(double w00)
{
    return model_form(w00, 1);
}

static const double g_y0[TB * TN] = {1.0, -0.5, 0.3, 0.8, -1.2, 0.1, 0.6, 0.6, -0.4, -0.9};
static const double g_in[TB * TK] = {0.5, -0.3, 0.0, 0.9, -0.7};
static const double g_t0s[TB] = {0.0, 0.5, 0.0, 1.1, 0.2};
static const double g_t1s[TB] = {2.0, 2.0, 1.5, 2.0, 2.0};
static const double g_ts[TTS] = {0.25, 0.75, 1.25, 1.75};
/* per-trajectory rows, backwards from 2 to 0 */
static const double g_ts_rows[TB * TTS] = {1.9, 1.2, 0.7, 0.1, 1.5, 1.5, 0.4, 0.0, 1.8, 1.0,
                                           0.6, 0.3, 2.0, 1.1, 0.9, 0.2, 1.7, 1.6, 1.0, 0.5};

typedef struct {
    clnode_solve_options o;
    clnode_problem p;
    size_t slots;
} tcase;

/* case 0: forwards, shared save times in per-trajectory intervals, every kind saved;
 * case 1: backwards, per-trajectory save times, no steps saved. */
static tcase case_of(int which, clnode_precision prec)
{
    tcase c;
    clnode_solve_default_options(&c.o);
    c.o.precision = prec;
    c.o.rtol = prec == CLNODE_FP64 ? 1e-7 : 1e-4;
    c.o.atol = prec == CLNODE_FP64 ? 1e-9 : 1e-6;
    c.o.keep_tape = 1;
    c.o.checkpoint_every = 3;
    c.o.max_steps = 200;
    c.p = test_problem(TB, g_y0);
    c.p.inputs = g_in;
    c.p.n_save_ts = TTS;
    if (which == 0) {
        c.o.save_t0 = 1;
        c.o.save_steps = 1;
        c.o.save_t1 = 1;
        c.p.t0s = g_t0s;
        c.p.t1s = g_t1s;
        c.p.save_ts = g_ts;
    } else {
        c.o.t0 = 2.0;
        c.o.t1 = 0.0;
        c.o.dt0 = -0.05;
        c.o.save_t1 = 1;
        c.p.save_ts = g_ts_rows;
        c.p.save_ts_per_trajectory = 1;
    }
    assert_ok(clnode_save_slots(g_ctx, &c.o, &c.p, &c.slots));
    return c;
}

static clnode_solution *solve_case(const clnode_model *m, const tcase *c)
{
    clnode_solution *s = NULL;
    if (clnode_solve(g_ctx, m, &c->o, &c->p, &s) != CLNODE_OK)
        fail_msg("clnode_solve: %s", clnode_context_last_error(g_ctx));
    return s;
}

/* Cotangents for every slot (the padding's are not read). */
static double *cot_of(size_t slots)
{
    double *cot = malloc(TB * slots * TN * sizeof *cot);
    assert_non_null(cot);
    uint32_t x = 5u;
    for (size_t i = 0; i < TB * slots * TN; ++i)
        cot[i] = test_lcg(&x);
    return cot;
}

/* The tape of s as a fresh buffer (*n bytes). */
static unsigned char *export_of(const clnode_model *m, const clnode_solution *s, size_t *n)
{
    assert_ok(clnode_solution_tape_export(g_ctx, m, s, NULL, 0, n));
    unsigned char *buf = malloc(*n);
    assert_non_null(buf);
    size_t again = 0;
    assert_ok(clnode_solution_tape_export(g_ctx, m, s, buf, *n, &again));
    assert_int_equal(again, *n);
    return buf;
}

/* A solve of case `which` and its tape's bytes. */
typedef struct {
    clnode_model *m;
    tcase c;
    clnode_solution *s;
    unsigned char *buf;
    size_t n;
} tfix;

static tfix fix_open(int which, clnode_precision prec)
{
    tfix f;
    f.m = model_of(g_w0[0]);
    f.c = case_of(which, prec);
    f.s = solve_case(f.m, &f.c);
    f.buf = export_of(f.m, f.s, &f.n);
    return f;
}

static void fix_close(tfix *f)
{
    free(f->buf);
    clnode_solution_destroy(&f->s);
    clnode_model_destroy(&f->m);
}

static void same_bits(const void *a, const void *b, size_t n, const char *what)
{
    if (n && memcmp(a, b, n) != 0)
        fail_msg("%s differs after the round trip", what);
}

/* Every accessor of a (solved) and b (imported) answers the same, but for the saved values and
 * final states, which b does not hold (NULL, and rows with states refused). */
static void same_solution(const clnode_solution *a, const clnode_solution *b, size_t slots)
{
    assert_int_equal(clnode_solution_batch(a), clnode_solution_batch(b));
    assert_int_equal(clnode_solution_dim(a), clnode_solution_dim(b));
    assert_int_equal(clnode_solution_syncs(a), clnode_solution_syncs(b));
    assert_int_equal(clnode_solution_kept_bytes(a), clnode_solution_kept_bytes(b));
    assert_true(clnode_solution_kept_bytes(a) > 0);
    const size_t B = clnode_solution_batch(a), N = clnode_solution_dim(a);
    double *ra = malloc(B * slots * (N + 1) * sizeof *ra), *rb = malloc(B * slots * (N + 1) * 8);
    clnode_save_kind *ka = malloc(slots * sizeof *ka), *kb = malloc(slots * sizeof *kb);
    assert_true(ra && rb && ka && kb);
    assert_ok(clnode_solution_rows_f64(a, 0, B, slots, ra, NULL));
    assert_ok(clnode_solution_rows_f64(b, 0, B, slots, rb, NULL));
    same_bits(ra, rb, B * slots * sizeof *ra, "the rows' times");
    assert_int_equal(clnode_solution_rows_f64(b, 0, B, slots, rb, rb + B * slots),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_solution_rows_f32(b, 0, B, slots, NULL, (float *)rb),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(clnode_solution_y_final(a, 0));
    for (size_t t = 0; t < B; ++t) {
        clnode_trajectory_stats sa, sb;
        assert_ok(clnode_solution_stats(a, t, &sa));
        assert_ok(clnode_solution_stats(b, t, &sb));
        same_bits(&sa, &sb, sizeof sa, "the statistics");
        assert_null(clnode_solution_y_final(b, t));
        const size_t P = clnode_solution_points(a, t);
        assert_int_equal(P, clnode_solution_points(b, t));
        assert_ok(clnode_solution_kinds(a, t, slots, ka));
        assert_ok(clnode_solution_kinds(b, t, slots, kb));
        same_bits(ka, kb, P * sizeof *ka, "the kinds");
        size_t fa = 9, fb = 9;
        assert_ok(clnode_solution_ts_index(a, t, &fa));
        assert_ok(clnode_solution_ts_index(b, t, &fb));
        assert_int_equal(fa, fb);
        for (int k = 0; k < 4; ++k) {
            size_t na = 0, nb = 0;
            const double *ta, *tb, *ya, *yb;
            assert_ok(clnode_solution_saved(a, t, (clnode_save_kind)k, &na, &ta, &ya));
            assert_ok(clnode_solution_saved(b, t, (clnode_save_kind)k, &nb, &tb, &yb));
            assert_int_equal(na, nb);
            same_bits(ta, tb, na * 8, "the saved times");
            assert_true(!na || ya);
            assert_null(yb);
        }
    }
    free(ra);
    free(rb);
    free(ka);
    free(kb);
}

static void same_gradient(const clnode_gradient *a, const clnode_gradient *b)
{
    size_t na = 0, nb = 0;
    const double *pa = clnode_gradient_params(a, &na), *pb = clnode_gradient_params(b, &nb);
    assert_int_equal(na, nb);
    same_bits(pa, pb, na * sizeof *pa, "the parameters' gradient");
    same_bits(clnode_gradient_y0(a), clnode_gradient_y0(b), TB * TN * 8, "the y0 gradient");
    same_bits(clnode_gradient_inputs(a), clnode_gradient_inputs(b), TB * TK * 8,
              "the inputs' gradient");
}

static clnode_gradient *grad_of(const clnode_model *m, const clnode_solution *s, size_t slots,
                                const double *cot)
{
    clnode_gradient *g = NULL;
    if (clnode_gradient_compute(g_ctx, m, NULL, s, slots, cot, &g) != CLNODE_OK)
        fail_msg("clnode_gradient_compute: %s", clnode_context_last_error(g_ctx));
    return g;
}

static void round_trip(int which, clnode_precision prec)
{
    tfix f = fix_open(which, prec);
    const clnode_model *m = f.m;
    const tcase c = f.c;
    const size_t n = f.n;
    /* at an odd address, with bytes after it */
    unsigned char *odd = malloc(n + 9);
    assert_non_null(odd);
    memcpy(odd + 1, f.buf, n);
    memset(odd + 1 + n, 0xA5, 8);
    /* a model object of the same form and parameters: the fingerprint, not the object */
    clnode_model *m2 = model_of(g_w0[0]);
    clnode_solution *back = NULL;
    if (clnode_solution_tape_import(g_ctx, m2, odd + 1, n + 8, &back) != CLNODE_OK)
        fail_msg("import: %s", clnode_context_last_error(g_ctx));
    same_solution(f.s, back, c.slots);
    double *cot = cot_of(c.slots);
    clnode_gradient *ga = grad_of(m, f.s, c.slots, cot), *gb = grad_of(m2, back, c.slots, cot);
    same_gradient(ga, gb);
    /* its tangent pass too: the exported solution's, bit for bit */
    double dy0[TB * TN];
    for (size_t i = 0; i < TB * TN; ++i)
        dy0[i] = 0.1 * (double)i - 0.4;
    clnode_tangent *ta = NULL, *tb = NULL;
    assert_ok(clnode_tangent_compute(g_ctx, m, NULL, f.s, c.slots, 1, dy0, NULL, NULL, &ta));
    assert_ok(clnode_tangent_compute(g_ctx, m2, NULL, back, c.slots, 1, dy0, NULL, NULL, &tb));
    same_bits(clnode_tangent_values(ta), clnode_tangent_values(tb), TB * c.slots * TN * 8,
              "the tangents");
    clnode_tangent_destroy(&ta);
    clnode_tangent_destroy(&tb);
    /* and again: the imported solution's export is the same bytes */
    size_t n2 = 0;
    unsigned char *buf2 = export_of(m2, back, &n2);
    assert_int_equal(n, n2);
    same_bits(f.buf, buf2, n, "the bytes of the imported solution's export");
    printf("case %d %s: %zu bytes (kept_bytes %zu)\n", which, clnode_precision_name(prec), n,
           clnode_solution_kept_bytes(f.s));
    clnode_gradient_destroy(&ga);
    clnode_gradient_destroy(&gb);
    free(cot);
    free(buf2);
    free(odd);
    clnode_solution_destroy(&back);
    clnode_model_destroy(&m2);
    fix_close(&f);
}

static void test_round_trip(void **state)
{
    (void)state;
    round_trip(0, CLNODE_FP64);
    round_trip(0, CLNODE_FP32);
    round_trip(1, CLNODE_FP64);
    round_trip(1, CLNODE_FP32);
}

/* ------------------------------------------------------------------------ the bytes */

/* The checksum of doc/gradient.md: over the bytes from offset 32 to the end, words of 8 bytes in
 * four lanes, then the lanes and the remaining bytes. */
static uint64_t doc_checksum(const unsigned char *p, size_t n)
{
    const uint64_t prime = 1099511628211ull, basis = 1469598103934665603ull;
    uint64_t lane[4] = {basis, basis ^ 1, basis ^ 2, basis ^ 3};
    size_t i = 32, words = (n - 32) / 32 * 4;
    for (size_t k = 0; k < words; ++k, i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        lane[k % 4] = (lane[k % 4] ^ w) * prime;
        lane[k % 4] ^= lane[k % 4] >> 29;
    }
    uint64_t h = lane[0];
    for (int l = 1; l < 4; ++l)
        h = (h ^ lane[l]) * prime;
    for (; i < n; ++i)
        h = (h ^ p[i]) * prime;
    return h;
}

static void reseal(unsigned char *buf, size_t n)
{
    const uint64_t h = doc_checksum(buf, n);
    memcpy(buf + 24, &h, 8);
}

static uint64_t u64_at(const unsigned char *p, size_t off)
{
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}

static void expect_refused(const clnode_model *m, const unsigned char *buf, size_t n,
                           const char *text, const char *what)
{
    clnode_solution *s = NULL;
    const clnode_status st = clnode_solution_tape_import(g_ctx, m, buf, n, &s);
    const char *msg = clnode_context_last_error(g_ctx);
    printf("%s: %s: %s\n", what, clnode_status_name(st), msg);
    if (st != CLNODE_ERR_INVALID_ARGUMENT)
        fail_msg("%s: %s, expected CLNODE_ERR_INVALID_ARGUMENT", what, clnode_status_name(st));
    if (!strstr(msg, text))
        fail_msg("%s: the message \"%s\" does not say \"%s\"", what, msg, text);
    assert_null(s);
}

static void test_bytes_and_refusals(void **state)
{
    (void)state;
    tfix f = fix_open(0, CLNODE_FP32);
    const clnode_model *m = f.m;
    const size_t n = f.n;
    const unsigned char *buf = f.buf;
    unsigned char *bad = malloc(n);
    assert_non_null(bad);
    assert_memory_equal(buf, "CLNTAPE", 8);
    uint32_t version;
    memcpy(&version, buf + 8, 4);
    assert_int_equal(version, CLNODE_TAPE_VERSION);
    assert_int_equal(u64_at(buf, 16), n);
    assert_int_equal(u64_at(buf, 24), doc_checksum(buf, n));
    assert_int_equal(n % 8, 0);

    expect_refused(m, buf, 100, "less than the tape's header", "a buffer cut in the header");
    expect_refused(m, buf, n - 8, "short (truncated)", "a buffer cut in the body");
    memcpy(bad, buf, n);
    bad[0] = 'X';
    expect_refused(m, bad, n, "not a clnode tape", "no magic");
    memcpy(bad, buf, n);
    const uint32_t swapped = 0x04030201u, v2 = CLNODE_TAPE_VERSION + 1;
    memcpy(bad + 12, &swapped, 4);
    expect_refused(m, bad, n, "other byte order", "the other byte order");
    memcpy(bad, buf, n);
    memcpy(bad + 8, &v2, 4);
    expect_refused(m, bad, n, "version 3, this library reads version 2", "a later version");
    /* layout 1 held the saved values and final states: its tapes are refused by their version */
    const uint32_t v1 = 1;
    memcpy(bad, buf, n);
    memcpy(bad + 8, &v1, 4);
    expect_refused(m, bad, n, "version 1, this library reads version 2", "the version before");
    memcpy(bad, buf, n);
    bad[n - 3] ^= 0x10;
    expect_refused(m, bad, n, "checksum", "a changed byte");
    clnode_model *other = model_of(g_w0[0] + 1e-12);
    expect_refused(other, buf, n, "not the one the tape was solved with", "another parameter");
    clnode_model_destroy(&other);
    other = model_form(g_w0[0], 0);
    expect_refused(other, buf, n, "not the one the tape was solved with", "another form");
    clnode_model_destroy(&other);
    /* the header's sizes changed, checksum made again: B (offset 64) */
    memcpy(bad, buf, n);
    const uint64_t B2 = TB + 1;
    memcpy(bad + 64, &B2, 8);
    reseal(bad, n);
    expect_refused(m, bad, n, "its sizes make", "a batch changed");
    /* the solver constants: the stage count (cln_iconsts' fifth int, after the 8 + ... reals) */
    memcpy(bad, buf, n);
    uint32_t nK;
    memcpy(&nK, bad + 188, 4);
    const size_t ki = 200 + nK * 8 + 4 * sizeof(int);
    const int stages = 99;
    memcpy(bad + ki, &stages, sizeof stages);
    reseal(bad, n);
    expect_refused(m, bad, n, "solver constants", "a stage count changed");
    /* export's own refusals */
    size_t need = 0;
    expect_refused(m, NULL, 0, "less than the tape's header", "no buffer");
    assert_int_equal(clnode_solution_tape_export(g_ctx, m, f.s, bad, n - 1, &need),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "smaller than the tape's"));
    assert_int_equal(need, n);
    clnode_model *m2 = model_of(g_w0[0]);
    assert_int_equal(clnode_solution_tape_export(g_ctx, m2, f.s, NULL, 0, &need),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "not the one the solution"));
    clnode_solve_options plain = f.c.o;
    plain.keep_tape = 0;
    plain.checkpoint_every = 1;
    clnode_solution *bare = NULL;
    assert_ok(clnode_solve(g_ctx, m, &plain, &f.c.p, &bare));
    assert_int_equal(clnode_solution_tape_export(g_ctx, m, bare, NULL, 0, &need),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "keep_tape"));
    clnode_solution_destroy(&bare);
    clnode_model_destroy(&m2);
    free(bad);
    fix_close(&f);
}

/* ------------------------------------------------------------------------ no crash */

static void test_every_byte_and_prefix(void **state)
{
    (void)state;
    tfix f = fix_open(0, CLNODE_FP64);
    const clnode_model *m = f.m;
    const size_t n = f.n, slots = f.c.slots;
    const unsigned char *buf = f.buf;
    unsigned char *bad = malloc(n);
    double *cot = cot_of(slots);
    assert_non_null(bad);
    size_t accepted = 0, refused = 0;
    for (size_t i = 0; i < n; ++i) {
        for (int v = 0; v < 2; ++v) {
            memcpy(bad, buf, n);
            bad[i] = v ? (unsigned char)(bad[i] + 1) : 0xFF;
            if (bad[i] == buf[i])
                continue;
            if (i < 24 || i >= 32)
                reseal(bad, n);
            clnode_solution *back = NULL;
            const clnode_status st = clnode_solution_tape_import(g_ctx, m, bad, n, &back);
            if (st != CLNODE_OK) {
                if (st != CLNODE_ERR_INVALID_ARGUMENT)
                    fail_msg("byte %zu: %s", i, clnode_status_name(st));
                assert_null(back);
                ++refused;
                continue;
            }
            ++accepted;
            clnode_gradient *g = NULL; /* whatever its values, the reverse pass runs */
            (void)clnode_gradient_compute(g_ctx, m, NULL, back, slots, cot, &g);
            clnode_gradient_destroy(&g);
            clnode_solution_destroy(&back);
        }
    }
    for (size_t k = 0; k < n; ++k) {
        clnode_solution *back = NULL;
        assert_int_equal(clnode_solution_tape_import(g_ctx, m, buf, k, &back),
                         CLNODE_ERR_INVALID_ARGUMENT);
        assert_null(back);
    }
    printf("%zu bytes changed one at a time: %zu imports refused, %zu accepted (values)\n", n,
           refused, accepted);
    assert_true(refused > 0 && accepted > 0);
    free(cot);
    free(bad);
    fix_close(&f);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "tape-io", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    params_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bytes_and_refusals),
        cmocka_unit_test(test_every_byte_and_prefix),
    };
    const int rc = cmocka_run_group_tests_name("tape-io", tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
