// The attention in int8 for int8c (kernels_body.h: AVX-512 VNNI, or the
// avx2 variant's vpdpbusd forms, i8c_attention_runs): both products of
// softmax(q·kᵀ·scale)·v with int32 sums over their whole depth, as the
// per-channel products (kernels_int8c*.h) compute the linear layers:
//
//   - scores k·qᵀ: k quantized per key and q per query over the head dims
//     (s = max|x|/127, round to nearest), k as unsigned A panels (q + 128),
//     q as a signed B panel with its excesses (i8c_tile);
//   - probabilities: p = exp(s·scale − max) ∈ (0, 1] per query, as the bytes
//     round(255·p) of an unsigned B panel; their integer sum per query is
//     the softmax's denominator, so a probability rounded to 0 leaves both
//     the numerator and the denominator alike;
//   - outputs vᵀ·p: v quantized per head dim over the keys (signed A panels),
//     times the probability bytes (i8c_tile_su), divided by the sum.
//
// Everything else (threads, items, the scores' maxima, the output's
// transposition) is da3_attention's. The panels of vᵀ are half a vector
// tall (a vector of head dims fills two).
_Static_assert(MR_I8C * 2 == VL, "pack_v_i8c stores a vector's halves as two panels");

// pack_q_i8c quantizes w query rows of hd values (row stride ldq floats) per
// row into the signed B panel p of NR columns: [quads][NR], then the scales
// [NR] and the excesses 128·Σq [NR]; columns past w are zero.
static ISA_INT8C void pack_q_i8c(const float * q, int64_t ldq, int64_t w, int64_t hd, int32_t * p) {
    const int64_t kq = i8c_quads(hd);
    float * sc = (float *) (p + kq * NR);
    int32_t * ex = p + (kq + 1) * NR;
    if (w < NR) {
        memset(p, 0, sizeof(int32_t) * i8c_b_words(hd) * NR);
    }
    for (int64_t j = 0; j < w; j++) {
        const float * x = q + j * ldq;
        const float d = i8c_row_amax(x, hd) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        vi sum = vi_zero();
        for (int64_t k = 0; k < 4 * kq; k += VL) {
            // round to nearest, ties to even; the depth's padding quantizes to 0
            const vi qi = vi_round(v_mul(v_loadu_m(x + k, m_first(hd - k)), v_set1(id)));
            sum = vi_add(sum, qi);
            int32_t quads[VL / 4];
            vi_bytes(qi, quads);
            for (int qd = 0; qd < VL / 4 && k / 4 + qd < kq; qd++) {
                p[(k / 4 + qd) * NR + j] = quads[qd];
            }
        }
        sc[j] = d;
        ex[j] = 128 * vi_hsum(sum);
    }
}

