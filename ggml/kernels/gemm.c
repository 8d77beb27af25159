// An AVX-512 F32 matrix product for the CPU, used through ggml_custom_4d
// (ggml.OpGEMM). ggml's own F32 path (llamafile's tinyBLAS) reaches about 40 %
// of the AVX-512 FMA peak of the CPUs this project runs on; this one follows
// the GotoBLAS/BLIS scheme (packed panels sized for L1/L2, a 14×32 register
// tile) and reaches about 80 %.
//
// dst[m][n] = Σ_k A[m][k]·B[n][k] with A = src[1] (activations: M rows of K)
// and B = src[0] (weights: N rows of K), which is ggml_mul_mat(src0, src1).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "da3_ggml.h"
#include "custom.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#define MR 14   // rows of A per register tile
#define NR 32   // columns of B per register tile (two zmm)
#define KC 128  // depth of a packed block: a B micro-panel (KC×NR, 16 KiB) and the A
                // micro-panel streaming past it fit L1 together (256 measured 20-30 %
                // slower on convolutions)
#define KCQ 256 // the depth for weights in 256-value blocks (k-quants)
#define MC 112  // rows of A per block (MC×KC stays in L2)
#define NC 1024 // columns of B per packed block

int da3_gemm_available(void) { return 1; }

// ---- vector math for the fused epilogues and the softmax ----

// vexp is e^x to about 1 ulp (Cephes' expf: x = n·ln2 + r, |r| ≤ ln2/2, a
// degree-6 polynomial in r, then the exact scaling by 2^n).
static inline __m512 vexp(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

// vgelu is x·Φ(x), the exact (erf) GELU of torch's nn.GELU(), with erf from
// Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, the approximation
// oneDNN's GELU uses). For x < 0, Φ is computed as the small
// term itself, so there is no cancellation in the negative tail.
static inline __m512 vgelu(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), z, one));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    const __m512 tail = _mm512_mul_ps(_mm512_mul_ps(p, vexp(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), z))),
                                      _mm512_set1_ps(0.5f)); // (1 − erf(z))/2 = Φ(−|x|)
    const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 phi = _mm512_mask_blend_ps(neg, _mm512_sub_ps(one, tail), tail);
    return _mm512_mul_ps(x, phi);
}

// An epilogue applied to the finished tiles of a product: a bias, per
// column (a linear layer's output features) or per row (a convolution's
// output channels), then an activation.
enum { ACT_NONE = 0, ACT_RELU = 1, ACT_GELU = 2 };

struct epi {
    const float * bias; // NULL: no bias
    int per_row;        // bias[m] instead of bias[n]
    int act;
};

static inline __m512 activate(__m512 v, int act) {
    switch (act) {
    case ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case ACT_GELU: return vgelu(v);
    }
    return v;
}

// ---- packing ----

// bsrc describes B: either rows of K values (a matrix) or the implicit
// im2col matrix of a convolution input, B[n][k] with n = oy·OW + ox and
// k = (ic·KH + ky)·KW + kx, read from x [W, H, IC] without materialising it.
struct bsrc {
    const float * b; int64_t ldb;                    // F32 matrix
    const char * q; size_t row_bytes; enum ggml_type type; // matrix of another type (q == NULL: F32)
    float * deq;                                     // scratch for NR dequantized rows of KCQ values
    const float * x; int64_t W, H, KW, KH, OW, s, pad, d; // convolution (x == NULL: matrix)
};

