// Hopper (sm_90a) FlashAttention-2 backward pass on warpgroup MMA (float16 or bfloat16 in,
// float32 accumulate). It runs between the mma.sync backward's helper kernels
// (kernels/ampere/flash_backward_mma.cu): backward_delta before it (D = rowsum(dO ∘ O), dQ
// accumulator zeroed) and backward_dq_cast_tiles after it (dQ = scale · accumulator, from
// the accumulator's tile order below into rows).
//
// One thread block per (key tile j, batch·head), in the launch order of grid_key_tile
// (kernels/include/common.cuh): causal key tiles heaviest first (j = 0 meets every query tile)
// within groups of batch·heads; bh_offset + the block's batch·head index = bh.
// The block has 1 + Bc / 64 warpgroups:
//   - warpgroup 0, the producer: thread 0 copies K_j and V_j once, then Q_i and dO_i of every
//     query tile i (causal: from the first that sees tile j) into a two-stage ring, as bulk
//     tensor copies (TMA) completing on the stage's "full" mbarrier; warp 1 copies lse_i and
//     D_i into the same stage and arrives on it. A stage is refilled once every consumer
//     thread has arrived on its "empty" mbarrier.
//   - warpgroups 1 .. Bc / 64, the consumers: each owns 64 keys of K_j, V_j and keeps their
//     dK_j, dV_j rows in registers. Per query tile, on the tensor cores, in this order:
//       S_ijᵀ = K_j Q_iᵀ,   dP_ijᵀ = V_j dO_iᵀ       (both operands in shared memory)
//       P_ijᵀ = exp2(S·scale·log2e − lse·log2e);  dV_j += P_ijᵀ dO_i
//       dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i)            (P, dS straight from the accumulators)
//       dQ_i += dS_ij K_j                          (dS_ij through shared memory, stored
//                                                   transposed by stmatrix; each consumer
//                                                   takes a 64-row or 64-column part)
//       dK_j += dS_ijᵀ Q_i                         (runs while dQ_i's part goes out)
//     and dQ_i's parts are added to the float32 accumulator in HBM, kept in tile order (a
//     consumer's part is 16 contiguous KB, in its fragment order; see DQ_PART):
//     DQ_WRITER 0, by the consumers from their registers, red.global.add.v4 of 512
//     contiguous bytes a warp; DQ_WRITER 1, by warp 2 of the producer warpgroup, from a
//     float32 staging tile in shared memory that the consumers fill ("dq_full") and reuse
//     once it is read ("dq_empty"): one bulk reduction (cp.reduce.async.bulk) per part.
// Shared-memory tiles are 64-column (128-byte) slabs in the 128-byte swizzle that the copy
// engine writes and wgmma reads (16-byte chunk c of row r sits at chunk c XOR (r mod 8)).
// Rows past seq_q / seq_k arrive as zeros; P is zeroed where masked (causal diagonal tiles,
// ragged last tiles), so those rows add nothing.
//
// Compile-time switches (-D): HEAD_DIM (64 or 128), BLOCK_Q (Br), BLOCK_K (Bc: 128, two
// consumers), BF16 (0: float16, 1: bfloat16), DQ_WRITER (0 or 1, as above). (HEAD_DIM, Br)
// is (64, 128) or (128, 64): the shapes whose accumulators fit the consumers' 240 registers.

#include "tile_shape.cuh"
#ifndef DQ_WRITER
#define DQ_WRITER 0
#endif

