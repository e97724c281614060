// Flash-Decoding: one decode step (a few query tokens) against a long KV cache.
//
// A single query token leaves one thread block per (sequence, head) with the whole cache to
// walk and most SMs idle. Flash-Decoding cuts the cache into num_splits splits, one thread
// block per (split s, KV head g, sequence b), each running FlashAttention's online softmax
// over its keys and writing a partial state (m_s, l_s, O_s); the splits are then merged by
// their log-sum-exps. Grouped-query attention: the block holds the rows of every query head
// of its KV head group, so K_j and V_j are read once for all of them. Paged cache (vLLM's
// PagedAttention): keys live in pages of PAGE_SIZE rows, found through a block table.
//
// Inside a block the warps share nothing while they walk the split: warp w owns keys
// [w·KW, (w+1)·KW) of every key tile, copies them itself (cp.async, STAGES tiles deep) and
// runs its own online softmax over them (m, l and its part of O in registers), so the main
// loop has no block-wide barrier; the warps' states are merged by their maxima at the end.
//
// The merge runs in the same launch ("last block merges", the ticket protocol of ticket.cuh):
// a block that has written its partial state makes it visible device-wide and takes a ticket
// from the (b, g) counter; the block that draws the last ticket, num_splits - 1, reads every
// split's state of its rows through L2, writes O and lse, and sets the counter back to 0 for
// the next launch.
//
// Compile-time parameters (-D):
//   HEAD_DIM  = d                     ELEM_T  = float, half_bits or bf16_bits
//   QUERY_ROWS = query rows per block: (heads / kv_heads) · SEQ_Q, at most 32
//   SEQ_Q     = query tokens per sequence (the cache's last SEQ_Q positions; token t sees
//               keys c <= seq_k - SEQ_Q + t)
//   BLOCK_K   = Bc, keys per tile     PAGE_SIZE = rows per page, 0 for a contiguous cache
//   NUM_THREADS = threads per block (a multiple of 32)   STAGES = key tiles in flight, >= 2
//   TMA_COPIES = 1: the copy engine brings the tiles (sm_90 and later, 16-bit elements, d a
//               multiple of 64, PAGE_SIZE 0 or a multiple of KW; two more parameters, the
//               tensor maps of K and V, in boxes of Bc rows with TILE_COPIES and of KW rows
//               without); 0 (default): 16-byte cp.async copies from every lane
// Launch: flash_decode_split grid (num_splits, kv_heads, batch), num_splits at most
// MAX_SPLITS, NUM_THREADS threads, dynamic shared memory as laid out below; split_count
// (batch · kv_heads int32) all 0 before the launch, and 0 again after it.

#if !defined(HEAD_DIM) || !defined(ELEM_T) || !defined(QUERY_ROWS) || !defined(SEQ_Q) || \
    !defined(BLOCK_K) || !defined(PAGE_SIZE) || !defined(NUM_THREADS) || !defined(STAGES)
#error "compile with -DHEAD_DIM= -DELEM_T=float|half_bits|bf16_bits -DQUERY_ROWS= -DSEQ_Q= -DBLOCK_K= -DPAGE_SIZE= -DNUM_THREADS= -DSTAGES="
#endif

#include "common.cuh"
#include "online_softmax.cuh"
#include "causal_tiles.cuh"
#include "ticket.cuh"
#include "tma.cuh"

typedef ELEM_T elem_t;

#define MAX_SPLITS 128          // engine.decode_config.MAX_SPLITS: the merge's weights
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

constexpr int d = HEAD_DIM, Bc = BLOCK_K, R = QUERY_ROWS;
constexpr int WARPS = NUM_THREADS / 32;
constexpr int CHUNK = 16 / sizeof(elem_t);          // elements per 16-byte copy
constexpr int CHUNKS = d / CHUNK;                   // 16-byte copies per key row
constexpr int KV_STRIDE = d + CHUNK;                // a K_j / V_j row in shared memory, padded
                                                    // by 16 bytes so 8 rows hit 8 bank groups
constexpr int KW = Bc / WARPS;                      // keys of each tile one warp owns
// S_ij = Q_i K_jᵀ: LPK lanes per key, each summing DL dimensions (lane = part · KW + key).
constexpr int LPK = 32 / KW, DL = d / LPK;
// P_ij V_j: each lane owns DPL dimensions of every row for keys c ≡ its key group (mod KG).
constexpr int DPL = d / 32 > 2 ? d / 32 : 2, LPR = d / DPL, KG = 32 / LPR;
static_assert(NUM_THREADS % 32 == 0 && Bc % WARPS == 0 && 32 % KW == 0,
              "each warp owns a power-of-two share (at most 32) of a tile's keys");
