// CPU kernels for ggml_custom_4d, exposed to Go as ggml.CustomOp values.
// Each kernel splits its rows over the nth threads by ith.
#include <math.h>
#include <stdint.h>
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