// pack_conv_panel packs one NR-wide panel of the implicit im2col matrix:
// columns n0 … n0+w−1 over k in [k0, k0+kc). A 1×1 unpadded convolution
// reads its pixels contiguously; with stride 1 and the panel inside one
// output row, each k is one masked load of a row segment of x; otherwise
// each k is two gathers with per-lane bounds masks.
static void pack_conv_panel(const struct bsrc * src, int64_t n0, int64_t w, int64_t k0, int64_t kc, float * p) {
    const int64_t oy = n0 / src->OW, ox0 = n0 % src->OW;
    const int64_t HW = src->H * src->W;
    const __mmask32 wm = w >= NR ? 0xffffffffu : (__mmask32) ((1u << w) - 1);
    if (src->KW == 1 && src->KH == 1 && src->s == 1 && src->pad == 0) {
        for (int64_t k = 0; k < kc; k++) {
            const float * row = src->x + (k0 + k) * HW + n0;
            _mm512_store_ps(p + k * NR, _mm512_maskz_loadu_ps((__mmask16) wm, row));
            _mm512_store_ps(p + k * NR + 16, _mm512_maskz_loadu_ps((__mmask16) (wm >> 16), row + 16));
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
                _mm512_store_ps(dst, _mm512_setzero_ps());
                _mm512_store_ps(dst + 16, _mm512_setzero_ps());
                continue;
            }
            const int64_t ix0 = ox0 + kx * src->d - src->pad; // x column of lane 0
            const float * row = src->x + ic * HW + iy * src->W;
            if (kx == 0) { // the lines the panels after the next will read: the loads below miss otherwise
                _mm_prefetch((const char *) (row + ix0 + 2 * NR), _MM_HINT_T0);
                _mm_prefetch((const char *) (row + ix0 + 2 * NR + 16), _MM_HINT_T0);
            }
            // lanes j < w with 0 <= ix0 + j < W
            const int64_t lo = ix0 < 0 ? -ix0 : 0;
            const int64_t hi = src->W - ix0; // lanes below hi are inside
            const __mmask32 m = (hi <= 0 || lo >= NR) ? 0 :
                (__mmask32) ((hi >= NR ? 0xffffffffu : ((1u << hi) - 1)) & ~((1u << lo) - 1)) & wm;
            _mm512_store_ps(dst, _mm512_maskz_loadu_ps((__mmask16) m, row + ix0));
            _mm512_store_ps(dst + 16, _mm512_maskz_loadu_ps((__mmask16) (m >> 16), row + ix0 + 16));
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
    const __m512i vy[2] = { _mm512_loadu_si512(iy0), _mm512_loadu_si512(iy0 + 16) };
    const __m512i vx[2] = { _mm512_loadu_si512(ix0), _mm512_loadu_si512(ix0 + 16) };
    const __m512i vH = _mm512_set1_epi32((int32_t) src->H), vW = _mm512_set1_epi32((int32_t) src->W);
    for (int64_t k = 0; k < kc; k++) {
        const int64_t kk = k0 + k;
        const int64_t kx = kk % src->KW, ky = (kk / src->KW) % src->KH, ic = kk / (src->KW * src->KH);
        const float * plane = src->x + ic * HW;
        for (int h = 0; h < 2; h++) {
            const __m512i iy = _mm512_add_epi32(vy[h], _mm512_set1_epi32((int32_t) (ky * src->d)));
            const __m512i ix = _mm512_add_epi32(vx[h], _mm512_set1_epi32((int32_t) (kx * src->d)));
            const __mmask16 m = (__mmask16) (wm >> (16 * h)) & _mm512_cmplt_epu32_mask(iy, vH) & _mm512_cmplt_epu32_mask(ix, vW);
            const __m512i idx = _mm512_add_epi32(_mm512_mullo_epi32(iy, vW), ix);
            _mm512_store_ps(p + k * NR + 16 * h, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, plane, 4));
        }
    }
}

// transpose16 writes the transpose of the 16×16 block at src (row stride
// lds) to dst (row stride ldd): dst[k][j] = src[j][k].
static inline void transpose16(const float * src, int64_t lds, float * dst, int64_t ldd) {
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
            float * tmp = src->deq;
            for (int64_t j = 0; j < w; j++) {
                tt->to_float(src->q + (n0 + j0 + j) * src->row_bytes + seg, tmp + j * KCQ, kc);
            }
            rows = tmp;
            ld = KCQ;
        }
        int64_t k = 0;
        if (w == NR) { // 16×16 blocks transposed in registers
            for (; k + 16 <= kc; k += 16) {
                transpose16(rows + k, ld, p + k * NR, NR);
                transpose16(rows + 16 * ld + k, ld, p + k * NR + 16, NR);
            }
        }
        for (int64_t j = 0; j < w; j++) {
            for (int64_t kk = k; kk < kc; kk++) {
                p[kk * NR + j] = rows[j * ld + kk];
            }
        }
    }
}

// ---- the register tile ----

