// FlashAttention backward pass, teaching version.
//
// The loop order of FlashAttention-2 (Dao, 2023), Algorithm 2: one thread block owns one key
// tile K_j, V_j of one (batch, head), keeps its gradients dK_j and dV_j on chip, and walks over
// the query tiles Q_i, dO_i. P_ij is never read from HBM: it is rebuilt from the forward's row
// log-sum-exp L_i as exp(S_ij - L_i). dQ is shared by every key tile, so each block adds its
// part scale · dS_ij K_j into one float32 buffer in HBM with atomicAdd. Written to be read, not
// to be fast: plain float32 arithmetic out of shared memory, no tensor cores. The paper leaves
// the softmax scale out; here it is written where it applies.
//
// Three kernels, launched in this order by engine/gpu/launchers/backward_teaching.py:
//   backward_delta           D = rowsum(dO ∘ O) (Algorithm 2, line 5)
//   flash_backward_teaching  lines 6-20, into a zeroed float32 dQ accumulator
//   cast_rows                the float32 dQ accumulator -> dQ in the input dtype
//
// Compile-time parameters (-D):
//   BLOCK_Q  = Br, query rows per tile      BLOCK_K = Bc, keys per tile
//   HEAD_DIM = d                            ELEM_T  = float, half_bits (IEEE float16)
//                                           or bf16_bits (bfloat16)
//   CAUSAL   = 0 or 1 (key c visible to query r iff c <= r)
//   TRACE    = 0 or 1 (write, per query row and key tile, the row sum of P_ij and the part
//              added to dQ; per key and query tile, ||dK_c|| and ||dV_c||; and per block the
//              SM id and the start and end times)
// Launch of flash_backward_teaching: grid (Tc, B·H), NUM_THREADS threads, dynamic shared
// memory laid out as below (engine/model/iomodel.py's smem_parts, kernel "backward teaching").
//
// Each step of the loop opens with a `// [phase <name>]` line: the paragraph it opens (down to
// the next blank line) is what the app's backward animation highlights for that phase
// (app/core/player/kernel_lines.py reads them).

#if !defined(BLOCK_Q) || !defined(BLOCK_K) || !defined(HEAD_DIM) || !defined(ELEM_T) || \
    !defined(CAUSAL) || !defined(TRACE)
#error "compile with -DBLOCK_Q= -DBLOCK_K= -DHEAD_DIM= -DELEM_T=float|half_bits|bf16_bits -DCAUSAL=0|1 -DTRACE=0|1"
#endif

#include "common.cuh"
#include "causal_tiles.cuh"

typedef ELEM_T elem_t;

#define NUM_THREADS 128             // 4 warps cooperate on every phase
#define NUM_WARPS (NUM_THREADS / 32)

// Row stride of the d-wide input tiles in shared memory: one 32-bit word longer than a row,
// so that threads reading the same column of consecutive rows hit different banks.
constexpr int ROW = HEAD_DIM + 4 / (int)sizeof(elem_t);

// Line 5: D_r = sum_t dO[r, t] · O[r, t] in float32; one warp per row of the (B·H·seq_q) rows.
extern "C" __global__ void __launch_bounds__(NUM_THREADS)
backward_delta(const elem_t* __restrict__ O,      // (B·H·seq_q, d)
               const elem_t* __restrict__ dO,     // (B·H·seq_q, d)
               float* __restrict__ D,             // (B·H·seq_q)
               long long rows)
{
    const long long r = (long long)blockIdx.x * NUM_WARPS + threadIdx.x / 32;
    if (r >= rows) return;                          // the whole warp leaves together
    const int lane = threadIdx.x % 32;
    float acc = 0.f;
    for (int t = lane; t < HEAD_DIM; t += 32)
        acc += to_f32(dO[r * HEAD_DIM + t]) * to_f32(O[r * HEAD_DIM + t]);
    acc = warp_sum(acc);
    if (lane == 0) D[r] = acc;
}

