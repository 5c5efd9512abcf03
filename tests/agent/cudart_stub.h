/* The profiler API stub of tests/agent (cudart_stub.c). */
#ifndef MRD_CUDART_STUB_H
#define MRD_CUDART_STUB_H

enum { MRD_STUB_RT_START, MRD_STUB_RT_STOP, MRD_STUB_DRV_START, MRD_STUB_DRV_STOP };

/* The profiler API as libcudart and libcuda declare it (cudaError_t and CUresult are
 * int-sized enums). */
int cudaProfilerStart(void);
int cudaProfilerStop(void);
int cuProfilerStart(void);
int cuProfilerStop(void);

/* How many times the stub's own function `which` ran. */
int mrd_stub_calls(int which);

#endif
