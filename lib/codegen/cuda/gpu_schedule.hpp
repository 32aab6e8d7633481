// Which GPU threads compute what: a kernel's stages rearranged for a GPU
// before they are emitted (codegen/cuda/gpu_kernel.hpp), as kernel IR.
//
// The CPU gives a thread a range of a stage's outer loop and wants the rows
// inside it (vectors along them, caches over them). A GPU wants tens of
// thousands of threads, neighbouring ones reading neighbouring elements:
//
//  - Elements. A stage's loops whose variables index its store (its
//    element's coordinates) collapse into one parallel loop over all its
//    elements, a GPU thread an element; the loops whose variables do not
//    index it (batch_matmul's k, accumulating into the element it reads)
//    stay inside it, in their order, so that every element is updated in the
//    order the CPU's loops update it. A dense layer's [m, n] products get
//    m·n threads, not m; batch_matmul's [B, m, n] B·m·n, not B.
//  - Warps. A stage whose element is a reduction along a row (softmax's max
//    and sum, layer_norm's sums, a dense product's dot, a sum over an axis)
//    computes each element by a warp's 32 lanes: lane l folds the row's
//    elements l, l + 32, … (the reduction's axes flattened: neighbouring
//    lanes read neighbouring elements, one memory transaction a step), the
//    lanes' partials combine in a butterfly of warp shuffles, and lane 0
//    stores (Stage::lanes).
//  - Blocks. Where a reduction is long (4096 elements or more, known when
//    compiling) or the stage has one element (a whole tensor's sum), a
//    block's 256 threads compute the element: each warp as above, then the
//    warps' sums in order through shared memory.
//  - Vectors. A flat element-wise stage of 32-bit elements (an add, an
//    activation, a fused chain of them over whole tensors) gives a thread 4
//    consecutive elements, read and written as 128-bit vectors where all 4
//    are in range and the buffers aligned (Stage::vector_elements).
//  - Tiles. A product of 16 rows or more (or rows known at run time) —
//    a dot product of rows of a with rows of b (dense's x · wᵀ,
//    batch_matmul's q · kᵀ) or matmul's a · b (attention's p · v), the two
//    forms of dot_product.hpp — is computed in tiles of 64 × 64 elements, a
//    block of 256 threads a tile, each summing 4 × 4 of them from a's and
//    b's elements staged in shared memory 16 steps of k at a time
//    (GpuProductTile): each element of a and b is read from memory once a
//    tile, not once an element.
#pragma once

#include "codegen/kernel_ir.hpp"

namespace nimble::codegen {

/// The lanes of a GPU warp: Stage::lanes of a stage computed a warp an element.
inline constexpr unsigned kWarpLanes = 32;
/// A block's threads: Stage::lanes of a stage computed a block an element.
inline constexpr unsigned kBlockLanes = 256;

/// `kernel` with its stages scheduled for a GPU as the header says. What it
/// computes is unchanged; the order of a reduction's sum changes where its
/// stage runs a warp an element (as reassociated sums do on the CPU).
[[nodiscard]] KernelIR schedule_for_gpu(KernelIR kernel);

}  // namespace nimble::codegen
