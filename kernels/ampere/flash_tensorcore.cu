// Tensor-core FlashAttention-2 forward pass (float16 or bfloat16 in, float32 accumulate),
// sm_80 and later.
//
// One thread block of 4 warps per (query tile i, batch·head); the grid (bh_group, Tr, groups)
// lays the items out in launch order, heaviest query tiles first under causal
// (grid_item_tile in common.cuh).
// Each warp owns Br / 4 query rows of Q_i (one or two m16 row tiles). Key tiles K_j, V_j are
// streamed through shared memory with cp.async, two buffers deep. S_ij = Q_i K_jᵀ and
// O_i += P_ij V_j run on mma.sync m16n8k16; O_i, m_i and l_i stay in registers, and so does
// Q_i when a warp owns 16 rows (with 32 rows it is re-read from shared memory, which lets
// each K_j / V_j fragment feed two row tiles).
// Scores are kept raw (q·k); exp2 uses scale·log2(e) folded in, so the trace, written in
// natural-log units of scale·q·k, needs only one multiply.
//
// Stream-K (-DSTREAM_K=1, untraced; the launcher builds it where its cost model,
// engine/model/stream_k.py, has an even share of the key tiles faster than one block per item, i.e.
// for launches of fewer items than the GPU holds blocks at once): a grid of G blocks, each
// walking its share of the line of key tiles (stream_k.cuh), run after run; the parts of an
// item cut across blocks are posted (each thread its own registers) and merged by the block
// that draws the item's last ticket.
//
// Compile-time switches (-D): HEAD_DIM (64 or 128), BLOCK_Q (Br), BLOCK_K (Bc), SK_HEAD
// (stream-K: the positions each item's head takes on the line, stream_k.cuh),
// TRACE (0 or 1: write the online-softmax trace and the block schedule), BF16 (0: float16
// inputs and output, 1: bfloat16), STREAM_K (0 or 1, as above), RUNS (0 or 1, untraced: log
// every run to run_log, RUN_FIELDS u64 each: its start and end (%globaltimer), SM, block,
// batch·head, query tile i, key tiles [j_lo, j_hi) and outcome (0 a whole item, 1 a part
// posted, 2 a part that merged its item); run_log[0] counts the runs, run_log[1] is the room
// for them, records start at run_log + RUN_FIELDS). The launcher builds every STREAM_K launch
// with RUNS (a log of no room when nothing is recorded): that build, with thread 0's timer read
// at a run's start and its ticket on the log's count at its end, is the faster of the two
// (lab/NOTES.md has the timings).

#include "tile_shape.cuh"
#ifndef TRACE
#define TRACE 0
#endif
#ifndef STREAM_K
#define STREAM_K 0
#endif
#ifndef RUNS
#define RUNS 0
#endif

constexpr int d = HEAD_DIM;
constexpr int Br = BLOCK_Q;
constexpr int Bc = BLOCK_K;
constexpr int WARPS = 4;
constexpr int THREADS = WARPS * 32;
constexpr int WARP_ROWS = Br / WARPS;    // query rows per warp
constexpr int MT = WARP_ROWS / 16;       // m16 row tiles per warp
constexpr int RT = 2 * MT;               // query rows per thread (fragment rows g and g + 8)
constexpr bool Q_IN_REGS = MT * d <= 128;  // else Q_i is re-read from shared memory
constexpr int CHUNKS = d / 8;            // 16-byte chunks per row of Q, K, V, O
constexpr int ROW_BYTES = d * 2;
constexpr int S_TILES = Bc / 8;          // n-tiles of 8 keys in one row strip of S_ij
constexpr int O_TILES = d / 8;           // n-tiles of 8 columns in one row strip of O_i
constexpr float LOG2E = 1.4426950408889634f;
// Stream-K: a part's state in sk_part, one row of THREADS floats (one per thread) for each
// of its O_acc, m_i and l_i registers.
#if STREAM_K
constexpr int O_FLOATS = MT * O_TILES * 4;
constexpr int SK_SLOT = (O_FLOATS + 2 * RT) * THREADS;
#endif

static_assert(d == 64 || d == 128, "HEAD_DIM must be 64 or 128");
static_assert(Br == 64 || Br == 128, "BLOCK_Q must be 64 or 128");
static_assert(Bc % 16 == 0 && Bc >= 16, "BLOCK_K must be a multiple of 16");
static_assert((Bc * CHUNKS) % THREADS == 0, "K/V tile must split evenly over the threads");
static_assert((Br * CHUNKS) % THREADS == 0, "Q tile must split evenly over the threads");
static_assert(!(TRACE && STREAM_K), "traced runs take whole items (the trace follows each row "
                                    "over all its key tiles)");
