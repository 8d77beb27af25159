// The CPU kernels' algorithms, written once over the vector operations of a
// simd_*.h header and compiled once per instruction set by the variant_*.c
// files (each sets the target, the register tiles and block sizes, includes
// its simd header, then this file). Only the op entry points leave a
// translation unit: ISA_FN(name) appends the variant's suffix.
//
// GEMM: dst[m][n] = Σ_k A[m][k]·B[n][k] with A = src[1] (activations: M rows
// of K) and B = src[0] (weights: N rows of K), which is ggml_mul_mat(src0,
// src1), in the GotoBLAS/BLIS scheme: packed panels sized for L1/L2 and an
// MR×NR register tile (NR = NV vectors). ggml's own F32 path (llamafile's
// tinyBLAS) reaches about 40 % of the AVX-512 FMA peak of the CPUs this
// project runs on; the AVX-512 variant reaches 85–91 % on a ViT-B's products (BenchmarkPeak).
//
// A variant file defines: ISA_FN, NV, MR_BIG and MR_SMALL (two tile heights:
// the small one where the big one would compute many padding rows, e.g. 32
// output channels), SMALL_TILE_SPEED (the small tile's measured speed
// relative to the big one), KC, MC, NC (block sizes), and optionally
// ISA_BF16 / ISA_INT8 (function attributes enabling the bf16 and int8
// products, kernels_bf16.h and kernels_int8.h) or ISA_INT8C_AVX2 (the
// per-channel int8 products of kernels_int8c_avx2.h). The int8c headers
// define ISA_INT8C (the attribute of their functions).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NR (NV * VL) // columns of B per register tile
#define KCQ 256      // the packed depth for weights in 256-value blocks (k-quants)
#define KCB 512      // the packed depth of f32 matrices in bf16 (256 pairs: the same bytes as KCQ floats)

// ---- vector math for the fused epilogues and the softmax ----

// vexp is e^x to about 1 ulp (Cephes' expf: x = n·ln2 + r, |r| ≤ ln2/2, a
// degree-6 polynomial in r, then the exact scaling by 2^n).
static inline vf vexp(vf x) {
    x = v_min(v_max(x, v_set1(-104.0f)), v_set1(89.0f));
    const vf n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    vf r = v_fnma(n, v_set1(0.693359375f), x);
    r = v_fnma(n, v_set1(-2.12194440e-4f), r);
    vf p = v_set1(1.9875691500e-4f);
    p = v_fma(p, r, v_set1(1.3981999507e-3f));
    p = v_fma(p, r, v_set1(8.3334519073e-3f));
    p = v_fma(p, r, v_set1(4.1665795894e-2f));
    p = v_fma(p, r, v_set1(1.6666665459e-1f));
    p = v_fma(p, r, v_set1(5.0000001201e-1f));
    p = v_fma(v_mul(p, r), r, v_add(r, v_set1(1.0f)));
    return v_ldexp(p, n);
}

// vpow2_fast is c·2^t to about 6e-6 (relative) for t ≤ 0: e^x of a
// softmax's shifted scores as 2^(x·log2(e)), its scale and maximum
// multiplied by log2(e) once outside the loop, for the narrow attentions'
// exponentials, rounded to bf16 (2^-9) or to bytes (2^-8) after. t = n + f
// with |f| ≤ 1/2, 2^f by a degree-4 minimax polynomial (2.6e-6) with the
// constant c folded into its coefficients, the scaling by 2^n exact; below
// 2^-126 (the smallest normal float) it is c·2^-126, as good as 0 beside the
// softmax's largest term, c. Half the operations of vexp.
static inline vf vpow2_fast(vf t, float c) {
    t = v_max(t, v_set1(-126.0f));
    const vf n = v_round(t);
    const vf f = v_sub(t, n);
    vf p = v_set1(c * 0.009570088712624044f);
    p = v_fma(p, f, v_set1(c * 0.05591786789414349f));
    p = v_fma(p, f, v_set1(c * 0.2402474522863996f));
    p = v_fma(p, f, v_set1(c * 0.693121813885694f));
    p = v_fma(p, f, v_set1(c * 0.9999992613017235f));
    return v_ldexp(p, n);
}

// vgelu is x·Φ(x) = x·(1 + erf(x/√2))/2, the exact (erf) GELU of torch's
// nn.GELU(), with erf(x/√2) = x·P(x²)/Q(x²), P of degree 7 and Q of degree 4:
// a rational minimax fit on |x| ≤ 4√2 (erf(4) is 1 in float32, and x is
// clamped there; scripts/gelu_fit.py) whose error is below 1e-8 in exact
// arithmetic. Written as x·(Q + x·P)/(2Q) it costs one division and eleven
// multiply-adds, against an exponential and a division for Abramowitz &
// Stegun's erf (the GELU's share of the first MLP product in int8c went from
// 15 % to 5 %, BenchmarkGEMMInt8Channel's _gelu case). Φ is kept
// ≥ 0 (rounding leaves 1 + erf a little below 0 near the clamp), so the
// negative tail keeps its sign.
static inline vf vgelu(vf x) {
    const vf lim = v_set1(5.656854249f);
    const vf xc = v_min(v_max(x, v_set1(-5.656854249f)), lim), u = v_mul(xc, xc);
    vf p = v_set1(-4.116778533e-12f);
    p = v_fma(p, u, v_set1(8.241748395e-10f));
    p = v_fma(p, u, v_set1(-7.751085462e-08f));
    p = v_fma(p, u, v_set1(6.072712495e-06f));
    p = v_fma(p, u, v_set1(1.629620092e-04f));
    p = v_fma(p, u, v_set1(7.961831056e-03f));
    p = v_fma(p, u, v_set1(5.234902725e-02f));
    p = v_fma(p, u, v_set1(7.978845239e-01f));
    vf q = v_set1(3.799750266e-05f);
    q = v_fma(q, u, v_set1(1.321231946e-03f));
    q = v_fma(q, u, v_set1(2.369245701e-02f));
    q = v_fma(q, u, v_set1(2.322758734e-01f));
    q = v_fma(q, u, v_set1(1.0f));
    const vf a = v_max(v_fma(xc, p, q), v_zero()); // Q·(1 + erf(x/√2)), ≥ 0
    return v_mul(v_mul(x, v_set1(0.5f)), v_div(a, q));
}

// An epilogue applied to the finished tiles of a product: a bias, per
// column (a linear layer's output features) or per row (a convolution's
// output channels), then an activation.
struct epi {
    const float * bias; // NULL: no bias
    int per_row;        // bias[m] instead of bias[n]
    int act;
    const float * res;  // Winograd only, NULL: none; else a map laid out as the output, added last
};

static inline vf activate(vf v, int act) {
    switch (act) {
    case DA3_ACT_RELU: return v_max(v, v_zero());
    case DA3_ACT_GELU: return vgelu(v);
    }
    return v;
}

// ---- packing ----

// bsrc describes B: either rows of K values (a matrix) or the implicit
// im2col matrix of a convolution input, B[n][k] with n = oy·OW + ox and
// k = (ic·KH + ky)·KW + kx, read from x [W, H, IC] without materialising it.
struct bsrc {
    const float * b; int64_t ldb;                          // F32 matrix
    const char * q; size_t row_bytes; enum ggml_type type; // matrix of another type (q == NULL: F32)
    float * deq;                                           // scratch for NR dequantized rows of KCQ values
    const float * x; int64_t W, H, KW, KH, OW, s, pad, d;  // convolution (x == NULL: matrix)
    const uint32_t * pre; int64_t prew;                    // pre-packed (da3_pack_weight): [N/NR][prew][NR] words
};

// pack_conv_panel packs one NR-wide panel of the implicit im2col matrix:
// columns n0 … n0+w−1 over k in [k0, k0+kc). A 1×1 unpadded convolution
// reads its pixels contiguously; with stride 1 and the panel inside one
// output row, each k is one masked load per vector of a row segment of x;
// otherwise each k is NV gathers with per-lane bounds masks.
static void pack_conv_panel(const struct bsrc * src, int64_t n0, int64_t w, int64_t k0, int64_t kc, float * p) {
    const int64_t oy = n0 / src->OW, ox0 = n0 % src->OW;
    const int64_t HW = src->H * src->W;
    if (src->KW == 1 && src->KH == 1 && src->s == 1 && src->pad == 0) {
        for (int64_t k = 0; k < kc; k++) {
            const float * row = src->x + (k0 + k) * HW + n0;
            for (int h = 0; h < NV; h++) {
                v_store(p + k * NR + h * VL, v_loadu_m(row + h * VL, m_first(w - h * VL)));
            }
        }
        return;
    }
    if (src->s == 1 && ox0 + w <= src->OW) {
        for (int64_t k = 0; k < kc; k++) {
            const int64_t kk = k0 + k;
            const int64_t kx = kk % src->KW, ky = (kk / src->KW) % src->KH, ic = kk / (src->KW * src->KH);
            float * dst = p + k * NR;
            const int64_t iy = oy + ky * src->d - src->pad;
            if (iy < 0 || iy >= src->H) {
                for (int h = 0; h < NV; h++) {
                    v_store(dst + h * VL, v_zero());
                }
                continue;
            }
            const int64_t ix0 = ox0 + kx * src->d - src->pad; // x column of lane 0
            const float * row = src->x + ic * HW + iy * src->W;
            if (kx == 0) { // the lines the panels after the next will read: the loads below miss otherwise
                for (int64_t o = 0; o < NR; o += 16) {
                    v_prefetch(row + ix0 + 2 * NR + o);
                }
            }
            // lanes j < w with 0 <= ix0 + j < W
            const int64_t lo = ix0 < 0 ? -ix0 : 0;
            const int64_t hi = src->W - ix0 < w ? src->W - ix0 : w;
            for (int h = 0; h < NV; h++) {
                v_store(dst + h * VL, v_loadu_m(row + ix0 + h * VL, m_range(lo - h * VL, hi - h * VL)));
            }
        }
        return;
    }
    // The general case: per-lane top-left input coordinates.
    int32_t iy0[NR], ix0[NR];
    for (int64_t j = 0; j < NR; j++) {
        const int64_t n = n0 + (j < w ? j : 0);
        iy0[j] = (int32_t) ((n / src->OW) * src->s - src->pad);
        ix0[j] = (int32_t) ((n % src->OW) * src->s - src->pad);
    }
    vi vy[NV], vx[NV];
    vm wm[NV];
    for (int h = 0; h < NV; h++) {
        vy[h] = vi_loadu(iy0 + h * VL);
        vx[h] = vi_loadu(ix0 + h * VL);
        wm[h] = m_first(w - h * VL);
    }
    const vi vW = vi_set1((int32_t) src->W);
    for (int64_t k = 0; k < kc; k++) {
        const int64_t kk = k0 + k;
        const int64_t kx = kk % src->KW, ky = (kk / src->KW) % src->KH, ic = kk / (src->KW * src->KH);
        const float * plane = src->x + ic * HW;
        for (int h = 0; h < NV; h++) {
            const vi iy = vi_add(vy[h], vi_set1((int32_t) (ky * src->d)));
            const vi ix = vi_add(vx[h], vi_set1((int32_t) (kx * src->d)));
            const vm m = m_and(wm[h], m_and(m_inside(iy, (int32_t) src->H), m_inside(ix, (int32_t) src->W)));
            v_store(p + k * NR + h * VL, v_gather_m(plane, vi_add(vi_mul(iy, vW), ix), m));
        }
    }
}