// dQ = the float32 accumulator rounded to the input dtype, n elements, grid-stride loop.
extern "C" __global__ void __launch_bounds__(NUM_THREADS)
cast_rows(const float* __restrict__ src, elem_t* __restrict__ dst, long long n)
{
    const long long stride = (long long)gridDim.x * NUM_THREADS;
    for (long long idx = (long long)blockIdx.x * NUM_THREADS + threadIdx.x; idx < n; idx += stride)
        store_as(&dst[idx], src[idx]);
}

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
flash_backward_teaching(const elem_t* __restrict__ Q,     // (B·H, seq_q, d)
                        const elem_t* __restrict__ K,     // (B·H, seq_k, d)
                        const elem_t* __restrict__ V,     // (B·H, seq_k, d)
                        const elem_t* __restrict__ dO,    // (B·H, seq_q, d)
                        const float* __restrict__ lse,    // (B·H, seq_q): L from the forward
                        const float* __restrict__ D,      // (B·H, seq_q): from backward_delta
                        float* __restrict__ dQ_accum,     // (B·H, seq_q, d), zero at launch
                        elem_t* __restrict__ dK,          // (B·H, seq_k, d)
                        elem_t* __restrict__ dV,          // (B·H, seq_k, d)
                        int seq_q, int seq_k, float scale,
                        float* __restrict__ trace_p_rowsum,   // (B·H, seq_q, Tc), TRACE only
                        float* __restrict__ trace_dq_part,    // (B·H, seq_q, Tc, d)
                        float* __restrict__ trace_dk_norm,    // (B·H, seq_k, Tr)
                        float* __restrict__ trace_dv_norm,    // (B·H, seq_k, Tr)
                        int* __restrict__ block_sm_id,        // (B·H · Tc), TRACE only
                        unsigned long long* __restrict__ block_start_ns,
                        unsigned long long* __restrict__ block_end_ns)
{
    constexpr int Br = BLOCK_Q, Bc = BLOCK_K, d = HEAD_DIM;

    const int j = blockIdx.x;               // key tile index, 0 <= j < Tc
    const int bh = blockIdx.y;              // batch·head index
    const int Tr = tile_count(seq_q, Br);
    const int tid = threadIdx.x;
    const int k0 = j * Bc;                          // first key of K_j
    const int k_cols = tile_rows(j, Bc, seq_k);     // the last tile may be ragged
    // Causal: query tile i sees K_j iff its last row is at or after key k0 (the forward's rule),
    // which holds for every tile from the one that contains row k0 on (causal_tiles.cuh); none
    // (i_first = Tr) when K_j starts past the last query row.
    const int i_first = first_query_tile(j, Br, Bc, seq_q, Tr, CAUSAL);

#if TRACE
    const int Tc = gridDim.x;
    const int lane = tid % 32, warp = tid / 32;
    const int record = bh * Tc + j;                 // this block's schedule record: bh·Tc + j
    if (tid == 0) {
        block_start_ns[record] = global_timer();
        block_sm_id[record] = (int)sm_index();
    }
#endif

    // Dynamic shared memory, in the order engine/model/iomodel.py's smem_parts lists it.
    extern __shared__ __align__(16) unsigned char smem[];
    elem_t* K_j = (elem_t*)smem;                    // Bc × d (row stride ROW)
    elem_t* V_j = K_j + Bc * ROW;                   // Bc × d
    elem_t* Q_i = V_j + Bc * ROW;                   // Br × d
    elem_t* dO_i = Q_i + Br * ROW;                  // Br × d
    float* dK_j = (float*)(dO_i + Br * ROW);        // Bc × d: gradient accumulators
    float* dV_j = dK_j + Bc * d;                    // Bc × d
    float* P_ij = dV_j + Bc * d;                    // Br × Bc
    float* dS_ij = P_ij + Br * Bc;                  // Br × Bc
    float* L_i = dS_ij + Br * Bc;                   // Br: the forward's lse rows
    float* D_i = L_i + Br;                          // Br: rowsum(dO_i ∘ O_i)

    const long long kv_base = ((long long)bh * seq_k + k0) * d;

    // [phase load_kv]
    // Lines 7-8: load K_j and V_j from HBM into SRAM; dK_j = 0, dV_j = 0 on chip.
    for (int idx = tid; idx < k_cols * d; idx += NUM_THREADS) {
        const int c = idx / d, t = idx % d;
        K_j[c * ROW + t] = K[kv_base + idx];
        V_j[c * ROW + t] = V[kv_base + idx];
    }
    for (int idx = tid; idx < Bc * d; idx += NUM_THREADS) {
        dK_j[idx] = 0.f;
        dV_j[idx] = 0.f;
    }

#if TRACE
    // Query tiles skipped by the causal mask add nothing: P rows sum to 0 over K_j, the dQ part
    // is 0, and dK_c, dV_c are still 0 after them.
    const int skipped_rows = min(i_first * Br, seq_q);
    for (int idx = tid; idx < skipped_rows * d; idx += NUM_THREADS) {
        const long long row = (long long)bh * seq_q + idx / d;
        trace_dq_part[(row * Tc + j) * d + idx % d] = 0.f;
        if (idx % d == 0) trace_p_rowsum[row * Tc + j] = 0.f;
    }
    for (int i = 0; i < i_first; ++i)
        for (int c = tid; c < k_cols; c += NUM_THREADS) {
            const long long at = ((long long)bh * seq_k + k0 + c) * Tr + i;
            trace_dk_norm[at] = 0.f;
            trace_dv_norm[at] = 0.f;
        }
#endif
    __syncthreads();  // K_j, V_j and the zeroed dK_j, dV_j are in place before any phase reads them

    for (int i = i_first; i < Tr; ++i) {
        const int q0 = i * Br;                      // first query row of Q_i
        const int q_rows = tile_rows(i, Br, seq_q);
        const long long row0 = (long long)bh * seq_q + q0;
        const long long q_base = row0 * d;

        // [phase load_q]
        // Line 10: load Q_i, dO_i, L_i and D_i from HBM into SRAM.
        for (int idx = tid; idx < q_rows * d; idx += NUM_THREADS) {
            const int r = idx / d, t = idx % d;
            Q_i[r * ROW + t] = Q[q_base + idx];
            dO_i[r * ROW + t] = dO[q_base + idx];
        }
        for (int r = tid; r < q_rows; r += NUM_THREADS) {
            L_i[r] = lse[row0 + r];
            D_i[r] = D[row0 + r];
        }
        __syncthreads();  // the query tile is complete before any thread reads it

        // [phase rebuild_p]
        // Lines 11-15, one element (r, c) per thread: S_ij = scale · Q_i K_jᵀ,
        // P_ij = exp(S_ij - L_i), dP_ij = dO_i V_jᵀ, dS_ij = P_ij ∘ (dP_ij - D_i).
        // Keys hidden by the causal mask, keys past seq_k and rows past seq_q get P = dS = 0.
        for (int idx = tid; idx < Br * Bc; idx += NUM_THREADS) {
            const int r = idx / Bc, c = idx % Bc;
            float p = 0.f, ds = 0.f;
            if (r < q_rows && c < k_cols && (!CAUSAL || k0 + c <= q0 + r)) {
                float s = 0.f, dp = 0.f;
#pragma unroll 8
                for (int t = 0; t < d; ++t) {
                    s += to_f32(Q_i[r * ROW + t]) * to_f32(K_j[c * ROW + t]);
                    dp += to_f32(dO_i[r * ROW + t]) * to_f32(V_j[c * ROW + t]);
                }
                p = expf(scale * s - L_i[r]);
                ds = p * (dp - D_i[r]);
            }
            P_ij[idx] = p;
            dS_ij[idx] = ds;
        }
        __syncthreads();  // P_ij and dS_ij are complete before the three products read them

        // [phase dkv]
        // Lines 13 and 17, one element (c, t) of dV_j and dK_j per thread:
        // dV_j += P_ijᵀ dO_i and dK_j += scale · dS_ijᵀ Q_i.
        for (int idx = tid; idx < k_cols * d; idx += NUM_THREADS) {
            const int c = idx / d, t = idx % d;
            float dv = 0.f, dk = 0.f;
            for (int r = 0; r < q_rows; ++r) {
                dv += P_ij[r * Bc + c] * to_f32(dO_i[r * ROW + t]);
                dk += dS_ij[r * Bc + c] * to_f32(Q_i[r * ROW + t]);
            }
            dV_j[idx] += dv;
            dK_j[idx] += scale * dk;
        }

        // [phase dq]
        // Line 16, one element (r, t) of dQ_i per thread: dQ_i += scale · dS_ij K_j, added in
        // HBM with atomicAdd because the blocks of all key tiles add to the same rows.
        for (int idx = tid; idx < q_rows * d; idx += NUM_THREADS) {
            const int r = idx / d, t = idx % d;
            float dq = 0.f;
            for (int c = 0; c < k_cols; ++c) dq += dS_ij[r * Bc + c] * to_f32(K_j[c * ROW + t]);
            dq *= scale;
            atomicAdd(&dQ_accum[q_base + idx], dq);
#if TRACE
            trace_dq_part[((row0 + r) * Tc + j) * d + t] = dq;
#endif
        }

#if TRACE
        // One warp per query row: the sum of P_ij over the keys of K_j.
        for (int r = warp; r < q_rows; r += NUM_WARPS) {
            float p_sum = 0.f;
            for (int c = lane; c < k_cols; c += 32) p_sum += P_ij[r * Bc + c];
            p_sum = warp_sum(p_sum);
            if (lane == 0) trace_p_rowsum[(row0 + r) * Tc + j] = p_sum;
        }
        __syncthreads();  // dK_j and dV_j hold query tile i's part before their norms are taken

        // One warp per key: ||dK_c|| and ||dV_c|| after query tiles up to i.
        for (int c = warp; c < k_cols; c += NUM_WARPS) {
            float dk2 = 0.f, dv2 = 0.f;
            for (int t = lane; t < d; t += 32) {
                dk2 += dK_j[c * d + t] * dK_j[c * d + t];
                dv2 += dV_j[c * d + t] * dV_j[c * d + t];
            }
            dk2 = warp_sum(dk2);
            dv2 = warp_sum(dv2);
            if (lane == 0) {
                const long long at = ((long long)bh * seq_k + k0 + c) * Tr + i;
                trace_dk_norm[at] = sqrtf(dk2);
                trace_dv_norm[at] = sqrtf(dv2);
            }
        }
#endif
        __syncthreads();  // Q_i, dO_i, P_ij and dS_ij are no longer read (nor dK_j, dV_j's norms):
                          // the next query tile may overwrite them
    }

    // [phase write_dkv]
    // Line 19: write dK_j and dV_j to HBM in the input dtype.
    for (int idx = tid; idx < k_cols * d; idx += NUM_THREADS) {
        store_as(&dK[kv_base + idx], dK_j[idx]);
        store_as(&dV[kv_base + idx], dV_j[idx]);
    }

#if TRACE
    __syncthreads();  // every thread has issued its last write before the end time is taken
    if (tid == 0) block_end_ns[record] = global_timer();
#endif
}
