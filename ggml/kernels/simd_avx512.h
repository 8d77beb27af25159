// AVX-512 (F, BW, DQ, VL) vectors of 16 floats for the kernel bodies (see kernels_body.h).
#include <immintrin.h>

#define VL 16 // lanes of a vector
typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vm;

static inline vf v_zero(void) { return _mm512_setzero_ps(); }
static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline vf v_load(const float * p) { return _mm512_load_ps(p); }
static inline vf v_loadu(const float * p) { return _mm512_loadu_ps(p); }
static inline void v_store(float * p, vf v) { _mm512_store_ps(p, v); }
static inline void v_storeu(float * p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }  // a·b + c
static inline vf v_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } // c − a·b
static inline vf v_fms(vf a, vf b, vf c) { return _mm512_fmsub_ps(a, b, c); }  // a·b − c
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf v_abs(vf a) { return _mm512_abs_ps(a); }
static inline vf v_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf v_ldexp(vf p, vf n) { return _mm512_scalef_ps(p, n); } // p·2^n, n integral
static inline float v_hmax(vf a) { return _mm512_reduce_max_ps(a); }
static inline float v_hsum(vf a) { return _mm512_reduce_add_ps(a); }

// Masks select lanes; masked loads neither read nor fault on the others.
static inline vm m_first(int64_t n) { return n >= VL ? (vm) 0xffff : n <= 0 ? (vm) 0 : (vm) ((1u << n) - 1); }
static inline vm m_range(int64_t lo, int64_t hi) { // lanes lo <= j < hi
    lo = lo < 0 ? 0 : lo;
    return lo >= hi ? (vm) 0 : (vm) (m_first(hi) & ~m_first(lo));
}
static inline vm m_and(vm a, vm b) { return a & b; }
static inline vm m_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vf v_blend(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, a, b); } // m ? b : a
static inline vf v_loadu_m(const float * p, vm m) { return _mm512_maskz_loadu_ps(m, p); }
static inline void v_storeu_m(float * p, vm m, vf v) { _mm512_mask_storeu_ps(p, m, v); }

static inline vi vi_loadu(const int32_t * p) { return _mm512_loadu_si512(p); }
static inline vi vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
static inline vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi vi_mul(vi a, vi b) { return _mm512_mullo_epi32(a, b); }
static inline vi vi_zero(void) { return _mm512_setzero_si512(); }
static inline void vi_store(int32_t * p, vi v) { _mm512_store_si512(p, v); }
static inline vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
static inline vi vi_slli(vi a, int n) { return _mm512_slli_epi32(a, (unsigned) n); }
static inline vi vi_round(vf a) { return _mm512_cvtps_epi32(a); } // to nearest, ties to even
static inline vf vi_float(vi a) { return _mm512_cvtepi32_ps(a); }
static inline int32_t vi_hsum(vi a) { return _mm512_reduce_add_epi32(a); }
// vi_store_halves stores lanes [0, VL/2) at lo and, unless hi is NULL, [VL/2, VL) at hi.
static inline void vi_store_halves(int32_t * lo, int32_t * hi, vi v) {
    _mm256_storeu_si256((__m256i *) lo, _mm512_castsi512_si256(v));
    if (hi != NULL) {
        _mm256_storeu_si256((__m256i *) hi, _mm512_extracti64x4_epi64(v, 1));
    }
}
// vi_bytes stores the lanes' low bytes, in order, as VL/4 quads (truncating:
// exact for lanes in [-128, 255]).
static inline void vi_bytes(vi v, int32_t * quads) { _mm_storeu_si128((__m128i *) quads, _mm512_cvtepi32_epi8(v)); }
// vi_quads_u and vi_quads_s pack the lanes of a, b, c and d (values in
// [0, 255], or [-128, 127]) into quads: lane j holds the bytes a_j, b_j, c_j,
// d_j in that order. Per 128-bit lane the two packs leave the bytes a0–a3
// b0–b3 c0–c3 d0–d3, and the shuffle transposes them.
static inline vi vi_quads_order(vi x) {
    return _mm512_shuffle_epi8(x, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)));
}
static inline vi vi_quads_u(vi a, vi b, vi c, vi d) {
    return vi_quads_order(_mm512_packus_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d)));
}
static inline vi vi_quads_s(vi a, vi b, vi c, vi d) {
    return vi_quads_order(_mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d)));
}
static inline vm m_inside(vi i, int32_t n) { return _mm512_cmplt_epu32_mask(i, _mm512_set1_epi32(n)); } // 0 <= i < n
static inline vf v_gather_m(const float * base, vi idx, vm m) {
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base, 4);
}
// v_deint splits the 2·VL values a, b (in order) into the even and odd ones;
// v_interleave is its inverse (lo: the first VL values, hi: the rest).
static inline void v_deint(vf a, vf b, vf * even, vf * odd) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *even = _mm512_permutex2var_ps(a, ie, b);
    *odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), b);
}
static inline void v_interleave(vf even, vf odd, vf * lo, vf * hi) {
    const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *lo = _mm512_permutex2var_ps(even, il, odd);
    *hi = _mm512_permutex2var_ps(even, _mm512_add_epi32(il, _mm512_set1_epi32(8)), odd);
}
// v_next returns a's lanes 1 … VL−1 followed by b's lane k (0 or 1).
static inline vf v_next(vf a, vf b, int k) {
    const __m512i i = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    return _mm512_permutex2var_ps(a, k ? _mm512_mask_add_epi32(i, 0x8000, i, _mm512_set1_epi32(1)) : i, b);
}
static inline void v_prefetch(const void * p) { _mm_prefetch((const char *) p, _MM_HINT_T0); }

// v_transpose writes the transpose of the VL×VL block at src (row stride
// lds) to dst (row stride ldd): dst[k][j] = src[j][k].
static inline void v_transpose(const float * src, int64_t lds, float * dst, int64_t ldd) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) {
        r[i] = _mm512_loadu_ps(src + i * lds);
    }
    for (int i = 0; i < 16; i += 2) { // pairs of rows interleaved by element
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { // then by pairs of elements
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    // r[4q + c] now holds, in each 128-bit lane l, column 4l + c of rows 4q..4q+3.
    for (int c = 0; c < 4; c++) { // gather the 128-bit lanes: first rows 0-7 / 8-15, then all 16
        t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);      // lanes 0, 2 of r[c], r[4+c]
        t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);  // lanes 1, 3
        t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; c++) {
        _mm512_storeu_ps(dst + (c + 0) * ldd, _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88));
        _mm512_storeu_ps(dst + (c + 4) * ldd, _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88));
        _mm512_storeu_ps(dst + (c + 8) * ldd, _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd));
        _mm512_storeu_ps(dst + (c + 12) * ldd, _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd));
    }
}
