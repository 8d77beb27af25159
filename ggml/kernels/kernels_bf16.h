// bf16 products for kernels_body.h (AVX-512 BF16 only): panels of pairs of k
// rounded to bf16, multiplied with vdpbf16ps (two bf16 products per f32
// lane, exact, summed into f32 accumulators).

// bf16_pairs rounds lo and hi to bf16 (to nearest, ties to even, with
// vcvtne2ps2bf16: subnormal inputs and results are flushed to zero) and
// returns their pairs: lane i holds lo[i]'s bf16 in its low half and hi[i]'s
// in its high half (the layout of the depth pairs vdpbf16ps multiplies).
// The conversion writes lo's 16 values, then hi's; one permute of the 16-bit
// words interleaves them.
static inline ISA_BF16 __m512i bf16_pairs(__m512 lo, __m512 hi) {
    static const uint16_t interleave[32] __attribute__((aligned(64))) = {
        0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31,
    };
    return _mm512_permutexvar_epi16(_mm512_load_si512(interleave), (__m512i) _mm512_cvtne2ps_pbh(hi, lo));
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
                const vf h = 2 * p + 1 < kc ? v_loadu_m(hi + j, m) : v_zero();
                _mm512_mask_storeu_epi32(d + p * width + j, m, bf16_pairs(v_loadu_m(lo + j, m), h));
            }
        }
    }
}

// pairs32 rounds r[0 … 31] to bf16 (as bf16_pairs) and returns them as 16
// pairs: lane i holds r[2i] in its low half and r[2i+1] in its high half,
// which is the order vcvtne2ps2bf16 writes the 32 values in.
static inline ISA_BF16 __m512i pairs32(const float * r) {
    return (__m512i) _mm512_cvtne2ps_pbh(_mm512_loadu_ps(r + 16), _mm512_loadu_ps(r));
}

// pack_b_pairs is pack_b_panels followed by pairs_panels in one pass for an
// F32 matrix B: each row's 32 values of a block rounded to 16 pairs, then
// 16×16 blocks of pairs transposed in registers into the panel (half the
// transposes of the f32 panels, and no second pass). Panels narrower than
// NR, or depths not a multiple of 32, take the two passes (tmp: f32 scratch
// of one panel). The same values as the two passes.
static ISA_BF16 void pack_b_pairs(const struct bsrc * src, int64_t n0, int64_t nc, int64_t k0, int64_t kc, float * tmp,
                                  uint32_t * out) {
    const int64_t kt = (kc + 1) / 2;
    uint32_t blk[16 * 16] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        const int64_t w = nc - j0 < NR ? nc - j0 : NR;
        uint32_t * p = out + j0 * kt;
        if (w < NR || kc % 32 != 0) {
            pack_b_panels(src, n0 + j0, w, k0, kc, tmp);
            pairs_panels(tmp, w, NR, kc, p);
            continue;
        }
        for (int h = 0; h < NV; h++) {
            const float * rows = src->b + (n0 + j0 + h * VL) * src->ldb + k0;
            for (int64_t k = 0; k < kc; k += 32) {
                for (int r = 0; r < 16; r++) {
                    _mm512_store_si512(blk + r * 16, pairs32(rows + r * src->ldb + k));
                }
                v_transpose((const float *) blk, 16, (float *) (p + k / 2 * NR + h * VL), NR);
            }
        }
    }
}

// pack_a_pairs is pack_a_panels followed by pairs_panels in one pass (as
// pack_b_pairs) for rows [m0, m0+mc) of A in mr-tall panels; depths not a
// multiple of 32 take the two passes (tmp: f32 scratch of the block).
static ISA_BF16 void pack_a_pairs(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int mr,
                                  float * tmp, uint32_t * out) {
    if (kc % 32 != 0) {
        pack_a_panels(a, lda, m0, mc, k0, kc, mr, tmp);
        pairs_panels(tmp, mc, mr, kc, out);
        return;
    }
    const int64_t kt = kc / 2;
    uint32_t blk[16 * 16] __attribute__((aligned(64))), tr[16 * 16] __attribute__((aligned(64)));
    for (int64_t i0 = 0; i0 < mc; i0 += mr) {
        const int64_t h = mc - i0 < mr ? mc - i0 : mr;
        uint32_t * p = out + i0 * kt;
        if (h < mr) {
            memset(p, 0, sizeof(uint32_t) * kt * mr);
        }
        for (int64_t g0 = 0; g0 < h; g0 += 16) {
            const int64_t g = h - g0 < 16 ? h - g0 : 16;
            const vm gm = m_first(g);
            const float * src = a + (m0 + i0 + g0) * lda + k0;
            for (int64_t r = g; r < 16; r++) {
                _mm512_store_si512(blk + r * 16, _mm512_setzero_si512());
            }
            for (int64_t k = 0; k < kc; k += 32) {
                for (int64_t r = 0; r < g; r++) {
                    _mm512_store_si512(blk + r * 16, pairs32(src + r * lda + k));
                }
                v_transpose((const float *) blk, 16, (float *) tr, 16);
                for (int kk = 0; kk < 16; kk++) {
                    _mm512_mask_storeu_epi32(p + (k / 2 + kk) * mr + g0, gm, _mm512_load_si512(tr + kk * 16));
                }
            }
        }
    }
}

// softmax_pairs is the attention's softmax step in bf16 (kernels_body.h):
// for the scores sᵀ [nk][NR] with column maxima mx, the exponentials
// exp(x·vs − mx·vs) (as 2^(x·vs' − mx·vs') with vs' = vs·log2(e):
// vpow2_fast) rounded to bf16 straight into the pairs panel sh [nk/2][NR]
// (what pairs_panels makes of them), their f32 sums summed in key order,
// and 1/Σ per column in inv.
static ISA_BF16 void softmax_pairs(const float * st, int64_t nk, const vf * mx, vf vs, uint32_t * sh, vf * inv) {
    const vf vs2 = v_mul(vs, v_set1(1.44269504088896341f));
    for (int part = 0; part < NV; part++) {
        const float * c = st + VL * part;
        const vf m = v_mul(mx[part], vs2);
        vf sum = v_zero();
        for (int64_t j = 0; j < nk; j += 2) {
            const vf e0 = vpow2_fast(v_fms(v_load(c + j * NR), vs2, m), 1.0f);
            sum = v_add(sum, e0);
            vf e1 = v_zero();
            if (j + 1 < nk) {
                e1 = vpow2_fast(v_fms(v_load(c + (j + 1) * NR), vs2, m), 1.0f);
                sum = v_add(sum, e1);
            }
            _mm512_store_si512(sh + j / 2 * NR + VL * part, bf16_pairs(e0, e1));
        }
        inv[part] = v_div(v_set1(1.0f), sum);
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
