// bf16 products for kernels_body.h (AVX-512 BF16 only): panels of pairs of k
// rounded to bf16, multiplied with vdpbf16ps (two bf16 products per f32
// lane, exact, summed into f32 accumulators).

// bf16_hi rounds x to bf16 (to nearest, ties to even) in the upper 16 bits
// of each lane; the lower 16 bits are zero. (Finite inputs: the activations
// and weights of a network.)
static inline ISA_BF16 __m512i bf16_hi(__m512 x) {
    const __m512i b = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_and_si512(r, _mm512_set1_epi32((int32_t) 0xffff0000u));
}

// pairs_panels converts packed f32 panels (ceil(n/width) panels of [kc][width],
// as pack_a_panels and pack_b_panels write them) to panels of [ceil(kc/2)][width]
// 32-bit pairs: the bf16 of k = 2p in the low half, of k = 2p+1 (0 past kc)
// in the high half.
static ISA_BF16 void pairs_panels(const float * src, int64_t n, int width, int64_t kc, void * dstv) {
    uint32_t * dst = dstv;
    const int64_t kt = (kc + 1) / 2;
    for (int64_t t = 0; t < n; t += width) {
        const float * s = src + t * kc;
        uint32_t * d = dst + t * kt;
        for (int64_t p = 0; p < kt; p++) {
            const float * lo = s + 2 * p * width;
            const float * hi = lo + width;
            for (int j = 0; j < width; j += VL) {
                const vm m = m_first(width - j);
                const __m512i l = _mm512_srli_epi32(bf16_hi(v_loadu_m(lo + j, m)), 16);
                const __m512i h = 2 * p + 1 < kc ? bf16_hi(v_loadu_m(hi + j, m)) : _mm512_setzero_si512();
                _mm512_mask_storeu_epi32(d + p * width + j, m, _mm512_or_si512(l, h));
            }
        }
    }
}

#define DEFINE_TILE_BF16(NAME, ROWS)                                                                         \
static ISA_BF16 void NAME(int64_t kc, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr,         \
                 int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {          \
    const int32_t * ap = apv, * bp = bpv;                                                                    \
    TILE_PREFETCH(ROWS)                                                                                      \
    vf acc[ROWS][NV];                                                                                        \
    _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; i++) {                                                \
        _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) acc[i][h] = v_zero();                           \
    }                                                                                                        \
    for (int64_t k = 0; k < kc; k++) {                                                                       \
        __m512bh b[NV];                                                                                      \
        _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) b[h] = (__m512bh) _mm512_load_si512(bp + h * VL); \
        _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; i++) {                                            \
            const __m512bh a = (__m512bh) _mm512_set1_epi32(ap[i]);                                          \
            _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) acc[i][h] = _mm512_dpbf16_ps(acc[i][h], a, b[h]); \
        }                                                                                                    \
        ap += ROWS;                                                                                          \
        bp += NR;                                                                                            \
    }                                                                                                        \
    TILE_STORE(ROWS)                                                                                         \
}

DEFINE_TILE_BF16(tile_bf16_big, MR_BIG)
DEFINE_TILE_BF16(tile_bf16_small, MR_SMALL)

static tile_fn tile_bf16_for(int mr) { return mr == MR_BIG ? tile_bf16_big : tile_bf16_small; }