static_assert(!(TRACE && RUNS), "the run log is for untraced builds (TRACE has its own records)");
#if RUNS
constexpr int RUN_FIELDS = 9;    // u64 fields of a run_log record (the launcher's RUN_FIELDS)
#endif

#include "common.cuh"
#include "online_softmax.cuh"
#include "stream_k.cuh"

typedef unsigned short half_t;   // raw 16-bit elements: float16, or bfloat16 when BF16=1

// One ldmatrix_x4 of B feeds two n8 tiles of every row tile: C[mt][2·n2] += A[mt]·(b0, b1) and
// C[mt][2·n2 + 1] += A[mt]·(b2, b3) (S_ij = Q_i K_jᵀ and O_i += P_ij V_j alike).
template <int NT>
__device__ __forceinline__ void mma_two_tiles(float (&C)[MT][NT][4], const unsigned (&A)[MT][4],
                                              const unsigned (&b)[4], int n2) {
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        mma16816<BF16>(C[mt][2 * n2], A[mt], b[0], b[1]);
        mma16816<BF16>(C[mt][2 * n2 + 1], A[mt], b[2], b[3]);
    }
}

// f(x, h, o) for every O_acc register o: its row x of a stream-K slot, its thread row h. A
// function template, not a generic lambda: NVRTC 12 takes a lambda's templated call operator
// for host code.
template <int NT, class F>
__device__ __forceinline__ void each_o(float (&O_acc)[MT][NT][4], F f) {
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        #pragma unroll
        for (int n = 0; n < NT; ++n)
            #pragma unroll
            for (int e = 0; e < 4; ++e)
                f((mt * NT + n) * 4 + e, 2 * mt + (e >> 1), O_acc[mt][n][e]);
}

