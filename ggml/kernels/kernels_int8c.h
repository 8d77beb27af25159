// Per-channel int8 products for kernels_body.h (AVX-512 VNNI; the AVX2
// variant's, without VNNI, are kernels_int8c_avx2.h): the
// weights quantized symmetrically with one scale per output channel over the
// whole depth (s_w = max|w|/127, at load: da3_pack_weight), the activations
// with one scale per row over the whole depth (s_a = max|x|/127, as A is
// packed), both rounded to nearest. The int32 sums of vpdpbusd run over all
// of K with no conversion inside the loop, and each output is scaled once:
//
//     C[m][n] = (s_a[m]·s_w[n]) · (Σ_k (q_a + 128)·q_w − 128·Σ_k q_w)
//
// (vpdpbusd takes unsigned activations: q_a + 128, 1 … 255; the excess
// 128·Σ q_w is an integer per column, subtracted exactly). |Σ| ≤
// 255·127·K stays below 2³¹ for K ≤ I8C_MAX_K. The depth is padded to a
// multiple of 4 with zero weights.

#define ISA_INT8C ISA_INT8 // the attribute of the int8c functions kernels_body.h defines
#define MR_I8C 8           // rows of the tile: 16 int32 accumulators (12 rows run no faster)
#define I8C_MAX_K 65536    // the deepest product whose int32 sums cannot overflow

// i8c_quads is the 32-bit quads of depth K (K padded to a multiple of 4).
static inline int64_t i8c_quads(int64_t K) { return (K + 3) / 4; }

// Packed per-channel panels: per NR columns (B), [quads][NR] int32 quads of
// q_w, then the scales [NR] (f32) and the excesses 128·Σ q_w [NR] (int32);
// per MR_I8C rows (A), [quads][MR_I8C] quads of q_a + 128, then the scales
// [MR_I8C] (f32). Words per column of B and per row of A:
static inline int64_t i8c_b_words(int64_t K) { return i8c_quads(K) + 2; }
static inline int64_t i8c_a_words(int64_t K) { return i8c_quads(K) + 1; }

// pack_a_i8c quantizes A rows [m0, m0+mc) over all K values per row and
// packs them into MR_I8C-tall panels of q + 128; rows past mc are zero. A
// whole panel's eight rows are quantized sixteen values at a time and their
// quads transposed into place with two permutes.
static ISA_INT8 void pack_a_i8c(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t K, int32_t * out) {
    _Static_assert(MR_I8C == 8, "the transposition takes eight rows");
    const int64_t kq = i8c_quads(K), words = i8c_a_words(K) * MR_I8C;
    const __m512i off = _mm512_set1_epi32(128);
    // the quads of rows 0–3 (z0) and 4–7 (z1), four per row, to quads 0, 1 (lo) and 2, 3 (hi) of all rows
    const __m512i lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(2));
    for (int64_t i0 = 0; i0 < mc; i0 += MR_I8C) {
        const int64_t h = mc - i0 < MR_I8C ? mc - i0 : MR_I8C;
        int32_t * p = out + (i0 / MR_I8C) * words;
        float * sc = (float *) (p + kq * MR_I8C);
        __m512 vid[MR_I8C];
        for (int i = 0; i < MR_I8C; i++) { // rows past mc quantize to 0 (128) with a scale of 0
            const float d = i < h ? i8c_row_amax(a + (m0 + i0 + i) * lda, K) / 127.0f : 0.0f;
            vid[i] = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
            sc[i] = d;
        }
        for (int64_t k = 0; k < 4 * kq; k += 16) {
            const __mmask16 m = K - k >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << (K - k)) - 1);
            __m128i b[MR_I8C];
            for (int i = 0; i < MR_I8C; i++) {
                // round to nearest, ties to even; the depth's padding (and a missing row) quantizes to 0 (128)
                const __m512 x = i < h ? _mm512_maskz_loadu_ps(m, a + (m0 + i0 + i) * lda + k) : _mm512_setzero_ps();
                b[i] = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x, vid[i])), off));
            }
            const __m512i z0 = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(b[0]), b[1], 1), b[2], 2), b[3], 3);
            const __m512i z1 = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(b[4]), b[5], 1), b[6], 2), b[7], 3);
            const int64_t nq = kq - k / 4 < 4 ? kq - k / 4 : 4; // quads of this step inside the depth
            int32_t * dst = p + (k / 4) * MR_I8C;
            _mm512_mask_storeu_epi32(dst, nq >= 2 ? (__mmask16) 0xffff : (__mmask16) 0x00ff, _mm512_permutex2var_epi32(z0, lo, z1));
            if (nq > 2) {
                _mm512_mask_storeu_epi32(dst + 2 * MR_I8C, nq >= 4 ? (__mmask16) 0xffff : (__mmask16) 0x00ff,
                                         _mm512_permutex2var_epi32(z0, hi, z1));
            }
        }
    }
}