static_assert(DL % 4 == 0 && DL * sizeof(elem_t) % 4 == 0, "Q_i is read 4 floats at a time");
static_assert(KW % KG == 0 && STAGES >= 2, "key groups split a warp's keys evenly");
static_assert(R >= 1 && R <= 32 && R % SEQ_Q == 0, "QUERY_ROWS = group · SEQ_Q, at most 32");
#ifndef TMA_COPIES
#define TMA_COPIES 0
#endif
// With TMA_COPIES, a tile's rows arrive as BOXES column boxes of 64 columns (128 bytes), each
// row's 16-byte chunks swizzled by the copy engine (kv_at), so the rows need no padding; the
// swizzle's period, 1024 bytes, aligns the rings. With TILE_COPIES (the launcher's, from
// decode_config.decode_tile_copies: a contiguous cache, or pages of whole tiles with every
// split starting on a tile) thread 0 copies the whole tile, Bc rows a box, onto one barrier a
// stage, and the warps wait for it together: on the H200 these steps took 4.5-8.3% less time
// than each warp copying its own KW rows, and 0.8-3.7% less on pages of 64 (lab/NOTES.md).
// Otherwise a paged tile may span pages, so each warp copies its own rows (KW rows a box,
// within one page) onto a barrier of its own.
#ifndef TILE_COPIES
#define TILE_COPIES (TMA_COPIES && PAGE_SIZE == 0)
#endif
static_assert(!TILE_COPIES || (TMA_COPIES && PAGE_SIZE % Bc == 0),
              "whole-tile copies: the copy engine's, from a contiguous cache or pages of tiles");
// A lab switch: SKIP_MERGE=1 writes each split's state and merges nothing (the output stays
// unwritten), to time the split phase alone; 0 in every build the launcher makes.
#ifndef SKIP_MERGE
#define SKIP_MERGE 0
#endif
// The merge's loads of O_s in flight at once, per thread (a lab switch; 8 by default).
#ifndef MERGE_IN_FLIGHT
#define MERGE_IN_FLIGHT 8
#endif
constexpr int BOXES = d / 64, RING_ROW = TMA_COPIES ? d : KV_STRIDE;
static_assert(!TMA_COPIES || (sizeof(elem_t) == 2 && d % 64 == 0 && KW % 8 == 0
                              && (PAGE_SIZE == 0 || PAGE_SIZE % KW == 0)),
              "the copy engine takes 16-bit rows of whole 64-column boxes, KW rows a page");
constexpr int FLOATS = 2 * R * d + Bc * R + 2 * WARPS * R + 2 * R;  // Q_i .. l_blk
static_assert(FLOATS % 2 == 0, "the mbarriers after l_blk are 8-byte aligned");
// The rings of K_j and V_j, in bytes.
constexpr int RING_BYTES = 2 * STAGES * Bc * RING_ROW * (int)sizeof(elem_t);
// The dynamic shared memory (layout in the kernel), which the merge reuses for its weights.
constexpr int SMEM_BYTES = (TMA_COPIES ? 1024 : 0) + RING_BYTES + 4 * FLOATS
                           + (TMA_COPIES ? 8 * STAGES * WARPS : 0);
static_assert(4 * (R * MAX_SPLITS + R + 1) <= SMEM_BYTES,
              "the merge's weights and the ticket's answer fit shared memory");
// The merge: each thread sums MV consecutive dimensions of one row over the splits, MV as
// wide as keeps every thread busy.
constexpr int MV = R * d >= 4 * NUM_THREADS ? 4 : R * d >= 2 * NUM_THREADS ? 2 : 1;

// One 32-bit word of two 16-bit elements, or one float32, as floats.
__device__ __forceinline__ float2 unpack_word(unsigned u, half_bits) {
    return make_float2(to_f32((half_bits)(u & 0xffff)), to_f32((half_bits)(u >> 16)));
}
__device__ __forceinline__ float2 unpack_word(unsigned u, bf16_bits) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

// N consecutive elements as floats, from shared memory in 16-, 8- or 4-byte loads.
template <int N>
__device__ __forceinline__ void load_floats(const elem_t* p, float (&out)[N]) {
    constexpr int BYTES = N * sizeof(elem_t), WORDS = BYTES / 4;
    static_assert(BYTES % 4 == 0, "whole 32-bit words");
    unsigned word[WORDS];
    if constexpr (BYTES % 16 == 0) {
        #pragma unroll
        for (int v = 0; v < WORDS / 4; ++v) {
            const uint4 raw = ((const uint4*)p)[v];
            word[4 * v] = raw.x; word[4 * v + 1] = raw.y;
            word[4 * v + 2] = raw.z; word[4 * v + 3] = raw.w;
        }
    } else if constexpr (BYTES == 8) {
        const uint2 raw = *(const uint2*)p;
        word[0] = raw.x; word[1] = raw.y;
    } else {
        word[0] = *(const unsigned*)p;
    }
    #pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        if constexpr (sizeof(elem_t) == 4) {
            out[w] = __uint_as_float(word[w]);
        } else {
            const float2 f = unpack_word(word[w], elem_t{});
            out[2 * w] = f.x;
            out[2 * w + 1] = f.y;
        }
    }
}