extern "C" __global__ void __launch_bounds__(THREADS)
flash_tensorcore(const half_t* __restrict__ Q, const half_t* __restrict__ K,
                 const half_t* __restrict__ V, half_t* __restrict__ O, float* __restrict__ lse,
                 int seq_q, int seq_k, float scale, int causal, int bh_count, int Tr,
                 int stream_k_tiles, float* __restrict__ sk_part, int* __restrict__ sk_count,
                 u64* __restrict__ run_log,
                 float* __restrict__ t_running_max, float* __restrict__ t_running_sum,
                 float* __restrict__ t_rescale, float* __restrict__ t_tile_max,
                 int* __restrict__ t_sm_id, u64* __restrict__ t_start_ns,
                 u64* __restrict__ t_end_ns) {
    extern __shared__ __align__(16) unsigned char smem[];
#if STREAM_K
    __shared__ int sk_merges;   // whether this block merges the item it ran part of
#endif
#if RUNS
    __shared__ u64 run_t0;      // the current run's start (shared: no register held across it)
#endif
    const int Tc = tile_count(seq_k, Bc);
    // The work: items (query tile i, batch·head) of work.tiles(i) key tiles each (causal: key
    // tile j runs iff j·Bc <= the last row of Q_i; later tiles are skipped).
    const Work work{Tr, Tc, seq_q, bh_count, 1, causal, STREAM_K ? stream_k_tiles : 0};
    const unsigned sQ = smem_addr(smem);                  // Br x d (later: O_i staging)
    const unsigned sK = sQ + Br * d * 2;                  // 2 buffers of Bc x d
    const unsigned sV = sK + 2 * Bc * d * 2;              // 2 buffers of Bc x d

    // One run: key tiles [r.j_lo, r.j_hi) of query tile r.i of batch·head r.bh, then O_i and
    // lse written (a whole item, or the merge of a cut one) or the part posted.
    auto run_tiles = [&](const Run& r) {
        const int i = r.i, bh = r.bh, j_lo = r.j_lo, j_hi = r.j_hi;
        // Stream-K: the thread index read anew in every run, so that what derives from it is
        // recomputed per run, not held in registers across the runs (held, they would not fit
        // beside the main loop's).
        const int tid = STREAM_K ? thread_index_anew() : threadIdx.x;
        const int warp = tid / 32, lane = tid % 32;
        const int g = lane / 4, t = lane % 4;   // mma fragment row group and column pair
        const float scale_log2 = scale * LOG2E;
        const int warp_row0 = warp * WARP_ROWS;

        // ldmatrix row addresses of this lane at k-step 0 (Q_i, K_j) and column step 0 (V_j).
        // Chunk 2·kk XOR the swizzle equals the offset XOR 32·kk bytes, so loops need no tables.
        const unsigned q_lane_off = (warp_row0 + (lane & 15)) * ROW_BYTES
                                    + (((lane >> 4) ^ (lane & 7)) * 16);
        const unsigned k_lane_off = ((lane & 7) + ((lane >> 4) << 3)) * ROW_BYTES
                                    + ((((lane >> 3) & 1) ^ (lane & 7)) * 16);
        const unsigned v_lane_off = (lane & 15) * ROW_BYTES + (((lane >> 4) ^ (lane & 7)) * 16);
#if TRACE
        const u64 t_start = global_timer();
#endif
#if RUNS
        if (tid == 0) run_t0 = global_timer();
#endif
        // Thread 0 logs the run once the block is done with it (outcome: see the header).
        [[maybe_unused]] auto log_run = [&](int outcome) {
#if RUNS
            if (tid != 0) return;
            const u64 slot = atomicAdd((unsigned long long*)run_log, 1ull);
            if (slot >= run_log[1]) return;          // no room: the launcher reports the count
            u64* rec = run_log + (slot + 1) * RUN_FIELDS;
            rec[0] = run_t0;                      rec[1] = global_timer();
            rec[2] = sm_index();
            rec[3] = blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
            rec[4] = bh; rec[5] = i; rec[6] = j_lo; rec[7] = j_hi; rec[8] = outcome;
#endif
        };
        const int q0 = i * Br;
        const half_t* Qb = Q + (u64)bh * seq_q * d;
        const half_t* Kb = K + (u64)bh * seq_k * d;
        const half_t* Vb = V + (u64)bh * seq_k * d;

        // Prologue: Q_i and K_{j_lo} in one group, V_{j_lo} in the next (tile j in buffer j mod 2).
        load_tile<Br, d, THREADS>(sQ, Qb, q0, seq_q, tid);
        load_tile<Bc, d, THREADS>(sK + (j_lo & 1) * Bc * d * 2, Kb, j_lo * Bc, seq_k, tid);
        cp_async_commit();
        load_tile<Bc, d, THREADS>(sV + (j_lo & 1) * Bc * d * 2, Vb, j_lo * Bc, seq_k, tid);
        cp_async_commit();

        // Thread row h (0 .. RT-1) is query row row_of(h): row tile h / 2, fragment row g or g + 8.
        auto row_of = [&](int h) { return q0 + warp_row0 + (h >> 1) * 16 + (h & 1) * 8 + g; };

        unsigned Qf[Q_IN_REGS ? MT : 1][d / 16][4];   // Q_i as mma A fragments (if in registers)
        float O_acc[MT][O_TILES][4];              // unnormalised O_i
        float m_i[RT], l_i[RT];                   // running max of raw scores q·k; running sum
        #pragma unroll
        for (int h = 0; h < RT; ++h) { m_i[h] = neg_inf(); l_i[h] = 0.f; }  // l_i: own columns
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            #pragma unroll
            for (int n = 0; n < O_TILES; ++n)
                O_acc[mt][n][0] = O_acc[mt][n][1] = O_acc[mt][n][2] = O_acc[mt][n][3] = 0.f;
#if TRACE
        float keep[4][RT];   // trace values of the tile j with j mod 4 == t, stored 4 tiles at once
#endif

        for (int j = j_lo; j < j_hi; ++j) {
            const unsigned bufK = sK + (j & 1) * Bc * d * 2;
            const unsigned bufV = sV + (j & 1) * Bc * d * 2;
            cp_async_wait<1>();            // K_j (and Q_i) have landed
            __syncthreads();
            if (Q_IN_REGS && j == j_lo) {
                #pragma unroll
                for (int mt = 0; mt < (Q_IN_REGS ? MT : 0); ++mt)
                    #pragma unroll
                    for (int kk = 0; kk < d / 16; ++kk)
                        ldmatrix_x4(sQ + mt * 16 * ROW_BYTES + (q_lane_off ^ (kk * 32)),
                                    Qf[mt][kk]);
            }
            if (j + 1 < j_hi)              // prefetch K_{j+1}; its buffer held K_{j-1}
                load_tile<Bc, d, THREADS>(sK + ((j + 1) & 1) * Bc * d * 2, Kb, (j + 1) * Bc, seq_k,
                                          tid);
            cp_async_commit();

            // S_ij = Q_i K_jᵀ (raw scores).
            float S[MT][S_TILES][4];
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                #pragma unroll
                for (int n = 0; n < S_TILES; ++n)
                    S[mt][n][0] = S[mt][n][1] = S[mt][n][2] = S[mt][n][3] = 0.f;
            #pragma unroll
            for (int kk = 0; kk < d / 16; ++kk) {
                unsigned a[MT][4];
                #pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    if constexpr (Q_IN_REGS) {
                        a[mt][0] = Qf[mt][kk][0]; a[mt][1] = Qf[mt][kk][1];
                        a[mt][2] = Qf[mt][kk][2]; a[mt][3] = Qf[mt][kk][3];
                    } else {
                        ldmatrix_x4(sQ + mt * 16 * ROW_BYTES + (q_lane_off ^ (kk * 32)), a[mt]);
                    }
                }
                #pragma unroll
                for (int n2 = 0; n2 < S_TILES / 2; ++n2) {
                    unsigned b[4];
                    ldmatrix_x4(bufK + n2 * 16 * ROW_BYTES + (k_lane_off ^ (kk * 32)), b);
                    mma_two_tiles(S, a, b, n2);
                }
            }

            // Masks only where needed: the diagonal tiles (causal) and a ragged last key tile.
            const int k0 = j * Bc;
            const bool diagonal = causal && k0 + Bc - 1 > q0;
            if (diagonal || k0 + Bc > seq_k) {
                #pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    #pragma unroll
                    for (int n = 0; n < S_TILES; ++n)
                        #pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            int c = k0 + n * 8 + 2 * t + (e & 1);
                            int r = row_of(2 * mt + (e >> 1));
                            if (c >= seq_k || (causal && c > r)) S[mt][n][e] = neg_inf();
                        }
            }

            // Online softmax: new max, rescale factor, P_ij = exp(scale·(S - m)).
            float tile_max[RT], rescale[RT], m_shift[RT], row_sum[RT];
            #pragma unroll
            for (int h = 0; h < RT; ++h) { tile_max[h] = neg_inf(); row_sum[h] = 0.f; }
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                #pragma unroll
                for (int n = 0; n < S_TILES; ++n) {
                    tile_max[2 * mt] = fmaxf(tile_max[2 * mt], fmaxf(S[mt][n][0], S[mt][n][1]));
                    tile_max[2 * mt + 1] = fmaxf(tile_max[2 * mt + 1],
                                                 fmaxf(S[mt][n][2], S[mt][n][3]));
                }
            #pragma unroll
            for (int h = 0; h < RT; ++h) {
                tile_max[h] = quad_max(tile_max[h]);
                rescale[h] = online_softmax_step(m_i[h], tile_max[h], scale_log2, m_shift[h]);
            }
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                #pragma unroll
                for (int n = 0; n < S_TILES; ++n)
                    #pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        int h = 2 * mt + (e >> 1);
                        S[mt][n][e] = fast_exp2(fmaf(S[mt][n][e], scale_log2, -m_shift[h]));
                        row_sum[h] += S[mt][n][e];
                    }
            #pragma unroll
            for (int h = 0; h < RT; ++h) l_i[h] = l_i[h] * rescale[h] + row_sum[h];
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                #pragma unroll
                for (int n = 0; n < O_TILES; ++n) {
                    O_acc[mt][n][0] *= rescale[2 * mt]; O_acc[mt][n][1] *= rescale[2 * mt];
                    O_acc[mt][n][2] *= rescale[2 * mt + 1]; O_acc[mt][n][3] *= rescale[2 * mt + 1];
                }