// pack_b_panels packs B rows [n0, n0+nc) over k in [k0, k0+kc) into NR-wide
// k-major panels; columns past nc are zero.
static void pack_b_panels(const struct bsrc * src, int64_t n0, int64_t nc, int64_t k0, int64_t kc, float * out) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        const int64_t w = nc - j0 < NR ? nc - j0 : NR;
        float * p = out + j0 * kc;
        if (src->x != NULL) {
            pack_conv_panel(src, n0 + j0, w, k0, kc, p);
            continue;
        }
        if (w < NR) {
            memset(p, 0, sizeof(float) * kc * NR);
        }
        const float * rows = src->b + (n0 + j0) * src->ldb + k0; // the w rows' segments, ld apart
        int64_t ld = src->ldb;
        if (src->q != NULL) { // dequantize the rows' segments first
            const struct ggml_type_traits * tt = ggml_get_type_traits(src->type);
            const size_t seg = ggml_row_size(src->type, k0); // k0 is a multiple of the block size
            for (int64_t j = 0; j < w; j++) {
                tt->to_float(src->q + (n0 + j0 + j) * src->row_bytes + seg, src->deq + j * KCQ, kc);
            }
            rows = src->deq;
            ld = KCQ;
        }
        int64_t k = 0;
        if (w == NR) { // VL×VL blocks transposed in registers
            for (; k + VL <= kc; k += VL) {
                for (int h = 0; h < NV; h++) {
                    v_transpose(rows + h * VL * ld + k, ld, p + k * NR + h * VL, NR);
                }
            }
        }
        for (int64_t j = 0; j < w; j++) {
            for (int64_t kk = k; kk < kc; kk++) {
                p[kk * NR + j] = rows[j * ld + kk];
            }
        }
    }
}

// pack_a_panels packs A rows [m0, m0+mc) over k in [k0, k0+kc) into mr-tall
// k-major panels; rows past mc are zero. (Inlined for each tile height, so
// that the stores' stride is a constant.)
static inline __attribute__((always_inline)) void pack_a_rows(const float * a, int64_t lda, int64_t m0, int64_t mc,
                                                              int64_t k0, int64_t kc, const int mr, float * out) {
    // Groups of up to VL rows are transposed VL values of k at a time: copied into blk (the rows past
    // the group zero), transposed in registers into tr, stored as masked rows of the panel.
    float blk[VL * VL] __attribute__((aligned(64))), tr[VL * VL] __attribute__((aligned(64)));
    for (int64_t i0 = 0; i0 < mc; i0 += mr) {
        const int64_t h = mc - i0 < mr ? mc - i0 : mr;
        float * p = out + i0 * kc;
        if (h < mr) {
            memset(p, 0, sizeof(float) * kc * mr);
        }
        for (int64_t g0 = 0; g0 < h; g0 += VL) {
            const int64_t g = h - g0 < VL ? h - g0 : VL;
            const vm gm = m_first(g);
            const float * src = a + (m0 + i0 + g0) * lda + k0;
            for (int64_t r = g; r < VL; r++) {
                v_store(blk + r * VL, v_zero());
            }
            int64_t k = 0;
            for (; k + VL <= kc; k += VL) {
                for (int64_t r = 0; r < g; r++) {
                    v_store(blk + r * VL, v_loadu(src + r * lda + k));
                }
                v_transpose(blk, VL, tr, VL);
                for (int kk = 0; kk < VL; kk++) {
                    v_storeu_m(p + (k + kk) * mr + g0, gm, v_load(tr + kk * VL));
                }
            }
            for (; k < kc; k++) {
                for (int64_t r = 0; r < g; r++) {
                    p[k * mr + g0 + r] = src[r * lda + k];
                }
            }
        }
    }
}

static void pack_a_panels(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int mr,
                          float * out) {
    if (mr == MR_BIG) {
        pack_a_rows(a, lda, m0, mc, k0, kc, MR_BIG, out);
    } else {
        pack_a_rows(a, lda, m0, mc, k0, kc, MR_SMALL, out);
    }
}

// ---- the register tiles ----

// A tile kernel computes a ROWS×NR tile over kc from packed panels of A
// (ap[k·ROWS + i]) and B (bp[k·NR + j]). It stores (or adds to) the first mr
// rows and the first ncols columns of c; e, when not NULL, is applied to the
// finished values (row0, col0: the tile's position in the whole product,
// for the bias). The bf16 tiles take panels of pairs of k (see kernels_bf16.h)
// and kc counts pairs.
typedef void (*tile_fn)(int64_t kc, const void * ap, const void * bp, float * c, int64_t ldc, int64_t mr,
                        int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0);

// TILE_PREFETCH asks for the lines of the tile's part of c at the start of a
// tile kernel: c's rows lie a whole row of the product apart, so the hardware
// prefetcher does not see them coming, and with many rows they have left the
// caches since the last depth block; the k loop hides the wait.
#define TILE_PREFETCH(ROWS)                                                                                  \
    _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; i++) {                                                \
        if (i < mr) {                                                                                        \
            v_prefetch(c + i * ldc);                                                                         \
            v_prefetch(c + i * ldc + NR - 1);                                                                \
        }                                                                                                    \
    }

// TILE_STORE stores the accumulators acc[ROWS][NV] of a tile kernel.
#define TILE_STORE(ROWS)                                                                                     \
    vm cm[NV];                                                                                               \
    vf bias[NV];                                                                                             \
    _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) {                                                   \
        cm[h] = m_first(ncols - h * VL);                                                                     \
        bias[h] = e != NULL && e->bias != NULL && !e->per_row ? v_loadu_m(e->bias + col0 + h * VL, cm[h])    \
                                                              : v_zero();                                    \
    }                                                                                                        \
    _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; i++) {                                                \
        if (i < mr) {                                                                                        \
            float * cr = c + i * ldc;                                                                        \
            _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) {                                           \
                vf v = acc[i][h];                                                                            \
                if (accumulate) {                                                                            \
                    v = v_add(v, v_loadu_m(cr + h * VL, cm[h]));                                             \
                }                                                                                            \
                if (e != NULL) {                                                                             \
                    v = v_add(v, e->bias != NULL && e->per_row ? v_set1(e->bias[row0 + i]) : bias[h]);       \
                    v = activate(v, e->act);                                                                 \
                }                                                                                            \
                v_storeu_m(cr + h * VL, cm[h], v);                                                           \
            }                                                                                                \
        }                                                                                                    \
    }

#define DEFINE_TILE(NAME, ROWS)                                                                              \
static void NAME(int64_t kc, const void * apv, const void * bpv, float * c, int64_t ldc, int64_t mr,         \
                 int64_t ncols, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {          \
    const float * ap = apv, * bp = bpv;                                                                      \
    TILE_PREFETCH(ROWS)                                                                                      \
    vf acc[ROWS][NV];                                                                                        \
    _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; i++) {                                                \
        _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) acc[i][h] = v_zero();                           \
    }                                                                                                        \
    for (int64_t k = 0; k < kc; k++) {                                                                       \
        vf b[NV];                                                                                            \
        _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) b[h] = v_load(bp + h * VL);                     \
        _Pragma("GCC unroll 16") for (int i = 0; i < ROWS; i++) {                                            \
            const vf a = v_set1(ap[i]);                                                                      \
            _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) acc[i][h] = v_fma(a, b[h], acc[i][h]);      \
        }                                                                                                    \
        ap += ROWS;                                                                                          \
        bp += NR;                                                                                            \
    }                                                                                                        \
    TILE_STORE(ROWS)                                                                                         \
}

DEFINE_TILE(tile_big, MR_BIG)
DEFINE_TILE(tile_small, MR_SMALL)

// tile_for is the kernel of mr rows (MR_BIG or MR_SMALL).
static tile_fn tile_for(int mr) { return mr == MR_BIG ? tile_big : tile_small; }

#if defined(ISA_INT8) || defined(ISA_INT8C_AVX2)
// i8c_row_amax is max|x| over the K values of a row (the per-channel int8
// scales of kernels_int8c*.h).
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
#endif

#if defined(ISA_BF16)
#include "kernels_bf16.h"
#endif
#if defined(ISA_INT8)
#include "kernels_int8.h"
#include "kernels_int8c.h"
#elif defined(ISA_INT8C_AVX2)
#include "kernels_int8c_avx2.h"
#endif

#if defined(ISA_INT8C)
// i8c_quantize_col quantizes one weight row x of K values per channel into
// column j of the NR-wide panel p (i8c_b_words(K)·NR words): the quads of
// q_w, the scale and the excess 128·Σq_w, in both int8c headers' layout.
static void i8c_quantize_col(const float * x, int64_t K, int j, int32_t * p) {
    const int64_t kq = i8c_quads(K);
    const float d = i8c_row_amax(x, K) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int64_t q = 0; q < kq; q++) {
        uint8_t bytes[4] = { 0, 0, 0, 0 };
        for (int i = 0; i < 4 && 4 * q + i < K; i++) {
            float t = nearbyintf(x[4 * q + i] * id); // ties to even, as vcvtps2dq
            t = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
            const int8_t v = (int8_t) t;
            sum += v;
            bytes[i] = (uint8_t) v;
        }
        int32_t w;
        memcpy(&w, bytes, 4);
        p[q * NR + j] = w;
    }
    ((float *) p)[kq * NR + j] = d;
    p[(kq + 1) * NR + j] = 128 * sum;
}
#endif

// choose_mr picks the tile height for m rows: the small tile when the big
// one would compute more padding rows than its speed advantage is worth
// (e.g. 32 output channels: three 14-row tiles compute 42 rows, four 8-row
// tiles exactly 32).
static int choose_mr(int64_t m) {
    const int64_t big = (m + MR_BIG - 1) / MR_BIG * MR_BIG, small = (m + MR_SMALL - 1) / MR_SMALL * MR_SMALL;
    return (double) big * SMALL_TILE_SPEED < (double) small ? MR_BIG : MR_SMALL;
}

// ---- the product ----

// gemm_scratch is a thread's packing buffers for gemm and the abort flag
// its node carries (da3_abort_flag), polled once per block of rows.
struct gemm_scratch { float * pa, * pb; void * pah, * pbh; const int * abort; };

// b_panels is a block of B as the tile reads it: kt steps, sa words per row
// of A's panels and sb per column of B's.
struct b_panels { const void * b; int64_t kt, sa, sb; };

// gemm_mode is one precision of gemm: the depth of its blocks, its tile for
// mr rows, how it packs a block of B (columns [jc, jc+nc), depths
// [pc, pc+kc)) or finds it packed at load, and how it packs a block of A
// (rows [ic, ic+mc)). gemm_mode_for chooses one per product.
struct gemm_mode {
    int64_t (*depth)(const struct bsrc * b);
    tile_fn (*tile)(int mr);
    struct b_panels (*pack_b)(const struct bsrc * b, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                              const struct gemm_scratch * sc);
    const void * (*pack_a)(const float * a, int64_t lda, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                           const struct gemm_scratch * sc);
};

// f32: matrices take 256-deep blocks (each block is a pass over C, and with
// many rows C leaves the caches: four views, 17 % faster than 128),
// convolutions KC (their panels packed from the image).
static int64_t f32_depth(const struct bsrc * b) { return b->x != NULL ? KC : KCQ; }

static struct b_panels f32_pack_b(const struct bsrc * b, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                                  const struct gemm_scratch * sc) {
    if (b->pre != NULL) { // packed once at load: the block's panels are read in place
        return (struct b_panels){ b->pre + jc * b->prew + pc * NR, kc, kc, b->prew };
    }
    pack_b_panels(b, jc, nc, pc, kc, sc->pb);
    return (struct b_panels){ sc->pb, kc, kc, kc };
}

static const void * f32_pack_a(const float * a, int64_t lda, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                               const struct gemm_scratch * sc) {
    pack_a_panels(a, lda, ic, mc, pc, kc, mr, sc->pa);
    return sc->pa;
}

static const struct gemm_mode gemm_f32 = { f32_depth, tile_for, f32_pack_b, f32_pack_a };

#if defined(ISA_BF16)
// bf16: pairs of k halve the bytes of a panel, so f32 matrices take twice
// the depth for the same panel size and C (which leaves the caches with
// many rows) is read and written half as often.
static int64_t bf16_depth(const struct bsrc * b) { return b->x == NULL && b->q == NULL ? KCB : KCQ; }

static struct b_panels bf16_pack_b(const struct bsrc * b, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                                   const struct gemm_scratch * sc) {
    const int64_t kt = (kc + 1) / 2;
    if (b->pre != NULL) { // packed once at load, in pairs of k
        return (struct b_panels){ b->pre + jc * b->prew + pc / 2 * NR, kt, kt, b->prew };
    }
    if (b->x == NULL && b->q == NULL) {
        pack_b_pairs(b, jc, nc, pc, kc, sc->pb, sc->pbh);
    } else {
        pack_b_panels(b, jc, nc, pc, kc, sc->pb);
        pairs_panels(sc->pb, nc, NR, kc, sc->pbh);
    }
    return (struct b_panels){ sc->pbh, kt, kt, kt };
}

