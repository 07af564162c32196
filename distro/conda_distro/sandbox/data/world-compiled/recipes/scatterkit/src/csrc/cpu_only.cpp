// the CPU build: no CUDA part
extern "C" int scatterkit_has_cuda(void) { return 0; }
