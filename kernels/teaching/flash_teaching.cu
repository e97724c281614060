// FlashAttention forward pass, teaching version.
//
// The loop order of FlashAttention-2 (Dao, 2023), Algorithm 1: one thread block owns one query
// tile Q_i of one (batch, head) and walks over the key tiles K_j, V_j, staging each through
// shared memory and keeping the online-softmax state (m_i, l_i, O_i) on chip. Written to be
// read, not to be fast: plain float32 arithmetic, no tensor cores.
//
// Compile-time parameters (-D):
//   BLOCK_Q  = Br, query rows per tile      BLOCK_K = Bc, keys per tile
//   HEAD_DIM = d                            ELEM_T  = float, half_bits (IEEE float16)
//                                           or bf16_bits (bfloat16)
//   CAUSAL   = 0 or 1 (key c visible to query r iff c <= r)
//   TRACE    = 0 or 1 (write the online-softmax state after every key tile, and per block
//              the SM id and the start and end times)
// Launch: grid (Tr, B·H), NUM_THREADS threads, dynamic shared memory laid out as below.
//
// Each step of the loop opens with a `// [phase <name>]` line: the paragraph it opens (down to
// the next blank line) is what the app's loop animation highlights for that phase
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

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
flash_teaching(const elem_t* __restrict__ Q,      // (B·H, seq_q, d)
               const elem_t* __restrict__ K,      // (B·H, seq_k, d)
               const elem_t* __restrict__ V,      // (B·H, seq_k, d)
               elem_t* __restrict__ O,            // (B·H, seq_q, d)
               float* __restrict__ lse,           // (B·H, seq_q)
               int seq_q, int seq_k, float scale,
               float* __restrict__ trace_running_max,   // (B·H, seq_q, Tc), TRACE only
               float* __restrict__ trace_running_sum,
               float* __restrict__ trace_rescale,
               float* __restrict__ trace_tile_max,
               int* __restrict__ block_sm_id,           // (B·H · Tr), TRACE only
               unsigned long long* __restrict__ block_start_ns,
               unsigned long long* __restrict__ block_end_ns)
{
    constexpr int Br = BLOCK_Q, Bc = BLOCK_K, d = HEAD_DIM;
    const float NEG_INF = __int_as_float(0xff800000);

    const int i = blockIdx.x;               // query tile index, 0 <= i < Tr
    const int bh = blockIdx.y;              // batch·head index
    const int Tc = tile_count(seq_k, Bc);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int q0 = i * Br;                          // first query row of Q_i
    const int q_rows = tile_rows(i, Br, seq_q);     // the last tile may be ragged
    // Causal: key tiles that start after the tile's last row are seen by none of its rows
    // (causal_tiles.cuh); the loop runs key tiles 0 .. Tc_run - 1.
    const int Tc_run = seen_key_tiles(i, Br, Bc, seq_q, Tc, CAUSAL);

#if TRACE
    const int record = bh * gridDim.x + i;          // this block's schedule record: bh·Tr + i
    if (tid == 0) {
        block_start_ns[record] = global_timer();
        block_sm_id[record] = (int)sm_index();
    }
#endif

    // Dynamic shared memory, in the order engine/model/iomodel.py's smem_parts lists it.
    extern __shared__ __align__(16) unsigned char smem[];
    elem_t* Q_i = (elem_t*)smem;                    // Br × d
    elem_t* K_jT = Q_i + Br * d;                    // K_j stored transposed: d × Bc
    elem_t* V_j = K_jT + Bc * d;                    // Bc × d
    float* S_ij = (float*)(V_j + Bc * d);           // Br × Bc: scores, then P̃_ij in place
    float* O_i = S_ij + Br * Bc;                    // Br × d: unnormalised output
    float* m_i = O_i + Br * d;                      // Br: running max (row_m)
    float* l_i = m_i + Br;                          // Br: running sum (row_l)

    const long long q_base = ((long long)bh * seq_q + q0) * d;
    const long long kv_base = (long long)bh * seq_k * d;

    // [phase load_q]
    // Algorithm 1, lines 4-5: load Q_i into SRAM; O_i = 0, l_i = 0, m_i = -inf on chip.
    for (int idx = tid; idx < q_rows * d; idx += NUM_THREADS) {
        Q_i[idx] = Q[q_base + idx];
        O_i[idx] = 0.f;
    }
    for (int r = tid; r < Br; r += NUM_THREADS) {
        m_i[r] = NEG_INF;
        l_i[r] = 0.f;
    }
    __syncthreads();  // Q_i and the state are initialised before any phase reads them

    for (int j = 0; j < Tc_run; ++j) {
        const int k0 = j * Bc;                      // first key of tile j
        const int k_cols = tile_rows(j, Bc, seq_k); // keys past seq_k are padding

        // [phase load_kv]
        // Line 7: load K_j and V_j from HBM into SRAM (K_j transposed, so that threads
        // reading consecutive keys below touch consecutive shared-memory banks).
        for (int idx = tid; idx < k_cols * d; idx += NUM_THREADS) {
            const int c = idx / d, t = idx % d;
            K_jT[t * Bc + c] = K[kv_base + (long long)k0 * d + idx];
            V_j[idx] = V[kv_base + (long long)k0 * d + idx];
        }
        __syncthreads();  // K_j and V_j are complete before any thread reads them

        // [phase scores]
        // Line 8: S_ij = scale · Q_i K_jᵀ; keys hidden by the causal mask get -inf.
        for (int idx = tid; idx < Br * Bc; idx += NUM_THREADS) {
            const int r = idx / Bc, c = idx % Bc;
            if (r >= q_rows || c >= k_cols) continue;
            float s = NEG_INF;
            if (!CAUSAL || k0 + c <= q0 + r) {
                float dot = 0.f;
#pragma unroll 8
                for (int t = 0; t < d; ++t)
                    dot += to_f32(Q_i[r * d + t]) * to_f32(K_jT[t * Bc + c]);
                s = scale * dot;
            }
            S_ij[r * Bc + c] = s;
        }
        __syncthreads();  // every score of S_ij is written before the row statistics read it

        // [phase softmax]
        // Line 9, one warp per row: row_m = max(m_i, rowmax(S_ij)), P̃_ij = exp(S_ij - row_m),
        // row_l = exp(m_i - row_m)·l_i + rowsum(P̃_ij); and the first half of line 10:
        // O_i is multiplied by the same rescale factor exp(m_i - row_m). Spelt out here in the
        // paper's names and natural units; the faster kernels share this step, in exp2, as
        // online_softmax_step (include/online_softmax.cuh).
        for (int r = warp; r < q_rows; r += NUM_WARPS) {
            float* S_row = S_ij + r * Bc;
            const float m_old = m_i[r];
            float tile_max = NEG_INF;
            for (int c = lane; c < k_cols; c += 32) tile_max = fmaxf(tile_max, S_row[c]);
            tile_max = warp_max(tile_max);
            const float row_m = fmaxf(m_old, tile_max);
            // Exactly 1 when the max did not move (also for a row that sees no key yet).
            const float rescale = (row_m == m_old) ? 1.f : expf(m_old - row_m);
            const float m_safe = (row_m == NEG_INF) ? 0.f : row_m;  // hidden keys -> exp(-inf) = 0
            float p_sum = 0.f;
            for (int c = lane; c < k_cols; c += 32) {
                const float p = expf(S_row[c] - m_safe);
                S_row[c] = p;
                p_sum += p;
            }
            p_sum = warp_sum(p_sum);  // every lane has read m_i[r] before lane 0 rewrites it
            for (int t = lane; t < d; t += 32) O_i[r * d + t] *= rescale;
            if (lane == 0) {
                const float row_l = rescale * l_i[r] + p_sum;
                m_i[r] = row_m;
                l_i[r] = row_l;
#if TRACE
                const long long at = ((long long)bh * seq_q + q0 + r) * Tc + j;
                trace_tile_max[at] = tile_max;
                trace_running_max[at] = row_m;
                trace_rescale[at] = rescale;
                trace_running_sum[at] = row_l;
#endif
            }
        }
        __syncthreads();  // P̃_ij and the rescaled O_i are complete before P̃_ij V_j is added

        // [phase pv]
        // Line 10, second half: O_i += P̃_ij V_j.
        for (int idx = tid; idx < q_rows * d; idx += NUM_THREADS) {
            const int r = idx / d, t = idx % d;
            float acc = 0.f;
            for (int c = 0; c < k_cols; ++c) acc += S_ij[r * Bc + c] * to_f32(V_j[c * d + t]);
            O_i[idx] += acc;
        }
        __syncthreads();  // S_ij, K_j and V_j are no longer read: the next tile may overwrite them
    }

    // [phase write_o]
    // Lines 12-15: O_i = diag(l_i)^-1 O_i and L_i = m_i + log(l_i), written to HBM.
    for (int idx = tid; idx < q_rows * d; idx += NUM_THREADS)
        store_as(&O[q_base + idx], O_i[idx] / l_i[idx / d]);
    for (int r = tid; r < q_rows; r += NUM_THREADS) {
        lse[(long long)bh * seq_q + q0 + r] = m_i[r] + logf(l_i[r]);
#if TRACE
        // Key tiles skipped by the causal mask: the state carries over unchanged.
        for (int j = Tc_run; j < Tc; ++j) {
            const long long at = ((long long)bh * seq_q + q0 + r) * Tc + j;
            trace_tile_max[at] = NEG_INF;
            trace_running_max[at] = m_i[r];
            trace_rescale[at] = 1.f;
            trace_running_sum[at] = l_i[r];
        }
#endif
    }

#if TRACE
    __syncthreads();  // every thread has issued its last write before the end time is taken
    if (tid == 0) block_end_ns[record] = global_timer();
#endif
}