// pack_v_i8c quantizes vᵀ: each of the hd dims over the nk keys (rows of v
// with stride ldv floats) with one scale per dim, as signed bytes in
// MR_I8C-tall A panels of i8c_a_words(nk)·MR_I8C words ([quads of keys]
// [MR_I8C], then the scales); keys and dims past the ends are zero.
static ISA_INT8C void pack_v_i8c(const float * v, int64_t ldv, int64_t nk, int64_t hd, int32_t * out) {
    const int64_t kq = i8c_quads(nk), words = i8c_a_words(nk) * MR_I8C;
    const int64_t nvec = (hd + VL - 1) / VL, npan = (hd + MR_I8C - 1) / MR_I8C;
    float d[256 + VL], id[256 + VL];
    vf mx[(256 + VL - 1) / VL];
    for (int64_t c = 0; c < nvec; c++) {
        mx[c] = v_zero();
    }
    for (int64_t j = 0; j < nk; j++) { // the dims' largest magnitudes, key by key (v's rows are far apart)
        for (int64_t c = 0; c < nvec; c++) {
            mx[c] = v_max(mx[c], v_abs(v_loadu_m(v + j * ldv + c * VL, m_first(hd - c * VL))));
        }
    }
    for (int64_t c = 0; c < nvec; c++) { // their scales
        vf dv;
        v_storeu(id + c * VL, i8c_scales(mx[c], &dv));
        v_storeu(d + c * VL, dv);
    }
    for (int64_t q = 0; q < kq; q++) {
        for (int64_t c = 0; c < nvec; c++) {
            const vm m = m_first(hd - c * VL);
            const vf vid = v_loadu(id + c * VL);
            vi e[4]; // keys past the end quantize to 0
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                e[i] = 4 * q + i < nk ? vi_round(v_mul(v_loadu_m(v + (4 * q + i) * ldv + c * VL, m), vid)) : vi_zero();
            }
            const vi r = vi_quads_s(e[0], e[1], e[2], e[3]);
            // the first half of the lanes are the dims of panel 2c, the second those of panel 2c+1
            vi_store_halves(out + 2 * c * words + q * MR_I8C, 2 * c + 1 < npan ? out + (2 * c + 1) * words + q * MR_I8C : NULL, r);
        }
    }
    for (int64_t pn = 0; pn < npan; pn++) {
        float * sc = (float *) (out + pn * words + kq * MR_I8C);
        for (int i = 0; i < MR_I8C; i++) {
            sc[i] = pn * MR_I8C + i < hd ? d[pn * MR_I8C + i] : 0.0f;
        }
    }
}

// softmax_u8 turns the scores sᵀ [nk][NR] with column maxima mx into the
// bytes round(255·exp(x·vs − mx·vs)) of the unsigned B panel sp ([quads of
// keys][NR], then the scales 1 and the excesses 0), and 1/Σ bytes per
// column into inv. The exponentials are 255·2^(x·vs' − mx·vs') with vs' =
// vs·log2(e) (vpow2_fast: the scale by log2(e) and by 255 folded in).
static ISA_INT8C void softmax_u8(const float * st, int64_t nk, const vf * mx, vf vs, int32_t * sp, vf * inv) {
    const int64_t kq = i8c_quads(nk), full = nk / 4;
    const vf vs2 = v_mul(vs, v_set1(1.44269504088896341f));
    for (int part = 0; part < NV; part++) {
        const float * c = st + VL * part;
        const vf m = v_mul(mx[part], vs2);
        vi sum = vi_zero();
        // whole quads of keys without a bound test a key (the four exponentials independent), then the rest
        for (int64_t q = 0; q < full; q++) {
            const float * cq = c + 4 * q * NR;
            const vi b0 = vi_round(vpow2_fast(v_fms(v_load(cq), vs2, m), 255.0f));
            const vi b1 = vi_round(vpow2_fast(v_fms(v_load(cq + NR), vs2, m), 255.0f));
            const vi b2 = vi_round(vpow2_fast(v_fms(v_load(cq + 2 * NR), vs2, m), 255.0f));
            const vi b3 = vi_round(vpow2_fast(v_fms(v_load(cq + 3 * NR), vs2, m), 255.0f));
            sum = vi_add(sum, vi_add(vi_add(b0, b1), vi_add(b2, b3)));
            vi_store(sp + q * NR + VL * part, vi_quads_u(b0, b1, b2, b3));
        }
        for (int64_t q = full; q < kq; q++) {
            vi r = vi_zero();
            for (int i = 0; 4 * q + i < nk; i++) {
                const vi b = vi_round(vpow2_fast(v_fms(v_load(c + (4 * q + i) * NR), vs2, m), 255.0f));
                sum = vi_add(sum, b);
                r = vi_or(r, vi_slli(b, 8 * i));
            }
            vi_store(sp + q * NR + VL * part, r);
        }
        inv[part] = v_div(v_set1(1.0f), vi_float(sum));
        v_store((float *) (sp + kq * NR) + VL * part, v_set1(1.0f));
        vi_store(sp + (kq + 1) * NR + VL * part, vi_zero());
    }
}

