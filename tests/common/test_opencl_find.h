/* test_opencl_find.h - the OpenCL device a test means, found by its platform's name (the OpenCL
 * tests that make their own cl_context: test_opencl_adopt, test_opencl_faults,
 * test_solve_device). Needs the OpenCL headers. */
#ifndef CLNODE_TEST_OPENCL_FIND_H
#define CLNODE_TEST_OPENCL_FIND_H

#include <ctype.h>
#include <string.h>

#include "clnode/opencl.h"

/* The first device of the OpenCL platform whose name or vendor contains `want` (any case): the
 * test names the device it means (a simulator registered ahead of it is never taken). */
static inline int test_opencl_find(const char *want, cl_platform_id *plat, cl_device_id *dev)
{
    cl_platform_id ps[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, ps, &np) != CL_SUCCESS)
        return 0;
    for (cl_uint p = 0; p < np && p < 16; ++p) {
        char text[2][256];
        const cl_platform_info what[2] = {CL_PLATFORM_NAME, CL_PLATFORM_VENDOR};
        for (int t = 0; t < 2; ++t) {
            if (clGetPlatformInfo(ps[p], what[t], sizeof text[t], text[t], NULL) != CL_SUCCESS)
                text[t][0] = '\0';
            text[t][sizeof text[t] - 1] = '\0';
            for (char *c = text[t]; *c; ++c)
                *c = (char)tolower((unsigned char)*c);
        }
        if ((strstr(text[0], want) || strstr(text[1], want)) &&
            clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 1, dev, NULL) == CL_SUCCESS) {
            *plat = ps[p];
            return 1;
        }
    }
    return 0;
}

#endif /* CLNODE_TEST_OPENCL_FIND_H */