// kernel computes an MR×NR tile over kc from packed panels of A (ap[k·MR +
// i]) and B (bp[k·NR + j]). It stores (or adds to) the first mr rows and
// the columns enabled in m0, m1 of c; e, when not NULL, is applied to the
// finished values (row0, col0: the tile's position in the whole product,
// for the bias).
static void kernel(int64_t kc, const float * ap, const float * bp, float * c, int64_t ldc, int64_t mr,
                   __mmask16 m0, __mmask16 m1, int accumulate, const struct epi * e, int64_t row0, int64_t col0) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        c0[i] = _mm512_setzero_ps();
        c1[i] = _mm512_setzero_ps();
    }
#define FMA_(i, av) do { const __m512 t_ = (av); c0[i] = _mm512_fmadd_ps(t_, b0, c0[i]); c1[i] = _mm512_fmadd_ps(t_, b1, c1[i]); } while (0)
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(bp);
        const __m512 b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            FMA_(i, _mm512_set1_ps(ap[i]));
        }
        ap += MR;
        bp += NR;
    }
#undef FMA_
    __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
    if (e != NULL && e->bias != NULL && !e->per_row) {
        bias0 = _mm512_maskz_loadu_ps(m0, e->bias + col0);
        bias1 = _mm512_maskz_loadu_ps(m1, e->bias + col0 + 16);
    }
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        if (i < mr) {
            float * cr = c + i * ldc;
            __m512 v0 = c0[i], v1 = c1[i];
            if (accumulate) {
                v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
                v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
            }
            if (e != NULL) {
                if (e->bias != NULL && e->per_row) {
                    const __m512 bv = _mm512_set1_ps(e->bias[row0 + i]);
                    v0 = _mm512_add_ps(v0, bv);
                    v1 = _mm512_add_ps(v1, bv);
                } else {
                    v0 = _mm512_add_ps(v0, bias0);
                    v1 = _mm512_add_ps(v1, bias1);
                }
                v0 = activate(v0, e->act);
                v1 = activate(v1, e->act);
            }
            _mm512_mask_storeu_ps(cr, m0, v0);
            _mm512_mask_storeu_ps(cr + 16, m1, v1);
        }
    }
}

static __mmask16 mask_of(int64_t n) { return n >= 16 ? (__mmask16) 0xffff : n <= 0 ? 0 : (__mmask16) ((1u << n) - 1); }

// pack_a_panels packs A rows [m0, m0+mc) over k in [k0, k0+kc) into MR-tall
// k-major panels; rows past mc are zero.
static void pack_a_panels(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float * out) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        const int64_t h = mc - i0 < MR ? mc - i0 : MR;
        float * p = out + i0 * kc;
        if (h < MR) {
            memset(p, 0, sizeof(float) * kc * MR);
        }
        for (int64_t i = 0; i < h; i++) {
            const float * src = a + (m0 + i0 + i) * lda + k0;
            for (int64_t k = 0; k < kc; k++) {
                p[k * MR + i] = src[k];
            }
        }
    }
}

// gemm_scratch gives the calling thread's packing buffers for gemm: pa
// (KCQ×MC), pb (KCQ×NC) and, for weights of another type than F32, the
// dequantized rows (NR×KCQ). It returns 0 when out of memory.
static int gemm_scratch(float ** pa, float ** pb, float ** deq) {
    *pa = da3_scratch(DA3_BUF_A, (size_t) KCQ * MC);
    *pb = da3_scratch(DA3_BUF_B, (size_t) KCQ * NC);
    *deq = da3_scratch(DA3_BUF_DEQ, (size_t) NR * KCQ);
    return *pa != NULL && *pb != NULL && *deq != NULL;
}

// gemm computes C[m][n] = Σ_k A[m][k]·B[n][k] for m in [m0, m1), n in
// [n0, n1), then applies the epilogue ep (may be NULL). pa and pb are the
// packing buffers of gemm_scratch.
static void gemm(const float * a, int64_t lda, const struct bsrc * b, float * c, int64_t ldc, int64_t K,
                 int64_t m0, int64_t m1, int64_t n0, int64_t n1, const struct epi * ep, float * pa, float * pb) {
    const int64_t kb = b->q != NULL && ggml_blck_size(b->type) > KC ? KCQ : KC;
    for (int64_t jc = n0; jc < n1; jc += NC) {
        const int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        for (int64_t pc = 0; pc < K; pc += kb) {
            const int64_t kc = K - pc < kb ? K - pc : kb;
            const struct epi * e = pc + kc == K ? ep : NULL;
            pack_b_panels(b, jc, nc, pc, kc, pb);
            for (int64_t ic = m0; ic < m1; ic += MC) {
                const int64_t mc = m1 - ic < MC ? m1 - ic : MC;
                pack_a_panels(a, lda, ic, mc, pc, kc, pa);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    const __mmask16 k0 = mask_of(nc - jr), k1 = mask_of(nc - jr - 16);
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const int64_t mr = mc - ir < MR ? mc - ir : MR;
                        kernel(kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * ldc + jc + jr, ldc, mr, k0, k1, pc > 0, e, ic + ir, jc + jr);
                    }
                }
            }
        }
    }
}