#if TRACE
            // Lane t keeps tile j = t (mod 4); every 4 tiles the quad stores 4 adjacent floats.
            #pragma unroll
            for (int h = 0; h < RT; ++h) {
                float l_row = quad_sum(l_i[h]);
                if ((j & 3) == t) {
                    keep[0][h] = m_i[h] * scale; keep[1][h] = l_row;
                    keep[2][h] = rescale[h];     keep[3][h] = tile_max[h] * scale;
                }
            }
            if ((j & 3) == 3 || j + 1 == j_hi) {
                int jj = (j & ~3) + t;
                #pragma unroll
                for (int h = 0; h < RT; ++h) {
                    int r = row_of(h);
                    if (jj <= j && r < seq_q) {
                        u64 at = ((u64)bh * seq_q + r) * Tc + jj;
                        t_running_max[at] = keep[0][h]; t_running_sum[at] = keep[1][h];
                        t_rescale[at] = keep[2][h];     t_tile_max[at] = keep[3][h];
                    }
                }
            }
#endif

            cp_async_wait<1>();            // V_j has landed (K_{j+1} may still be in flight)
            __syncthreads();
            if (j + 1 < j_hi)              // prefetch V_{j+1}; its buffer held V_{j-1}
                load_tile<Bc, d, THREADS>(sV + ((j + 1) & 1) * Bc * d * 2, Vb, (j + 1) * Bc, seq_k,
                                          tid);
            cp_async_commit();

            // O_i += P_ij V_j, P_ij as 16-bit A fragments straight from the S accumulators.
            #pragma unroll
            for (int kk = 0; kk < Bc / 16; ++kk) {
                unsigned P[MT][4];
                #pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    P[mt][0] = pack_pair<BF16>(S[mt][2 * kk][0], S[mt][2 * kk][1]);
                    P[mt][1] = pack_pair<BF16>(S[mt][2 * kk][2], S[mt][2 * kk][3]);
                    P[mt][2] = pack_pair<BF16>(S[mt][2 * kk + 1][0], S[mt][2 * kk + 1][1]);
                    P[mt][3] = pack_pair<BF16>(S[mt][2 * kk + 1][2], S[mt][2 * kk + 1][3]);
                }
                #pragma unroll
                for (int n2 = 0; n2 < O_TILES / 2; ++n2) {
                    unsigned b[4];
                    ldmatrix_x4_trans(bufV + kk * 16 * ROW_BYTES + (v_lane_off ^ (n2 * 32)), b);
                    mma_two_tiles(O_acc, P, b, n2);
                }
            }
        }
        cp_async_wait<0>();
        #pragma unroll
        for (int h = 0; h < RT; ++h) l_i[h] = quad_sum(l_i[h]);   // full row sums