static const void * bf16_pack_a(const float * a, int64_t lda, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                                const struct gemm_scratch * sc) {
    pack_a_pairs(a, lda, ic, mc, pc, kc, mr, sc->pa, sc->pah);
    return sc->pah;
}

static const struct gemm_mode gemm_bf16 = { bf16_depth, tile_bf16_for, bf16_pack_b, bf16_pack_a };
#endif

#if defined(ISA_INT8)
// int8: q8_0 weights in KCQ-deep blocks, the activations quantized per
// block of A.
static int64_t int8_depth(const struct bsrc * b) { (void) b; return KCQ; }

static tile_fn int8_tile(int mr) { (void) mr; return tile_int8; }

static struct b_panels int8_pack_b(const struct bsrc * b, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                                   const struct gemm_scratch * sc) {
    const int64_t sa = panel_words(kc, MR_INT8, 0) / MR_INT8;
    if (b->pre != NULL) { // q8 panels packed at load: 5/16 words per k and column (pc a multiple of KCQ)
        return (struct b_panels){ b->pre + jc * b->prew + pc / 16 * 5 * NR, kc, sa, b->prew };
    }
    pack_b_q8(b->q, b->row_bytes, jc, nc, pc, kc, sc->pbh);
    return (struct b_panels){ sc->pbh, kc, sa, panel_words(kc, NR, 1) / NR };
}

static const void * int8_pack_a(const float * a, int64_t lda, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                                const struct gemm_scratch * sc) {
    (void) mr;
    pack_a_q8(a, lda, ic, mc, pc, kc, sc->pah);
    return sc->pah;
}

static const struct gemm_mode gemm_int8 = { int8_depth, int8_tile, int8_pack_b, int8_pack_a };
#endif

#if defined(ISA_INT8C)
// int8c: per-channel int8 weights packed at load, the whole depth in one
// block (its int32 sums are not split); A quantized per row into the
// buffer da3_gemm sized for it (sc->pah).
static int64_t int8c_depth(const struct bsrc * b) { (void) b; return (int64_t) 1 << 40; }

static tile_fn int8c_tile(int mr) { (void) mr; return i8c_tile(); }

static struct b_panels int8c_pack_b(const struct bsrc * b, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                                    const struct gemm_scratch * sc) {
    (void) nc; (void) pc; (void) sc;
    return (struct b_panels){ b->pre + jc * b->prew, i8c_quads(kc), i8c_a_words(kc), b->prew };
}

static const void * int8c_pack_a(const float * a, int64_t lda, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int mr,
                                 const struct gemm_scratch * sc) {
    (void) mr; (void) pc;
    pack_a_i8c(a, lda, ic, mc, kc, sc->pah);
    return sc->pah;
}

static const struct gemm_mode gemm_int8c = { int8c_depth, int8c_tile, int8c_pack_b, int8c_pack_a };
#endif

// gemm_modes are the precisions this variant computes, by DA3_PREC_*
// (NULL: not in this variant, which then computes f32).
static const struct gemm_mode * const gemm_modes[DA3_NPREC] = {
    [DA3_PREC_F32] = &gemm_f32,
#if defined(ISA_BF16)
    [DA3_PREC_BF16] = &gemm_bf16,
#endif
#if defined(ISA_INT8)
    [DA3_PREC_INT8] = &gemm_int8,
#endif
#if defined(ISA_INT8C)
    [DA3_PREC_INT8C] = &gemm_int8c,
#endif
};

// gemm_mode_for is the mode of a product of B in precision prec: int8 only
// for q8_0 weights (per call, or packed at load: for int8 the packing is
// always of q8_0 rows), int8c only for weights packed at load, f32 for a
// precision the variant lacks.
static const struct gemm_mode * gemm_mode_for(const struct bsrc * b, int prec) {
    const int q8 = (b->q != NULL && b->type == GGML_TYPE_Q8_0) || b->pre != NULL;
    if (prec < 0 || prec >= DA3_NPREC || gemm_modes[prec] == NULL || (prec == DA3_PREC_INT8 && !q8) ||
        (prec == DA3_PREC_INT8C && b->pre == NULL)) {
        return &gemm_f32;
    }
    return gemm_modes[prec];
}

// gemm computes C[m][n] = Σ_k A[m][k]·B[n][k] for m in [m0, m1), n in
// [n0, n1) with mr-tall tiles, then applies the epilogue ep (may be NULL).
// sc holds the packing buffers (gemm_scratch). prec is the precision
// (gemm_mode_for): DA3_PREC_BF16 rounds the packed panels to bf16 and
// multiplies them with bf16 products summed in f32, DA3_PREC_INT8 takes
// q8_0 weights and quantized activations (where the variant has them).
static void gemm(const float * a, int64_t lda, const struct bsrc * b, float * c, int64_t ldc, int64_t K,
                 int64_t m0, int64_t m1, int64_t n0, int64_t n1, int mr, const struct epi * ep,
                 const struct gemm_scratch * sc, int prec) {
    const struct gemm_mode * md = gemm_mode_for(b, prec);
    const int64_t kb = md->depth(b);
    const tile_fn tile = md->tile(mr);
    const int64_t mcb = MC / mr * mr; // rows per packed block: whole tiles
    // Weights packed at load need no packing buffer: one column block, so A is packed once per block of
    // rows and depth instead of once per NC columns.
    const int64_t ncb = b->pre != NULL ? n1 - n0 : NC;
    for (int64_t jc = n0; jc < n1; jc += ncb) {
        const int64_t nc = n1 - jc < ncb ? n1 - jc : ncb;
        for (int64_t pc = 0; pc < K; pc += kb) {
            const int64_t kc = K - pc < kb ? K - pc : kb;
            const struct epi * e = pc + kc == K ? ep : NULL;
            const struct b_panels pb = md->pack_b(b, jc, nc, pc, kc, sc);
            for (int64_t ic = m0; ic < m1; ic += mcb) {
                if (da3_aborted(sc->abort)) { // the graph is being stopped: ggml returns ABORTED after the node
                    return;
                }
                const int64_t mc = m1 - ic < mcb ? m1 - ic : mcb;
                const uint32_t * pa = md->pack_a(a, lda, ic, mc, pc, kc, mr, sc);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        const int64_t rows = mc - ir < mr ? mc - ir : mr;
                        tile(pb.kt, pa + ir * pb.sa, (const uint32_t *) pb.b + jr * pb.sb,
                             c + (ic + ir) * ldc + jc + jr, ldc, rows, nc - jr, pc > 0, e, ic + ir, jc + jr);
                    }
                }
            }
        }
    }
}

// get_scratch gives the calling thread's packing buffers for gemm; it
// returns 0 when out of memory.
static int get_scratch(struct gemm_scratch * sc, int prec) {
    const size_t kd = prec == DA3_PREC_BF16 ? KCB : KCQ; // the deepest block gemm packs
    sc->abort = NULL;
    sc->pa = da3_scratch(DA3_BUF_A, kd * MC);
    sc->pb = da3_scratch(DA3_BUF_B, kd * NC);
    sc->pah = sc->pbh = NULL;
    if (prec != DA3_PREC_F32) { // pairs of bf16 (32 bits per two k), or q8 panels (fewer words)
        sc->pah = da3_scratch(DA3_BUF_AH, kd / 2 * MC);
        sc->pbh = da3_scratch(DA3_BUF_BH, kd / 2 * NC);
        if (sc->pah == NULL || sc->pbh == NULL) {
            return 0;
        }
    }
    return sc->pa != NULL && sc->pb != NULL;
}

// split gives thread ith its share of an M×N product: NR-wide column
// stripes when there are enough of them (and by_rows is 0), else mr-tall
// row blocks. It
// returns 0 when the share is empty.
static int split(int64_t M, int64_t N, int mr, int ith, int nth, int by_rows, int64_t * m0, int64_t * m1, int64_t * n0,
                 int64_t * n1) {
    const int64_t stripes = (N + NR - 1) / NR;
    *m0 = 0; *m1 = M; *n0 = 0; *n1 = N;
    if ((stripes >= 4 * nth && !by_rows) || M < (int64_t) nth * mr) {
        const int64_t per = (stripes + nth - 1) / nth;
        *n0 = per * ith * NR;
        *n1 = *n0 + per * NR < N ? *n0 + per * NR : N;
    } else {
        const int64_t per = ((M + nth - 1) / nth + mr - 1) / mr * mr;
        *m0 = per * ith;
        *m1 = *m0 + per < M ? *m0 + per : M;
    }
    return *m0 < *m1 && *n0 < *n1;
}

// ---- ops ----

// pack_weight_words is the size in 32-bit words of an F32 weight [K, N]
// packed for this variant in precision prec (da3_pack_weight), 0 when N is
// not a multiple of NR.
static int64_t pack_weight_words(int64_t K, int64_t N, int prec) {
    if (prec == DA3_PREC_INT8C) { // per channel: the quads of the whole depth, a scale (and an excess: i8c_b_words)
#if defined(ISA_INT8C)
        return N % NR != 0 || K > I8C_MAX_K ? 0 : N * i8c_b_words(K);
#else
        return 0;
#endif
    }
    if (prec == DA3_PREC_INT8) { // q8_0 rows: per KCQ block of depth, the panels of pack_b_q8
#if defined(ISA_INT8)
        return N % NR != 0 || K % QK != 0 ? 0 : N * (K / 16 * 5);
#else
        return 0;
#endif
    }
    return N % NR != 0 ? 0 : N * (prec == DA3_PREC_BF16 ? (K + 1) / 2 : K);
}

// da3_pack_weight packs the weight w [K, N] (N rows of K) once, as the GEMM
// packs it per call: an F32 weight with the whole depth in one panel per NR
// columns, [N/NR][K][NR] floats, or in bf16 precision [N/NR][⌈K/2⌉][NR]
// pairs (of an F32 or F16 weight); in int8 precision w holds q8_0 rows and each NR columns take, per
// KCQ-deep block of k, the panel pack_b_q8 makes of it ([N/NR][5K/16][NR]
// words in all). The same values as per-call packing. It returns the words
// written (0: N is not a multiple of NR, or the precision is not this
// variant's, or out of memory).
int ISA_FN(da3_nr)(void) { return NR; }

#if defined(ISA_INT8C)
// pack_weight_i8c quantizes the rows of w (F32, F16, BF16 or Q8_0; the
// others widened to f32 first, exactly) per channel into the panels of
// tile_i8c; 0 for another type or out of memory.
static ISA_INT8C int pack_weight_i8c(int type, const void * wv, int64_t K, int64_t N, int32_t * out) {
    if ((type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16 && type != GGML_TYPE_Q8_0) ||
        K % ggml_blck_size((enum ggml_type) type) != 0) {
        return 0;
    }
    float * row = type == GGML_TYPE_F32 ? NULL : malloc(sizeof(float) * K);
    if (type != GGML_TYPE_F32 && row == NULL) {
        return 0;
    }
    const size_t row_bytes = ggml_row_size((enum ggml_type) type, K);
    const struct ggml_type_traits * tt = ggml_get_type_traits((enum ggml_type) type);
    const int64_t words = i8c_b_words(K) * NR;
    for (int64_t n = 0; n < N; n++) {
        const float * x = (const float *) ((const char *) wv + n * row_bytes);
        if (row != NULL) {
            tt->to_float((const char *) wv + n * row_bytes, row, K);
            x = row;
        }
        i8c_quantize_col(x, K, (int) (n % NR), out + n / NR * words);
    }
    free(row);
    return 1;
}
#endif

int64_t ISA_FN(da3_pack_weight_words)(int prec, int64_t K, int64_t N) {
    return pack_weight_words(K, N, prec);
}