// ---- entry checks ----
//
// The Go side builds nodes only for operands that fit (kernels.GEMMFits and
// friends); the kernels check again, in O(1), so that a node built in any
// other way records a fault (da3_fault) instead of reading out of bounds.

static int contiguous_f32(const struct ggml_tensor * t) {
    return t != NULL && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t);
}

// bias_ok: no bias, or an F32 contiguous vector of n values.
static int bias_ok(const struct ggml_tensor * b, int64_t n) { return b == NULL || (contiguous_f32(b) && ggml_nelements(b) == n); }

// gemm_dequantizes lists the weight types whose rows gemm dequantizes while
// packing: the block must divide the packed depth.
static int gemm_dequantizes(enum ggml_type t) {
    switch (t) {
    case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        return KCQ % ggml_blck_size(t) == 0;
    default:
        return 0;
    }
}

// gemm_operands_ok checks da3_op_gemm's operands (see there).
static int gemm_operands_ok(const struct ggml_tensor * dst, intptr_t act) {
    const struct ggml_tensor * w = dst->src[0], * x = dst->src[1];
    if (w == NULL || !ggml_is_contiguous(w) || !contiguous_f32(x) || !contiguous_f32(dst) || act < ACT_NONE || act > ACT_GELU ||
        x->ne[0] != w->ne[0] || dst->ne[0] != w->ne[1] || !bias_ok(dst->src[2], w->ne[1])) {
        return 0;
    }
    if (w->ne[2] == 1 && w->ne[3] == 1) { // one matrix: x [K, …] gives dst [N, …]
        return (w->type == GGML_TYPE_F32 || gemm_dequantizes(w->type)) &&
            dst->ne[1] == x->ne[1] && dst->ne[2] == x->ne[2] && dst->ne[3] == x->ne[3];
    }
    return w->type == GGML_TYPE_F32 && w->ne[2] == x->ne[2] && w->ne[3] == x->ne[3] && // one product per batch
        dst->ne[1] == x->ne[1] && dst->ne[2] == x->ne[2] && dst->ne[3] == x->ne[3];
}

// conv_operands_ok checks da3_op_conv2d's operands and parameters (see there).
static int conv_operands_ok(const struct ggml_tensor * dst, intptr_t prm) {
    const struct ggml_tensor * w = dst->src[0], * x = dst->src[1];
    const int64_t s = prm & 0xff, pad = (prm >> 8) & 0xff, d = (prm >> 16) & 0xff, act = (prm >> 24) & 0xff;
    if (!contiguous_f32(w) || !contiguous_f32(x) || !contiguous_f32(dst) || s < 1 || d < 1 || act > ACT_GELU ||
        w->ne[2] != x->ne[2] || dst->ne[2] != w->ne[3] || dst->ne[3] != x->ne[3] || !bias_ok(dst->src[2], w->ne[3]) ||
        x->ne[0] * x->ne[1] >= ((int64_t) 1 << 31)) { // the gathers use 32-bit offsets within a plane
        return 0;
    }
    const int64_t ow = (x->ne[0] + 2 * pad - d * (w->ne[0] - 1) - 1) / s + 1;
    const int64_t oh = (x->ne[1] + 2 * pad - d * (w->ne[1] - 1) - 1) / s + 1;
    return ow > 0 && oh > 0 && dst->ne[0] == ow && dst->ne[1] == oh;
}

