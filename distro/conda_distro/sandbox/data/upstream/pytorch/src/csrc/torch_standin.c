/* STAND-IN libtorch (see torch_standin.h). */
#include "torch_standin.h"

double torch_standin_sum(const double *values, long n) {
    double total = 0.0;
    for (long i = 0; i < n; i++) total += values[i];
    return total;
}

const char *torch_standin_version(void) { return TORCH_STANDIN_VERSION; }