int64_t ISA_FN(da3_pack_weight)(int prec, int type, const void * wv, int64_t K, int64_t N, uint32_t * out) {
    const int64_t words = pack_weight_words(K, N, prec);
    if (words == 0 || K < 1 || (type != GGML_TYPE_F32 && !(type == GGML_TYPE_F16 && prec == DA3_PREC_BF16) &&
                                !(type == GGML_TYPE_Q8_0 && prec == DA3_PREC_INT8) && prec != DA3_PREC_INT8C)) {
        return 0;
    }
#if defined(ISA_INT8C)
    if (prec == DA3_PREC_INT8C) {
        return pack_weight_i8c(type, wv, K, N, (int32_t *) out) ? words : 0;
    }
#endif
#if defined(ISA_INT8)
    if (prec == DA3_PREC_INT8) {
        const size_t row_bytes = (size_t) (K / QK) * sizeof(struct q8_block);
        for (int64_t j0 = 0; j0 < N; j0 += NR) {
            for (int64_t pc = 0; pc < K; pc += KCQ) {
                const int64_t kc = K - pc < KCQ ? K - pc : KCQ;
                pack_b_q8(wv, row_bytes, j0, NR, pc, kc, (int32_t *) out + j0 * (K / 16 * 5) + pc / 16 * 5 * NR);
            }
        }
        return words;
    }
#endif
    const float * w = wv;
    const struct bsrc b = { .b = w, .ldb = K };
#if defined(ISA_BF16)
    if (prec == DA3_PREC_BF16) {
        float * tmp = malloc(sizeof(float) * NR * K * (type == GGML_TYPE_F16 ? 2 : 1));
        if (tmp == NULL) {
            return 0;
        }
        if (type == GGML_TYPE_F16) { // each panel's rows widened to f32 (exact), then as an F32 weight
            float * rows = tmp + NR * K;
            const struct bsrc bp = { .b = rows, .ldb = K };
            for (int64_t j0 = 0; j0 < N; j0 += NR) {
                ggml_fp16_to_fp32_row((const ggml_fp16_t *) wv + j0 * K, rows, NR * K);
                pack_b_pairs(&bp, 0, NR, 0, K, tmp, out + j0 * ((K + 1) / 2));
            }
        } else {
            pack_b_pairs(&b, 0, N, 0, K, tmp, out);
        }
        free(tmp);
        return words;
    }
#endif
    if (prec == DA3_PREC_BF16) {
        return 0;
    }
    pack_b_panels(&b, 0, N, 0, K, (float *) out);
    return words;
}

// da3_op_gemm: dst = mul_mat(src0, src1) for contiguous F32 src0 [K, N, B2,
// B3] and src1 [K, M, B2, B3] (one product per batch, no broadcasting); dst
// [N, M, B2, B3]. A 2-D src0 may also be f16 or block-quantized (blocks
// dividing 256): its rows are dequantized as they are packed, so the product
// runs at the F32 rate while the weights stay small. An optional src2 [N]
// is added to every row, then the activation in userdata (DA3_ACT_*)
// applied. The caller (dispatch.c) has checked the operands and that this
// variant computes the precision in userdata on this CPU.
//
// With the packed flag (userdata bit 24) src0 is instead a weight packed once
// by da3_pack_weight in the precision of userdata: [NR·W, N/NR] F32 words
// (W = K, ⌈K/2⌉ bf16 pairs, or 5K/16 words of q8 panels for int8), 64-byte
// aligned, with K x's depth and N dst's width; its panels are read in place.
void ISA_FN(da3_gemm)(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * w = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const struct ggml_tensor * bias = dst->src[2];
    const int packed = (int) (((intptr_t) userdata >> 24) & 1);
    const int64_t K = packed ? x->ne[0] : w->ne[0], N = packed ? dst->ne[0] : w->ne[1];
    const int64_t M = packed || w->ne[2] * w->ne[3] == 1 ? ggml_nrows(x) : x->ne[1];
    const int64_t batches = packed ? 1 : w->ne[2] * w->ne[3];
    const int act = (int) ((intptr_t) userdata & 0xff);
    int prec = (int) (((intptr_t) userdata >> 8) & 0xff);
    if (packed) { // prec is how the weight was packed: f32, bf16, or int8 (q8_0 rows)
        if (ggml_nelements(w) != pack_weight_words(K, N, prec) || w->ne[1] * NR != N || ((uintptr_t) w->data & 63) != 0) {
            da3_fault(DA3_FAULT_OPERANDS);
            return;
        }
    }
    const struct epi ep = { .bias = bias != NULL ? (const float *) bias->data : NULL, .act = act };
    const struct epi * e = ep.bias != NULL || ep.act != DA3_ACT_NONE ? &ep : NULL;
    int mr = choose_mr(M);
#if defined(ISA_INT8)
    mr = prec == DA3_PREC_INT8 && (w->type == GGML_TYPE_Q8_0 || packed) ? MR_INT8 : mr;
#endif
#if defined(ISA_INT8C)
    mr = prec == DA3_PREC_INT8C && packed ? MR_I8C : mr;
#endif
    int64_t m0, m1, n0, n1;
    // Weights packed at load are read in place, so threads sharing the rows read all of them instead of
    // each packing all of A: for bf16 and int8, whose packing converts A, rows, where a depth block of
    // all the columns stays in L2 (N <= NC: a ViT's output projections; -7 % bf16, -13 % int8; wider
    // ones stream it from L3 for every block of rows and lose as much). int8c takes rows whatever N:
    // its weights are a quarter of f32's bytes, and quantizing A (a row's maximum, then its bytes) costs
    // more beside its products than converting it to bf16 does.
    const int by_rows = packed && prec != DA3_PREC_F32 && M >= (int64_t) nth * MC && (N <= NC || prec == DA3_PREC_INT8C);
    if (!split(M, N, mr, ith, nth, by_rows, &m0, &m1, &n0, &n1)) {
        return;
    }
    struct gemm_scratch sc;
    float * deq = w->type != GGML_TYPE_F32 ? da3_scratch(DA3_BUF_DEQ, (size_t) NR * KCQ) : NULL;
    if (!get_scratch(&sc, prec) || (w->type != GGML_TYPE_F32 && deq == NULL)) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    sc.abort = da3_abort_flag(dst);
#if defined(ISA_INT8C)
    if (packed && prec == DA3_PREC_INT8C) { // A's panels hold a block of rows over the whole depth
        sc.pah = da3_scratch(DA3_BUF_AH, (size_t) (MC / MR_I8C * MR_I8C) * i8c_a_words(K));
        if (sc.pah == NULL) {
            da3_fault(DA3_FAULT_NOMEM);
            return;
        }
    }
#endif
    if (packed) {
        const struct bsrc b = { .pre = (const uint32_t *) w->data, .prew = w->ne[0] / NR };
        gemm((const float *) x->data, K, &b, (float *) dst->data, N, K, m0, m1, n0, n1, mr, e, &sc, prec);
        return;
    }
    if (w->type != GGML_TYPE_F32) { // a 2-D quantized or f16 matrix, dequantized while packing
        const struct bsrc b = { .q = (const char *) w->data, .row_bytes = w->nb[1], .type = w->type, .deq = deq };
        gemm((const float *) x->data, K, &b, (float *) dst->data, N, K, m0, m1, n0, n1, mr, e, &sc, prec);
        return;
    }
    for (int64_t i = 0; i < batches; i++) {
        const struct bsrc b = { .b = (const float *) w->data + i * K * N, .ldb = K };
        gemm((const float *) x->data + i * K * M, K, &b, (float *) dst->data + i * N * M, N, K, m0, m1, n0, n1, mr, e,
             &sc, prec);
    }
}

// da3_op_conv2d: a 2-D convolution as an implicit-im2col GEMM. src0 is the
// F32 kernel [KW, KH, IC, OC] and src1 the F32 input [W, H, IC, N], both
// contiguous; dst [OW, OH, OC, N]; an optional src2 [OC] is the bias.
// userdata packs stride | pad<<8 | dil<<16 | act<<24 | prec<<26 (custom.h).
void ISA_FN(da3_conv2d)(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t prm = (intptr_t) userdata;
    const struct ggml_tensor * w = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const struct ggml_tensor * bias = dst->src[2];
    const int64_t KW = w->ne[0], KH = w->ne[1], IC = w->ne[2], OC = w->ne[3];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t K = KW * KH * IC, P = OW * OH;
    const struct epi ep = { .bias = bias != NULL ? (const float *) bias->data : NULL, .per_row = 1, .act = (int) ((prm >> 24) & 0x3) };
    const struct epi * e = ep.bias != NULL || ep.act != DA3_ACT_NONE ? &ep : NULL;
    const int prec = (int) ((prm >> 26) & 0x3);
    const int mr = choose_mr(OC);
    int64_t m0, m1, n0, n1;
    if (!split(OC, P, mr, ith, nth, 0, &m0, &m1, &n0, &n1)) {
        return;
    }
    struct gemm_scratch sc;
    if (!get_scratch(&sc, prec)) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    sc.abort = da3_abort_flag(dst);
    for (int64_t n = 0; n < x->ne[3]; n++) {
        const struct bsrc b = {
            .x = (const float *) x->data + n * x->ne[0] * x->ne[1] * x->ne[2],
            .W = x->ne[0], .H = x->ne[1], .KW = KW, .KH = KH, .OW = OW,
            .s = prm & 0xff, .pad = (prm >> 8) & 0xff, .d = (prm >> 16) & 0xff,
        };
        gemm((const float *) w->data, K, &b, (float *) dst->data + n * OC * P, P, K, m0, m1, n0, n1, mr, e, &sc, prec);
    }
}

// ---- Winograd convolution: F(2×2, 3×3) and F(4×4, 3×3) ----
//
// A 3×3 stride-1 convolution computes each T×T block of outputs from an
// (T+2)×(T+2) block of input with (T+2)² products per (input, output
// channel) pair instead of 9·T² (Lavin & Gray): 16 instead of 36 for T = 2,
// 36 instead of 144 for T = 4. With
//
//	F(2×2, 3×3), points 0, ±1, ∞:
//	Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]
//	G  = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1]
//	Aᵀ = [1 1 1 0; 0 1 −1 −1]
//
//	F(4×4, 3×3), points 0, ±1, ±2, ∞:
//	Bᵀ = [4 0 −5 0 1 0; 0 −4 −4 1 1 0; 0 4 −4 −1 1 0; 0 −2 −1 2 1 0; 0 2 −1 −2 1 0; 0 4 0 −5 0 1]
//	G  = [¼ 0 0; −⅙ −⅙ −⅙; −⅙ ⅙ −⅙; 1/24 1/12 ⅙; 1/24 −1/12 ⅙; 0 0 1]
//	Aᵀ = [1 1 1 1 1 0; 0 1 −1 2 −2 0; 0 1 1 4 4 0; 0 1 −1 8 −8 1]
//
// Y = Aᵀ [Σ_ic (G g Gᵀ) ⊙ (Bᵀ d B)] A for kernel g and input block d. The
// F(2×2) transforms only add, subtract and halve; F(4×4)'s multiply by
// small integers too, and its kernel transform (computed in double, rounded
// once) is inexact, so its rounding error is larger (see TestWinograd's
// bound). The Σ_ic is, for each position ξ, a matrix product
// U_ξ [OC×IC] · V_ξ [IC×tiles] computed by the GEMM's tiles.
//
// The kernel transform is its own graph node (da3_wino_kernel: packed A
// panels U_ξ, once per graph and weight, the threads splitting the output
// channels). The convolution gives each thread an equal run of the tiles
// in row-major order; it takes them in blocks of up to WB (a block may span
// tile rows, so narrow maps fill whole panels), transforms their input into
// packed B panels V_ξ (NR tiles a panel, the columns of VL blocks from
// loads and deinterleaves, lanes on different tile rows blended),
// multiplies, and transforms the products M_ξ [OC×WB] back into T×T outputs
// with the bias and activation, stored as interleaved vectors.

// Tiles per block: one panel. The block's V_ξ and M_ξ then stay in L2 (128 channels: 0.6 MB each; four
// panels' 2.4 MB went through L3 and back, 7-12 % slower on the DPT head's larger maps).
#define WB NR

// wino_stride is the distance between the positions' matrices in a scratch
// buffer of n values each: n and one cache line more, so that the rows one
// tile transform reads or writes (a power-of-two apart without the line:
// 32 or 64 KiB) do not all fall into one set of the L1 cache.
static inline int64_t wino_stride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

// v_load_deint loads row[x0 + i] for i in [0, 2·VL) (zero where x0 + i is
// outside [0, n)) and returns the even i in *even, the odd in *odd.
static inline void v_load_deint(const float * row, int64_t x0, int64_t n, vf * even, vf * odd) {
    const int64_t lo = -x0, hi = n - x0; // valid i: lo <= i < hi
    v_deint(v_loadu_m(row + x0, m_range(lo, hi)), v_loadu_m(row + x0 + VL, m_range(lo - VL, hi - VL)), even, odd);
}