// attention_operands_ok checks da3_op_attention's operands (see there).
static int attention_operands_ok(const struct ggml_tensor * dst) {
    const struct ggml_tensor * t[3] = { dst->src[0], dst->src[1], dst->src[2] };
    for (int i = 0; i < 3; i++) {
        if (t[i] == NULL || t[i]->type != GGML_TYPE_F32 || t[i]->nb[0] != sizeof(float) ||
            t[i]->nb[1] % sizeof(float) != 0 || t[i]->nb[2] % sizeof(float) != 0 || t[i]->nb[3] % sizeof(float) != 0 ||
            t[i]->ne[0] != t[0]->ne[0] || t[i]->ne[1] != t[0]->ne[1] || t[i]->ne[3] != t[0]->ne[3]) {
            return 0;
        }
    }
    return t[0]->ne[0] <= 256 && t[1]->ne[2] >= 1 && t[2]->ne[2] == t[1]->ne[2] && contiguous_f32(dst) &&
        dst->ne[0] == t[0]->ne[0] && dst->ne[1] == t[0]->ne[1] && dst->ne[2] == t[0]->ne[2] && dst->ne[3] == t[0]->ne[3];
}

// split gives thread ith its share of an M×N product: NR-wide column
// stripes when there are enough of them, else MR-tall row blocks. It
// returns 0 when the share is empty.
static int split(int64_t M, int64_t N, int ith, int nth, int64_t * m0, int64_t * m1, int64_t * n0, int64_t * n1) {
    const int64_t stripes = (N + NR - 1) / NR;
    *m0 = 0; *m1 = M; *n0 = 0; *n1 = N;
    if (stripes >= 4 * nth || M < (int64_t) nth * MR) {
        const int64_t per = (stripes + nth - 1) / nth;
        *n0 = per * ith * NR;
        *n1 = *n0 + per * NR < N ? *n0 + per * NR : N;
    } else {
        const int64_t per = ((M + nth - 1) / nth + MR - 1) / MR * MR;
        *m0 = per * ith;
        *m1 = *m0 + per < M ? *m0 + per : M;
    }
    return *m0 < *m1 && *n0 < *n1;
}

// da3_op_gemm: dst = mul_mat(src0, src1) for contiguous F32 src0 [K, N, B2,
// B3] and src1 [K, M, B2, B3] (one product per batch, no broadcasting); dst
// [N, M, B2, B3]. A 2-D src0 may also be f16 or block-quantized (blocks
// dividing 256): its rows are dequantized as they are packed, so the product
// runs at the F32 rate while the weights stay small. An optional src2 [N]
// is added to every row, then the activation in userdata (ACT_*) applied.
void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * w = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const struct ggml_tensor * bias = dst->src[2];
    if (!gemm_operands_ok(dst, (intptr_t) userdata)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const int64_t K = w->ne[0], N = w->ne[1];
    const int64_t M = w->ne[2] * w->ne[3] == 1 ? ggml_nrows(x) : x->ne[1];
    const int64_t batches = w->ne[2] * w->ne[3];
    const struct epi ep = { .bias = bias != NULL ? (const float *) bias->data : NULL, .act = (int) (intptr_t) userdata };
    const struct epi * e = ep.bias != NULL || ep.act != ACT_NONE ? &ep : NULL;
    int64_t m0, m1, n0, n1;
    if (!split(M, N, ith, nth, &m0, &m1, &n0, &n1)) {
        return;
    }
    float * pa, * pb, * deq;
    if (!gemm_scratch(&pa, &pb, &deq)) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    if (w->type != GGML_TYPE_F32) { // a 2-D quantized or f16 matrix, dequantized while packing
        const struct bsrc b = { .q = (const char *) w->data, .row_bytes = w->nb[1], .type = w->type, .deq = deq };
        gemm((const float *) x->data, K, &b, (float *) dst->data, N, K, m0, m1, n0, n1, e, pa, pb);
        return;
    }
    for (int64_t i = 0; i < batches; i++) {
        const struct bsrc b = { .b = (const float *) w->data + i * K * N, .ldb = K };
        gemm((const float *) x->data + i * K * M, K, &b, (float *) dst->data + i * N * M, N, K, m0, m1, n0, n1, e, pa, pb);
    }
}

