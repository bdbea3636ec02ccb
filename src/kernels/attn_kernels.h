// The fused attention kernels over KV rows in any cache codec (kv_scores, kv_accumulate,
// exp_shift_sum, softmax_tile) are declared with every other kernel in kernel_list.inc, their
// contracts there:
// scalar reference in ref/attn_kernels.cc, AVX2 in avx2/attn_kernels.cc; tests compare the two.
#pragma once

#include "kernels/kernels.h"
