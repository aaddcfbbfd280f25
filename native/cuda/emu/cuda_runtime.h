/* Minimal CUDA emulation on the host for testing native/cuda kernels without a GPU.
 * Blocks run one after another; the threads of a block are ucontext fibers that
 * switch at __syncthreads(). __shared__ is static storage (one block at a time). */
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <ucontext.h>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef dim3 uint3;
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

typedef void* cudaStream_t;
typedef void* cudaEvent_t;
typedef enum {
  cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100, cudaErrorNotReady = 600, cudaErrorLaunchFailure = 719
} cudaError_t;
typedef enum { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault } cudaMemcpyKind;
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; };

void emu_sync_threads();
#define __syncthreads() emu_sync_threads()
void emu_launch(dim3 grid, dim3 block, const std::function<void()>& body);
extern unsigned long long emu_launches;

inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  unsigned long long o = *p; if (v < o) *p = v; return o;
}

inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
inline const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* n);
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaFree(void* p);
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  strcpy(p->name, "emulated device"); p->major = 9; p->minor = 0; p->multiProcessorCount = 1; return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t n);
inline cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
inline cudaError_t cudaMallocHost(void** p, size_t n) { return cudaMalloc(p, n); }
inline cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
inline cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { *f = 1ull << 34; *t = 1ull << 34; return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = malloc(1); return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = calloc(1, 8); return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0; return cudaSuccess; }
typedef void* cudaMemPool_t;
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* p, int) { *p = nullptr; return cudaSuccess; }
inline cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold, cudaMemPoolAttrReservedMemCurrent, cudaMemPoolAttrUsedMemCurrent };
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }
inline cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, cudaMemPoolAttr, void* v) { *(uint64_t*)v = 0; return cudaSuccess; }
