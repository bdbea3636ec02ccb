// KernelTable: one function pointer per dispatched kernel (kernel_list.inc), one table per ISA.
// The entry points in kernels.h call through the active table; tests and kernel-lab benches may
// call a given ISA's table directly.
#pragma once

#include "kernels/kernels.h"

namespace hz::kernels {

struct KernelTable {
#define HZ_KERNEL(variants, ret, name, params, args) ret(*name) params = nullptr;
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL
};

// The implementations of `isa` (AVX2 without the VNNI matmuls). Asking for an ISA this CPU lacks
// is allowed (the table exists); calling through it is not.
const KernelTable& kernel_table(Isa isa);

}  // namespace hz::kernels
