// The avx512 variant of the CPU kernels (kernels_body.h): AVX-512 (F, BW, DQ, VL) with FMA: 16-float vectors, a 14×32 register tile (8×32 for heights such as 32 channels);
// bf16 (AVX512_BF16) and int8 (AVX512_VNNI) products for the CPUs that have them.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "custom.h"
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")
#endif
#define ISA_FN(name) name##_avx512
// The bf16 and int8 kernels carry their extensions on top (called only
// where the CPU has them).
#define ISA_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c,avx512bf16")))
#define ISA_INT8 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c,avx512vnni")))
#define NV 2        // vectors per tile row: NR = 32 columns
#define MR_BIG 14   // rows of the big tile: 28 accumulators of the 32 registers
#define MR_SMALL 8
#define SMALL_TILE_SPEED 0.85
#define KC 128      // depth of a convolution's packed block: its B micro-panel (KC×NR, 16 KiB) and the A panel
                    // streaming past it fit L1 (matrices: 256, see gemm)
#define MC 112      // rows of A per block (MC×KC stays in L2)
#define NC 1024     // columns of B per packed block
#include "simd_avx512.h"
#include "kernels_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