// i8c_dpbusd is _mm512_dpbusd_epi32(s, u, w) (u's unsigned bytes by w's
// signed ones, four products added to each int32 lane of s) in inline
// assembly: with the intrinsic, GCC 12 copies every accumulator after each
// vpdpbusd and spills two of the tile's sixteen to the stack.
static inline ISA_INT8 __m512i i8c_dpbusd(__m512i s, __m512i u, __m512i w) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(s) : "v"(u), "v"(w));
    return s;
}

// tile_i8c_body computes an MR_I8C×NR tile from packed per-channel panels
// of kq quads of depth and stores it like the f32 tiles. B's bytes are
// signed and A's unsigned (q + 128), or, with signed_a, the other way round
// (the attention's vᵀ times its probabilities: no excess).
static inline __attribute__((always_inline)) ISA_INT8 void tile_i8c_body(
    int signed_a, int64_t kq, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr, int64_t ncols,
    int accumulate, const struct epi * e, int64_t row0, int64_t col0) {
    const int32_t * ap = apv, * bp = bpv;
    const float * as = (const float *) (ap + kq * MR_I8C);
    const float * bs = (const float *) (bp + kq * NR);
    const int32_t * bx = bp + (kq + 1) * NR;
    TILE_PREFETCH(MR_I8C)
    __m512i s[MR_I8C][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR_I8C; i++) {
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) s[i][h] = _mm512_setzero_si512();
    }
    for (int64_t q = 0; q < kq; q++) {
        __m512i w[NV];
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) w[h] = _mm512_load_si512(bp + q * NR + h * VL);
#pragma GCC unroll 16
        for (int i = 0; i < MR_I8C; i++) {
            const __m512i x = _mm512_set1_epi32(ap[q * MR_I8C + i]);
#pragma GCC unroll 4
            for (int h = 0; h < NV; h++) {
                s[i][h] = signed_a ? i8c_dpbusd(s[i][h], w[h], x) : i8c_dpbusd(s[i][h], x, w[h]);
            }
        }
    }
    vf acc[MR_I8C][NV], d[NV];
    __m512i x[NV];
#pragma GCC unroll 4
    for (int h = 0; h < NV; h++) {
        d[h] = v_load(bs + h * VL);
        x[h] = _mm512_load_si512(bx + h * VL);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR_I8C; i++) {
        const vf da = v_set1(as[i]);
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) {
            acc[i][h] = v_mul(_mm512_cvtepi32_ps(_mm512_sub_epi32(s[i][h], x[h])), v_mul(da, d[h]));
        }
    }
    TILE_STORE(MR_I8C)
}

