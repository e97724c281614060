// Flash-Decoding: one decode step (a few query tokens) against a long KV cache.
//
// A single query token leaves one thread block per (sequence, head) with the whole cache to
// walk and most SMs idle. Flash-Decoding cuts the cache into num_splits splits, one thread
// block per (split s, KV head g, sequence b), each running FlashAttention's online softmax
// over its keys and writing a partial state (m_s, l_s, O_s); a second kernel merges the splits
// by their log-sum-exps. Grouped-query attention: the block holds the rows of every query head
// of its KV head group, so K_j and V_j are read once for all of them. Paged cache (vLLM's
// PagedAttention): keys live in pages of PAGE_SIZE rows, found through a block table.
//
// Compile-time parameters (-D):
//   HEAD_DIM  = d                     ELEM_T  = float, half_bits or bf16_bits
//   QUERY_ROWS = query rows per block: (heads / kv_heads) · SEQ_Q, at most 32
//   SEQ_Q     = query tokens per sequence (the cache's last SEQ_Q positions; token t sees
//               keys c <= seq_k - SEQ_Q + t)
//   BLOCK_K   = Bc, keys per tile     PAGE_SIZE = rows per page, 0 for a contiguous cache
// Launch: flash_decode_split grid (num_splits, kv_heads, batch), NUM_THREADS threads, dynamic
// shared memory as laid out below; flash_decode_merge grid (batch · heads · SEQ_Q),
// MERGE_THREADS threads.

#if !defined(HEAD_DIM) || !defined(ELEM_T) || !defined(QUERY_ROWS) || !defined(SEQ_Q) || \
    !defined(BLOCK_K) || !defined(PAGE_SIZE)
#error "compile with -DHEAD_DIM= -DELEM_T=float|half_bits|bf16_bits -DQUERY_ROWS= -DSEQ_Q= -DBLOCK_K= -DPAGE_SIZE="
#endif

#include "common.cuh"

typedef ELEM_T elem_t;

#define NUM_THREADS 128
#define MERGE_THREADS 128
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

constexpr int d = HEAD_DIM, Bc = BLOCK_K;
constexpr int CHUNK = 16 / sizeof(elem_t);          // elements per 16-byte copy
constexpr int CHUNKS = d / CHUNK;                   // 16-byte copies per key row
constexpr int KV_STRIDE = d + CHUNK;                // a K_j / V_j row in shared memory, padded
                                                    // by 16 bytes so 8 rows hit 8 bank groups
constexpr int PARTS = NUM_THREADS / Bc;             // threads sharing one key's dot products
constexpr int PART_DIMS = d / PARTS;
constexpr int PAIRS = d / 2;                        // P_ij V_j: each thread owns 2 dimensions
constexpr int KEY_PHASES = NUM_THREADS / PAIRS;     // ... of every KEY_PHASES-th key
static_assert(NUM_THREADS % Bc == 0 && d % (PARTS * CHUNK) == 0, "Bc and d must split evenly");
static_assert(NUM_THREADS % PAIRS == 0, "head_dim must be at most 2 * NUM_THREADS");
static_assert(QUERY_ROWS >= 1 && QUERY_ROWS <= 32 && QUERY_ROWS % SEQ_Q == 0,
              "QUERY_ROWS = group · SEQ_Q, at most 32");

// One 32-bit word of two 16-bit elements, or one float32, as floats.
__device__ __forceinline__ float2 unpack_word(unsigned u, half_bits) {
    return make_float2(to_f32((half_bits)(u & 0xffff)), to_f32((half_bits)(u >> 16)));
}
__device__ __forceinline__ float2 unpack_word(unsigned u, bf16_bits) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

// Two consecutive elements as floats (one 32- or 64-bit shared-memory load).
__device__ __forceinline__ float2 load_pair(const elem_t* p) {
    if constexpr (sizeof(elem_t) == 4) return *(const float2*)p;
    else return unpack_word(*(const unsigned*)p, elem_t{});
}

// CHUNK consecutive elements (16 bytes, one 128-bit load) as floats.
__device__ __forceinline__ void load_chunk(const elem_t* p, float (&out)[16 / sizeof(elem_t)]) {
    const uint4 raw = *(const uint4*)p;
    const unsigned word[4] = {raw.x, raw.y, raw.z, raw.w};
    #pragma unroll
    for (int w = 0; w < 4; ++w) {
        if constexpr (sizeof(elem_t) == 4) {
            out[w] = __uint_as_float(word[w]);
        } else {
            const float2 f = unpack_word(word[w], elem_t{});
            out[2 * w] = f.x;
            out[2 * w + 1] = f.y;
        }
    }
}

