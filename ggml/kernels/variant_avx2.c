// The avx2 variant of the CPU kernels (kernels_body.h): AVX2 with FMA: 8-float vectors, a 6×16 register tile (4×16);
// per-channel int8 products with vpmaddubsw, or 256-bit vpdpbusd where the CPU has it (kernels_int8c_avx2.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "custom.h"
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c,no-avx512f")
#endif
#define ISA_FN(name) name##_avx2
#define ISA_INT8C_AVX2 1
#define NV 2        // NR = 16 columns
#define MR_BIG 6    // 12 accumulators of the 16 registers
#define MR_SMALL 4
#define SMALL_TILE_SPEED 0.85
#define KC 256
#define MC 120
#define NC 1024
#include "simd_avx2.h"
#include "kernels_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