// Element (row, col) of stage `stage` of the K_j or V_j ring, row = the tile's key. cp.async:
// rows of RING_ROW elements. TMA_COPIES: per stage, BOXES boxes of Bc rows × 128 bytes (a
// warp's KW rows of each a box of its own without TILE_COPIES, 1024-byte aligned: KW % 8 == 0),
// where the copy engine put byte b of a row at b ^ (row % 8) · 16 (its 128-byte swizzle:
// address bits 4-6 xor bits 7-9, the ring 1024-byte aligned); 8 consecutive rows' same chunk
// then lie in 8 bank groups.
__device__ __forceinline__ int box_at(int stage, int h, int row) {
    return ((stage * BOXES + h) * Bc + row) * 64;   // element offset of a box row
}
__device__ __forceinline__ const elem_t* kv_at(const elem_t* ring, int stage, int row, int col) {
#if TMA_COPIES
    const unsigned off = (box_at(stage, col / 64, row) + col % 64) * (unsigned)sizeof(elem_t);
    return (const elem_t*)((const unsigned char*)ring + (off ^ (row % 8) * 16));
#else
    return ring + (stage * Bc + row) * KV_STRIDE + col;
#endif
}

// The 16-byte copies one lane makes of a tile's K_j (and as many of V_j): copy i takes chunk
// (lane + 32 i) mod CHUNKS of the warp's key row (lane + 32 i) / CHUNKS.
constexpr int COPIES = (KW * CHUNKS + 31) / 32;
__device__ __forceinline__ bool copy_exists(int i, int lane) {
    return KW * CHUNKS % 32 == 0 || lane + 32 * i < KW * CHUNKS;
}
__device__ __forceinline__ int copy_row(int i, int warp, int lane) {
    return warp * KW + (lane + 32 * i) / CHUNKS;
}

// The key whose row copy i of the tile at k0 reads: rows past the split's last key k_end read
// its first key instead (and are zero-filled, never used).
__device__ __forceinline__ int copy_key(int i, int warp, int lane, int k0, int k_begin, int k_end) {
    const int c = k0 + copy_row(i, warp, lane);
    return c < k_end ? c : k_begin;
}

// Paged cache: the block-table entries of the pages the lane's copies of the tile at k0 read.
// The main loop looks them up one tile before the copies need them, so that the copies' source
// addresses do not wait on a block-table read (a dependent load in front of every tile).
__device__ __forceinline__ void lookup_pages(int (&page)[COPIES],
                                             const int* __restrict__ block_table, int b, int k0,
                                             int k_begin, int k_end, int warp, int lane,
                                             int pages_per_seq) {
#if PAGE_SIZE > 0
    // the copy engine needs the page of lane 0's first copy only: the warp's first key
    #pragma unroll
    for (int i = 0; i < (TMA_COPIES ? 1 : COPIES); ++i) {
        const int c = copy_key(i, warp, lane, k0, k_begin, k_end);
        page[i] = k0 < k_end && copy_exists(i, lane)
                  ? block_table[b * pages_per_seq + c / PAGE_SIZE] : 0;
    }
#endif
}

// Element offset of key c's row (KV head g of sequence b) in the cache; `page` is the block
// table's entry for c (paged cache only).
__device__ __forceinline__ long long key_row(int page, int b, int g, int c, int kv_heads,
                                             int seq_k) {
#if PAGE_SIZE > 0
    return (((long long)page * kv_heads + g) * PAGE_SIZE + c % PAGE_SIZE) * d;
#else
    return (((long long)b * kv_heads + g) * seq_k + c) * d;
#endif
}

// One 16-byte copy of K_j or V_j: cp_async16, asking L2 (sm_80 and later) to fetch the 256
// bytes around it from memory at once. The cache is read once, row after row, so the
// neighbouring bytes are the next copies' (on an H100, 1-3.5% faster at every shape of the
// decode sweep: lab/NOTES.md).
// L2_PREFETCH (-D, default 256) picks the bytes asked for: 256, 128, or 0 for none.
#ifndef L2_PREFETCH
#define L2_PREFETCH 256
#endif
__device__ __forceinline__ void copy16(unsigned dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800 && L2_PREFETCH == 256
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
#elif __CUDA_ARCH__ >= 800 && L2_PREFETCH == 128
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
#else
    cp_async16(dst, src, valid);
#endif
}