// Element offset of key c's row (KV head g of sequence b) in the cache.
__device__ __forceinline__ long long key_row(const int* __restrict__ block_table, int b, int g,
                                             int c, int kv_heads, int seq_k, int pages_per_seq) {
#if PAGE_SIZE > 0
    const int page = block_table[b * pages_per_seq + c / PAGE_SIZE];
    return (((long long)page * kv_heads + g) * PAGE_SIZE + c % PAGE_SIZE) * d;
#else
    return (((long long)b * kv_heads + g) * seq_k + c) * d;
#endif
}

// Stage the key tile starting at key k0 into buffer `stage` of K_j and V_j with cp.async;
// rows past the split's last key k_end are zero-filled, never read.
__device__ __forceinline__ void load_tile(elem_t* K_j, elem_t* V_j, const elem_t* __restrict__ K,
                                          const elem_t* __restrict__ V,
                                          const int* __restrict__ block_table, int b, int g,
                                          int k0, int k_begin, int k_end, int stage,
                                          int kv_heads, int seq_k, int pages_per_seq) {
    for (int idx = threadIdx.x; idx < Bc * CHUNKS; idx += NUM_THREADS) {
        const int row = idx / CHUNKS, chunk = idx % CHUNKS;
        const bool valid = k0 + row < k_end;
        const long long src = key_row(block_table, b, g, valid ? k0 + row : k_begin, kv_heads,
                                      seq_k, pages_per_seq) + chunk * CHUNK;
        const int dst = (stage * Bc + row) * KV_STRIDE + chunk * CHUNK;
        cp_async16(smem_addr(K_j + dst), K + src, valid);
        cp_async16(smem_addr(V_j + dst), V + src, valid);
    }
    cp_async_commit();
}

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
flash_decode_split(const elem_t* __restrict__ Q,        // (B, H, SEQ_Q, d)
                   const elem_t* __restrict__ K,        // (B, kv, seq_k, d), or paged
                                                        // (pages, kv, PAGE_SIZE, d)
                   const elem_t* __restrict__ V,
                   const int* __restrict__ block_table, // (B, pages_per_seq); PAGE_SIZE > 0 only
                   float* __restrict__ O_part,          // (B, H, SEQ_Q, S, d): O_s, normalised
                   float* __restrict__ m_part,          // (B, H, SEQ_Q, S): m_s, natural log
                   float* __restrict__ l_part,          // (B, H, SEQ_Q, S): l_s
                   int seq_k, int split_len, int pages_per_seq, float scale)
{
    const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
    const int S = gridDim.x, kv_heads = gridDim.y;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int k_begin = s * split_len, k_end = min(k_begin + split_len, seq_k);
    const int n_tiles = (k_end - k_begin + Bc - 1) / Bc;
    // The QUERY_ROWS rows of KV head g are contiguous in Q: heads g·group.., SEQ_Q tokens each.
    const long long row0 = ((long long)b * kv_heads + g) * QUERY_ROWS;

    // Dynamic shared memory, in the order engine/iomodel.py's decode_smem_parts lists it.
    extern __shared__ __align__(16) unsigned char smem[];
    elem_t* K_j = (elem_t*)smem;                        // 2 stages × Bc × KV_STRIDE
    elem_t* V_j = K_j + 2 * Bc * KV_STRIDE;             // 2 stages × Bc × KV_STRIDE
    float* Q_i = (float*)(V_j + 2 * Bc * KV_STRIDE);    // QUERY_ROWS × d, in log2 units
    float* S_ij = Q_i + QUERY_ROWS * d;                 // PARTS × QUERY_ROWS × Bc: partial
                                                        // dots, then P_ij in part 0
    float* O_acc = S_ij + PARTS * QUERY_ROWS * Bc;      // QUERY_ROWS × d: key phases' sum
    float* m_i = O_acc + QUERY_ROWS * d;                // QUERY_ROWS: running max (log2)
    float* l_i = m_i + QUERY_ROWS;                      // QUERY_ROWS: running sum
    float* alpha = l_i + QUERY_ROWS;                    // QUERY_ROWS: this tile's rescale

    // Start fetching the first key tile; meanwhile Q_i with scale · log2(e) folded in (the
    // softmax runs in exp2), m_i = -inf, l_i = 0.
    load_tile(K_j, V_j, K, V, block_table, b, g, k_begin, k_begin, k_end, 0, kv_heads, seq_k,
              pages_per_seq);
    for (int idx = tid; idx < QUERY_ROWS * d; idx += NUM_THREADS)
        Q_i[idx] = to_f32(Q[row0 * d + idx]) * (scale * LOG2E);
    if (tid < QUERY_ROWS) { m_i[tid] = neg_inf(); l_i[tid] = 0.f; }

    // P_ij V_j accumulators: dimensions 2·pair, 2·pair + 1 of every row, over keys
    // c ≡ phase (mod KEY_PHASES) of each tile.
    const int pair = tid % PAIRS, phase = tid / PAIRS;
    float acc[QUERY_ROWS][2];
    #pragma unroll
    for (int r = 0; r < QUERY_ROWS; ++r) acc[r][0] = acc[r][1] = 0.f;

    for (int j = 0; j < n_tiles; ++j) {
        const int k0 = k_begin + j * Bc, stage = j & 1;
        // Prefetch the next tile into the other buffer, then wait for this one.
        if (j + 1 < n_tiles) {
            load_tile(K_j, V_j, K, V, block_table, b, g, k0 + Bc, k_begin, k_end, stage ^ 1,
                      kv_heads, seq_k, pages_per_seq);
            cp_async_wait<1>();
        }
        else cp_async_wait<0>();
        __syncthreads();  // tile j (every thread's copies) and Q_i, m_i, l_i are in shared memory

        // S_ij = Q_i K_jᵀ: thread (part, c) sums dimensions [part·PART_DIMS, ...) of key c for
        // every row; one conversion of each K element serves all QUERY_ROWS rows.
        {
            const int c = tid % Bc, part = tid / Bc;
            float dot[QUERY_ROWS];
            #pragma unroll
            for (int r = 0; r < QUERY_ROWS; ++r) dot[r] = 0.f;
            if (k0 + c < k_end) {
                const elem_t* k_row = K_j + (stage * Bc + c) * KV_STRIDE + part * PART_DIMS;
                for (int x = 0; x < PART_DIMS; x += CHUNK) {
                    float kx[CHUNK];
                    load_chunk(k_row + x, kx);   // 16 bytes; rows 16 bytes apart in banks
                    #pragma unroll
                    for (int r = 0; r < QUERY_ROWS; ++r) {
                        const float* qx = Q_i + r * d + part * PART_DIMS + x;   // broadcast
                        #pragma unroll
                        for (int e = 0; e < CHUNK; ++e) dot[r] += qx[e] * kx[e];
                    }
                }
            }
            #pragma unroll
            for (int r = 0; r < QUERY_ROWS; ++r) S_ij[(part * QUERY_ROWS + r) * Bc + c] = dot[r];
        }
        __syncthreads();  // every part of every dot product is written before the softmax sums them

        // Online softmax, one warp per row: mask, tile max, new running max, P_ij = exp2(S - m),
        // rescale of the old state, new running sum.
        for (int r = warp; r < QUERY_ROWS; r += NUM_THREADS / 32) {
            const int last_key = seq_k - SEQ_Q + r % SEQ_Q;   // causal among the new tokens
            float s_val[(Bc + 31) / 32], tile_max = neg_inf();
            #pragma unroll
            for (int u = 0; u < (Bc + 31) / 32; ++u) {
                const int c = lane + 32 * u;
                float x = neg_inf();
                if (c < Bc && k0 + c < k_end && k0 + c <= last_key) {
                    x = 0.f;
                    for (int part = 0; part < PARTS; ++part)
                        x += S_ij[(part * QUERY_ROWS + r) * Bc + c];
                }
                s_val[u] = x;
                tile_max = fmaxf(tile_max, x);
            }
            tile_max = warp_max(tile_max);
            const float m_old = m_i[r], m_new = fmaxf(m_old, tile_max);
            const float m_use = m_new == neg_inf() ? 0.f : m_new;  // no key seen yet: P = 0
            float row_sum = 0.f;
            #pragma unroll
            for (int u = 0; u < (Bc + 31) / 32; ++u) {
                const int c = lane + 32 * u;
                const float p = fast_exp2(s_val[u] - m_use);     // exp2(-inf) = 0
                if (c < Bc) S_ij[r * Bc + c] = p;
                row_sum += p;
            }
            row_sum = warp_sum(row_sum);
            if (lane == 0) {
                const float a = m_new == m_old ? 1.f : fast_exp2(m_old - m_new);
                alpha[r] = a;
                l_i[r] = a * l_i[r] + row_sum;
                m_i[r] = m_new;
            }
        }
        __syncthreads();  // P_ij and the rescale factors are written before P_ij V_j reads them

        // O_i = alpha · O_i + P_ij V_j, the thread's two dimensions over its keys of the tile.
        #pragma unroll
        for (int r = 0; r < QUERY_ROWS; ++r) { acc[r][0] *= alpha[r]; acc[r][1] *= alpha[r]; }
        for (int c = phase; c < Bc; c += KEY_PHASES) {
            const float2 vx = load_pair(V_j + (stage * Bc + c) * KV_STRIDE + 2 * pair);
            #pragma unroll
            for (int r = 0; r < QUERY_ROWS; ++r) {
                const float p = S_ij[r * Bc + c];
                acc[r][0] += p * vx.x;
                acc[r][1] += p * vx.y;
            }
        }
        __syncthreads();  // every thread is done with this stage and with S_ij before the next
                          // tile's prefetch or dot products overwrite them
    }

    // Sum the key phases' accumulators in O_acc, one phase at a time (a fixed order).
    for (int ph = 0; ph < KEY_PHASES; ++ph) {
        if (phase == ph) {
            #pragma unroll
            for (int r = 0; r < QUERY_ROWS; ++r) {
                float* o = O_acc + r * d + 2 * pair;
                o[0] = ph == 0 ? acc[r][0] : o[0] + acc[r][0];
                o[1] = ph == 0 ? acc[r][1] : o[1] + acc[r][1];
            }
        }
        __syncthreads();  // phase ph has added its part before phase ph + 1 reads O_acc
    }

    // Write the split's state: O_s = O_acc / l_s (0 for a row that saw no key of the split),
    // m_s in natural-log units, l_s.
    for (int idx = tid; idx < QUERY_ROWS * d; idx += NUM_THREADS) {
        const int r = idx / d, x = idx % d;
        const float l = l_i[r];
        O_part[((row0 + r) * S + s) * d + x] = l > 0.f ? O_acc[idx] / l : 0.f;
    }
    if (tid < QUERY_ROWS) {
        m_part[(row0 + tid) * S + s] = m_i[tid] * LN2;
        l_part[(row0 + tid) * S + s] = l_i[tid];
    }
}

