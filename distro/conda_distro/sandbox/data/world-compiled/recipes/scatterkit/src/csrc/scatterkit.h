/* scatterkit (sandbox stand-in): segment sums on the stand-in libtorch. */
#ifndef SCATTERKIT_H
#define SCATTERKIT_H
#ifdef __cplusplus
extern "C" {
#endif
double scatterkit_segment_sum(const double *values, long n);
const char *scatterkit_built_for(void);
int scatterkit_has_cuda(void);
#ifdef __cplusplus
}
#endif
#endif