// tile_i8c is the per-channel product's tile: A unsigned (q + 128), B signed.
// The tiles are never inlined: inlined into the attention's loop, GCC
// spilled their accumulators.
static __attribute__((noinline)) ISA_INT8 void tile_i8c(int64_t kq, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr,
                              int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {
    tile_i8c_body(0, kq, apv, bpv, c, ldc, mr, ncols, accumulate, e, row0, col0);
}

// tile_i8c_su is the tile of signed A and unsigned B (B's excesses zero).
static __attribute__((noinline)) ISA_INT8 void tile_i8c_su(int64_t kq, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr,
                                 int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {
    tile_i8c_body(1, kq, apv, bpv, c, ldc, mr, ncols, accumulate, e, row0, col0);
}

// i8c_tile and i8c_tile_su are the tiles of the per-channel products (one
// form here), and the int8 attention runs wherever the variant does.
static inline tile_fn i8c_tile(void) { return tile_i8c; }
static inline tile_fn i8c_tile_su(void) { return tile_i8c_su; }
static inline int i8c_attention_runs(void) { return 1; }

// i8c_scales returns the quantization scales max|x|/127 of the lanes' maxima
// mx in *d and their reciprocals (0 for a scale of 0).
static inline ISA_INT8 vf i8c_scales(vf mx, vf * d) {
    *d = v_div(mx, v_set1(127.0f));
    return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(*d, v_zero(), _CMP_NEQ_OQ), v_set1(1.0f), *d);
}

// i8c_pack_a_rows quantizes the MR_I8C rows of an f32 A panel f ([k][MR_I8C],
// K deep) per row over all of K into the per-channel A panel out (as
// pack_a_i8c makes from rows: q + 128, then the scales): the Winograd
// kernel's U_ξ.
static ISA_INT8 void i8c_pack_a_rows(const float * f, int64_t K, int32_t * out) {
    const int64_t kq = i8c_quads(K);
    __m256 mx = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(f + k * MR_I8C)));
    }
    const __m256 d = _mm256_div_ps(mx, _mm256_set1_ps(127.0f));
    const __m256 id = _mm256_maskz_div_ps(_mm256_cmp_ps_mask(d, _mm256_setzero_ps(), _CMP_NEQ_OQ), _mm256_set1_ps(1.0f), d);
    const __m256i off = _mm256_set1_epi32(128), lo = _mm256_set1_epi32(0xff);
    for (int64_t q = 0; q < kq; q++) {
        __m256i r = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) { // the depth's padding quantizes to 0 (128)
            const __m256i e = 4 * q + i < K ? _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(f + (4 * q + i) * MR_I8C), id)), off)
                                            : off;
            r = _mm256_or_si256(r, _mm256_slli_epi32(_mm256_and_si256(e, lo), 8 * i));
        }
        _mm256_storeu_si256((__m256i *) (out + q * MR_I8C), r);
    }
    _mm256_storeu_ps((float *) (out + kq * MR_I8C), d);
}

// i8c_pack_b_cols quantizes the NR columns of an f32 B panel v ([k][NR], K
// deep) per column over all of K into the per-channel B panel out (as
// i8c_quantize_col makes for weights: the quads, the scales, the excesses
// 128·Σq): the Winograd input's V_ξ for a block of tiles.
static ISA_INT8 void i8c_pack_b_cols(const float * v, int64_t K, int32_t * out) {
    const int64_t kq = i8c_quads(K);
    for (int h = 0; h < NV; h++) {
        vf mx = v_zero();
        for (int64_t k = 0; k < K; k++) {
            mx = v_max(mx, v_abs(v_load(v + k * NR + h * VL)));
        }
        vf d;
        const vf id = i8c_scales(mx, &d);
        __m512i sum = _mm512_setzero_si512();
        for (int64_t q = 0; q < kq; q++) {
            __m512i e[4]; // the depth's padding quantizes to 0
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                e[i] = 4 * q + i < K ? _mm512_cvtps_epi32(v_mul(v_load(v + (4 * q + i) * NR + h * VL), id)) : _mm512_setzero_si512();
            }
            const __m512i r = vi_quads_s(e[0], e[1], e[2], e[3]);
            sum = i8c_dpbusd(sum, _mm512_set1_epi8(1), r); // Σq: the quad's four bytes, each times 1
            _mm512_store_si512(out + q * NR + h * VL, r);
        }
        v_store((float *) (out + kq * NR) + h * VL, d);
        _mm512_store_si512(out + (kq + 1) * NR + h * VL, _mm512_slli_epi32(sum, 7));
    }
}
