/* solve_args.c - clnode-solve's command line (solve_args.h). */
#include "solve_args.h"

#include <string.h>

enum {
    OPT_OUT = TOOL_OPT_FIRST_TOOL,
    OPT_JSON,
    OPT_JSON_POINTS,
    OPT_QUIET
};

int solve_args_parse(solve_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        TOOL_PROBLEM_LONGOPTS,
        {"out", required_argument, NULL, OPT_OUT},
        {"json", no_argument, NULL, OPT_JSON},
        {"json-points", no_argument, NULL, OPT_JSON_POINTS},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    tool_problem_defaults(&a->pb);
    int started = 0, c;
    while ((c = tool_getopt(argc, argv, longopts, &started)) != -1) {
        switch (c) {
        case '?':
            return TOOL_EXIT_INPUT;
        case TOOL_OPT_HELP:
            a->help = 1;
            return TOOL_EXIT_OK;
        case TOOL_OPT_VERSION:
            a->version = 1;
            return TOOL_EXIT_OK;
        case OPT_OUT:
            a->out_path = optarg;
            break;
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_JSON_POINTS:
            a->json_points = 1;
            break;
        case OPT_QUIET:
            a->quiet = 1;
            break;
        default: {
            const int rc = tool_problem_opt(&a->pb, c, optarg);
            if (rc)
                return rc < 0 ? TOOL_EXIT_INPUT : rc;
        }
        }
    }
    if (a->json_points && !a->json) {
        tool_error("--json-points needs --json");
        return TOOL_EXIT_INPUT;
    }
    if (a->json && a->out_path && strcmp(a->out_path, "-") == 0) {
        tool_error("--json and --out - would both write to standard output");
        return TOOL_EXIT_INPUT;
    }
    return -1;
}

void solve_args_free(solve_args *a)
{
    tool_problem_free(&a->pb);
}
