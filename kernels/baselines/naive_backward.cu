// Softmax backward of naive attention, fused into one pass over a row of P and dP.
//
// The naive backward runs its four products through cuBLAS (dV = Pᵀ dO, dP = dO Vᵀ,
// dQ = scale · dS K, dK = scale · dSᵀ Q); between them this kernel turns each row of dP into a
// row of dS = P ∘ (dP - D) with D_r = sum_c P[r, c] · dP[r, c], and writes D. P comes from the
// naive forward, which materialises it (0 on keys hidden by the causal mask, so dS is 0 there
// too). One thread block per row: P and dP are read from HBM once into shared memory (kept in
// the input dtype, exactly as read), reduced for D_r, and dS is written once.
//
// P, dP and dS are all in the input dtype, as a framework's matmul - softmax backward - matmul
// keeps them: the same HBM bytes as that baseline, and dS is rounded to the input dtype anyway
// for the cuBLAS products that read it. The arithmetic here is float32.
//
// Compile-time parameters (-D): ELEM_T = float, half_bits (float16) or bf16_bits, the dtype of
// P, dP and dS; NUM_THREADS = threads per row (a multiple of 32, at most 1024); VEC = elements
// per load and store: 16 bytes' worth when seq_k is a multiple of it (every row then starts
// 16-byte aligned), else 1.
// Launch: grid (B·H·seq_q), NUM_THREADS threads, 2 · seq_k · sizeof(ELEM_T) bytes of dynamic
// shared memory.

#if !defined(ELEM_T) || !defined(NUM_THREADS) || !defined(VEC)
#error "compile with -DELEM_T=float|half_bits|bf16_bits -DNUM_THREADS=<multiple of 32> -DVEC=<1 or 16/sizeof(ELEM_T)>"
#endif

#include "common.cuh"

typedef ELEM_T elem_t;

#define NUM_WARPS (NUM_THREADS / 32)

// VEC consecutive elements, moved as one load or store.
struct __align__(VEC * sizeof(elem_t)) pack_t { elem_t x[VEC]; };

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
softmax_backward(const elem_t* __restrict__ P,    // (B·H, seq_q, seq_k)
                 const elem_t* __restrict__ dP,   // (B·H, seq_q, seq_k)
                 elem_t* __restrict__ dS,         // (B·H, seq_q, seq_k)
                 float* __restrict__ D,           // (B·H, seq_q)
                 int seq_k)
{
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float partials[NUM_WARPS + 1];
    const int packs = seq_k / VEC;
    pack_t* P_row = (pack_t*)smem;          // this row of P
    pack_t* dP_row = P_row + packs;         // this row of dP
    const long long row_id = blockIdx.x;    // (bh, r) flattened
    const long long base = row_id * packs;  // in packs
    const pack_t* P_in = (const pack_t*)P + base;
    const pack_t* dP_in = (const pack_t*)dP + base;
    pack_t* dS_out = (pack_t*)dS + base;

    // The one read of P and dP, and each thread's part of D_r = sum_c P[r, c] · dP[r, c].
    float d_part = 0.f;
    for (int c = threadIdx.x; c < packs; c += NUM_THREADS) {
        const pack_t p = P_in[c], dp = dP_in[c];
        P_row[c] = p;
        dP_row[c] = dp;
#pragma unroll
        for (int e = 0; e < VEC; ++e) d_part += to_f32(p.x[e]) * to_f32(dp.x[e]);
    }
    const float D_r = block_reduce<NUM_WARPS>(d_part, false, partials);

    // Each thread revisits only the packs it wrote itself: no barrier needed on the row.
    for (int c = threadIdx.x; c < packs; c += NUM_THREADS) {
        const pack_t p = P_row[c], dp = dP_row[c];
        pack_t ds;
#pragma unroll
        for (int e = 0; e < VEC; ++e) store_as(&ds.x[e], to_f32(p.x[e]) * (to_f32(dp.x[e]) - D_r));
        dS_out[c] = ds;
    }
    if (threadIdx.x == 0) D[row_id] = D_r;
}