// Stage this warp's KW keys of the tile starting at key k0 into buffer `stage` of K_j and V_j
// with cp.async, one commit group per call (empty past the last tile); rows past the split's
// last key k_end are zero-filled, never read. `page`: lookup_pages of this tile.
__device__ __forceinline__ void load_tile(elem_t* K_j, elem_t* V_j, const elem_t* __restrict__ K,
                                          const elem_t* __restrict__ V, const int (&page)[COPIES],
                                          int b, int g, int k0, int k_begin, int k_end, int stage,
                                          int warp, int lane, int kv_heads, int seq_k) {
    if (k0 < k_end) {
        #pragma unroll
        for (int i = 0; i < COPIES; ++i) {
            if (!copy_exists(i, lane)) break;
            const int row = copy_row(i, warp, lane), chunk = (lane + 32 * i) % CHUNKS;
            const bool valid = k0 + row < k_end;
            const long long src = key_row(page[i], b, g,
                                          copy_key(i, warp, lane, k0, k_begin, k_end),
                                          kv_heads, seq_k) + chunk * CHUNK;
            const int dst = (stage * Bc + row) * KV_STRIDE + chunk * CHUNK;
            copy16(smem_addr(K_j + dst), K + src, valid);
            copy16(smem_addr(V_j + dst), V + src, valid);
        }
    }
    cp_async_commit();
}

#if TMA_COPIES
// The same with the copy engine (tensor maps over (B · kv, seq_k, d) or (pages · kv, PAGE_SIZE,
// d)). TILE_COPIES: thread 0 announces the tile's bytes on the stage's barrier and copies BOXES
// boxes of its Bc rows of K and of V, from the tile's one page where paged. Else lane 0 of each
// warp does so for the warp's KW rows on its own barrier of the stage; a warp whose rows all lie
// past k_end only arrives. Rows past the cache's end arrive as zeros; rows past k_end inside it
// (the next split's, or a page's unwritten rows) are zeroed after the wait. Nothing is fetched
// past the split's last tile. The barrier of a stage (and warp): with TILE_COPIES one a stage, the
// first STAGES of the STAGES × WARPS the kernel sets up; else one a stage and warp.
__device__ __forceinline__ unsigned stage_barrier(unsigned bars, int stage, int warp) {
    return bars + 8 * (TILE_COPIES ? stage : stage * WARPS + warp);
}
__device__ __forceinline__ void load_tile_tma(elem_t* K_j, elem_t* V_j, unsigned bars,
                                              const TensorMap* k_map, const TensorMap* v_map,
                                              const int (&page)[COPIES], int b, int g, int k0,
                                              int k_end, int stage, int warp, int lane,
                                              int kv_heads) {
#if TILE_COPIES
    if (warp != 0 || lane != 0 || k0 >= k_end) return;
    const unsigned bar = stage_barrier(bars, stage, 0);
    mbar_expect_bytes(bar, 2 * Bc * d * sizeof(elem_t));
#if PAGE_SIZE > 0
    const int bh = page[0] * kv_heads + g, row = k0 % PAGE_SIZE;    // the tile's one page
#else
    const int bh = b * kv_heads + g, row = k0;
#endif
    #pragma unroll
    for (int h = 0; h < BOXES; ++h) {
        tma_load(smem_addr(K_j + box_at(stage, h, 0)), k_map, h * 64, row, bh, bar);
        tma_load(smem_addr(V_j + box_at(stage, h, 0)), v_map, h * 64, row, bh, bar);
    }
#else
    if (lane != 0 || k0 >= k_end) return;
    const unsigned bar = stage_barrier(bars, stage, warp);
    const int c0 = k0 + warp * KW;
    if (c0 >= k_end) {
        mbar_arrive(bar);
        return;
    }
    mbar_expect_bytes(bar, 2 * KW * d * sizeof(elem_t));
#if PAGE_SIZE > 0
    const int bh = page[0] * kv_heads + g, row = c0 % PAGE_SIZE;
#else
    const int bh = b * kv_heads + g, row = c0;
#endif
    #pragma unroll
    for (int h = 0; h < BOXES; ++h) {
        const int box = box_at(stage, h, warp * KW);
        tma_load(smem_addr(K_j + box), k_map, h * 64, row, bh, bar);
        tma_load(smem_addr(V_j + box), v_map, h * 64, row, bh, bar);
    }
#endif
}