// v_load_deint4 loads row[x0 + i] for i in [0, 4·VL) likewise and returns
// those with i % 4 = 0, 1, 2, 3 in c[0 … 3].
static inline void v_load_deint4(const float * row, int64_t x0, int64_t n, vf c[4]) {
    vf e1, o1, e2, o2;
    v_load_deint(row, x0, n, &e1, &o1);
    v_load_deint(row, x0 + 2 * VL, n, &e2, &o2);
    v_deint(e1, e2, &c[0], &c[2]);
    v_deint(o1, o2, &c[1], &c[3]);
}

// v_store_run stores the VL·k values of v[0 … k−1] at row[x0 …], only those
// whose position x0 + i is in [lo, hi).
static inline void v_store_run(float * row, int64_t x0, int64_t lo, int64_t hi, const vf * v, int k) {
    for (int s = 0; s < k; s++) {
        v_storeu_m(row + x0 + s * VL, m_range(lo - x0 - s * VL, hi - x0 - s * VL), v[s]);
    }
}

// A block of Winograd tiles is a run of the image's tiles in row-major
// order (tile t is tile row t / TW, column t % TW), so that narrow maps
// fill whole panels. wino_segs splits the lanes of the vector of tiles
// t … t+n−1 (n ≤ VL) into runs on one tile row: lanes [l0, l1) of run k lie
// on tile row ty, lane l's tile at column l − l0 + tx. It returns the runs.
struct wino_seg { int64_t ty, tx; int l0, l1; };
static int wino_segs(int64_t t, int64_t n, int64_t TW, struct wino_seg * sg) {
    int k = 0;
    for (int l = 0; l < n; k++) {
        const int64_t ty = (t + l) / TW, tx = (t + l) % TW;
        const int64_t run = TW - tx < n - l ? TW - tx : n - l;
        sg[k] = (struct wino_seg) { .ty = ty, .tx = tx, .l0 = l, .l1 = l + (int) run };
        l += (int) run;
    }
    return k;
}

// wino_kernel writes U_ξ = (G g Gᵀ)_ξ (tile T) for the output channels
// [oc0, oc1) (whole panels of mr, oc1 ≤ OCp) and every input channel ic of
// w [3, 3, IC, OC] as packed A panels: u + ξ·us holds [(oc−oc0)/mr][ic][oc%mr]
// (padding rows past OC zero). Each value is computed in double and rounded
// once, 8 output channels of a panel at a time (vectors of doubles; T is a
// constant in each instance, so G's zeros and ones fold away).
typedef double wino_vd __attribute__((vector_size(64)));
typedef float wino_vf8 __attribute__((vector_size(32)));
static inline __attribute__((always_inline)) void wino_kernel_t(const float * w, int64_t IC, int64_t OC, int mr,
                                                               const int T, int64_t oc0, int64_t oc1, float * u,
                                                               int64_t us) {
    static const double G2[4][3] = { { 1, 0, 0 }, { .5, .5, .5 }, { .5, -.5, .5 }, { 0, 0, 1 } };
    static const double G4[6][3] = { { 1. / 4, 0, 0 },           { -1. / 6, -1. / 6, -1. / 6 }, { -1. / 6, 1. / 6, -1. / 6 },
                                     { 1. / 24, 1. / 12, 1. / 6 }, { 1. / 24, -1. / 12, 1. / 6 }, { 0, 0, 1 } };
    const int A = T + 2;
    const double (*G)[3] = T == 4 ? G4 : G2;
    for (int q = 0; q < A * A; q++) {
        memset(u + q * us, 0, sizeof(float) * (oc1 - oc0) * IC);
    }
    for (int64_t p = oc0; p < oc1 && p < OC; p += mr) { // a panel
        const int64_t pe = p + mr < OC ? p + mr : OC;
        for (int64_t cs = p; cs < pe; cs += 8) { // up to 8 of its channels
            const int n = pe - cs < 8 ? (int) (pe - cs) : 8;
            for (int64_t ic = 0; ic < IC; ic++) {
                wino_vd g[9] = { 0 };
                for (int l = 0; l < n; l++) {
                    const float * gl = w + ((cs + l) * IC + ic) * 9;
                    for (int t = 0; t < 9; t++) {
                        g[t][l] = gl[t];
                    }
                }
                wino_vd gg[6][3]; // G g
                for (int r = 0; r < A; r++) {
                    for (int c = 0; c < 3; c++) {
                        gg[r][c] = G[r][0] * g[c] + G[r][1] * g[3 + c] + G[r][2] * g[6 + c];
                    }
                }
                float * at = u + (p - oc0) * IC + ic * mr + (cs - p);
                for (int r = 0; r < A; r++) { // (G g) Gᵀ
                    for (int c = 0; c < A; c++) {
                        const wino_vf8 v = __builtin_convertvector(gg[r][0] * G[c][0] + gg[r][1] * G[c][1] + gg[r][2] * G[c][2], wino_vf8);
                        float * d = at + (r * A + c) * us;
                        for (int l = 0; l < n; l++) {
                            d[l] = v[l];
                        }
                    }
                }
            }
        }
    }
}

static void wino_kernel(const float * w, int64_t IC, int64_t OC, int mr, int T, int64_t oc0, int64_t oc1, float * u,
                        int64_t us) {
    if (T == 4) {
        wino_kernel_t(w, IC, OC, mr, 4, oc0, oc1, u, us);
    } else {
        wino_kernel_t(w, IC, OC, mr, 2, oc0, oc1, u, us);
    }
}

// wino_prec is the precision da3_winograd computes for the requested prec:
// bf16, int8c (F(2×2) only; where the variant has the VNNI tiles) or f32.
static int wino_prec(int prec, int T) {
#if defined(ISA_INT8)
    if (prec == DA3_PREC_INT8C && T == 2) {
        return DA3_PREC_INT8C;
    }
#endif
    (void) T;
    return prec == DA3_PREC_BF16 ? DA3_PREC_BF16 : DA3_PREC_F32;
}

// wino_mr is the height of the transformed kernel's panels (the tile's
// rows) for OC output channels in precision prec (wino_prec's).
static int wino_mr(int64_t OC, int prec) {
#if defined(ISA_INT8)
    if (prec == DA3_PREC_INT8C) {
        return MR_I8C;
    }
#endif
    (void) prec;
    return choose_mr(OC);
}

// wino_a_words is the words per output channel of the transformed kernel's
// panels: IC floats, ⌈IC/2⌉ bf16 pairs, or int8c's quads and scale.
static int64_t wino_a_words(int64_t IC, int prec) {
#if defined(ISA_INT8)
    if (prec == DA3_PREC_INT8C) {
        return i8c_a_words(IC);
    }
#endif
    return prec == DA3_PREC_BF16 ? (IC + 1) / 2 : IC;
}

// wino_u_stride is the distance between the positions' matrices of the
// transformed kernel that da3_winograd takes: f32 panels of IC, bf16 pairs
// of IC (rounded up to even), or int8c panels (quads of IC, row scales).
static int64_t wino_u_stride(int64_t IC, int64_t OC, int prec) {
    const int mr = wino_mr(OC, prec);
    const int64_t OCp = (OC + mr - 1) / mr * mr;
    return wino_stride(OCp * wino_a_words(IC, prec));
}

// da3_wino_kernel_size is the size in floats of the transformed kernel of
// a 3×3 convolution with IC input and OC output channels in T×T tiles
// (da3_wino_kernel's output, da3_winograd's first operand).
int64_t ISA_FN(da3_wino_kernel_size)(int64_t IC, int64_t OC, int T, int prec) {
    return (int64_t) (T + 2) * (T + 2) * wino_u_stride(IC, OC, wino_prec(prec, T));
}

// da3_op_wino_kernel: dst = the Winograd transform of the kernel src0 [3, 3,
// IC, OC] (F32) as da3_winograd takes it: for each of the (T+2)² positions,
// packed A panels of its U_ξ [OC×IC] (in bf16 pairs for bf16 precision),
// da3_wino_kernel_size floats. userdata packs T | prec << 8. Threads take
// whole panels of output channels.
void ISA_FN(da3_wino_kernel)(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t prm = (intptr_t) userdata;
    const struct ggml_tensor * w = dst->src[0];
    const int64_t IC = w->ne[2], OC = w->ne[3];
    const int T = (int) (prm & 0xff), P = (T + 2) * (T + 2);
    const int prec = wino_prec((int) ((prm >> 8) & 0x3), T);
    const int mr = wino_mr(OC, prec);
    const int64_t panels = (OC + mr - 1) / mr, p0 = panels * ith / nth, p1 = panels * (ith + 1) / nth;
    const int64_t us = wino_u_stride(IC, OC, prec);
    if (ggml_nelements(dst) != P * us) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    if (p0 >= p1) {
        return;
    }
    float * u = (float *) dst->data;
    if (prec == DA3_PREC_F32) {
        wino_kernel((const float *) w->data, IC, OC, mr, T, p0 * mr, p1 * mr, u + p0 * mr * IC, us);
        return;
    }
    // f32 panels of this thread's channels first, then their bf16 pairs or int8c panels
    const int64_t n = (p1 - p0) * mr * IC, kt = wino_a_words(IC, prec);
    float * f = da3_scratch(DA3_BUF_A, (size_t) P * n);
    if (f == NULL) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    wino_kernel((const float *) w->data, IC, OC, mr, T, p0 * mr, p1 * mr, f, n);
    for (int q = 0; q < P; q++) {
#if defined(ISA_INT8)
        if (prec == DA3_PREC_INT8C) {
            for (int64_t pn = p0; pn < p1; pn++) {
                i8c_pack_a_rows(f + q * n + (pn - p0) * mr * IC, IC, (int32_t *) u + q * us + pn * mr * kt);
            }
            continue;
        }
#endif
#if defined(ISA_BF16)
        pairs_panels(f + q * n, (p1 - p0) * mr, mr, IC, (uint32_t *) u + q * us + p0 * mr * kt);
#else
        (void) kt;
        da3_fault(DA3_FAULT_UNAVAILABLE);
        return;
#endif
    }
}

// bt4 is F(4×4)'s Bᵀ·x for 6 vectors x (Bᵀ's rows as above).
static inline void bt4(const vf x[6], vf y[6]) {
    const vf t0 = v_fnma(v_set1(4.0f), x[2], x[4]), t1 = v_fnma(v_set1(4.0f), x[1], x[3]); // x4 − 4x2, x3 − 4x1
    const vf t2 = v_sub(x[4], x[2]), t3 = v_mul(v_set1(2.0f), v_sub(x[3], x[1]));            // x4 − x2, 2(x3 − x1)
    y[0] = v_fma(v_set1(4.0f), x[0], v_fnma(v_set1(5.0f), x[2], x[4]));
    y[1] = v_add(t0, t1);
    y[2] = v_sub(t0, t1);
    y[3] = v_add(t2, t3);
    y[4] = v_sub(t2, t3);
    y[5] = v_fma(v_set1(4.0f), x[1], v_fnma(v_set1(5.0f), x[3], x[5]));
}

// at4 is F(4×4)'s Aᵀ·x: 6 vectors x to 4.
static inline void at4(const vf x[6], vf y[4]) {
    const vf a = v_add(x[1], x[2]), b = v_sub(x[1], x[2]), c = v_add(x[3], x[4]), d = v_sub(x[3], x[4]);
    y[0] = v_add(v_add(x[0], a), c);
    y[1] = v_fma(v_set1(2.0f), d, b);
    y[2] = v_fma(v_set1(4.0f), c, a);
    y[3] = v_add(v_fma(v_set1(8.0f), d, b), x[5]);
}

// wino_prefetch prefetches rows [ya, yb) of the plane x [W, H], columns
// [xa, xb) (all where xa ≥ xb). A function of its own that GCC does not
// analyse across calls (noipa): as a loop in the copies of wino_input_t,
// GCC dropped it from the avx512 ones, and a plain function that only
// prefetches has no effect GCC must keep, so it dropped the calls (F(4×4)
// on the large maps ran 25 % slower without the prefetches).
static __attribute__((noipa)) void wino_prefetch(const float * x, int64_t W, int64_t H, int64_t ya, int64_t yb, int64_t xa,
                                                    int64_t xb) {
    for (int64_t iy = ya > 0 ? ya : 0; iy < yb && iy < H; iy++) {
        for (int64_t o = xa > 0 && xa < xb ? xa : 0; o < W && (xa >= xb || o < xb); o += 16) {
            v_prefetch(x + iy * W + o);
        }
    }
}

