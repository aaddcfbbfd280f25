/*
 * emu.cpp - the host side of the CUDA emulator (see build.sh and cuda_runtime.h):
 * memory is malloc'd (poisoned with 0xff bytes, so unwritten outputs read as
 * NaN), copies are memmove, and a launch runs every block in turn with one
 * ucontext fiber per thread; __syncthreads() returns to the scheduler, which
 * releases the barrier when every thread of the block has reached it (and
 * aborts on a barrier some threads skip).
 */
#include "cuda_runtime.h"
#include <stdio.h>
dim3 threadIdx, blockIdx, blockDim, gridDim;
unsigned long long emu_launches = 0;
static cudaError_t last = cudaSuccess;
cudaError_t cudaGetLastError() { cudaError_t e = last; last = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError() { return last; }
cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
/* Poison new allocations with NaN bytes so kernels that read unwritten memory show it. */
cudaError_t cudaMalloc(void** p, size_t n) { *p = aligned_alloc(256, (n + 255) / 256 * 256); if (!*p) return cudaErrorMemoryAllocation; memset(*p, 0xff, n); return cudaSuccess; }
cudaError_t cudaFree(void* p) { free(p); return cudaSuccess; }

static const size_t STACK = 64 * 1024;
static std::vector<ucontext_t> ctx;
static std::vector<char*> stacks;
static std::vector<int> state; /* 0 runnable, 1 at barrier, 2 done */
static ucontext_t sched;
static int cur = -1;
static const std::function<void()>* body_p;
static dim3 tid_of(int i) { return dim3(i % blockDim.x, (i / blockDim.x) % blockDim.y, i / (blockDim.x * blockDim.y)); }
static void trampoline() { (*body_p)(); state[cur] = 2; swapcontext(&ctx[cur], &sched); }
void emu_sync_threads() { state[cur] = 1; swapcontext(&ctx[cur], &sched); }

void emu_launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  emu_launches++;
  int nt = block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || nt == 0 || nt > 1024 || grid.y > 65535 || grid.z > 65535) {
    fprintf(stderr, "emu: invalid launch grid %u,%u,%u block %u,%u,%u\n", grid.x, grid.y, grid.z, block.x, block.y, block.z);
    last = cudaErrorInvalidValue;
    return;
  }
  gridDim = grid; blockDim = block; body_p = &body;
  if ((int)ctx.size() < nt) { ctx.resize(nt); state.resize(nt); while ((int)stacks.size() < nt) stacks.push_back((char*)malloc(STACK)); }
  /* EMU_REVERSE=1 runs blocks and threads in reverse order: a result that changes
   * with the order shows a race (a read of another thread's write without a barrier). */
  static const bool reverse = getenv("EMU_REVERSE") && getenv("EMU_REVERSE")[0] == '1';
  const unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
  for (unsigned long long q = 0; q < nblocks; q++) {
    const unsigned long long b = reverse ? nblocks - 1 - q : q;
    blockIdx = dim3(b % grid.x, (b / grid.x) % grid.y, b / ((unsigned long long)grid.x * grid.y));
    for (int i = 0; i < nt; i++) {
      getcontext(&ctx[i]); ctx[i].uc_stack.ss_sp = stacks[i]; ctx[i].uc_stack.ss_size = STACK; ctx[i].uc_link = nullptr;
      makecontext(&ctx[i], trampoline, 0); state[i] = 0;
    }
    for (;;) {
      int done = 0, waiting = 0;
      for (int q = 0; q < nt; q++) {
        const int i = reverse ? nt - 1 - q : q;
        if (state[i] == 0) { cur = i; threadIdx = tid_of(i); swapcontext(&sched, &ctx[i]); }
        if (state[i] == 2) done++; else if (state[i] == 1) waiting++;
      }
      if (done == nt) break;
      if (done > 0 && waiting > 0) { fprintf(stderr, "emu: divergent __syncthreads (%d done, %d waiting)\n", done, waiting); abort(); }
      for (int i = 0; i < nt; i++) if (state[i] == 1) state[i] = 0;
    }
  }
}
