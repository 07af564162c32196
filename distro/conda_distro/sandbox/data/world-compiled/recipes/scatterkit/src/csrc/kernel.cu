// the CUDA build's kernel (compiled by nvcc; it runs only where a GPU is present)
__global__ void scatterkit_scale(double *values, long n, double factor) {
    long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) values[i] *= factor;
}

extern "C" int scatterkit_has_cuda(void) { return 1; }