// wino_input transforms the input blocks of the nt tiles from tile t0 (of
// TW a tile row) of x [W, H, IC] into packed B panels:
// v + ξ·wino_stride(WB·IC) holds [tile/NR][ic][tile%NR].
static inline __attribute__((always_inline)) void wino_input_t(const float * x, int64_t W, int64_t H, int64_t IC, int64_t pad,
                                                             const int T, int64_t TW, int64_t t0, int64_t nt, int relu, float * v) {
    const int A = T + 2;
    const int64_t HW = W * H, vs = wino_stride(WB * IC);
    // the input rows the block reads, prefetched a channel ahead (each channel is a separate
    // stream the hardware prefetcher misses)
    const int64_t ya = T * (t0 / TW) - pad, yb = T * ((t0 + nt - 1) / TW) - pad + A;
    const int64_t xa = nt < TW ? T * (t0 % TW) - pad : -pad, xb = nt < TW ? T * ((t0 + nt - 1) % TW) - pad + A : W;
    struct wino_seg sg[VL + 1];
    for (int64_t ic = 0; ic < IC; ic++) {
        if (ic + 1 < IC) {
            wino_prefetch(x + (ic + 1) * HW, W, H, ya, yb, xa, xb);
        }
        const float * plane = x + ic * HW;
        for (int64_t j = 0; j < nt; j += VL) {
            const int ns = wino_segs(t0 + j, nt - j < VL ? nt - j : VL, TW, sg);
            float * dst = v + (j / NR) * NR * IC + ic * NR + j % NR;
            // d[r][c]: row r, column c of each lane's input block, from each run's rows (the rows' loop
            // innermost and unrolled, so that the block stays in registers)
            vf d[6][6];
#pragma GCC unroll 6
            for (int r = 0; r < A; r++) {
                for (int c = 0; c < A; c++) {
                    d[r][c] = v_zero();
                }
            }
            for (int k = 0; k < ns; k++) {
                const int64_t x0 = T * (sg[k].tx - sg[k].l0) - pad; // lane l's block starts at x0 + T·l
                const vm in = m_range(sg[k].l0, sg[k].l1);
#pragma GCC unroll 6
                for (int r = 0; r < A; r++) {
                    const int64_t iy = T * sg[k].ty - pad + r;
                    if (iy < 0 || iy >= H) {
                        continue;
                    }
                    const float * row = plane + iy * W;
                    vf c[6];
                    if (T == 2) {
                        v_load_deint(row, x0, W, &c[0], &c[1]);     // columns 0, 1 of each block
                        v_load_deint(row, x0 + 2, W, &c[2], &c[3]); // columns 2, 3
                    } else {
                        // columns 0 … 3 of each block; its columns 4, 5 are the next lane's 0, 1, the last
                        // lane's the two values after the vectors
                        v_load_deint4(row, x0, W, c);
                        const int64_t x1 = x0 + 4 * VL;
                        const vf e = v_loadu_m(row + x1, m_range(-x1, (W - x1 < 2 ? W - x1 : 2)));
                        c[4] = v_next(c[0], e, 0);
                        c[5] = v_next(c[1], e, 1);
                    }
                    if (relu) { // max(x, 0) is 0 for −0 and NaN as ggml's ReLU (x > 0 ? x : 0)
                        for (int q = 0; q < A; q++) {
                            c[q] = v_max(c[q], v_zero());
                        }
                    }
                    for (int q = 0; q < A; q++) {
                        d[r][q] = ns == 1 ? c[q] : v_blend(in, d[r][q], c[q]);
                    }
                }
            }
            if (T == 2) {
                vf t[4][4]; // Bᵀ d
                for (int c = 0; c < 4; c++) {
                    t[0][c] = v_sub(d[0][c], d[2][c]);
                    t[1][c] = v_add(d[1][c], d[2][c]);
                    t[2][c] = v_sub(d[2][c], d[1][c]);
                    t[3][c] = v_sub(d[1][c], d[3][c]);
                }
                for (int r = 0; r < 4; r++) { // (Bᵀ d) B
                    v_store(dst + (r * 4 + 0) * vs, v_sub(t[r][0], t[r][2]));
                    v_store(dst + (r * 4 + 1) * vs, v_add(t[r][1], t[r][2]));
                    v_store(dst + (r * 4 + 2) * vs, v_sub(t[r][2], t[r][1]));
                    v_store(dst + (r * 4 + 3) * vs, v_sub(t[r][1], t[r][3]));
                }
                continue;
            }
            vf e[6][6]; // d B, row by row: e[r][k] = (Bᵀ d[r][·])_k
            for (int r = 0; r < 6; r++) {
                bt4(d[r], e[r]);
            }
            for (int k = 0; k < 6; k++) { // Bᵀ (d B)
                const vf col[6] = { e[0][k], e[1][k], e[2][k], e[3][k], e[4][k], e[5][k] };
                vf y[6];
                bt4(col, y);
                for (int i = 0; i < 6; i++) {
                    v_store(dst + (i * 6 + k) * vs, y[i]);
                }
            }
        }
    }
}

// wino_input_f2 and wino_input_f4 are wino_input_t for each tile, T a
// constant: the loops over a block's rows and columns unroll and the block
// stays in registers (with T a variable, the blocks went through the
// stack: 10 % slower in int8c's F(2×2), 6 % in F(4×4)).
static __attribute__((noinline)) void wino_input_f2(const float * x, int64_t W, int64_t H, int64_t IC, int64_t pad, int64_t TW,
                                                    int64_t t0, int64_t nt, int relu, float * v) {
    wino_input_t(x, W, H, IC, pad, 2, TW, t0, nt, relu, v);
}

static __attribute__((noinline)) void wino_input_f4(const float * x, int64_t W, int64_t H, int64_t IC, int64_t pad, int64_t TW,
                                                    int64_t t0, int64_t nt, int relu, float * v) {
    wino_input_t(x, W, H, IC, pad, 4, TW, t0, nt, relu, v);
}

// wino_input transforms the input blocks (wino_input_t) in the copy for T
// (2 or 4).
static void wino_input(const float * x, int64_t W, int64_t H, int64_t IC, int64_t pad, int T, int64_t TW, int64_t t0,
                       int64_t nt, int relu, float * v) {
    if (T == 2) {
        wino_input_f2(x, W, H, IC, pad, TW, t0, nt, relu, v);
    } else {
        wino_input_f4(x, W, H, IC, pad, TW, t0, nt, relu, v);
    }
}

// wino_output transforms the products m + ξ·wino_stride(OCp·WB) ([oc][tile])
// of the block's nt tiles from tile t0 back into T×T outputs of y [OW, OH,
// OC] for the channels oc0 … oc1−1, with the epilogue.
static inline __attribute__((always_inline)) void wino_output_t(const float * m, int64_t OCp, int64_t oc0, int64_t oc1,
                                                              const struct epi * e, float * y, int64_t OW, int64_t OH,
                                                              const int T, const int act, int64_t TW, int64_t t0, int64_t nt) {
    const int64_t ms = wino_stride(OCp * WB);
    struct wino_seg sg[VL + 1];
    for (int64_t j = 0; j < nt; j += VL) {
        const int ns = wino_segs(t0 + j, nt - j < VL ? nt - j : VL, TW, sg);
        for (int64_t oc = oc0; oc < oc1; oc++) {
            const vf bias = v_set1(e->bias != NULL ? e->bias[oc] : 0.0f);
            float * plane = y + oc * OW * OH;
            const float * mo = m + oc * WB + j;
            vf o[4][4]; // o[a][b]: output row a, column b of each lane's tile
            if (T == 2) {
                vf p[16];
                for (int q = 0; q < 16; q++) {
                    p[q] = v_load(mo + q * ms);
                }
                vf t[2][4]; // Aᵀ M
                for (int c = 0; c < 4; c++) {
                    t[0][c] = v_add(v_add(p[c], p[4 + c]), p[8 + c]);
                    t[1][c] = v_sub(v_sub(p[4 + c], p[8 + c]), p[12 + c]);
                }
                for (int r = 0; r < 2; r++) { // (Aᵀ M) A
                    o[r][0] = activate(v_add(v_add(v_add(t[r][0], t[r][1]), t[r][2]), bias), act);
                    o[r][1] = activate(v_add(v_sub(v_sub(t[r][1], t[r][2]), t[r][3]), bias), act);
                }
            } else {
                vf t[6][4]; // M A, row by row: t[i][b] = (Aᵀ M[i][·])_b
                for (int i = 0; i < 6; i++) {
                    vf row[6];
                    for (int k = 0; k < 6; k++) {
                        row[k] = v_load(mo + (i * 6 + k) * ms);
                    }
                    at4(row, t[i]);
                }
                for (int b = 0; b < 4; b++) { // Aᵀ (M A)
                    const vf col[6] = { t[0][b], t[1][b], t[2][b], t[3][b], t[4][b], t[5][b] };
                    vf yb[4];
                    at4(col, yb);
                    for (int a = 0; a < 4; a++) {
                        o[a][b] = activate(v_add(yb[a], bias), act);
                    }
                }
            }
            vf out[4][4]; // out[a]: row a's T columns of each lane, interleaved (lane l's at T·l … T·l + T−1)
#pragma GCC unroll 4
            for (int a = 0; a < T; a++) {
                if (T == 2) {
                    v_interleave(o[a][0], o[a][1], &out[a][0], &out[a][1]);
                } else {
                    vf p0, p1, q0, q1; // columns 0 2 and 1 3 interleaved, then those pairs
                    v_interleave(o[a][0], o[a][2], &p0, &p1);
                    v_interleave(o[a][1], o[a][3], &q0, &q1);
                    v_interleave(p0, q0, &out[a][0], &out[a][1]);
                    v_interleave(p1, q1, &out[a][2], &out[a][3]);
                }
            }
            // each run's outputs on its own rows (the rows' loop innermost and unrolled, so that the
            // block stays in registers)
            for (int k = 0; k < ns; k++) {
                const int64_t x0 = T * (sg[k].tx - sg[k].l0); // lane l's outputs start at x0 + T·l
                const int64_t hi = x0 + T * sg[k].l1 < OW ? x0 + T * sg[k].l1 : OW, lo = x0 + T * sg[k].l0;
#pragma GCC unroll 4
                for (int a = 0; a < T; a++) {
                    const int64_t oy = T * sg[k].ty + a;
                    if (oy >= OH) {
                        break;
                    }
                    if (e->res != NULL) { // the residual's run added (res + out, as ggml's add)
                        const float * rr = e->res + oc * OW * OH + oy * OW;
                        vf sum[4];
                        for (int q = 0; q < T; q++) {
                            sum[q] = v_add(v_loadu_m(rr + x0 + q * VL, m_range(lo - x0 - q * VL, hi - x0 - q * VL)), out[a][q]);
                        }
                        v_store_run(plane + oy * OW, x0, lo, hi, sum, T);
                        continue;
                    }
                    v_store_run(plane + oy * OW, x0, lo, hi, out[a], T);
                }
            }
        }
    }
}

// wino_output_acts is wino_output_t for e's activation, a constant in each
// copy; wino_output_f2 and wino_output_f4 are its copies for each tile, as
// wino_input_f2 and wino_input_f4 (with T a variable the output block went
// through the stack, and with the activation a variable GELU's constants
// held registers the block needed).
static inline __attribute__((always_inline)) void wino_output_acts(const float * m, int64_t OCp, int64_t oc0, int64_t oc1,
                                                                 const struct epi * e, float * y, int64_t OW, int64_t OH,
                                                                 const int T, int64_t TW, int64_t t0, int64_t nt) {
    switch (e->act) {
    case DA3_ACT_NONE: wino_output_t(m, OCp, oc0, oc1, e, y, OW, OH, T, DA3_ACT_NONE, TW, t0, nt); return;
    case DA3_ACT_RELU: wino_output_t(m, OCp, oc0, oc1, e, y, OW, OH, T, DA3_ACT_RELU, TW, t0, nt); return;
    }
    wino_output_t(m, OCp, oc0, oc1, e, y, OW, OH, T, DA3_ACT_GELU, TW, t0, nt);
}