constexpr int d = HEAD_DIM;
constexpr int Br = BLOCK_Q;
constexpr int Bc = BLOCK_K;
constexpr int CONSUMERS = Bc / 64;              // consumer warpgroups, 64 keys each
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int STAGES = 2;                       // Q_i / dO_i / lse_i / D_i stages in the ring
constexpr int SLAB_Q = Br * 128;                // bytes of one 64-column slab of Q_i or dO_i
constexpr int SLAB_KV = Bc * 128;               // ... of K_j or V_j
constexpr int SLAB_DS = Br * 128;               // ... of dS_ij (64 keys a slab)
constexpr int Q_BYTES = Br * d * 2;
constexpr int KV_BYTES = Bc * d * 2;
constexpr int DS_BYTES = Br * Bc * 2;
// dQ_i's accumulator in HBM is kept in tile order, not row order: query tile i of batch·head
// bh is DQ_PARTS consecutive parts of 64 x 64 floats (a consumer's part of dQ_i), each in
// its consumers' fragment order, so a consumer's part is one contiguous 16 KB: float4 f of
// thread x (0..127) of the warpgroup holds its accumulators 4f .. 4f + 3, at float
// (f · 128 + x) · 4. backward_dq_cast_tiles (kernels/ampere/flash_backward_mma.cu) reads it
// back into rows. Rows past seq_q (a ragged last tile) add zeros there and are never read.
constexpr int DQ_PART = 64 * 64;                // floats of one consumer's part of dQ_i
constexpr int DQ_PARTS = Br * d / DQ_PART;
constexpr int S_REGS = Br / 2;                  // S_ijᵀ (or dP_ijᵀ) accumulators: 64 x Br
constexpr int G_REGS = d / 2;                   // dK_j (or dV_j) accumulators: 64 x d
// dQ_i (Br x d) parts: with Br = 64 · CONSUMERS each consumer takes 64 rows and every
// column; with Br = 64, 64 columns each. Either way a 64 x 64 product over all Bc keys.
constexpr bool DQ_BY_ROWS = Br == 64 * CONSUMERS;
constexpr float LOG2E = 1.4426950408889634f;
// Register budgets after setmaxnreg (multiples of 8): the block starts with 168 a thread
// (64K / THREADS, rounded down to 8) and the two budgets share exactly that; head_dim 64's
// consumers need fewer, which leaves the producer's bulk-reduction lanes enough.
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
constexpr int CONSUMER_REGS = d == 128 ? 240 : 232;
constexpr int PRODUCER_REGS = (LAUNCH_REGS * THREADS - CONSUMER_REGS * CONSUMERS * 128) / 128;
static_assert(PRODUCER_REGS >= 24 && PRODUCER_REGS % 8 == 0, "register budgets");

static_assert(Bc == 128, "BLOCK_K must be 128 (two consumer warpgroups)");
static_assert((d == 64 && Br == 128) || (d == 128 && Br == 64),
              "(HEAD_DIM, BLOCK_Q) must be (64, 128) or (128, 64)");
static_assert(DQ_BY_ROWS || d == 64 * CONSUMERS, "dQ parts must be 64 x 64");

#include "common.cuh"
#include "causal_tiles.cuh"
#include "hopper.cuh"
#include "pipeline.cuh"

typedef unsigned short half_t;   // raw 16-bit elements: float16, or bfloat16 when BF16=1

constexpr int PARTS_P = 2;                      // P's exponentials go in two halves (below)

// P_ijᵀ of one half of its k-steps (queries): exponentials from lse_i, zeroed where masked
// when WITH_MASK, packed into 16-bit A fragments. A template, so that the tiles that need no
// mask (all but the causal diagonal and ragged ones) run a copy with no compares or selects.
// (The copy with the tests checks `masked` again, though its caller has: in that form nvcc
// 13.0 emits the SASS that was timed; without it, ptxas allocates registers otherwise.)
template <bool WITH_MASK>
__device__ __forceinline__ void p_part(float (&S)[S_REGS], unsigned (&P_a)[Br / 16][4], int part,
                                       unsigned Ls, int t, int q0, const int (&key)[2],
                                       int seq_q, int seq_k, bool causal, bool masked,
                                       float scale_log2) {
    constexpr int KK_PART = Br / 16 / PARTS_P;
    #pragma unroll
    for (int nn = 2 * KK_PART * part; nn < 2 * KK_PART * (part + 1); ++nn) {
        const float2 L = lds_f2(Ls + (nn * 8 + 2 * t) * 4);
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
            float p = fast_exp2(fmaf(S[4 * nn + e], scale_log2, -((e & 1) ? L.y : L.x) * LOG2E));
            if (WITH_MASK && masked) {
                const int c = key[e >> 1], r = q0 + nn * 8 + 2 * t + (e & 1);
                if (c >= seq_k || r >= seq_q || (causal && c > r)) p = 0.f;
            }
            S[4 * nn + e] = p;
        }
    }
    #pragma unroll
    for (int kk = KK_PART * part; kk < KK_PART * (part + 1); ++kk)
        #pragma unroll
        for (int r = 0; r < 4; ++r)
            P_a[kk][r] = pack_pair<BF16>(S[8 * kk + 2 * r], S[8 * kk + 2 * r + 1]);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
