// The generic variant of the CPU kernels (kernels_body.h): portable C (GCC/Clang vector extensions of 4 floats, a 6×8 register tile):
// the fallback for CPUs without AVX2, and the kernels of non-x86 builds.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "custom.h"
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("no-avx") // the portable variant stays portable in -march=native builds
#endif
#define ISA_FN(name) name##_generic
#define NV 2        // NR = 8 columns
#define MR_BIG 6    // 12 accumulators of 16 registers (SSE2), or of 32 (NEON)
#define MR_SMALL 4
#define SMALL_TILE_SPEED 0.85
#define KC 256
#define MC 120
#define NC 1024
#include "simd_generic.h"
#include "kernels_body.h"
