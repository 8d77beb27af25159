// int8 products for kernels_body.h (AVX-512 VNNI only): q8_0 weights times
// activations quantized to q8_0 blocks per row as ggml's quantize_row_q8_0
// does (32 values, scale amax/127, round to nearest), with vpdpbusd (four
// u8·s8 products per int32 lane). Each 32-deep block's integer sums are
// scaled by both blocks' scales into f32 accumulators.
//
// vpdpbusd multiplies unsigned by signed bytes: activations are stored as
// q + 128 (1 … 255) and the excess, 128·Σq_w per weight block and column,
// is subtracted with the scales: Σ (q_a + 128)·q_w = Σ q_a·q_w + 128·Σ q_w.

#define QK 32      // values per q8_0 block
#define QUADS 8    // int32 lanes of four bytes per block
#define MR_INT8 5  // rows of the int8 tile: 10 int32 + 10 f32 accumulators, the B vectors and scales in 32 registers

// q8_0 as ggml stores it (ggml-common.h block_q8_0).
struct q8_block { uint16_t d; int8_t qs[QK]; };

// Packed int8 panels: per NR columns (B) or MR_INT8 rows (A) and per block b
// of the packed depth, QUADS rows of 32-bit quads [b·QUADS + q][width], then
// the block scales [b][width] (f32) and, for B, the excess 128·d·Σq [b][width].
static inline int64_t panel_words(int64_t kc, int width, int with_excess) {
    return kc / 4 * width + kc / QK * width * (with_excess ? 2 : 1);
}

// pack_b_q8 packs the q8_0 rows [n0, n0+nc) of B over k in [k0, k0+kc) (k0,
// kc multiples of QK) into NR-wide panels; columns past nc are zero.
static ISA_INT8 void pack_b_q8(const char * q, size_t row_bytes, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                               int32_t * out) {
    const int64_t nb = kc / QK, words = panel_words(kc, NR, 1);
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        const int64_t w = nc - j0 < NR ? nc - j0 : NR;
        int32_t * p = out + (j0 / NR) * words;
        float * sc = (float *) (p + kc / 4 * NR), * ex = sc + nb * NR;
        if (w < NR) {
            memset(p, 0, sizeof(int32_t) * words);
        }
        for (int64_t j = 0; j < w; j++) {
            const struct q8_block * blk = (const struct q8_block *) (q + (n0 + j0 + j) * row_bytes) + k0 / QK;
            for (int64_t b = 0; b < nb; b++) {
                int32_t sum = 0;
                for (int i = 0; i < QUADS; i++) {
                    int32_t v;
                    memcpy(&v, blk[b].qs + 4 * i, 4);
                    p[(b * QUADS + i) * NR + j] = v;
                }
                for (int i = 0; i < QK; i++) {
                    sum += blk[b].qs[i];
                }
                const float d = _cvtsh_ss(blk[b].d);
                sc[b * NR + j] = d;
                ex[b * NR + j] = d * (float) (128 * sum);
            }
        }
    }
}

// pack_a_q8 quantizes A rows [m0, m0+mc) over k in [k0, k0+kc) (kc a
// multiple of QK) to q8_0 blocks and packs them into MR_INT8-tall panels of
// q + 128; rows past mc are zero.
static ISA_INT8 void pack_a_q8(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                               int32_t * out) {
    const int64_t nb = kc / QK, words = panel_words(kc, MR_INT8, 0);
    for (int64_t i0 = 0; i0 < mc; i0 += MR_INT8) {
        const int64_t h = mc - i0 < MR_INT8 ? mc - i0 : MR_INT8;
        int32_t * p = out + (i0 / MR_INT8) * words;
        float * sc = (float *) (p + kc / 4 * MR_INT8);
        if (h < MR_INT8) {
            memset(p, 0, sizeof(int32_t) * words);
        }
        for (int64_t i = 0; i < h; i++) {
            const float * x = a + (m0 + i0 + i) * lda + k0;
            for (int64_t b = 0; b < nb; b++) {
                const __m512 x0 = _mm512_loadu_ps(x + b * QK), x1 = _mm512_loadu_ps(x + b * QK + 16);
                const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
                const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                const __m512i off = _mm512_set1_epi32(128);
                // round to nearest (ties to even; ggml's roundf rounds ties away: a rare one-step difference)
                const __m512i q0 = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x0, _mm512_set1_ps(id))), off);
                const __m512i q1 = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x1, _mm512_set1_ps(id))), off);
                uint8_t bytes[QK];
                _mm_storeu_si128((__m128i *) bytes, _mm512_cvtepi32_epi8(q0));
                _mm_storeu_si128((__m128i *) (bytes + 16), _mm512_cvtepi32_epi8(q1));
                for (int qd = 0; qd < QUADS; qd++) {
                    int32_t v;
                    memcpy(&v, bytes + 4 * qd, 4);
                    p[(b * QUADS + qd) * MR_INT8 + i] = v;
                }
                sc[b * MR_INT8 + i] = d;
            }
        }
    }
}

// tile_int8 computes an MR_INT8×NR tile over kc (a multiple of QK) from
// packed q8 panels and stores it like the f32 tiles.
static ISA_INT8 void tile_int8(int64_t kc, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr,
                               int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {
    const int32_t * ap = apv, * bp = bpv;
    const int64_t nb = kc / QK;
    const float * as = (const float *) (ap + kc / 4 * MR_INT8);
    const float * bs = (const float *) (bp + kc / 4 * NR), * bx = bs + nb * NR;
    TILE_PREFETCH(MR_INT8)
    vf acc[MR_INT8][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR_INT8; i++) {
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) acc[i][h] = v_zero();
    }
    for (int64_t b = 0; b < nb; b++) {
        __m512i s[MR_INT8][NV];
#pragma GCC unroll 16
        for (int i = 0; i < MR_INT8; i++) {
#pragma GCC unroll 4
            for (int h = 0; h < NV; h++) s[i][h] = _mm512_setzero_si512();
        }
        const int32_t * bq = bp + b * QUADS * NR, * aq = ap + b * QUADS * MR_INT8;
#pragma GCC unroll 8
        for (int q = 0; q < QUADS; q++) {
            __m512i w[NV];
#pragma GCC unroll 4
            for (int h = 0; h < NV; h++) w[h] = _mm512_load_si512(bq + q * NR + h * VL);
#pragma GCC unroll 16
            for (int i = 0; i < MR_INT8; i++) {
                const __m512i x = _mm512_set1_epi32(aq[q * MR_INT8 + i]);
#pragma GCC unroll 4
                for (int h = 0; h < NV; h++) s[i][h] = _mm512_dpbusd_epi32(s[i][h], x, w[h]);
            }
        }
        vf d[NV], x[NV];
#pragma GCC unroll 4
        for (int h = 0; h < NV; h++) {
            d[h] = v_load(bs + b * NR + h * VL);
            x[h] = v_load(bx + b * NR + h * VL);
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR_INT8; i++) {
            const vf da = v_set1(as[b * MR_INT8 + i]);
#pragma GCC unroll 4
            for (int h = 0; h < NV; h++) {
                acc[i][h] = v_fma(da, v_fms(d[h], _mm512_cvtepi32_ps(s[i][h]), x[h]), acc[i][h]);
            }
        }
    }
    TILE_STORE(MR_INT8)
}
