// An AVX-512 F32 matrix product for the CPU, used through ggml_custom_4d
// (ggml.OpGEMM). ggml's own F32 path (llamafile's tinyBLAS) reaches about 40 %
// of the AVX-512 FMA peak of the CPUs this project runs on; this one follows
// the GotoBLAS/BLIS scheme (packed panels sized for L1/L2, a 14×32 register
// tile) and reaches about 80 %.
//
// dst[m][n] = Σ_k A[m][k]·B[n][k] with A = src[1] (activations: M rows of K)
// and B = src[0] (weights: N rows of K), which is ggml_mul_mat(src0, src1).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "da3_ggml.h"
#include "custom.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#define MR 14   // rows of A per register tile
#define NR 32   // columns of B per register tile (two zmm)
#define KC 256  // depth of a packed block: a B micro-panel (KC×NR) fits L1
#define MC 112  // rows of A per packed block (MC×KC fits L2)
#define NC 1024 // columns of B per packed block

int da3_gemm_available(void) { return 1; }

// Per-thread packing buffers, grown on demand and kept for the thread's life.
static __thread float * pack_a;
static __thread float * pack_b;

static float * buffer(float ** p, size_t n) {
    if (*p == NULL) {
        *p = aligned_alloc(64, n * sizeof(float));
    }
    return *p;
}

// bsrc describes B: either rows of K values (a matrix) or the implicit
// im2col matrix of a convolution input, B[n][k] with n = oy·OW + ox and
// k = (ic·KH + ky)·KW + kx, read from x [W, H, IC] without materialising it.
struct bsrc {
    const float * b; int64_t ldb;                    // F32 matrix
    const char * q; size_t row_bytes; enum ggml_type type; // matrix of another type (q == NULL: F32)
    const float * x; int64_t W, H, KW, KH, OW, s, pad, d; // convolution (x == NULL: matrix)
};

// conv_value is one element of the implicit im2col matrix.
static inline float conv_value(const struct bsrc * src, int64_t n, int64_t ic, int64_t ky, int64_t kx) {
    const int64_t oy = n / src->OW, ox = n % src->OW;
    const int64_t iy = oy * src->s + ky * src->d - src->pad;
    const int64_t ix = ox * src->s + kx * src->d - src->pad;
    if (iy < 0 || iy >= src->H || ix < 0 || ix >= src->W) {
        return 0.0f;
    }
    return src->x[(ic * src->H + iy) * src->W + ix];
}

// pack_conv_panel packs one NR-wide panel of the implicit im2col matrix:
// columns n0 … n0+w−1 over k in [k0, k0+kc). With stride 1 and the panel
// inside one output row, each k is one masked load of a row segment of x.
static void pack_conv_panel(const struct bsrc * src, int64_t n0, int64_t w, int64_t k0, int64_t kc, float * p) {
    const int64_t oy = n0 / src->OW, ox0 = n0 % src->OW;
    const int fast = src->s == 1 && ox0 + w <= src->OW && w == NR;
    for (int64_t k = 0; k < kc; k++) {
        const int64_t kk = k0 + k;
        const int64_t kx = kk % src->KW, ky = (kk / src->KW) % src->KH, ic = kk / (src->KW * src->KH);
        float * dst = p + k * NR;
        if (fast) {
            const int64_t iy = oy + ky * src->d - src->pad;
            if (iy < 0 || iy >= src->H) {
                _mm512_store_ps(dst, _mm512_setzero_ps());
                _mm512_store_ps(dst + 16, _mm512_setzero_ps());
                continue;
            }
            const int64_t ix0 = ox0 + kx * src->d - src->pad; // x column of lane 0
            const float * row = src->x + (ic * src->H + iy) * src->W;
            // lanes j with 0 <= ix0 + j < W
            const int64_t lo = ix0 < 0 ? -ix0 : 0;
            const int64_t hi = src->W - ix0; // lanes below hi are inside
            const __mmask32 m = (hi <= 0 || lo >= NR) ? 0 :
                (__mmask32) ((hi >= NR ? 0xffffffffu : ((1u << hi) - 1)) & ~((1u << lo) - 1));
            _mm512_store_ps(dst, _mm512_maskz_loadu_ps((__mmask16) m, row + ix0));
            _mm512_store_ps(dst + 16, _mm512_maskz_loadu_ps((__mmask16) (m >> 16), row + ix0 + 16));
        } else {
            for (int64_t j = 0; j < NR; j++) {
                dst[j] = j < w ? conv_value(src, n0 + j, ic, ky, kx) : 0.0f;
            }
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
        if (src->q != NULL) { // dequantize each row's segment, then transpose it into the panel
            const struct ggml_type_traits * tt = ggml_get_type_traits(src->type);
            const size_t seg = ggml_row_size(src->type, k0); // k0 is a multiple of the block size
            float row[KC];
            for (int64_t j = 0; j < w; j++) {
                tt->to_float(src->q + (n0 + j0 + j) * src->row_bytes + seg, row, kc);
                for (int64_t k = 0; k < kc; k++) {
                    p[k * NR + j] = row[k];
                }
            }
            continue;
        }
        for (int64_t j = 0; j < w; j++) {
            const float * row = src->b + (n0 + j0 + j) * src->ldb + k0;
            for (int64_t k = 0; k < kc; k++) {
                p[k * NR + j] = row[k];
            }
        }
    }
}

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

// kernel computes an MR×NR tile over kc and stores (or adds) its first mr
// rows and the columns enabled in m0, m1 into c.
static void kernel(int64_t kc, const float * ap, const float * bp, float * c, int64_t ldc, int64_t mr,
                   __mmask16 m0, __mmask16 m1, int accumulate) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        c0[i] = _mm512_setzero_ps();
        c1[i] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(bp);
        const __m512 b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            const __m512 av = _mm512_set1_ps(ap[i]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
        ap += MR;
        bp += NR;
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
            _mm512_mask_storeu_ps(cr, m0, v0);
            _mm512_mask_storeu_ps(cr + 16, m1, v1);
        }
    }
}

