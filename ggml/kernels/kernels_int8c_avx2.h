// Per-channel int8 products for kernels_body.h in the AVX2 variant (no VNNI
// needed): the quantization of kernels_int8c.h (weights with one scale per
// output channel over the whole depth, s_w = max|w|/127, at load by
// da3_pack_weight; activations with one scale per row, s_a = max|x|/127, as
// A is packed; both rounded to nearest, ties to even, into [-127, 127]),
// multiplied with vpmaddubsw, which takes unsigned by signed bytes and
// saturates its pair sums to int16. Storing q_a + 128 as the AVX-512
// variant does could saturate (2·255·127 > 32767), so the products use the
// sign trick of ggml's AVX2 q8_0 dot product instead:
//
//     q_a·q_w = |q_a| · (sign(q_a)·q_w),  |q_a| ≤ 127, |sign(q_a)·q_w| ≤ 127
//
// (vpsignb applies the activation's sign to the weight), so a pair sums to
// at most 2·127·127 = 32258 and never saturates; vpmaddwd by ones widens
// the pairs to int32 sums of four products, accumulated over all of K. No
// excess term: each output is the exact integer dot product scaled once,
//
//     C[m][n] = (s_a[m]·s_w[n]) · Σ_k q_a·q_w,
//
// the same values as the AVX-512 variant's. |Σ| ≤ 127²·K stays below 2³¹
// for K ≤ I8C_MAX_K. The depth is padded to a multiple of 4 with zeros.

#define ISA_INT8C          // the variant's own target (AVX2) has every instruction used here
#define MR_I8C 4           // rows of the tile: 8 int32 accumulators, 2 weight vectors, the broadcasts and ones in 16 registers
#define I8C_MAX_K 65536    // the deepest product (the AVX-512 variant's limit; the int32 sums could go to 133144)
#define I8C_PEAK peak_i8c  // da3_peak's int8c rate

// i8c_quads is the 32-bit quads of depth K (K padded to a multiple of 4).
static inline int64_t i8c_quads(int64_t K) { return (K + 3) / 4; }

// Packed per-channel panels: per NR columns (B), [quads][NR] int32 quads of
// q_w, then the scales [NR] (f32); per MR_I8C rows (A), per quad the
// MR_I8C quads of q_a, then the MR_I8C quads of |q_a| ([quads][2][MR_I8C]),
// then the scales [MR_I8C] (f32). Words per column of B and per row of A:
static inline int64_t i8c_b_words(int64_t K) { return i8c_quads(K) + 1; }
static inline int64_t i8c_a_words(int64_t K) { return 2 * i8c_quads(K) + 1; }

// i8c_quantize_col quantizes one weight row x of K values per channel into
// column j of the NR-wide panel p (i8c_b_words(K)·NR words), as the AVX-512
// variant does (without its excess).
static void i8c_quantize_col(const float * x, int64_t K, int j, int32_t * p) {
    const int64_t kq = i8c_quads(K);
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        amax = fmaxf(amax, fabsf(x[k]));
    }
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t q = 0; q < kq; q++) {
        uint8_t bytes[4] = { 0, 0, 0, 0 };
        for (int i = 0; i < 4 && 4 * q + i < K; i++) {
            float t = nearbyintf(x[4 * q + i] * id); // ties to even, as vcvtps2dq
            t = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
            bytes[i] = (uint8_t) (int8_t) t;
        }
        int32_t w;
        memcpy(&w, bytes, 4);
        p[q * NR + j] = w;
    }
    ((float *) p)[kq * NR + j] = d;
}

// i8c_row_amax is max|x| over the K values of a row.
static float i8c_row_amax(const float * x, int64_t K) {
    vf mx = v_zero();
    int64_t k = 0;
    for (; k + VL <= K; k += VL) {
        mx = v_max(mx, v_abs(v_loadu(x + k)));
    }
    if (k < K) {
        mx = v_max(mx, v_abs(v_loadu_m(x + k, m_first(K - k))));
    }
    return v_hmax(mx);
}

