// CPU kernels for ggml_custom_4d, exposed to Go as ggml.CustomOp values.
// Each kernel splits its rows over the nth threads by ith.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "da3_ggml.h"
#include "custom.h"

// da3_op_expp1: dst = exp(src0) + 1 element-wise (F32, same shape). This is
// DA3's confidence activation "expp1" in one pass.
void da3_op_expp1(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * src = dst->src[0];
    const int64_t nr = ggml_nrows(src);
    const int64_t ne0 = src->ne[0];
    const int64_t per = (nr + nth - 1) / nth;
    const int64_t r0 = per * ith;
    const int64_t r1 = r0 + per < nr ? r0 + per : nr;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % src->ne[1];
        const int64_t i2 = (r / src->ne[1]) % src->ne[2];
        const int64_t i3 = r / (src->ne[1] * src->ne[2]);
        const float * x = (const float *) ((const char *) src->data + i1*src->nb[1] + i2*src->nb[2] + i3*src->nb[3]);
        float * y = (float *) ((char *) dst->data + i1*dst->nb[1] + i2*dst->nb[2] + i3*dst->nb[3]);
        for (int64_t i = 0; i < ne0; i++) {
            y[i] = expf(x[i]) + 1.0f;
        }
    }
}

// da3_op_bilinear: ggml_interpolate's bilinear mode (userdata: 1 for
// align_corners) for a contiguous F32 src0 [W, H, C, N] resized to dst [OW,
// OH, C, N], with the same source coordinates and weights as ggml's kernel
// but with the per-column ones computed once per call instead of per
// element, and rows (not channels) split over the threads.
void da3_op_bilinear(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * src = dst->src[0];
    const int64_t W = src->ne[0], H = src->ne[1];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t rows = OH * dst->ne[2] * dst->ne[3];
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    if (r0 >= r1) {
        return;
    }
    const int align = (int) (intptr_t) userdata;
    float sf0 = (float) OW / W, sf1 = (float) OH / H, po = 0.5f;
    if (align) {
        po = 0.0f;
        sf0 = OW > 1 && W > 1 ? (float) (OW - 1) / (W - 1) : sf0;
        sf1 = OH > 1 && H > 1 ? (float) (OH - 1) / (H - 1) : sf1;
    }
    int32_t * x0 = malloc(sizeof(int32_t) * 2 * OW);
    float * dx = malloc(sizeof(float) * OW);
    if (x0 == NULL || dx == NULL) {
        abort(); // a few KiB: nothing sensible to do inside a graph
    }
    int32_t * x1 = x0 + OW;
    for (int64_t i = 0; i < OW; i++) {
        const float x = ((float) i + po) / sf0 - po;
        int64_t a = (int64_t) floorf(x), b = a + 1;
        a = a < 0 ? 0 : a > W - 1 ? W - 1 : a;
        b = b < 0 ? 0 : b > W - 1 ? W - 1 : b;
        float d = x - (float) a;
        dx[i] = d < 0.0f ? 0.0f : d > 1.0f ? 1.0f : d;
        x0[i] = (int32_t) a;
        x1[i] = (int32_t) b;
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t oy = r % OH, plane = r / OH;
        const float y = ((float) oy + po) / sf1 - po;
        int64_t y0 = (int64_t) floorf(y), y1 = y0 + 1;
        y0 = y0 < 0 ? 0 : y0 > H - 1 ? H - 1 : y0;
        y1 = y1 < 0 ? 0 : y1 > H - 1 ? H - 1 : y1;
        float dy = y - (float) y0;
        dy = dy < 0.0f ? 0.0f : dy > 1.0f ? 1.0f : dy;
        const float * s0 = (const float *) src->data + (plane * H + y0) * W;
        const float * s1 = (const float *) src->data + (plane * H + y1) * W;
        float * out = (float *) dst->data + r * OW;
        for (int64_t i = 0; i < OW; i++) {
            const float a = s0[x0[i]], b = s0[x1[i]], c = s1[x0[i]], d = s1[x1[i]];
            out[i] = a * (1 - dx[i]) * (1 - dy) + b * dx[i] * (1 - dy) + c * (1 - dx[i]) * dy + d * dx[i] * dy;
        }
    }
    free(x0);
    free(dx);
}
