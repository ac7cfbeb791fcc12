/* test_reference.h - the committed diffrax references of tests/data/diffrax (seed-*.json,
 * tanh64-*.json: one model, cases of one batch each) as solve options and problems: the
 * conformance suite compares clnode with them, test_host_isa runs them on every host ISA.
 * Needs cmocka (included before) and CLN_SOURCE_ROOT. */
#ifndef CLNODE_TEST_REFERENCE_H
#define CLNODE_TEST_REFERENCE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "clnode.h"
#include "test_problem.h"

#ifndef CLN_SOURCE_ROOT
#error "CLN_SOURCE_ROOT must name the source tree"
#endif

/* Reads a reference file of tests/data/diffrax and the path of its model. */
static inline json_object *open_reference(const char *file, char *model_path, size_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/diffrax/%s", CLN_SOURCE_ROOT, file);
    json_object *root = json_object_from_file(path);
    if (!root)
        fail_msg("cannot read %s", path);
    snprintf(model_path, size, "%s/%s", CLN_SOURCE_ROOT,
             json_object_get_string(json_object_object_get(root, "model_file")));
    return root;
}

/* One case of a reference file as solve options and its problem (y0 is allocated). */
typedef struct ref_case {
    clnode_solve_options o;
    clnode_problem p;
    double ts[64];
    double *y0;
    size_t B;
    const char *method, *save;
} ref_case;

static inline void load_case(json_object *cs, size_t N, clnode_precision prec, ref_case *rc)
{
    rc->method = json_object_get_string(json_object_object_get(cs, "method"));
    rc->save = json_object_get_string(json_object_object_get(cs, "save"));
    json_object *trajs = json_object_object_get(cs, "trajectories");
    rc->B = json_object_array_length(trajs);
    clnode_solve_options *o = &rc->o;
    clnode_solve_default_options(o);
    rc->p = test_problem(rc->B, NULL);
    o->method = clnode_method_by_name(rc->method);
    assert_non_null(o->method);
    o->precision = prec;
    o->rtol = json_object_get_double(json_object_object_get(cs, "rtol"));
    o->atol = json_object_get_double(json_object_object_get(cs, "atol"));
    o->t0 = json_object_get_double(json_object_object_get(cs, "t0"));
    o->t1 = json_object_get_double(json_object_object_get(cs, "t1"));
    o->dt0 = json_object_get_double(json_object_object_get(cs, "dt0"));
    o->max_steps = json_object_get_int(json_object_object_get(cs, "max_steps"));
    if (strcmp(rc->save, "ts") == 0) {
        json_object *sts = json_object_object_get(cs, "save_ts");
        const size_t nts = json_object_array_length(sts);
        assert_true(nts <= 64);
        for (size_t j = 0; j < nts; ++j)
            rc->ts[j] = json_object_get_double(json_object_array_get_idx(sts, j));
        rc->p.save_ts = rc->ts;
        rc->p.n_save_ts = nts;
    } else {
        o->save_steps = 1;
    }
    rc->y0 = calloc(rc->B * N, sizeof(double));
    assert_non_null(rc->y0);
    rc->p.y0 = rc->y0;
    for (size_t b = 0; b < rc->B; ++b) {
        json_object *ty = json_object_object_get(json_object_array_get_idx(trajs, b), "y0");
        for (size_t n = 0; n < N; ++n)
            rc->y0[b * N + n] = json_object_get_double(json_object_array_get_idx(ty, n));
    }
}

#endif /* CLNODE_TEST_REFERENCE_H */