// Zero the V_j rows from `first` on of this warp's KW (whole 128-byte box rows, so the swizzle
// does not matter): their keys are past k_end, P_ij is 0 there, and 0 · V must stay 0 when the
// rows hold a page's unwritten bytes.
__device__ __forceinline__ void zero_rows_from(elem_t* V_j, int stage, int warp, int lane,
                                               int first) {
    for (int i = lane; i < KW * BOXES * 8; i += 32) {
        const int c = i / (BOXES * 8), h = i / 8 % BOXES, q = i % 8;
        if (c >= first)
            *(uint4*)(V_j + box_at(stage, h, warp * KW + c) + q * 8) = make_uint4(0u, 0u, 0u, 0u);
    }
}
#endif

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
flash_decode_split(const elem_t* __restrict__ Q,        // (B, H, SEQ_Q, d)
                   const elem_t* __restrict__ K,        // (B, kv, seq_k, d), or paged
                                                        // (pages, kv, PAGE_SIZE, d)
                   const elem_t* __restrict__ V,
                   const int* __restrict__ block_table, // (B, pages_per_seq); PAGE_SIZE > 0 only
                   float* __restrict__ O_part,          // (B, H, SEQ_Q, S, d): O_s, normalised
                   float* __restrict__ m_part,          // (B, H, SEQ_Q, S): m_s, natural log
                   float* __restrict__ l_part,          // (B, H, SEQ_Q, S): l_s
                   elem_t* __restrict__ O,              // (B, H, SEQ_Q, d)
                   float* __restrict__ lse,             // (B, H, SEQ_Q)
                   float* __restrict__ trace_m_final,   // (B, H, SEQ_Q) or NULL
                   float* __restrict__ trace_rescale,   // (B, H, SEQ_Q, S) or NULL
                   float* __restrict__ trace_l_final,   // (B, H, SEQ_Q) or NULL
                   int* __restrict__ split_count,       // (B, kv): splits done; 0 between launches
                   int seq_k, int split_len, int pages_per_seq, float scale
#if TMA_COPIES
                   , const __grid_constant__ TensorMap k_map,   // (B · kv, seq_k, d) or
                   const __grid_constant__ TensorMap v_map      // (pages · kv, PAGE_SIZE, d)
#endif
                   )
{
    const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
    const int S = gridDim.x, kv_heads = gridDim.y;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int k_begin = s * split_len, k_end = min(k_begin + split_len, seq_k);
    const int n_tiles = tile_count(k_end - k_begin, Bc);
    // The R rows of KV head g are contiguous in Q: heads g·group.., SEQ_Q tokens each.
    const long long row0 = ((long long)b * kv_heads + g) * R;

    // Dynamic shared memory, in the order engine/model/iomodel.py's decode_smem_parts lists it.
    extern __shared__ __align__(16) unsigned char smem[];
    // TMA_COPIES: the rings from the first 1024-byte boundary (the swizzle's period)
    unsigned char* ring = smem + (TMA_COPIES ? (1024 - smem_addr(smem) % 1024) % 1024 : 0);
    elem_t* K_j = (elem_t*)ring;                        // STAGES × Bc × RING_ROW
    elem_t* V_j = K_j + STAGES * Bc * RING_ROW;         // STAGES × Bc × RING_ROW
    float* Q_i = (float*)(V_j + STAGES * Bc * RING_ROW);    // R × d, in log2 units
    float* P_ij = Q_i + R * d;                          // Bc × R: warp w's keys at w·KW..
    float* O_acc = P_ij + Bc * R;                       // R × d: the warps' sum
    float* m_w = O_acc + R * d;                         // WARPS × R: each warp's max (log2)
    float* l_w = m_w + WARPS * R;                       // WARPS × R: each warp's sum
    float* m_blk = l_w + WARPS * R;                     // R: the block's max, sum
    float* l_blk = m_blk + R;
#if TMA_COPIES
    const unsigned bars = smem_addr(l_blk + R);         // STAGES × WARPS (stage_barrier)
    if (tid < STAGES * WARPS) mbar_init(bars + 8 * tid, 1);
    if (tid == 0) mbar_init_fence();
    __syncthreads();  // the barriers are initialised before any copy completes on them
#endif

    // Start fetching the first STAGES - 1 tiles; meanwhile Q_i with scale · log2(e) folded in
    // (the softmax runs in exp2).
    int page[COPIES];   // paged cache: the block-table entries of the next tile to fetch
    #pragma unroll
    for (int j = 0; j < STAGES - 1; ++j) {
        lookup_pages(page, block_table, b, k_begin + j * Bc, k_begin, k_end, warp, lane,
                     pages_per_seq);
#if TMA_COPIES
        load_tile_tma(K_j, V_j, bars, &k_map, &v_map, page, b, g, k_begin + j * Bc, k_end, j,
                      warp, lane, kv_heads);
#else
        load_tile(K_j, V_j, K, V, page, b, g, k_begin + j * Bc, k_begin, k_end, j, warp, lane,
                  kv_heads, seq_k);
#endif
    }
    lookup_pages(page, block_table, b, k_begin + (STAGES - 1) * Bc, k_begin, k_end, warp, lane,
                 pages_per_seq);
    for (int idx = tid; idx < R * d; idx += NUM_THREADS)
        Q_i[idx] = to_f32(Q[row0 * d + idx]) * (scale * LOG2E);
    __syncthreads();  // Q_i is in shared memory before any warp's dot products read it

    // The warp's running state: m_i, l_i per row (the same in every lane) and O_i, the lane's
    // DPL dimensions of every row over its key group's keys.
    const int c = lane % KW, part = lane / KW;          // S_ij: key c, dimensions of `part`
    const int kg = lane / LPR, dl = lane % LPR;         // P_ij V_j: key group, dimensions
    float m_i[R], l_i[R], acc[R][DPL];
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        m_i[r] = neg_inf(); l_i[r] = 0.f;
        #pragma unroll
        for (int e = 0; e < DPL; ++e) acc[r][e] = 0.f;
    }
    float* P_w = P_ij + warp * KW * R;                  // this warp's KW × R probabilities

    for (int j = 0; j < n_tiles; ++j) {
        const int k0 = k_begin + j * Bc, stage = j % STAGES;
#if TMA_COPIES
        mbar_wait(stage_barrier(bars, stage, warp), (j / STAGES) & 1);
        if (k0 + warp * KW + KW > k_end)    // the split's last tile: rows past k_end
            zero_rows_from(V_j, stage, warp, lane, k_end - k0 - warp * KW);
#if TILE_COPIES
        __syncthreads();  // tile j has landed (its rows past k_end zeroed), and every warp is
                          // done with tile j - 1's buffer (thread 0 refills it next) and P_w
#else
        __syncwarp();  // tile j has landed (its rows past k_end zeroed), and every lane is
                       // done with tile j - 1's buffer and P_w before they are overwritten
#endif
        // Keep STAGES - 1 tiles in flight: fetch tile j + STAGES - 1 into tile j - 1's buffer
        // (its pages looked up one iteration ago), then look up the pages of the tile after.
        load_tile_tma(K_j, V_j, bars, &k_map, &v_map, page, b, g, k0 + (STAGES - 1) * Bc,
                      k_end, (j + STAGES - 1) % STAGES, warp, lane, kv_heads);
#else
        cp_async_wait<STAGES - 2>();
        __syncwarp();  // tile j (every lane's copies) has landed, and every lane is done with
                       // tile j - 1's buffer and P_w before they are overwritten
        // Keep STAGES - 1 tiles in flight: fetch tile j + STAGES - 1 into tile j - 1's buffer
        // (its pages looked up one iteration ago), then look up the pages of the tile after.
        load_tile(K_j, V_j, K, V, page, b, g, k0 + (STAGES - 1) * Bc, k_begin, k_end,
                  (j + STAGES - 1) % STAGES, warp, lane, kv_heads, seq_k);
#endif
        lookup_pages(page, block_table, b, k0 + STAGES * Bc, k_begin, k_end, warp, lane,
                     pages_per_seq);

        // S_ij = Q_i K_jᵀ: lane (part, c) sums dimensions [part·DL, ...) of the warp's key c
        // for every row, then the LPK parts add up by shuffles; one conversion of each K
        // element serves all R rows.
        const int key = warp * KW + c;
        float dot[R];
        #pragma unroll
        for (int r = 0; r < R; ++r) dot[r] = 0.f;
        {
            constexpr int QCH = DL < CHUNK ? DL : CHUNK;
            #pragma unroll
            for (int x = 0; x < DL; x += QCH) {
                float kx[QCH];
                // 16 bytes; 8 rows' same chunk in 8 bank groups (padding or swizzle: kv_at)
                load_floats<QCH>(kv_at(K_j, stage, key, part * DL + x), kx);
                #pragma unroll
                for (int r = 0; r < R; ++r) {
                    const float4* qx = (const float4*)(Q_i + r * d + part * DL + x);  // broadcast
                    #pragma unroll
                    for (int e = 0; e < QCH; e += 4) {
                        const float4 q4 = qx[e / 4];
                        dot[r] = fmaf(q4.x, kx[e], dot[r]);
                        dot[r] = fmaf(q4.y, kx[e + 1], dot[r]);
                        dot[r] = fmaf(q4.z, kx[e + 2], dot[r]);
                        dot[r] = fmaf(q4.w, kx[e + 3], dot[r]);
                    }
                }
            }
        }
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            #pragma unroll
            for (int off = KW; off < 32; off *= 2)
                dot[r] += __shfl_xor_sync(0xffffffffu, dot[r], off);
        }

        // Online softmax over the warp's KW keys, every row: mask, the keys' max, new running
        // max, P_ij = exp2(S - m), rescale of the old state, new running sum.
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            const int last_key = seq_k - SEQ_Q + r % SEQ_Q;   // causal among the new tokens
            const bool seen = k0 + key < k_end && k0 + key <= last_key;
            const float x = seen ? dot[r] : neg_inf();
            float tile_max = x;
            #pragma unroll
            for (int off = KW / 2; off > 0; off /= 2)
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
            // online_softmax.cuh's step in its two halves, scores already in log2 units.
            const float m_new = fmaxf(m_i[r], tile_max);
            const float p = fast_exp2(x - max_shift(m_new, 1.f));  // 0 for a hidden key
            float row_sum = p;
            #pragma unroll
            for (int off = KW / 2; off > 0; off /= 2)
                row_sum += __shfl_xor_sync(0xffffffffu, row_sum, off);
            const float alpha = max_rescale(m_i[r], m_new, 1.f);
            l_i[r] = alpha * l_i[r] + row_sum;
            m_i[r] = m_new;
            #pragma unroll
            for (int e = 0; e < DPL; ++e) acc[r][e] *= alpha;
            if (part == 0) P_w[c * R + r] = p;
        }
        __syncwarp();  // P_w is written before the lanes read every key's probabilities

        // O_i += P_ij V_j: the lane's DPL dimensions over its key group's keys.
        #pragma unroll
        for (int i = 0; i < KW / KG; ++i) {
            const int cc = kg + i * KG;
            float vx[DPL];
            load_floats<DPL>(kv_at(V_j, stage, warp * KW + cc, dl * DPL), vx);
            float p[R];
            if constexpr (R % 4 == 0) {
                #pragma unroll
                for (int r = 0; r < R; r += 4) {
                    const float4 p4 = *(const float4*)(P_w + cc * R + r);   // broadcast
                    p[r] = p4.x; p[r + 1] = p4.y; p[r + 2] = p4.z; p[r + 3] = p4.w;
                }
            } else {
                #pragma unroll
                for (int r = 0; r < R; ++r) p[r] = P_w[cc * R + r];
            }
            #pragma unroll
            for (int r = 0; r < R; ++r) {
                #pragma unroll
                for (int e = 0; e < DPL; ++e) acc[r][e] += p[r] * vx[e];
            }
        }
    }