static __attribute__((noinline)) void wino_output_f2(const float * m, int64_t OCp, int64_t oc0, int64_t oc1, const struct epi * e,
                                                     float * y, int64_t OW, int64_t OH, int64_t TW, int64_t t0, int64_t nt) {
    wino_output_acts(m, OCp, oc0, oc1, e, y, OW, OH, 2, TW, t0, nt);
}

static __attribute__((noinline)) void wino_output_f4(const float * m, int64_t OCp, int64_t oc0, int64_t oc1, const struct epi * e,
                                                     float * y, int64_t OW, int64_t OH, int64_t TW, int64_t t0, int64_t nt) {
    wino_output_acts(m, OCp, oc0, oc1, e, y, OW, OH, 4, TW, t0, nt);
}

// wino_output transforms the products back (wino_output_t) in the copy for
// T (2 or 4).
static void wino_output(const float * m, int64_t OCp, int64_t oc0, int64_t oc1, const struct epi * e, float * y, int64_t OW,
                        int64_t OH, int T, int64_t TW, int64_t t0, int64_t nt) {
    if (T == 2) {
        wino_output_f2(m, OCp, oc0, oc1, e, y, OW, OH, TW, t0, nt);
    } else {
        wino_output_f4(m, OCp, oc0, oc1, e, y, OW, OH, TW, t0, nt);
    }
}

// da3_op_winograd: the convolution of da3_op_conv2d for a 3×3 kernel with
// stride 1, dilation 1 and padding pad, in F(2×2, 3×3) or F(4×4, 3×3)
// tiles, from the transformed kernel src0 (da3_wino_kernel's output for the
// same tile, precision and variant), the input src1 [W, H, IC, N] and an
// optional bias src2 [OC]. userdata packs pad | act<<8 | prec<<10 |
// variant<<12 | f4<<16 (custom.h).
// split_channels reports whether the threads of a Winograd convolution
// should share its OCp channels (in mr-row tiles) rather than its NT tiles:
// a thread's tiles are computed in whole NR-wide panels, so on small maps
// (e.g. 18×12 in 4×4 tiles: 15 tiles, one panel for each of two threads)
// most columns would be padding. Sharing the channels repeats the input
// transform in every thread, so it is taken only when it saves a quarter of
// the products.
static int split_channels(int64_t NT, int64_t OCp, int mr, int nth) {
    const int64_t panels = (NT + NR - 1) / NR; // a thread's blocks are at most WB tiles: not counted here
    const int64_t by_tiles = ((NT + nth - 1) / nth + NR - 1) / NR * OCp;
    const int64_t by_channels = panels * ((OCp / mr + nth - 1) / nth * mr);
    return nth > 1 && 4 * by_channels < 3 * by_tiles;
}

void ISA_FN(da3_winograd)(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t prm = (intptr_t) userdata;
    const struct ggml_tensor * uk = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const struct ggml_tensor * bias = winograd_bias(dst, prm), * res = winograd_residual(dst, prm);
    const int64_t W = x->ne[0], H = x->ne[1], IC = x->ne[2], OC = dst->ne[2];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t pad = prm & 0xff;
    const int T = (prm >> 16) & 1 ? 4 : 2, P = (T + 2) * (T + 2); // output tile, positions
    const int prec = wino_prec((int) ((prm >> 10) & 0x3), T);
    const int relu = (int) ((prm >> 17) & 1);                       // ReLU of the input
    const struct epi ep = { .bias = bias != NULL ? (const float *) bias->data : NULL, .per_row = 1, .act = (int) ((prm >> 8) & 0x3),
        .res = res != NULL ? (const float *) res->data : NULL };
    const int mr = wino_mr(OC, prec);
    const int64_t uhs = wino_u_stride(IC, OC, prec); // U's positions, f32, bf16 pairs or int8c panels
    if (ggml_nelements(uk) != P * uhs) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    // Each thread takes an equal run of the tiles of all images (tile t of image t / TT), in blocks of
    // up to WB tiles that do not cross images, and all output channels; or, on maps with too few tiles
    // to give each thread whole panels of them, all the tiles and an equal share of the channels.
    const int64_t TW = (OW + T - 1) / T, TH = (OH + T - 1) / T, TT = TW * TH, NT = x->ne[3] * TT;
    const int64_t OCp = (OC + mr - 1) / mr * mr;
    int64_t i0 = NT * ith / nth, i1 = NT * (ith + 1) / nth, r0 = 0, r1 = OCp;
    if (split_channels(NT, OCp, mr, nth)) {
        const int64_t per = (OCp / mr + nth - 1) / nth * mr;
        i0 = 0, i1 = NT;
        r0 = per * ith;
        r1 = r0 + per < OCp ? r0 + per : OCp;
    }
    if (i0 >= i1 || r0 >= r1) {
        return;
    }
    const int64_t vs = wino_stride(WB * IC), ms = wino_stride(OCp * WB);
    float * v = da3_scratch(DA3_BUF_B, (size_t) P * vs);
    float * m = da3_scratch(DA3_BUF_O, (size_t) P * ms);
    int64_t vhs = vs; // the same in bf16 pairs or int8c panels
    void * vh = NULL;
    tile_fn tile = tile_for(mr);
    // words per row of U's panels and per column of V's, and the depth the tile steps through
    int64_t ka = IC, kb = IC, kd = IC;
#if defined(ISA_BF16)
    if (prec == DA3_PREC_BF16) {
        ka = kb = kd = (IC + 1) / 2;
        tile = tile_bf16_for(mr);
    }
#endif
#if defined(ISA_INT8)
    if (prec == DA3_PREC_INT8C) {
        ka = i8c_a_words(IC), kb = i8c_b_words(IC), kd = i8c_quads(IC);
        tile = tile_i8c;
    }
#endif
    if (prec != DA3_PREC_F32) {
        vhs = wino_stride(WB * kb);
        vh = da3_scratch(DA3_BUF_BH, (size_t) P * vhs);
    }
    if (v == NULL || m == NULL || (prec != DA3_PREC_F32 && vh == NULL)) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    const int * abort = da3_abort_flag(dst);
    for (int64_t it = i0, nt; it < i1; it += nt) {
        if (da3_aborted(abort)) { // stopping: ggml returns ABORTED after the node
            return;
        }
        const int64_t n = it / TT, t0 = it % TT;
        nt = i1 - it < WB ? i1 - it : WB;
        nt = TT - t0 < nt ? TT - t0 : nt;
        const int64_t np = (nt + NR - 1) / NR * NR; // tiles in whole panels
        wino_input((const float *) x->data + n * W * H * IC, W, H, IC, pad, T, TW, t0, nt, relu, v);
        const void * vb = v;
#if defined(ISA_BF16)
        if (prec == DA3_PREC_BF16) {
            for (int q = 0; q < P; q++) {
                pairs_panels(v + q * vs, np, NR, IC, (uint32_t *) vh + q * vhs);
            }
            vb = vh;
        }
#endif
#if defined(ISA_INT8)
        if (prec == DA3_PREC_INT8C) {
            for (int q = 0; q < P; q++) {
                for (int64_t jr = 0; jr < np; jr += NR) {
                    i8c_pack_b_cols(v + q * vs + jr * IC, IC, (int32_t *) vh + q * vhs + jr * kb);
                }
            }
            vb = vh;
        }
#endif
        for (int q = 0; q < P; q++) {
            const uint32_t * uq = (const uint32_t *) uk->data + q * uhs, * vq = (const uint32_t *) vb + q * vhs;
            for (int64_t jr = 0; jr < np; jr += NR) {
                for (int64_t ir = r0; ir < r1; ir += mr) {
                    tile(kd, uq + ir * ka, vq + jr * kb, m + q * ms + ir * WB + jr, WB, mr, NR, 0, NULL, 0, 0);
                }
            }
        }
        struct epi en = ep; // the residual's image
        if (en.res != NULL) {
            en.res += n * OW * OH * OC;
        }
        wino_output(m, OCp, r0, r1 < OC ? r1 : OC, &en, (float *) dst->data + n * OW * OH * OC, OW, OH, T, TW, t0, nt);
    }
}

// ---- fused attention ----

// da3_op_attention: dst = softmax(q·kᵀ·scale)·v per head, for F32 q [hd, H,
// n, B], k and v [hd, H, nk, B] with contiguous rows of hd (any strides
// above) and hd ≤ 256; dst [hd, H, n, B] contiguous. userdata holds the
// scale's float bits.
//
// Threads take (batch, head, NR-query block) items in order. Everything runs
// on the packed register tiles, transposed so that the softmax is along
// rows of memory: for each head a thread packs k and vᵀ once into tall
// panels; for a block of NR queries it computes the scores sᵀ [nk][NR] =
// k·qᵀ (each column's max taken as the tiles are stored), turns each column
// into exponentials and their sum (vexp: NR queries at once), computes
// oᵀ [hd][NR] = vᵀ·sᵀ (sᵀ already is a packed B panel), divides each
// column by its sum and writes oᵀ transposed into dst. No score matrix, permutation or
// copy of q, k, v or the output appears in the graph.
// dim_panels splits hd rows into panels of the two tile heights (starts in
// d0, heights in h; at most 72), the cheapest of: big tiles only, small
// only, or whole big tiles and small ones for the rest (a head of 64: 4×14 +
// 8 rows instead of 70), the small tile's rows weighed by its speed. It
// returns the count.
static int dim_panels(int64_t hd, int64_t * d0, int * h) {
    const int64_t nb = hd / MR_BIG, rest = hd - nb * MR_BIG;
    const double big = (double) ((hd + MR_BIG - 1) / MR_BIG * MR_BIG);
    const double small = (double) ((hd + MR_SMALL - 1) / MR_SMALL * MR_SMALL) / SMALL_TILE_SPEED;
    const double mixed = (double) (nb * MR_BIG) + (double) ((rest + MR_SMALL - 1) / MR_SMALL * MR_SMALL) / SMALL_TILE_SPEED;
    int64_t bigs = (hd + MR_BIG - 1) / MR_BIG; // big tiles, then small ones for the rest
    if (mixed < big && mixed <= small) {
        bigs = nb;
    } else if (small < big) {
        bigs = 0;
    }
    int n = 0;
    for (int64_t d = 0; d < hd && n < 72; n++) {
        d0[n] = d;
        h[n] = n < bigs ? MR_BIG : MR_SMALL;
        d += h[n];
    }
    return n;
}

// attention_rows returns the rows (tokens) of head h of batch b of t (q, k
// or v), from token t0.
static inline const float * attention_rows(const struct ggml_tensor * t, int64_t b, int64_t h, int64_t t0) {
    return (const float *) ((const char *) t->data + b * t->nb[3] + h * t->nb[1] + t0 * t->nb[2]);
}

// attention_store divides the columns of oᵀ [hd][NR] by their sums (inv:
// their reciprocals) and writes its w columns transposed to o, rows of hd
// values dld floats apart.
static void attention_store(float * ot, const vf * inv, int64_t hd, int64_t w, float * o, int64_t dld) {
    for (int64_t d = 0; d < hd; d++) {
        for (int part = 0; part < NV; part++) {
            v_store(ot + d * NR + VL * part, v_mul(v_load(ot + d * NR + VL * part), inv[part]));
        }
    }
    int64_t dv = 0; // oᵀ transposed back: VL×VL blocks in registers, the rest one value at a time
    if (w == NR) {
        for (; dv + VL <= hd; dv += VL) {
            for (int h = 0; h < NV; h++) {
                v_transpose(ot + dv * NR + h * VL, NR, o + h * VL * dld + dv, dld);
            }
        }
    }
    for (int64_t j = 0; j < w; j++) {
        for (int64_t d = dv; d < hd; d++) {
            o[j * dld + d] = ot[d * NR + j];
        }
    }
}

// prefetch_queries prefetches the rows of the block of queries from t0 of
// head h (batch b), if any: the next block's, which the attention would
// otherwise wait for on first touch (q's rows are a head's slice of every
// token, far apart).
static inline void prefetch_queries(const struct ggml_tensor * q, int64_t b, int64_t h, int64_t t0, int64_t n, int64_t hd) {
    for (int64_t t = t0; t < n && t < t0 + NR; t++) {
        const float * x = attention_rows(q, b, h, t);
        for (int64_t k = 0; k < hd; k += 64 / sizeof(float)) {
            v_prefetch(x + k);
        }
    }
}

