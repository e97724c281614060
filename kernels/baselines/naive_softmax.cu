// Row softmax of naive attention, fused into one pass over S.
//
// Naive attention runs S = QKᵀ and O = PV through cuBLAS; between them this kernel turns each
// row of S into a row of P = softmax(S) (causal mask applied), and writes the row's
// log-sum-exp. S arrives already scaled (cuBLAS's alpha applies the softmax scale), so a
// float16 S overflows only where the scaled scores themselves do. One thread block per row: the row is read from HBM once into shared memory as
// float32, reduced for its max and its sum of exponentials, and written once as P.
//
// Compile-time parameters (-D): ELEM_T = float, half_bits (float16) or bf16_bits, the dtype of S and
// P; NUM_THREADS = threads per row (a multiple of 32, at most 1024; short rows use fewer).
// Launch: grid (B·H·seq_q), NUM_THREADS threads, seq_k · 4 bytes of dynamic shared memory.

#if !defined(ELEM_T) || !defined(NUM_THREADS)
#error "compile with -DELEM_T=float|half_bits|bf16_bits -DNUM_THREADS=<multiple of 32>"
#endif

#include "common.cuh"

typedef ELEM_T elem_t;

#define NUM_WARPS (NUM_THREADS / 32)

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
row_softmax(const elem_t* __restrict__ S,   // (B·H, seq_q, seq_k), scaled scores
            elem_t* __restrict__ P,         // (B·H, seq_q, seq_k)
            float* __restrict__ lse,        // (B·H, seq_q)
            int seq_q, int seq_k, int causal)
{
    extern __shared__ float row[];          // this row's scores, then exponentials
    __shared__ float partials[NUM_WARPS + 1];
    const float NEG_INF = __int_as_float(0xff800000);
    const long long row_id = blockIdx.x;    // (bh, r) flattened
    const int r = (int)(row_id % seq_q);
    const elem_t* S_row = S + row_id * seq_k;
    elem_t* P_row = P + row_id * seq_k;
    // Causal, top-left aligned: query r sees keys 0..r (at least key 0).
    const int visible = causal ? min(seq_k, r + 1) : seq_k;

    // The one read of S: keep in shared memory, track the max.
    float m = NEG_INF;
    for (int c = threadIdx.x; c < visible; c += NUM_THREADS) {
        const float s = to_f32(S_row[c]);
        row[c] = s;
        m = fmaxf(m, s);
    }
    m = block_reduce<NUM_WARPS>(m, true, partials);

    // Each thread revisits only the entries it wrote itself: no barrier needed on `row`.
    float l = 0.f;
    for (int c = threadIdx.x; c < visible; c += NUM_THREADS) {
        const float e = expf(row[c] - m);
        row[c] = e;
        l += e;
    }
    l = block_reduce<NUM_WARPS>(l, false, partials);

    const float inv_l = 1.f / l;
    for (int c = threadIdx.x; c < seq_k; c += NUM_THREADS)
        store_as(&P_row[c], c < visible ? row[c] * inv_l : 0.f);
    if (threadIdx.x == 0) lse[row_id] = m + logf(l);
}