flash_backward_wgmma(const __grid_constant__ TensorMap tm_q, const __grid_constant__ TensorMap tm_k,
                     const __grid_constant__ TensorMap tm_v, const __grid_constant__ TensorMap tm_do,
                     const float* __restrict__ lse, const float* __restrict__ Dvec,
                     float* __restrict__ dQacc, half_t* __restrict__ dK, half_t* __restrict__ dV,
                     int seq_q, int seq_k, float scale, int causal, int bh_count,
                     int bh_offset) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    int j, bh;
    if (!grid_key_tile(bh_count, j, bh)) return;    // a block of a last, partial group
    bh += bh_offset;
    const int Tr = tile_count(seq_q, Br);
    const int k0 = j * Bc;
    // Causal: query tile i sees key tile j iff its last row >= j·Bc (causal_tiles.cuh); none
    // (i_first = Tr) when the tile starts past the last query row: then the producer has
    // nothing to load and the consumers write zeros for dK_j and dV_j.
    const int i_first = first_query_tile(j, Br, Bc, seq_q, Tr, causal);
    const bool has_work = i_first < Tr;

    // Shared memory from a 1024-byte boundary (the swizzle pattern's period): K_j, V_j, the
    // stages of Q_i and dO_i, two dS_ij buffers, the stages of lse_i and D_i, the staged
    // dQ_i (float32, in tile order), the mbarriers.
    const unsigned raw = smem_addr(smem_raw);
    const unsigned base = (raw + 1023) & ~1023u;
    const unsigned sK = base;
    const unsigned sV = sK + KV_BYTES;
    const unsigned sQ = sV + KV_BYTES;
    const unsigned sdO = sQ + STAGES * Q_BYTES;
    const unsigned sdS = sdO + STAGES * Q_BYTES;
    const unsigned sL = sdS + 2 * DS_BYTES;
    const unsigned sD = sL + STAGES * Br * 4;
    const unsigned sdQ = sD + STAGES * Br * 4;
    const unsigned bars = sdQ + Br * d * 4;
    const unsigned kv_full = bars, dq_full = bars + 8, dq_empty = bars + 16;
    auto full = [&](int s) { return bars + 8 * (3 + s); };
    auto empty = [&](int s) { return bars + 8 * (3 + STAGES + s); };

    if (tid == 0) {
        mbar_init(kv_full, 1);
        mbar_init(dq_full, CONSUMERS * 128);
        mbar_init(dq_empty, 32);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full(s), 1 + 32);            // thread 0's copies and warp 1's lanes
            mbar_init(empty(s), CONSUMERS * 128);
        }
        mbar_init_fence();
    }
    __syncthreads();  // the mbarriers are initialised before any thread waits on them

    // The ring (RingPos, pipeline.cuh): query tile i, the u-th of the block (u = i − i_first),
    // uses stage u mod STAGES, in that stage's (u / STAGES)-th phase; the staged dQ_i is a
    // ring of one buffer.
    if (warp < 4) {
        // ---- producer warpgroup -------------------------------------------------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
        if (!has_work) return;
        if (tid == 0) {
            // Thread 0: K_j and V_j once, then Q_i and dO_i stage by stage.
            mbar_expect_bytes(kv_full, 2 * KV_BYTES);
            for (int h = 0; h < d / 64; ++h) {
                tma_load(sK + h * SLAB_KV, &tm_k, h * 64, k0, bh, kv_full);
                tma_load(sV + h * SLAB_KV, &tm_v, h * 64, k0, bh, kv_full);
            }
            for (int i = i_first, u = 0; i < Tr; ++i, ++u) {
                const auto st = RingPos<STAGES>::at(u);
                const int s = st.index;
                if (u >= STAGES) mbar_wait(empty(s), st.empty_parity());
                mbar_expect_bytes(full(s), 2 * Q_BYTES);
                for (int h = 0; h < d / 64; ++h) {
                    tma_load(sQ + s * Q_BYTES + h * SLAB_Q, &tm_q, h * 64, i * Br, bh, full(s));
                    tma_load(sdO + s * Q_BYTES + h * SLAB_Q, &tm_do, h * 64, i * Br, bh, full(s));
                }
            }
        } else if (warp == 1) {
            // Warp 1: lse_i and D_i (zeros past seq_q), then each lane arrives.
            const float* Lb = lse + (u64)bh * seq_q;
            const float* Db = Dvec + (u64)bh * seq_q;
            for (int i = i_first, u = 0; i < Tr; ++i, ++u) {
                const auto st = RingPos<STAGES>::at(u);
                const int s = st.index;
                if (u >= STAGES) mbar_wait(empty(s), st.empty_parity());
                #pragma unroll 1                // unrolled, it needs more than its 24 registers
                for (int r = lane; r < Br; r += 32) {
                    const int row = i * Br + r;
                    sts_f1(sL + (s * Br + r) * 4, row < seq_q ? Lb[row] : 0.f);
                    sts_f1(sD + (s * Br + r) * 4, row < seq_q ? Db[row] : 0.f);
                }
                mbar_arrive(full(s));       // release: the stores above come first
            }
        } else if (DQ_WRITER && warp == 2) {
            // Warp 2: each staged dQ_i into the float32 accumulator, one bulk reduction of
            // 16 KB per consumer's part (lane p: part p); once they have read the stage, it
            // is free.
            for (int i = i_first, u = 0; i < Tr; ++i, ++u) {
                mbar_wait(dq_full, RingPos<1>::at(u).phase);
                if (lane < DQ_PARTS)
                    bulk_add_f32(dQacc + ((u64)bh * Tr + i) * Br * d + lane * DQ_PART,
                                 sdQ + lane * DQ_PART * 4, DQ_PART * 4);
                bulk_commit();
                bulk_wait_read();
                mbar_arrive(dq_empty);
            }
            bulk_wait_all();                // the reductions are done before the block ends
        }
        return;
    }

    // ---- consumer warpgroups --------------------------------------------------------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
    const int wg = warp / 4 - 1;                 // consumer index: keys 64·wg .. of K_j
    const int wq = warp % 4;                     // warp in the warpgroup: 16 of those keys
    const int g = lane / 4, t = lane % 4;        // accumulator row group and column pair
    const float scale_log2 = scale * LOG2E;
    const int key[2] = {k0 + wg * 64 + wq * 16 + g, k0 + wg * 64 + wq * 16 + g + 8};
    const int dq_row0 = DQ_BY_ROWS ? 64 * wg : 0;    // this consumer's part of dQ_i
    const int dq_col0 = DQ_BY_ROWS ? 0 : 64 * wg;
    const int x = tid % 128;                     // thread in the warpgroup (dQ_i's tile order)

    // Descriptors (see flash_wgmma.cu). K-major operands (a k-step of 16 columns moves 32
    // bytes inside a 128-byte row and every 4 k-steps to the next slab; 8-row groups 1024
    // bytes apart): K_j and V_j as A (this consumer's 64 rows), Q_i and dO_i as B of the
    // S and dP products, dS_ij as A of the dQ product. N-major operands (a k-step of 16 rows
    // moves 2048 bytes; 64-column slabs one slab apart): Q_i and dO_i as B of the dK and dV
    // products, K_j as B of the dQ product.
    auto kmajor = [&](unsigned tile, unsigned slab, int kk) {
        return smem_desc(tile + (kk / 4) * slab + (kk % 4) * 32, 16, 1024);
    };
    auto nmajor = [&](unsigned tile, unsigned slab, int kk) {
        return smem_desc(tile + kk * 16 * 128, slab, 1024);
    };
    const unsigned k_rows = sK + wg * 64 * 128, v_rows = sV + wg * 64 * 128;

    float dK_acc[G_REGS], dV_acc[G_REGS];
    #pragma unroll
    for (int e = 0; e < G_REGS; ++e) dK_acc[e] = dV_acc[e] = 0.f;

    if (has_work) mbar_wait(kv_full, 0);
    for (int i = i_first, u = 0; i < Tr; ++i, ++u) {
        const auto st = RingPos<STAGES>::at(u);
        const int s = st.index;
        const int q0 = i * Br;
        const unsigned sQs = sQ + s * Q_BYTES, sdOs = sdO + s * Q_BYTES;
        const unsigned sdSb = sdS + RingPos<2>::at(u).index * DS_BYTES;   // two, alternating
        mbar_wait(full(s), st.phase);

        // S_ijᵀ and dP_ijᵀ on the tensor cores, one commit group each.
        float S[S_REGS], dP[S_REGS];
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < d / 16; ++kk)
            wgmma_ss(S, kmajor(k_rows, SLAB_KV, kk), kmajor(sQs, SLAB_Q, kk), kk > 0);
        wgmma_commit();
        #pragma unroll
        for (int kk = 0; kk < d / 16; ++kk)
            wgmma_ss(dP, kmajor(v_rows, SLAB_KV, kk), kmajor(sdOs, SLAB_Q, kk), kk > 0);
        wgmma_commit();

        // P_ijᵀ rebuilt from lse_i (0 where masked), as 16-bit A fragments P_a[kk], k = queries.
        const unsigned Ls = sL + s * Br * 4, Ds = sD + s * Br * 4;   // lse_i, D_i of the stage
        const bool masked = (causal && k0 + Bc - 1 > q0) || k0 + Bc > seq_k || q0 + Br > seq_q;
        wgmma_wait<1>();                         // S_ijᵀ is done (dP may still run)
        reg_fence(S);
        unsigned P_a[Br / 16][4];
        // P's exponentials in two halves of its k-steps (queries), the first half's dV
        // product issued before the second half's exponentials, so the tensor cores take it
        // while the special-function units work (the consumers run in step). Each half is
        // built with the mask's tests (causal diagonal and ragged tiles) or without them
        // (every other tile): a warp-uniform branch between the two copies.
        constexpr int KK_PART = Br / 16 / PARTS_P;
        #pragma unroll
        for (int part = 0; part < PARTS_P; ++part) {
            if (masked)
                p_part<true>(S, P_a, part, Ls, t, q0, key, seq_q, seq_k, causal, masked,
                             scale_log2);
            else
                p_part<false>(S, P_a, part, Ls, t, q0, key, seq_q, seq_k, causal, masked,
                              scale_log2);

            // dV_j += P_ijᵀ dO_i (this part's k-steps), on the tensor cores while dS (and
            // the next part's P) is computed.
            wgmma_fence();
            #pragma unroll
            for (int kk = KK_PART * part; kk < KK_PART * (part + 1); ++kk)
                wgmma_rs(dV_acc, P_a[kk], nmajor(sdOs, SLAB_Q, kk));
            wgmma_commit();
        }

        // dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i) from the rounded P, as A fragments dS_a[kk].
        wgmma_wait<PARTS_P>();                   // dP_ijᵀ is done (dV may still run)
        reg_fence(dP);
        unsigned dS_a[Br / 16][4];
        #pragma unroll
        for (int kk = 0; kk < Br / 16; ++kk)
            #pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int e0 = 8 * kk + 2 * r;       // accumulators e0, e0 + 1: one row, 2 queries
                const float2 Dv = lds_f2(Ds + ((e0 / 4) * 8 + 2 * t) * 4);
                const float2 p = unpack_pair<BF16>(P_a[kk][r]);
                dS_a[kk][r] = pack_pair<BF16>(p.x * (dP[e0] - Dv.x), p.y * (dP[e0 + 1] - Dv.y));
            }

        // dS_ij into this tile's buffer: the fragments of dS_ijᵀ stored transposed, slab wg
        // holding this consumer's 64 keys (row = query, 16 bytes = 8 keys). Matrix m of
        // dS_a[kk] covers keys 16·wq + 8·(m & 1) .. and queries 16·kk + 8·(m >> 1) ...
        {
            const int m = lane / 8;
            const int chunk = 2 * wq + (m & 1);
            #pragma unroll
            for (int kk = 0; kk < Br / 16; ++kk) {
                const int q = 16 * kk + 8 * (m >> 1) + (lane & 7);
                stmatrix_x4_trans(sdSb + wg * SLAB_DS + q * 128 + ((chunk ^ (q & 7)) << 4),
                                  dS_a[kk]);
            }
        }
        fence_proxy_async();                     // the stores are visible to wgmma ...
        // ... and both consumers' keys of dS_ij are stored before either reads all of it
        // (the consumer warpgroups' named barrier).
        named_barrier_sync<BAR_CONSUMERS, CONSUMERS * 128>();

        // This consumer's part of dQ_i = dS_ij K_j, over all Bc keys.
        float dQ_part[32];
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk)
            wgmma_ss<1>(dQ_part, kmajor(sdSb + dq_row0 * 128, SLAB_DS, kk),
                        nmajor(sK + (dq_col0 / 64) * SLAB_KV, SLAB_KV, kk), kk > 0);
        wgmma_commit();
        // dK_j += dS_ijᵀ Q_i, behind dQ_i's product: it runs while dQ_i's part goes out.
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < Br / 16; ++kk) wgmma_rs(dK_acc, dS_a[kk], nmajor(sQs, SLAB_Q, kk));
        wgmma_commit();
        wgmma_wait<1>();                         // dV and dQ products of tile i are done
        reg_fence(dQ_part);
        reg_fence(dV_acc);

        // dQ_i's part into the float32 accumulator (scale applied by the cast), in tile order:
        // staged for the producer's warp 2 once it has read the last one, or added from here,
        // each warp's reduction 512 contiguous bytes.
        if constexpr (DQ_WRITER) {
            if (u > 0) mbar_wait(dq_empty, RingPos<1>::at(u).empty_parity());
            const unsigned part = sdQ + wg * DQ_PART * 4;
            #pragma unroll
            for (int f = 0; f < 8; ++f)
                sts_f4(part + (f * 128 + x) * 16, dQ_part[4 * f], dQ_part[4 * f + 1],
                       dQ_part[4 * f + 2], dQ_part[4 * f + 3]);
            fence_proxy_async();                 // the stores are visible to the bulk copies
            mbar_arrive(dq_full);
        } else {
            float* mine = dQacc + (((u64)bh * Tr + i) * DQ_PARTS + wg) * DQ_PART + x * 4;
            #pragma unroll
            for (int f = 0; f < 8; ++f)
                red_add4(mine + f * 512, dQ_part[4 * f], dQ_part[4 * f + 1], dQ_part[4 * f + 2],
                         dQ_part[4 * f + 3]);
        }
        wgmma_wait<0>();                         // dK_j's product of tile i is done
        reg_fence(dK_acc);
        mbar_arrive(empty(s));                   // Q_i, dO_i, lse_i, D_i are no longer read
    }

    // scale · dK_j and dV_j (zeros for a key tile no query tile sees) to global memory.
    half_t* dKb = dK + (u64)bh * seq_k * d;
    half_t* dVb = dV + (u64)bh * seq_k * d;
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        // Each 8-column chunk of a row is spread over the quad, two columns a lane;
        // transposed within the quad (every lane takes part, so before the row's test),
        // lane t holds chunk 4k + t whole and writes it as 16 bytes.
        #pragma unroll
        for (int k = 0; k < d / 32; ++k) {
            unsigned wk[4], wv[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int nn = 4 * k + i;
                wk[i] = pack_pair<BF16>(dK_acc[4 * nn + 2 * h] * scale,
                                        dK_acc[4 * nn + 2 * h + 1] * scale);
                wv[i] = pack_pair<BF16>(dV_acc[4 * nn + 2 * h], dV_acc[4 * nn + 2 * h + 1]);
            }
            const uint4 ck = quad_transpose(wk, t), cv = quad_transpose(wv, t);
            if (key[h] < seq_k) {
                *(uint4*)(dKb + (u64)key[h] * d + 8 * (4 * k + t)) = ck;
                *(uint4*)(dVb + (u64)key[h] * d + 8 * (4 * k + t)) = cv;
            }
        }
    }
}