#if defined(ISA_INT8) || defined(ISA_INT8C_AVX2)
#include "kernels_attn_i8c.h"
#endif

void ISA_FN(da3_attention)(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * q = dst->src[0];
    const struct ggml_tensor * k = dst->src[1];
    const struct ggml_tensor * v = dst->src[2];
    union { int32_t i; float f; } sc = { .i = (int32_t) (intptr_t) userdata };
    const float scale = sc.f;
    const int prec = sizeof(void *) == 8 ? (int) (((uint64_t) (uintptr_t) userdata >> 32) & 0xff) : DA3_PREC_F32;
    const int64_t hd = q->ne[0], H = q->ne[1], n = q->ne[2], B = q->ne[3];
    const int64_t nk = k->ne[2];
    const int mk = MR_BIG;
    const int64_t nkp = (nk + mk - 1) / mk * mk; // keys, padded to whole panels
    int64_t pd0[72];                              // the head dims' panels: panel i holds dims pd0[i] … + pdh[i] − 1
    int pdh[72];
    const int npd = dim_panels(hd, pd0, pdh);
    const int64_t hdp = pd0[npd - 1] + pdh[npd - 1]; // head dims, padded to whole panels
    const int64_t nqb = (n + NR - 1) / NR;
    const int64_t items = B * H * nqb;
    const int64_t i0 = items * ith / nth, i1 = items * (ith + 1) / nth;
    if (i0 >= i1) {
        return;
    }
#if defined(ISA_INT8) || defined(ISA_INT8C_AVX2)
    if (prec == DA3_PREC_INT8C && i8c_attention_runs()) {
        attention_i8c(dst, scale, i0, i1);
        return;
    }
#endif
    float * kp = da3_scratch(DA3_BUF_K, (size_t) nkp * hd);           // k panels: [key/mk][d][key%mk]
    float * vp = da3_scratch(DA3_BUF_V, (size_t) hdp * nk);           // vᵀ panels: panel i at pd0[i]·nk, [key][pdh[i]]
    float * st = da3_scratch(DA3_BUF_S, (size_t) nk * NR + hd * NR); // sᵀ [key][NR], then qᵀ [d][NR]
    float * ot = da3_scratch(DA3_BUF_O, (size_t) hdp * NR);          // oᵀ [d][NR]
    if (kp == NULL || vp == NULL || st == NULL || ot == NULL) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    float * qp = st + nk * NR;
    tile_fn tk = tile_for(mk);
    int bf = 0; // bf16 products
    (void) bf;
    // Depth steps of the two products: hd (scores) and nk (outputs), or their pairs in bf16.
    int64_t kts = hd;
    const void * ka = kp, * va = vp, * qa = qp, * sa = st;
#if defined(ISA_BF16)
    // bf16: q, k, v and the probabilities rounded to bf16, the products summed in f32 (the softmax in f32).
    uint32_t * kh = NULL, * vh = NULL, * qh = NULL, * sh = NULL;
    const int64_t kth = (hd + 1) / 2, nkt = (nk + 1) / 2;
    if (prec == DA3_PREC_BF16) {
        // qᵀ and sᵀ follow the k and vᵀ panels, 64-byte aligned (the tiles load B panels aligned)
        const int64_t ko = (nkp * kth + 15) / 16 * 16, vo = (hdp * nkt + 15) / 16 * 16;
        kh = (uint32_t *) da3_scratch(DA3_BUF_AH, (size_t) ko + NR * kth);
        vh = (uint32_t *) da3_scratch(DA3_BUF_BH, (size_t) vo + NR * nkt);
        if (kh == NULL || vh == NULL) {
            da3_fault(DA3_FAULT_NOMEM);
            return;
        }
        qh = kh + ko;
        sh = vh + vo;
        tk = tile_bf16_for(mk);
        bf = 1;
        kts = kth;
        ka = kh, va = vh, qa = qh, sa = sh;
    }
#else
    (void) prec;
#endif
    const int64_t dld = H * hd; // dst row stride (one query token)
    int64_t packed = -1;
    const int * abort = da3_abort_flag(dst);
    for (int64_t it = i0; it < i1; it++) {
        if (da3_aborted(abort)) { // stopping: ggml returns ABORTED after the node
            return;
        }
        const int64_t bh = it / nqb, qb = it % nqb;
        const int64_t b = bh / H, h = bh % H;
        if (bh != packed) {
            const float * vb = attention_rows(v, b, h, 0);
            // k: keys as the rows of A panels (register transposes); vᵀ: each key's md dims of a
            // panel are one contiguous run of its row
            pack_a_panels(attention_rows(k, b, h, 0), k->nb[2] / sizeof(float), 0, nk, 0, hd, mk, kp);
            if (hdp > hd) { // the padding dims of the last panel
                memset(vp + pd0[npd - 1] * nk, 0, sizeof(float) * pdh[npd - 1] * nk);
            }
            for (int i = 0; i < npd; i++) {
                const int64_t d0 = pd0[i], md = pdh[i], dn = hd - d0 < md ? hd - d0 : md;
                float * vd = vp + d0 * nk;
                for (int64_t j = 0; j < nk; j++) {
                    const float * vr = (const float *) ((const char *) vb + j * v->nb[2]) + d0;
                    for (int64_t c = 0; c < dn; c += VL) {
                        const vm cm = m_first(dn - c);
                        v_storeu_m(vd + j * md + c, cm, v_loadu_m(vr + c, cm));
                    }
                }
            }
#if defined(ISA_BF16)
            if (kh != NULL) {
                pairs_panels(kp, nkp, mk, hd, kh);
                for (int i = 0; i < npd; i++) {
                    pairs_panels(vp + pd0[i] * nk, pdh[i], pdh[i], nk, vh + pd0[i] * nkt);
                }
            }
#endif
            packed = bh;
        }
        const int64_t t0 = qb * NR;
        const int64_t w = n - t0 < NR ? n - t0 : NR;
        const struct bsrc qs = { .b = attention_rows(q, b, h, t0), .ldb = q->nb[2] / sizeof(float) };
        pack_b_panels(&qs, 0, w, 0, hd, qp); // qᵀ [d][NR]
        prefetch_queries(q, b, h, t0 + NR, n, hd);
#if defined(ISA_BF16)
        if (qh != NULL) {
            pairs_panels(qp, NR, NR, hd, qh);
        }
#endif
        // scores sᵀ = k·qᵀ, each column's max taken while the tile's rows are still in L1
        vf mx[NV];
        for (int part = 0; part < NV; part++) {
            mx[part] = v_set1(-INFINITY);
        }
        for (int64_t j = 0; j < nk; j += mk) {
            const int64_t mr = nk - j < mk ? nk - j : mk;
            tk(kts, (const uint32_t *) ka + j * kts, qa, st + j * NR, NR, mr, NR, 0, NULL, 0, 0);
            for (int64_t r = j; r < j + mr; r++) {
                for (int part = 0; part < NV; part++) {
                    mx[part] = v_max(mx[part], v_load(st + r * NR + VL * part));
                }
            }
        }
        // probabilities as torch's softmax, exp(x·scale − max(x·scale)) / Σ per column, with the
        // division by Σ applied to the column's outputs (oᵀ below) instead of to each of its nk values
        const vf vs = v_set1(scale);
        vf inv[NV];
        int64_t step = 1; // depth steps per key of the product below
#if defined(ISA_BF16)
        if (sh != NULL) { // bf16: the exponentials go straight into the pairs of the product's panel
            softmax_pairs(st, nk, mx, vs, sh, inv);
            step = 2;
        } else
#endif
        for (int part = 0; part < NV; part++) {
            float * c = st + VL * part;
            const vf m = v_mul(mx[part], vs);
            vf sum = v_zero();
            for (int64_t j = 0; j < nk; j++) {
                const vf ex = vexp(v_fms(v_load(c + j * NR), vs, m));
                v_store(c + j * NR, ex);
                sum = v_add(sum, ex);
            }
            inv[part] = v_div(v_set1(1.0f), sum);
        }
        // oᵀ = vᵀ·sᵀ, in chunks of KC keys (KC is even: the bf16 pairs do not straddle chunks)
        for (int i = 0; i < npd; i++) {
            const int64_t d = pd0[i], md = pdh[i], mr = hd - d < md ? hd - d : md;
#if defined(ISA_BF16)
            const tile_fn td = bf ? tile_bf16_for(md) : tile_for(md);
#else
            const tile_fn td = tile_for(md);
#endif
            for (int64_t pc = 0; pc < nk; pc += KC) {
                const int64_t kc = nk - pc < KC ? nk - pc : KC;
                const int64_t nkd = (nk + step - 1) / step; // the panels' depth
                td((kc + step - 1) / step, (const uint32_t *) va + d * nkd + pc / step * md,
                   (const uint32_t *) sa + pc / step * NR, ot + d * NR, NR, mr, NR, pc > 0, NULL, 0, 0);
            }
        }
        attention_store(ot, inv, hd, w, (float *) dst->data + ((b * n + t0) * H + h) * hd, dld);
    }
}

// ---- peak rate ----

// The CPU's peak rate of the products the kernels use, measured on registers
// alone: PEAK_ACC independent accumulators (more than the pipes' latency
// times their throughput needs, few enough to stay in registers: 32 vector
// registers with AVX-512, 16 otherwise), no memory traffic. kernels.Peak
// reports it, so that a kernel's speed can be given as a fraction of what the
// core can do.
#if VL == 16
#define PEAK_ACC 16
#else
#define PEAK_ACC 12
#endif

static volatile float peak_sink;

#if defined(ISA_BF16)
static ISA_BF16 double peak_bf16(int64_t rounds) {
    __m512 acc[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++) {
        acc[i] = _mm512_set1_ps((float) i);
    }
    const __m512bh a = (__m512bh) _mm512_set1_epi32(0x3f803f80), b = (__m512bh) _mm512_set1_epi32(0x3f7f3f7f);
    for (int64_t r = 0; r < rounds; r++) {
        _Pragma("GCC unroll 16") for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    float s = 0;
    for (int i = 0; i < PEAK_ACC; i++) {
        s += _mm512_reduce_add_ps(acc[i]);
    }
    peak_sink = s;
    return 2.0 * 2 * 16 * PEAK_ACC * (double) rounds; // 16 lanes of two products
}
#endif

#if defined(ISA_INT8)
static ISA_INT8 double peak_int8(int64_t rounds) {
    __m512i acc[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++) {
        acc[i] = _mm512_set1_epi32(i);
    }
    const __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x01020102);
    for (int64_t r = 0; r < rounds; r++) {
        _Pragma("GCC unroll 16") for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    }
    int64_t s = 0;
    for (int i = 0; i < PEAK_ACC; i++) {
        s += _mm512_reduce_add_epi32(acc[i]);
    }
    peak_sink = (float) s;
    return 2.0 * 4 * 16 * PEAK_ACC * (double) rounds; // 16 lanes of four products
}
#endif

// da3_peak runs rounds of PEAK_ACC multiply-adds of precision prec (f32 FMA;
// bf16 or int8 dot products where the variant has them, f32 otherwise) and
// returns the number of operations (two per product).
double ISA_FN(da3_peak)(int prec, int64_t rounds) {
#if defined(ISA_BF16)
    if (prec == DA3_PREC_BF16) {
        return peak_bf16(rounds);
    }
#endif
#if defined(ISA_INT8)
    if (prec == DA3_PREC_INT8 || prec == DA3_PREC_INT8C) {
        return peak_int8(rounds);
    }
#elif defined(I8C_PEAK)
    if (prec == DA3_PREC_INT8C) {
        return I8C_PEAK(rounds);
    }
#endif
    (void) prec;
    vf acc[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++) {
        acc[i] = v_set1((float) i);
    }
    const vf a = v_set1(1.0001f), b = v_set1(0.9999f);
    for (int64_t r = 0; r < rounds; r++) {
        _Pragma("GCC unroll 16") for (int i = 0; i < PEAK_ACC; i++) acc[i] = v_fma(acc[i], a, b);
    }
    float lanes[VL];
    float s = 0;
    for (int i = 0; i < PEAK_ACC; i++) {
        v_storeu(lanes, acc[i]);
        s += lanes[0];
    }
    peak_sink = s;
    return 2.0 * VL * PEAK_ACC * (double) rounds;
}