// pack_a_i8c quantizes A rows [m0, m0+mc) over all K values per row and
// packs them into MR_I8C-tall panels of q_a and |q_a|; rows past mc are zero.
static void pack_a_i8c(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t K, int32_t * out) {
    const int64_t kq = i8c_quads(K), words = i8c_a_words(K) * MR_I8C;
    for (int64_t i0 = 0; i0 < mc; i0 += MR_I8C) {
        const int64_t h = mc - i0 < MR_I8C ? mc - i0 : MR_I8C;
        int32_t * p = out + (i0 / MR_I8C) * words;
        float * sc = (float *) (p + 2 * kq * MR_I8C);
        if (h < MR_I8C) {
            memset(p, 0, sizeof(int32_t) * words);
        }
        for (int64_t i = 0; i < h; i++) {
            const float * x = a + (m0 + i0 + i) * lda;
            const float d = i8c_row_amax(x, K) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            const vf vid = v_set1(id);
            const __m256i lo = _mm256_set1_epi32(-127);
            for (int64_t k = 0; k < 4 * kq; k += VL) { // two quads a step; the depth's padding quantizes to 0
                const vf v = K - k >= VL ? v_loadu(x + k) : v_loadu_m(x + k, m_first(K - k));
                // round to nearest, ties to even; [-127, 127] (the upper bound by the saturating packs)
                const __m256i q = _mm256_max_epi32(_mm256_cvtps_epi32(v_mul(v, vid)), lo);
                const __m256i w16 = _mm256_packs_epi32(q, q); // per 128-bit lane: its four values, twice
                const __m256i b = _mm256_packs_epi16(w16, w16); // per lane: its four bytes in the low quad
                const __m256i ab = _mm256_abs_epi8(b);
                const int64_t qd = k / 4;
                p[qd * 2 * MR_I8C + i] = _mm_cvtsi128_si32(_mm256_castsi256_si128(b));
                p[qd * 2 * MR_I8C + MR_I8C + i] = _mm_cvtsi128_si32(_mm256_castsi256_si128(ab));
                if (qd + 1 < kq) {
                    p[(qd + 1) * 2 * MR_I8C + i] = _mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1));
                    p[(qd + 1) * 2 * MR_I8C + MR_I8C + i] = _mm_cvtsi128_si32(_mm256_extracti128_si256(ab, 1));
                }
            }
            sc[i] = d;
        }
    }
}

// i8c_dot4 adds to s, per int32 lane, the four products of the activation
// quad a (all lanes; |a| in aa) with the weight quads w, by the sign trick.
static inline __m256i i8c_dot4(__m256i s, __m256i a, __m256i aa, __m256i w, __m256i ones) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(w, a)), ones));
}

// tile_i8c computes an MR_I8C×NR tile from packed per-channel panels of kq
// quads of depth and stores it like the f32 tiles.
static void tile_i8c(int64_t kq, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr,
                     int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {
    const int32_t * ap = apv, * bp = bpv;
    const float * as = (const float *) (ap + 2 * kq * MR_I8C);
    const float * bs = (const float *) (bp + kq * NR);
    TILE_PREFETCH(MR_I8C)
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[MR_I8C][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR_I8C; i++) {
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) s[i][h] = _mm256_setzero_si256();
    }
    // GCC keeps two of the accumulators on the stack (the sums in a function of their own keep all in
    // registers, at the same speed: the vector pipes bound the loop, see peak_i8c)
    for (int64_t q = 0; q < kq; q++) {
        __m256i w[NV];
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) w[h] = _mm256_load_si256((const __m256i *) (bp + q * NR + h * VL));
#pragma GCC unroll 16
        for (int i = 0; i < MR_I8C; i++) {
            const __m256i x = _mm256_set1_epi32(ap[q * 2 * MR_I8C + i]);
            const __m256i ax = _mm256_set1_epi32(ap[q * 2 * MR_I8C + MR_I8C + i]);
#pragma GCC unroll 4
            for (int h = 0; h < NV; h++) s[i][h] = i8c_dot4(s[i][h], x, ax, w[h], ones);
        }
    }
    vf acc[MR_I8C][NV], d[NV];
#pragma GCC unroll 4
    for (int h = 0; h < NV; h++) d[h] = v_load(bs + h * VL);
#pragma GCC unroll 16
    for (int i = 0; i < MR_I8C; i++) {
        const vf da = v_set1(as[i]);
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) acc[i][h] = v_mul(_mm256_cvtepi32_ps(s[i][h]), v_mul(da, d[h]));
    }
    TILE_STORE(MR_I8C)
}

// peak_i8c is da3_peak for int8c: rounds of eight of the tile's steps
// (vpsignb, vpmaddubsw, vpmaddwd, vpaddd: 32 products each) on two rows and
// two weight vectors, made opaque to the compiler before each four (else it
// computes the products once and times the additions alone).
static volatile int32_t i8c_peak_sink;

static double peak_i8c(int64_t rounds) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    __m256i a0 = _mm256_set1_epi32(0x01ff01ff), a1 = _mm256_set1_epi32(0x7f02fe81);
    __m256i aa0 = _mm256_abs_epi8(a0), aa1 = _mm256_abs_epi8(a1);
    __m256i w0 = _mm256_set1_epi32(0x01020102), w1 = _mm256_set1_epi32(0x81037f05);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t r = 0; r < rounds; r++) {
        for (int half = 0; half < 2; half++) {
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(aa0), "+x"(aa1), "+x"(w0), "+x"(w1));
            s0 = i8c_dot4(s0, a0, aa0, w0, ones);
            s1 = i8c_dot4(s1, a0, aa0, w1, ones);
            s2 = i8c_dot4(s2, a1, aa1, w0, ones);
            s3 = i8c_dot4(s3, a1, aa1, w1, ones);
        }
    }
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *) lanes, _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)));
    i8c_peak_sink = lanes[0];
    return 2.0 * 32 * 8 * (double) rounds; // 32 byte products per step
}
