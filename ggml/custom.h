#pragma once
#include "da3_ggml.h"
void da3_op_expp1(struct ggml_tensor * dst, int ith, int nth, void * userdata);