// attention_i8c computes da3_attention's items [i0, i1) in int8.
static ISA_INT8C void attention_i8c(struct ggml_tensor * dst, float scale, int64_t i0, int64_t i1) {
    const struct ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    const int64_t hd = q->ne[0], H = q->ne[1], n = q->ne[2], nk = k->ne[2];
    const int64_t nqb = (n + NR - 1) / NR;
    const int64_t kw = i8c_a_words(hd) * MR_I8C, vw = i8c_a_words(nk) * MR_I8C; // words per panel of k and of vᵀ
    const int64_t nkpan = (nk + MR_I8C - 1) / MR_I8C, npan = (hd + MR_I8C - 1) / MR_I8C;
    const int64_t qw = i8c_b_words(hd) * NR, pw = i8c_b_words(nk) * NR; // the B panels of q and of the probabilities
    int32_t * kp = (int32_t *) da3_scratch(DA3_BUF_K, (size_t) (nkpan * kw));
    int32_t * vp = (int32_t *) da3_scratch(DA3_BUF_V, (size_t) (npan * vw));
    float * st = da3_scratch(DA3_BUF_S, (size_t) (nk * NR));            // sᵀ [key][NR]
    int32_t * qp = (int32_t *) da3_scratch(DA3_BUF_AH, (size_t) (qw + pw)); // q's panel, then the probabilities'
    float * ot = da3_scratch(DA3_BUF_O, (size_t) (npan * MR_I8C * NR));  // oᵀ [d][NR]
    if (kp == NULL || vp == NULL || st == NULL || qp == NULL || ot == NULL) {
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    int32_t * pp = qp + qw; // qw is a multiple of NR words: aligned as the tiles load B
    const tile_fn scores = i8c_tile(), outputs = i8c_tile_su();
    const int64_t dld = H * hd;
    int64_t packed = -1;
    const int * abort = da3_abort_flag(dst);
    for (int64_t it = i0; it < i1; it++) {
        if (da3_aborted(abort)) {
            return;
        }
        const int64_t bh = it / nqb, qb = it % nqb;
        const int64_t b = bh / H, h = bh % H;
        if (bh != packed) {
            pack_a_i8c(attention_rows(k, b, h, 0), k->nb[2] / sizeof(float), 0, nk, hd, kp);
            pack_v_i8c(attention_rows(v, b, h, 0), v->nb[2] / sizeof(float), nk, hd, vp);
            packed = bh;
        }
        const int64_t t0 = qb * NR;
        const int64_t w = n - t0 < NR ? n - t0 : NR;
        pack_q_i8c(attention_rows(q, b, h, t0), q->nb[2] / sizeof(float), w, hd, qp);
        prefetch_queries(q, b, h, t0 + NR, n, hd);
        vf mx[NV];
        for (int part = 0; part < NV; part++) {
            mx[part] = v_set1(-INFINITY);
        }
        for (int64_t j = 0; j < nk; j += MR_I8C) {
            const int64_t mr = nk - j < MR_I8C ? nk - j : MR_I8C;
            scores(i8c_quads(hd), kp + j / MR_I8C * kw, qp, st + j * NR, NR, mr, NR, 0, NULL, 0, 0);
            for (int64_t r = j; r < j + mr; r++) {
                for (int part = 0; part < NV; part++) {
                    mx[part] = v_max(mx[part], v_load(st + r * NR + VL * part));
                }
            }
        }
        vf inv[NV];
        softmax_u8(st, nk, mx, v_set1(scale), pp, inv);
        for (int64_t pn = 0; pn < npan; pn++) {
            const int64_t d = pn * MR_I8C, mr = hd - d < MR_I8C ? hd - d : MR_I8C;
            outputs(i8c_quads(nk), vp + pn * vw, pp, ot + d * NR, NR, mr, NR, 0, NULL, 0, 0);
        }
        attention_store(ot, inv, hd, w, (float *) dst->data + ((b * n + t0) * H + h) * hd, dld);
    }
}