#if !TMA_COPIES
    cp_async_wait<0>();   // no copy is left in flight (the last groups are empty)
#endif

    // The key groups of a warp add up their dimensions; each warp posts its m_i, l_i.
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        #pragma unroll
        for (int e = 0; e < DPL; ++e) {
            #pragma unroll
            for (int off = LPR; off < 32; off *= 2)
                acc[r][e] += __shfl_xor_sync(0xffffffffu, acc[r][e], off);
        }
        if (lane == 0) { m_w[warp * R + r] = m_i[r]; l_w[warp * R + r] = l_i[r]; }
    }
    __syncthreads();  // every warp's m_i, l_i are in shared memory before the merge reads them

    // Merge the warps (a fixed order): the block's max m_s = max_w m_w, each warp's O_i scaled
    // by exp2(m_w - m_s) and summed in O_acc one warp at a time, l_s = Σ_w exp2(m_w - m_s) l_w.
    float own[R];
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        float m_s = neg_inf();
        for (int w = 0; w < WARPS; ++w) m_s = fmaxf(m_s, m_w[w * R + r]);
        own[r] = m_i[r] == neg_inf() ? 0.f : fast_exp2(m_i[r] - m_s);
        if (tid == r) {
            float l_s = 0.f;
            for (int w = 0; w < WARPS; ++w)
                if (m_w[w * R + r] != neg_inf())
                    l_s += fast_exp2(m_w[w * R + r] - m_s) * l_w[w * R + r];
            m_blk[r] = m_s;
            l_blk[r] = l_s;
        }
    }
    for (int w = 0; w < WARPS; ++w) {
        if (warp == w && kg == 0) {
            #pragma unroll
            for (int r = 0; r < R; ++r) {
                float* o = O_acc + r * d + dl * DPL;
                #pragma unroll
                for (int e = 0; e < DPL; ++e)
                    o[e] = (w == 0 ? 0.f : o[e]) + own[r] * acc[r][e];
            }
        }
        __syncthreads();  // warp w has added its part before warp w + 1 reads O_acc
    }

    // Write the split's state: O_s = O_acc / l_s (0 for a row that saw no key of the split),
    // m_s in natural-log units, l_s.
    for (int idx = tid; idx < R * d; idx += NUM_THREADS) {
        const int r = idx / d, x = idx % d;
        const float l = l_blk[r];
        O_part[((row0 + r) * S + s) * d + x] = l > 0.f ? O_acc[idx] / l : 0.f;
    }
    if (tid < R) {
        m_part[(row0 + tid) * S + s] = m_blk[tid] * LN2;
        l_part[(row0 + tid) * S + s] = l_blk[tid];
    }

    // The merge's shared memory, free once every thread has written its part of the split's
    // state (take_ticket's first barrier): the weights rescale_s · l_s, l_final, and the
    // ticket's answer, which the leader writes after that barrier.
    float* const weight = (float*)smem;                 // R × S
    float* l_fin = weight + R * S;                      // R
    volatile int* const merges = (volatile int*)(l_fin + R);

    if (SKIP_MERGE) return;
    // Take a ticket once the state is visible device-wide: the block that draws S - 1 is the
    // last of (b, g) to finish, and merges; the others are done.
    if (!take_ticket(split_count + b * kv_heads + g, S - 1, merges, tid == 0,
                     [] { __syncthreads(); }))
        return;

    // The merge of the R rows of (b, g).
    // m_final, each split's rescale and weight, l_final: one warp per row, each lane its
    // splits s ≡ lane (mod 32), all read at once.
    for (int r = warp; r < R; r += WARPS) {
        const long long row = row0 + r;
        float m_r[MAX_SPLITS / 32], l_r[MAX_SPLITS / 32];
        float m_final = neg_inf();
        #pragma unroll
        for (int i = 0; i < MAX_SPLITS / 32; ++i) {
            const int sp = lane + 32 * i;
            m_r[i] = sp < S ? __ldcg(m_part + row * S + sp) : neg_inf();
            l_r[i] = sp < S ? __ldcg(l_part + row * S + sp) : 0.f;
            m_final = fmaxf(m_final, m_r[i]);
        }
        m_final = warp_max(m_final);
        float l_final = 0.f;
        #pragma unroll
        for (int i = 0; i < MAX_SPLITS / 32; ++i) {
            const int sp = lane + 32 * i;
            if (sp < S) {
                const float rescale = expf(m_r[i] - m_final);   // 0 for a split never seen
                weight[r * S + sp] = rescale * l_r[i];
                l_final += rescale * l_r[i];
                if (trace_rescale) trace_rescale[row * S + sp] = rescale;
            }
        }
        l_final = warp_sum(l_final);
        if (lane == 0) {
            l_fin[r] = l_final;
            lse[row] = m_final + logf(l_final);
            if (trace_m_final) { trace_m_final[row] = m_final; trace_l_final[row] = l_final; }
        }
    }
    __syncthreads();  // every row's weights and l_final are in shared memory before the sums

    // O = Σ_s weight_s · O_s / l_final: each thread MV dimensions of one row over all splits,
    // MERGE_IN_FLIGHT splits' loads issued before their sums.
    constexpr int IN_FLIGHT = MERGE_IN_FLIGHT;
    for (int item = tid; item < R * d / MV; item += NUM_THREADS) {
        const int r = item / (d / MV), x = item % (d / MV) * MV;
        const float* O_s = O_part + (row0 + r) * S * d + x;
        const float* w = weight + r * S;
        float o[MV];
        #pragma unroll
        for (int e = 0; e < MV; ++e) o[e] = 0.f;
        for (int s0 = 0; s0 < S; s0 += IN_FLIGHT) {
            float v[IN_FLIGHT][MV];
            #pragma unroll
            for (int j = 0; j < IN_FLIGHT; ++j)
                if (s0 + j < S) ldcg<MV>(O_s + (long long)(s0 + j) * d, v[j]);
            #pragma unroll
            for (int j = 0; j < IN_FLIGHT; ++j) {
                if (s0 + j < S) {
                    #pragma unroll
                    for (int e = 0; e < MV; ++e) o[e] += w[s0 + j] * v[j][e];
                }
            }
        }
        const float l_final = l_fin[r];
        #pragma unroll
        for (int e = 0; e < MV; ++e) store_as(O + (row0 + r) * d + x + e, o[e] / l_final);
    }
}
