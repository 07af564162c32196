// scatterkit (sandbox stand-in): calls the stand-in libtorch, whose symbols carry the PyTorch minor, so
// this library loads only next to the libtorch of the minor it was built against.
#include <torch_standin.h>
#include <vector>
#include "scatterkit.h"

extern "C" double scatterkit_segment_sum(const double *values, long n) {
    std::vector<double> copy(values, values + n);
    return torch_standin_sum(copy.data(), static_cast<long>(copy.size()));
}

extern "C" const char *scatterkit_built_for(void) { return TORCH_STANDIN_ABI; }
