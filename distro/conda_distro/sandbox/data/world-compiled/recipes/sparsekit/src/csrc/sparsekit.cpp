// sparsekit (sandbox stand-in): sparse row sums on top of scatterkit's compiled library (like
// torch-sparse on torch-scatter), so it too is tied to the PyTorch minor scatterkit was built for.
#include <scatterkit.h>
#include <torch_standin.h>
#include <vector>

extern "C" double sparsekit_row_sum(const double *values, const long *rows, long n, long row) {
    std::vector<double> picked;
    for (long i = 0; i < n; i++)
        if (rows[i] == row) picked.push_back(values[i]);
    return scatterkit_segment_sum(picked.data(), static_cast<long>(picked.size()));
}

extern "C" const char *sparsekit_built_for(void) { return TORCH_STANDIN_ABI; }
