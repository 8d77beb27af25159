#pragma once
#include "da3_ggml.h"
void da3_op_expp1(struct ggml_tensor * dst, int ith, int nth, void * userdata);
int da3_gemm_available(void);
void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_attention(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_bilinear(struct ggml_tensor * dst, int ith, int nth, void * userdata);
