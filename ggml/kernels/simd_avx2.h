// AVX2 + FMA vectors of 8 floats for the kernel bodies (see kernels_body.h).
#include <immintrin.h>

#define VL 8 // lanes of a vector
typedef __m256 vf;
typedef __m256i vi;
typedef __m256i vm; // all ones in the selected lanes

static inline vf v_zero(void) { return _mm256_setzero_ps(); }
static inline vf v_set1(float x) { return _mm256_set1_ps(x); }
static inline vf v_load(const float * p) { return _mm256_load_ps(p); }
static inline vf v_loadu(const float * p) { return _mm256_loadu_ps(p); }
static inline void v_store(float * p, vf v) { _mm256_store_ps(p, v); }
static inline void v_storeu(float * p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf v_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf v_fms(vf a, vf b, vf c) { return _mm256_fmsub_ps(a, b, c); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf v_abs(vf a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
static inline vf v_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// v_ldexp is p·2^n for integral n in [-150, 130], in two exact steps so that
// 2^n itself never needs a subnormal or infinite float.
static inline vf v_ldexp(vf p, vf n) {
    const __m256i k = _mm256_cvtps_epi32(n);
    const __m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
    const __m256i b = _mm256_set1_epi32(127);
    const vf s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b), 23));
    const vf s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
static inline float v_hmax(vf a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
static inline float v_hsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline vi lanes_(void) { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
static inline vm m_first(int64_t n) {
    n = n < 0 ? 0 : n > VL ? VL : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t) n), lanes_());
}
static inline vm m_range(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo > VL ? VL : lo;
    hi = hi < 0 ? 0 : hi > VL ? VL : hi;
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t) hi), lanes_()),
                            _mm256_cmpgt_epi32(lanes_(), _mm256_set1_epi32((int32_t) lo - 1)));
}
static inline vm m_and(vm a, vm b) { return _mm256_and_si256(a, b); }
static inline vm m_lt(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
static inline vf v_blend(vm m, vf a, vf b) { return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m)); }
static inline vf v_loadu_m(const float * p, vm m) { return _mm256_maskload_ps(p, m); }
static inline void v_storeu_m(float * p, vm m, vf v) { _mm256_maskstore_ps(p, m, v); }

static inline vi vi_loadu(const int32_t * p) { return _mm256_loadu_si256((const __m256i *) p); }
static inline vi vi_set1(int32_t x) { return _mm256_set1_epi32(x); }
static inline vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi vi_mul(vi a, vi b) { return _mm256_mullo_epi32(a, b); }
static inline vi vi_zero(void) { return _mm256_setzero_si256(); }
static inline void vi_store(int32_t * p, vi v) { _mm256_store_si256((__m256i *) p, v); }
static inline vi vi_or(vi a, vi b) { return _mm256_or_si256(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
static inline vi vi_slli(vi a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
static inline vi vi_round(vf a) { return _mm256_cvtps_epi32(a); } // to nearest, ties to even
static inline vf vi_float(vi a) { return _mm256_cvtepi32_ps(a); }
static inline int32_t vi_hsum(vi a) {
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
}
// vi_store_halves stores lanes [0, VL/2) at lo and, unless hi is NULL, [VL/2, VL) at hi.
static inline void vi_store_halves(int32_t * lo, int32_t * hi, vi v) {
    _mm_storeu_si128((__m128i *) lo, _mm256_castsi256_si128(v));
    if (hi != NULL) {
        _mm_storeu_si128((__m128i *) hi, _mm256_extracti128_si256(v, 1));
    }
}
// vi_bytes stores the lanes' low bytes, in order, as VL/4 quads (saturating:
// exact for lanes in [-128, 127]).
static inline void vi_bytes(vi v, int32_t * quads) {
    const __m256i w16 = _mm256_packs_epi32(v, v);     // per 128-bit lane: its four values, twice
    const __m256i b = _mm256_packs_epi16(w16, w16); // per lane: its four bytes in the low quad
    quads[0] = _mm_cvtsi128_si32(_mm256_castsi256_si128(b));
    quads[1] = _mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1));
}
// vi_quads_u and vi_quads_s pack the lanes of a, b, c and d (values in
// [0, 255], or [-128, 127]) into quads: lane j holds the bytes a_j, b_j, c_j,
// d_j in that order. Per 128-bit lane the two packs leave the bytes a0–a3
// b0–b3 c0–c3 d0–d3, and the shuffle transposes them.
static inline vi vi_quads_order(vi x) {
    return _mm256_shuffle_epi8(x, _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)));
}
static inline vi vi_quads_u(vi a, vi b, vi c, vi d) {
    return vi_quads_order(_mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d)));
}
static inline vi vi_quads_s(vi a, vi b, vi c, vi d) {
    return vi_quads_order(_mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d)));
}
static inline vm m_inside(vi i, int32_t n) {
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), i), _mm256_cmpgt_epi32(i, _mm256_set1_epi32(-1)));
}
static inline vf v_gather_m(const float * base, vi idx, vm m) {
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, idx, _mm256_castsi256_ps(m), 4);
}
// v_deint splits the 2·VL values a, b (in order) into the even and odd ones;
// v_interleave is its inverse (lo: the first VL values, hi: the rest).
static inline void v_deint(vf a, vf b, vf * even, vf * odd) {
    // a0 a2 b0 b2 | a4 a6 b4 b6, then the 64-bit pairs in order
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}
static inline void v_interleave(vf even, vf odd, vf * lo, vf * hi) {
    const vf l = _mm256_unpacklo_ps(even, odd), h = _mm256_unpackhi_ps(even, odd); // e0 o0 e1 o1 | e4 o4 e5 o5
    *lo = _mm256_permute2f128_ps(l, h, 0x20);
    *hi = _mm256_permute2f128_ps(l, h, 0x31);
}
// v_next returns a's lanes 1 … VL−1 followed by b's lane k (0 or 1).
static inline vf v_next(vf a, vf b, int k) {
    const vf r = _mm256_permutevar8x32_ps(a, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0));
    return _mm256_blend_ps(r, _mm256_permutevar8x32_ps(b, _mm256_set1_epi32(k)), 0x80);
}
static inline void v_prefetch(const void * p) { _mm_prefetch((const char *) p, _MM_HINT_T0); }

static inline void v_transpose(const float * src, int64_t lds, float * dst, int64_t ldd) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) {
        r[i] = _mm256_loadu_ps(src + i * lds);
    }
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    // r[4q + c] holds, in each 128-bit half h, column 4h + c of rows 4q..4q+3.
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
        _mm256_storeu_ps(dst + (c + 4) * ldd, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
    }
}