// da3_op_conv2d: a 2-D convolution as an implicit-im2col GEMM. src0 is the
// F32 kernel [KW, KH, IC, OC] and src1 the F32 input [W, H, IC, N], both
// contiguous; dst [OW, OH, OC, N]; an optional src2 [OC] is the bias.
// userdata packs stride | pad<<8 | dil<<16 | act<<24.
void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t prm = (intptr_t) userdata;
    const struct ggml_tensor * w = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const struct ggml_tensor * bias = dst->src[2];
    if (!conv_operands_ok(dst, prm)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const int64_t KW = w->ne[0], KH = w->ne[1], IC = w->ne[2], OC = w->ne[3];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t K = KW * KH * IC, P = OW * OH;
    const struct epi ep = { .bias = bias != NULL ? (const float *) bias->data : NULL, .per_row = 1, .act = (int) ((prm >> 24) & 0xff) };
    const struct epi * e = ep.bias != NULL || ep.act != ACT_NONE ? &ep : NULL;
    int64_t m0, m1, n0, n1;
    if (!split(OC, P, ith, nth, &m0, &m1, &n0, &n1)) {
        return;
    }
    float * pa, * pb, * deq;
    if (!gemm_scratch(&pa, &pb, &deq)) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    for (int64_t n = 0; n < x->ne[3]; n++) {
        const struct bsrc b = {
            .x = (const float *) x->data + n * x->ne[0] * x->ne[1] * x->ne[2],
            .W = x->ne[0], .H = x->ne[1], .KW = KW, .KH = KH, .OW = OW,
            .s = prm & 0xff, .pad = (prm >> 8) & 0xff, .d = (prm >> 16) & 0xff,
        };
        gemm((const float *) w->data, K, &b, (float *) dst->data + n * OC * P, P, K, m0, m1, n0, n1, e, pa, pb);
    }
}

// ---- fused attention ----