#if STREAM_K
        // A part of a cut item: post this part's state (each thread its O_acc, m_i, l_i, one float
        // per thread in a row of THREADS), then take the item's ticket; the part that draws the
        // last one merges, the others are done.
        if (j_hi - j_lo != work.tiles(i)) {
            const int first = work.first_part(r.start);
            const int last = work.last_part(r.start, work.tiles(i));
            float* const mine = sk_part + (u64)work.slot(blockIdx.x, r.start) * SK_SLOT + tid;
            each_o(O_acc, [&](int x, int, float& o) { mine[x * THREADS] = o; });
            #pragma unroll
            for (int h = 0; h < RT; ++h) {
                mine[(O_FLOATS + h) * THREADS] = m_i[h];
                mine[(O_FLOATS + RT + h) * THREADS] = l_i[h];
            }
            if (!take_ticket(sk_count + r.k, last - first, &sk_merges, tid == 0,
                             [] { __syncthreads(); })) {
                log_run(1);   // take_ticket's last barrier: every thread has posted
                return;
            }
            // Merge the parts in block order (the same result whichever part merges), each
            // thread its own rows and columns, read through L2 (ld.global.cg), its own part too:
            // first the row maxima over the parts, then l and O as sums of the parts' l and O,
            // each weighted by exp2(scale·log2e·(its m - m)).
            #pragma unroll
            for (int h = 0; h < RT; ++h) { m_i[h] = neg_inf(); l_i[h] = 0.f; }
            for (int b = first; b <= last; ++b) {
                const float* part = sk_part + (u64)work.slot(b, r.start) * SK_SLOT + tid;
                #pragma unroll
                for (int h = 0; h < RT; ++h)
                    m_i[h] = fmaxf(m_i[h], __ldcg(part + (O_FLOATS + h) * THREADS));
            }
            each_o(O_acc, [](int, int, float& o) { o = 0.f; });
            for (int b = first; b <= last; ++b) {
                const float* part = sk_part + (u64)work.slot(b, r.start) * SK_SLOT + tid;
                float w[RT];
                #pragma unroll
                for (int h = 0; h < RT; ++h) {
                    w[h] = part_weight(__ldcg(part + (O_FLOATS + h) * THREADS), m_i[h], scale_log2);
                    l_i[h] = fmaf(w[h], __ldcg(part + (O_FLOATS + RT + h) * THREADS), l_i[h]);
                }
                each_o(O_acc, [&](int x, int h, float& o) {
                    o = fmaf(w[h], __ldcg(part + x * THREADS), o);
                });
            }
        }