static __mmask16 mask_of(int64_t n) { return n >= 16 ? (__mmask16) 0xffff : n <= 0 ? 0 : (__mmask16) ((1u << n) - 1); }

// gemm computes C[m][n] = Σ_k A[m][k]·B[n][k] for m in [m0, m1), n in [n0, n1).
static void gemm(const float * a, int64_t lda, const struct bsrc * b, float * c, int64_t ldc, int64_t K,
                 int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    float * pb = buffer(&pack_b, (size_t) KC * NC);
    float * pa = buffer(&pack_a, (size_t) KC * MC);
    if (pa == NULL || pb == NULL) {
        abort(); // out of memory for two small buffers: nothing sensible to do inside a graph
    }
    for (int64_t jc = n0; jc < n1; jc += NC) {
        const int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = K - pc < KC ? K - pc : KC;
            pack_b_panels(b, jc, nc, pc, kc, pb);
            for (int64_t ic = m0; ic < m1; ic += MC) {
                const int64_t mc = m1 - ic < MC ? m1 - ic : MC;
                pack_a_panels(a, lda, ic, mc, pc, kc, pa);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    const __mmask16 k0 = mask_of(nc - jr), k1 = mask_of(nc - jr - 16);
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const int64_t mr = mc - ir < MR ? mc - ir : MR;
                        kernel(kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * ldc + jc + jr, ldc, mr, k0, k1, pc > 0);
                    }
                }
            }
        }
    }
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
// dividing KC): its rows are dequantized as they are packed, so the product
// runs at the F32 rate while the weights stay small.
void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * w = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const int64_t K = w->ne[0], N = w->ne[1];
    const int64_t M = w->ne[2] * w->ne[3] == 1 ? ggml_nrows(x) : x->ne[1];
    const int64_t batches = w->ne[2] * w->ne[3];
    int64_t m0, m1, n0, n1;
    if (!split(M, N, ith, nth, &m0, &m1, &n0, &n1)) {
        return;
    }
    if (w->type != GGML_TYPE_F32) { // a 2-D quantized or f16 matrix, dequantized while packing
        const struct bsrc b = { .q = (const char *) w->data, .row_bytes = w->nb[1], .type = w->type };
        gemm((const float *) x->data, K, &b, (float *) dst->data, N, K, m0, m1, n0, n1);
        return;
    }
    for (int64_t i = 0; i < batches; i++) {
        const struct bsrc b = { .b = (const float *) w->data + i * K * N, .ldb = K };
        gemm((const float *) x->data + i * K * M, K, &b, (float *) dst->data + i * N * M, N, K, m0, m1, n0, n1);
    }
}

// da3_op_conv2d: a 2-D convolution as an implicit-im2col GEMM. src0 is the
// F32 kernel [KW, KH, IC, OC] and src1 the F32 input [W, H, IC, N], both
// contiguous; dst [OW, OH, OC, N]. userdata packs stride | pad<<8 | dil<<16.
void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t prm = (intptr_t) userdata;
    const struct ggml_tensor * w = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const int64_t KW = w->ne[0], KH = w->ne[1], IC = w->ne[2], OC = w->ne[3];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t K = KW * KH * IC, P = OW * OH;
    int64_t m0, m1, n0, n1;
    if (!split(OC, P, ith, nth, &m0, &m1, &n0, &n1)) {
        return;
    }
    for (int64_t n = 0; n < x->ne[3]; n++) {
        const struct bsrc b = {
            .x = (const float *) x->data + n * x->ne[0] * x->ne[1] * x->ne[2],
            .W = x->ne[0], .H = x->ne[1], .KW = KW, .KH = KH, .OW = OW,
            .s = prm & 0xff, .pad = (prm >> 8) & 0xff, .d = (prm >> 16) & 0xff,
        };
        gemm((const float *) w->data, K, &b, (float *) dst->data + n * OC * P, P, K, m0, m1, n0, n1);
    }
}

#else

int da3_gemm_available(void) { return 0; }

void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) dst; (void) ith; (void) nth; (void) userdata;
    abort(); // unreachable: Go only builds OpGEMM nodes when da3_gemm_available()
}

void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) dst; (void) ith; (void) nth; (void) userdata;
    abort(); // unreachable, as above
}

#endif