// da3_op_attention: dst = softmax(q·kᵀ·scale)·v per head, for F32 q [hd, H,
// n, B], k and v [hd, H, nk, B] with contiguous rows of hd (any strides
// above) and hd ≤ 256; dst [hd, H, n, B] contiguous. userdata holds the
// scale's float bits.
//
// Threads take (batch, head, 32-query block) items in order. Everything runs
// on the packed register tile, transposed so that the softmax is along
// rows of memory: for each head a thread packs k and vᵀ once into MR-tall
// panels; for a block of 32 queries it computes the scores sᵀ [nk][32] =
// k·qᵀ, turns each column into probabilities (vector max, vexp, sum: 32
// queries at once), computes oᵀ [hd][32] = vᵀ·sᵀ (sᵀ already is a packed B
// panel) and writes oᵀ transposed into dst. No score matrix, permutation or
// copy of q, k, v or the output appears in the graph.
void da3_op_attention(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * q = dst->src[0];
    const struct ggml_tensor * k = dst->src[1];
    const struct ggml_tensor * v = dst->src[2];
    if (!attention_operands_ok(dst)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    union { int32_t i; float f; } sc = { .i = (int32_t) (intptr_t) userdata };
    const float scale = sc.f;
    const int64_t hd = q->ne[0], H = q->ne[1], n = q->ne[2], B = q->ne[3];
    const int64_t nk = k->ne[2];
    const int64_t nkp = (nk + MR - 1) / MR * MR; // keys, padded to whole panels
    const int64_t hdp = (hd + MR - 1) / MR * MR; // head dims, likewise
    const int64_t nqb = (n + NR - 1) / NR;
    const int64_t items = B * H * nqb;
    const int64_t i0 = items * ith / nth, i1 = items * (ith + 1) / nth;
    if (i0 >= i1) {
        return;
    }
    float * kp = da3_scratch(DA3_BUF_K, (size_t) nkp * hd);           // k panels: [key/MR][d][key%MR]
    float * vp = da3_scratch(DA3_BUF_V, (size_t) hdp * nk);           // vᵀ panels: [d/MR][key][d%MR]
    float * st = da3_scratch(DA3_BUF_S, (size_t) nk * NR + hd * NR); // sᵀ [key][32], then qᵀ [d][32]
    float * ot = da3_scratch(DA3_BUF_O, (size_t) hdp * NR);           // oᵀ [d][32]
    if (kp == NULL || vp == NULL || st == NULL || ot == NULL) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    float * qp = st + nk * NR;
    const int64_t dld = H * hd; // dst row stride (one query token)
    int64_t packed = -1;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t bh = it / nqb, qb = it % nqb;
        const int64_t b = bh / H, h = bh % H;
        if (bh != packed) {
            const char * kb = (const char *) k->data + b * k->nb[3] + h * k->nb[1];
            const char * vb = (const char *) v->data + b * v->nb[3] + h * v->nb[1];
            memset(kp + (nkp - MR) * hd, 0, sizeof(float) * MR * hd); // the padding keys of the last panel
            memset(vp + (hdp - MR) * nk, 0, sizeof(float) * MR * nk); // the padding dims of the last panel
            for (int64_t j = 0; j < nk; j++) {
                const float * kr = (const float *) (kb + j * k->nb[2]);
                const float * vr = (const float *) (vb + j * v->nb[2]);
                float * kd = kp + (j / MR) * MR * hd + j % MR;
                for (int64_t d = 0; d < hd; d++) {
                    kd[d * MR] = kr[d];
                    vp[(d / MR) * nk * MR + j * MR + d % MR] = vr[d];
                }
            }
            packed = bh;
        }
        const int64_t t0 = qb * NR;
        const int64_t w = n - t0 < NR ? n - t0 : NR;
        const char * qb0 = (const char *) q->data + b * q->nb[3] + h * q->nb[1] + t0 * q->nb[2];
        if (w < NR) {
            memset(qp, 0, sizeof(float) * hd * NR);
        }
        for (int64_t j = 0; j < w; j++) {
            const float * qr = (const float *) (qb0 + j * q->nb[2]);
            for (int64_t d = 0; d < hd; d++) {
                qp[d * NR + j] = qr[d];
            }
        }
        // scores sᵀ = k·qᵀ
        for (int64_t j = 0; j < nk; j += MR) {
            const int64_t mr = nk - j < MR ? nk - j : MR;
            kernel(hd, kp + j * hd, qp, st + j * NR, NR, mr, 0xffff, 0xffff, 0, NULL, 0, 0);
        }
        // probabilities, as torch: exp(x·scale − max(x·scale)) / Σ, per column
        const __m512 vs = _mm512_set1_ps(scale);
        for (int half = 0; half < 2; half++) {
            float * c = st + 16 * half;
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int64_t j = 0; j < nk; j++) {
                mx = _mm512_max_ps(mx, _mm512_load_ps(c + j * NR));
            }
            const __m512 m = _mm512_mul_ps(mx, vs);
            __m512 sum = _mm512_setzero_ps();
            for (int64_t j = 0; j < nk; j++) {
                const __m512 ex = vexp(_mm512_fmsub_ps(_mm512_load_ps(c + j * NR), vs, m));
                _mm512_store_ps(c + j * NR, ex);
                sum = _mm512_add_ps(sum, ex);
            }
            const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
            for (int64_t j = 0; j < nk; j++) {
                _mm512_store_ps(c + j * NR, _mm512_mul_ps(_mm512_load_ps(c + j * NR), inv));
            }
        }
        // oᵀ = vᵀ·sᵀ
        for (int64_t d = 0; d < hd; d += MR) {
            const int64_t mr = hd - d < MR ? hd - d : MR;
            for (int64_t pc = 0; pc < nk; pc += KC) {
                const int64_t kc = nk - pc < KC ? nk - pc : KC;
                kernel(kc, vp + d * nk + pc * MR, st + pc * NR, ot + d * NR, NR, mr, 0xffff, 0xffff, pc > 0, NULL, 0, 0);
            }
        }
        float * o = (float *) dst->data + ((b * n + t0) * H + h) * hd;
        for (int64_t j = 0; j < w; j++) {
            for (int64_t d = 0; d < hd; d++) {
                o[j * dld + d] = ot[d * NR + j];
            }
        }
    }
}

#else

int da3_gemm_available(void) { return 0; }

// Without AVX-512 the Go side never builds these nodes (kernels.Available);
// a node built anyway records a fault and computes nothing.

void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) dst; (void) ith; (void) nth; (void) userdata;
    da3_fault(DA3_FAULT_UNAVAILABLE);
}

void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) dst; (void) ith; (void) nth; (void) userdata;
    da3_fault(DA3_FAULT_UNAVAILABLE);
}

void da3_op_attention(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) dst; (void) ith; (void) nth; (void) userdata;
    da3_fault(DA3_FAULT_UNAVAILABLE);
}

#endif