#endif

        // Epilogue: O_i / l_i, lse = scale·m + log(l).
        float inv_l[RT];
        #pragma unroll
        for (int h = 0; h < RT; ++h) {
            inv_l[h] = 1.f / l_i[h];
            int r = row_of(h);
            if (t == 0 && r < seq_q) lse[(u64)bh * seq_q + r] = m_i[h] * scale + logf(l_i[h]);
        }
#if TRACE
        // Causal-skipped tiles carry the state forward (rescale 1, tile max -inf); the quad's
        // lanes take adjacent tiles.
        for (int jj = j_hi + t; jj < Tc; jj += 4) {
            #pragma unroll
            for (int h = 0; h < RT; ++h) {
                int r = row_of(h);
                if (r < seq_q) {
                    u64 at = ((u64)bh * seq_q + r) * Tc + jj;
                    t_running_max[at] = m_i[h] * scale; t_running_sum[at] = l_i[h];
                    t_rescale[at] = 1.f;                t_tile_max[at] = neg_inf();
                }
            }
        }
#endif

        // Stage this warp's rows of O_i in its own rows of the Q_i buffer, then store 16 B per
        // lane, coalesced. Only this warp touches those rows: a warp barrier suffices.
        unsigned char* sO = smem;
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            #pragma unroll
            for (int n = 0; n < O_TILES; ++n) {
                int row = warp_row0 + mt * 16 + g;
                *(unsigned*)(sO + swizzle<CHUNKS>(row, n) * 16 + t * 4) =
                    pack_pair<BF16>(O_acc[mt][n][0] * inv_l[2 * mt],
                                    O_acc[mt][n][1] * inv_l[2 * mt]);
                *(unsigned*)(sO + swizzle<CHUNKS>(row + 8, n) * 16 + t * 4) =
                    pack_pair<BF16>(O_acc[mt][n][2] * inv_l[2 * mt + 1],
                               O_acc[mt][n][3] * inv_l[2 * mt + 1]);
            }
        __syncwarp();
        half_t* Ob = O + (u64)bh * seq_q * d;
        #pragma unroll
        for (int it = 0; it < WARP_ROWS * CHUNKS / 32; ++it) {
            int idx = lane + it * 32;
            int row = warp_row0 + idx / CHUNKS, chunk = idx % CHUNKS;
            if (q0 + row < seq_q)
                *(uint4*)(Ob + (u64)(q0 + row) * d + chunk * 8) =
                    *(const uint4*)(sO + swizzle<CHUNKS>(row, chunk) * 16);
        }

#if TRACE
        __syncthreads();
        if (tid == 0) {
            int rec = bh * gridDim.y + i;       // gridDim.y = Tr
            t_sm_id[rec] = sm_index();
            t_start_ns[rec] = t_start;
            t_end_ns[rec] = global_timer();
        }
#endif
#if RUNS
        __syncthreads();   // every warp has stored its rows of O_i: the run's end
        log_run(j_hi - j_lo == work.tiles(i) ? 0 : 2);
#endif
    };

#if STREAM_K
    // This block's share of the line, run after run. Thread 0 walks it; the walk's state and
    // the current run live in shared memory, not in registers the main loop needs.
    __shared__ Run sk_run;
    __shared__ int sk_walk[4];    // k, start, x (stream_k_next), and whether sk_run is a run
    if (threadIdx.x == 0) { sk_walk[0] = 0; sk_walk[1] = 0; sk_walk[2] = -1; }
    for (;;) {
        __syncthreads();  // the last run's threads are done with sk_run and have stored their
                          // O_i from the Q_i buffer, which the next Q_i overwrites
        if (threadIdx.x == 0) {
            Run r;
            sk_walk[3] = stream_k_next(work, sk_walk[0], sk_walk[1], sk_walk[2], r);
            sk_run = r;
        }
        __syncthreads();  // the run is in shared memory before the threads read it
        if (!sk_walk[3]) break;
        run_tiles(sk_run);
    }
#else
    // This block's item (common.cuh: heaviest first under causal), all its key tiles.
    Run r{0, 0, 0, 0, 0, 0};
    if (!grid_item_tile(causal, bh_count, r.i, r.bh)) return;
    r.j_hi = work.tiles(r.i);
    run_tiles(r);
#endif
}
