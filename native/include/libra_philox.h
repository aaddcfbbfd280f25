/* libra_philox.h - Philox4x32-10 (Salmon et al., SC'11; Random123), shared by the cpu build
 * (host) and the cuda build (host and device). The kernel table's module doc
 * (packages/tensor/kernels.ts) says how random kernels derive their numbers from it. */
#ifndef LIBRA_PHILOX_H
#define LIBRA_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define LIBRA_HOST_DEVICE __host__ __device__ inline
#else
#define LIBRA_HOST_DEVICE static inline
#endif

/* out[0..3] = philox(counter = ctr[0..3], key = key[0..1]). */
LIBRA_HOST_DEVICE void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                     uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    const uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

#endif /* LIBRA_PHILOX_H */