// The merge: one block per query row (b, h, t). m_final = max_s m_s,
// rescale_s = exp(m_s - m_final), l_final = Σ_s rescale_s · l_s,
// O = Σ_s rescale_s · l_s · O_s / l_final, lse = m_final + log(l_final). With the trace
// pointers non-null it also writes m_final, l_final and every rescale_s.
extern "C" __global__ void __launch_bounds__(MERGE_THREADS)
flash_decode_merge(const float* __restrict__ O_part, const float* __restrict__ m_part,
                   const float* __restrict__ l_part, int S,
                   elem_t* __restrict__ O,              // (B, H, SEQ_Q, d)
                   float* __restrict__ lse,             // (B, H, SEQ_Q)
                   float* __restrict__ trace_m_final,   // (B, H, SEQ_Q) or NULL
                   float* __restrict__ trace_rescale,   // (B, H, SEQ_Q, S) or NULL
                   float* __restrict__ trace_l_final)   // (B, H, SEQ_Q) or NULL
{
    const long long row = blockIdx.x;
    const float* m_s = m_part + row * S;
    const float* l_s = l_part + row * S;
    float m_final = neg_inf();
    for (int s = 0; s < S; ++s) m_final = fmaxf(m_final, m_s[s]);
    float l_final = 0.f;
    for (int s = 0; s < S; ++s) l_final += expf(m_s[s] - m_final) * l_s[s];

    for (int x = threadIdx.x; x < d; x += MERGE_THREADS) {
        float o = 0.f;
        for (int s = 0; s < S; ++s)
            o += expf(m_s[s] - m_final) * l_s[s] * O_part[(row * S + s) * d + x];
        store_as(O + row * d + x, o / l_final);
    }
    if (threadIdx.x == 0) {
        lse[row] = m_final + logf(l_final);
        if (trace_m_final) { trace_m_final[row] = m_final; trace_l_final[row] = l_final; }
    }
    if (trace_rescale)
        for (int s = threadIdx.x; s < S; s += MERGE_THREADS)
            trace_rescale[row * S + s] = expf(m_s[s] - m_final);
}
