// Hopper (sm_90a) FlashAttention-2 forward pass on warpgroup MMA (float16 or bfloat16 in,
// float32 accumulate; or, the FP8 build, float8 e4m3 tiles with a scale each, bfloat16 out).
//
// The work is Tr · batch·heads items, one per (query tile i, batch·head), taken in the launch
// order of common.cuh (heaviest query tiles first under causal, by groups of bh_group
// batch·heads). Each thread block runs one item (the grid lays them out in order), or,
// PERSISTENT, one block per SM walks the items (struct Walk below), so the loads of its next
// item overlap the epilogue of the current one. The block has 1 + Br / 64 warpgroups:
//   - warpgroup 0, the producer: one thread issues bulk tensor copies (TMA) of Q_i once per
//     item into one of Q_BUFFERS buffers (two: the next item's Q_i loads a run ahead, behind
//     the current run's first K_j and V_j; one: after the current run's last S_ij) and of
//     K_j, V_j into a ring of KV_STAGES shared-memory stages; each copy completes on an
//     mbarrier ("full"); a buffer is refilled only after every consumer thread has arrived
//     on its "empty" mbarrier (Q_i's after the item's last S_ij).
//   - warpgroups 1 .. Br / 64, the consumers: each owns 64 query rows of Q_i. S_ij = Q_i K_jᵀ runs
//     as wgmma with both operands in shared memory; O_i += P_ij V_j as wgmma with P_ij in
//     registers (straight from the S accumulators) and V_j in shared memory. The two products
//     are software-pipelined: S_{i,j} is issued before P_{i,j-1} V_{j-1}, and the softmax of
//     tile j runs while that second product is still on the tensor cores. Across runs too:
//     a run's last P V is followed by the next run's first S_ij, and the run's output is
//     written while that S_ij computes.
// Shared-memory tiles are 64-column (128-byte) slabs in the 128-byte swizzle that both the copy
// engine writes and wgmma reads (16-byte chunk c of row r sits at chunk c XOR (r mod 8)).
// Rows past seq_q / seq_k arrive as zeros (the tensor map's bounds); masks apply only on the
// diagonal tiles (causal) and on a ragged last key tile. exp2 takes scale·log2(e) folded in.
//
// Compile-time switches (-D): HEAD_DIM (64 or 128), BLOCK_Q (Br: 128, two consumers),
// BLOCK_K (Bc: 64 or 128; FP8 128, 192 or 256 at d = 128, 256 at d = 64), TRACE (0 or 1: write
// the online-softmax trace and the schedule of the items, with the semantics of the
// tensor-core kernel's trace),
// PINGPONG (0 or 1: consumer warpgroups take turns issuing their products, so one's softmax
// overlaps the other's products), BF16 (0: float16 inputs and output, 1: bfloat16),
// PERSISTENT (0 or 1, as above), FP8 (below), SOFTMAX_FENCE (1, the default: a fence keeps the
// wait for P V behind the softmax; 0: ptxas places it, as the launchers ask at 16-bit d = 64),
// KV_STAGES and Q_BUFFERS (the rings, 2 and 2 by default; the launchers take them from
// engine.model.iomodel.wgmma_ring, which also counts the shared memory), Q_AHEAD (1: Q_i a run
// ahead, which needs two buffers), BAR_AREA (the bytes the launcher sets aside for the
// mbarriers), PREFETCH_MAPS and PV_FIRST (1, the defaults, for the ends of a run: the tensor
// maps fetched while the mbarriers are set up; a run's last P V issued before the waits for
// the next run's Q_i and first K_j), WIDE_STORES (1, the default: the output leaves in 16-byte
// stores, a row's 8-column chunks transposed within the quad; 0: a 4-byte store of each
// lane's two columns, for the lab's comparison), TILE_MAX_BITS (1, the default: a row's tile
// max from its scores' bits, two scores a three-input integer max, where the row holds a
// score >= +0; the same float as the float max; 0: the float max alone, as the launchers ask
// for FP8 at d = 64, where it measured faster), P_SMEM (FP8, 1: P_ij through shared memory,
// below; the launcher sets it at d = 128 with 256-key tiles, which it alone makes fit).
//
// FP8 (1): Q_i, K_j and V_j arrive as e4m3 tiles made by quantize_fp8 (fp8.cuh), each with its
// scale (q_scale per (batch·head, query tile), k_scale and v_scale per (batch·head, key tile)),
// V transposed (an 8-bit wgmma reads both operands K-major). The products take k = 32 keys or
// columns per instruction. The softmax runs in log2 units from the start (m_i holds the running
// max of scale·log2e·q_scale·k_scale_j·S_ij), P_ij is cast to e4m3 (P <= 1 after the running
// max, so it never saturates), and O_i is kept in units of the current V tile's scale: each
// tile rescales it by alpha · v_scale_{j-1} / v_scale_j, the epilogue multiplies by the last
// v_scale. Output bfloat16. No stream-K (a part's O would be in its own V scale).
// Bc = 192 (FP8, d = 128: wider key tiles share the softmax's fixed costs per tile, the row
// max, the O rescale, the barriers, among more keys): S_ij is one m64n192 wgmma, and V_jᵀ's
// rows of 192 bytes span more than one 128-byte swizzle row, so V_jᵀ arrives as three boxes
// of 64 keys in the 64-byte swizzle, each a slab of d rows of 64 bytes (VT_BOX below).
// Bc = 256 (FP8): S_ij is one m64n256 wgmma, V_jᵀ two boxes of 128 keys. At d = 128 the
// registers hold S (128) and O (64) but not P beside them (32 more: ptxas spills and
// serialises every wgmma), so P_SMEM: each k-step's P words go with one stmatrix to a buffer
// of the warpgroup's 64 rows (K-major, 128-key slabs, the 128-byte swizzle, as Q_i), fenced
// for the async proxy, and P V reads A from there (an SS wgmma) once the warpgroup has met on
// its named barrier (BAR_P + wg); the buffer is rewritten only after the P V that read it.
//
// Stream-K (PERSISTENT builds, untraced, the launch argument stream_k_tiles > 0: the launcher
// passes the work's key tiles when its cost model, engine/model/stream_k.py, has an even share
// faster than whole items, i.e. for launches of few items): each block walks an even share of
// the line of key tiles, cutting items at its share's ends, and the parts of a cut item are
// merged by the block that ends it (stream_k.cuh; each consumer thread posts its own
// registers).

#include "tile_shape.cuh"
#ifndef TRACE
#define TRACE 0
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef SOFTMAX_FENCE
#define SOFTMAX_FENCE 1
#endif
#ifndef PREFETCH_MAPS
#define PREFETCH_MAPS 1
#endif
#ifndef PV_FIRST
#define PV_FIRST 1
#endif
#ifndef Q_AHEAD
#define Q_AHEAD 1
#endif
#ifndef WIDE_STORES
#define WIDE_STORES 1
#endif
#ifndef TILE_MAX_BITS
#define TILE_MAX_BITS 1
#endif
#ifndef P_SMEM
#define P_SMEM 0
#endif

constexpr int d = HEAD_DIM;
constexpr int Br = BLOCK_Q;
constexpr int Bc = BLOCK_K;
constexpr int CONSUMERS = Br / 64;              // consumer warpgroups, 64 query rows each
constexpr int THREADS = 128 * (CONSUMERS + 1);
#ifndef KV_STAGES
#define KV_STAGES 2
#endif
#ifndef Q_BUFFERS
#define Q_BUFFERS 2
#endif
#ifndef BAR_AREA
#define BAR_AREA 128
#endif
constexpr int STAGES = KV_STAGES;               // K_j / V_j buffers in the ring
constexpr int Q_STAGES = Q_BUFFERS;             // Q_i buffers: run n reads buffer n mod Q_STAGES
static_assert(Q_STAGES == 2 || !Q_AHEAD, "Q_i a run ahead needs two buffers");
constexpr int ELEM = FP8 ? 1 : 2;               // bytes of an operand element
// Rows of Q_i and K_j are stored in slabs of SWIZZLE bytes (64 columns of 16 bits, 128 of
// FP8; a 64-byte swizzle for FP8 at d = 64, whose rows are 64 bytes).
constexpr int SWIZZLE = d * ELEM < 128 ? d * ELEM : 128;
constexpr int SLAB_COLS = SWIZZLE / ELEM;       // columns of one slab
constexpr int SLAB_Q = Br * SWIZZLE;            // bytes of one slab of Q_i
constexpr int SLAB_KV = Bc * SWIZZLE;           // ... of K_j (and of V_j, 16-bit)
constexpr int Q_BYTES = Br * d * ELEM;
constexpr int KV_BYTES = Bc * d * ELEM;
constexpr int K_STEP = 32 / ELEM;               // k of one wgmma: 32 bytes of a row
// FP8's V_jᵀ: d rows of Bc keys, loaded as boxes of VT_BOX keys (bytes), each a slab of d rows
// in the VT_BOX-byte swizzle: one box of 128 at Bc = 128, three of 64 at Bc = 192, two of
// 128 at Bc = 256.
constexpr int VT_BOX = Bc % 128 == 0 ? 128 : 64;
constexpr int VT_SLAB = d * VT_BOX;             // bytes of one box of V_jᵀ
// P_SMEM (FP8, the header says why): one buffer of P_ij a consumer warpgroup, 64 rows in
// slabs of 128 keys.
constexpr int P_SLAB = 64 * 128;                // bytes of one slab of a consumer's P_ij
constexpr int P_WG_BYTES = P_SMEM ? (Bc + 127) / 128 * P_SLAB : 0;
constexpr int P_BYTES = (Br / 64) * P_WG_BYTES;
static_assert(!P_SMEM || FP8, "P through shared memory: the FP8 build only");
constexpr int S_REGS = Bc / 2;                  // S accumulators per thread (64 x Bc per warpgroup)
constexpr int O_REGS = d / 2;                   // O accumulators per thread (64 x d)
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
// Register budgets after setmaxnreg (a multiple of 8; producer + consumers within 64K).
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = 240;
// setmaxnreg.inc waits until the block's pool holds the registers, and the pool is what the
// launch gave the block (ENTRY_REGS a thread): the producer must free at least what the
// consumers take, or they wait forever.
constexpr int ENTRY_REGS = 65536 / THREADS / 8 * 8;
static_assert(128 * (ENTRY_REGS - PRODUCER_REGS) >= CONSUMERS * 128 * (CONSUMER_REGS - ENTRY_REGS),
              "the consumers' registers come from the producer's");
constexpr bool TAKE_TURNS = PINGPONG;
// Stream-K: a part's state in sk_part, one row of SK_THREADS floats (one per consumer thread)
// for each of the O_REGS accumulators, m_i[2] and l_i[2].
constexpr int SK_THREADS = CONSUMERS * 128;
constexpr int SK_SLOT = (O_REGS + 4) * SK_THREADS;
static_assert(8 * (2 * Q_STAGES + 4 * STAGES) + 4 <= BAR_AREA,
              "the mbarriers and sk_merges fit their BAR_AREA bytes (iomodel.wgmma_barrier_bytes)");

static_assert(d == 64 || d == 128, "HEAD_DIM must be 64 or 128");
static_assert(Br == 128, "BLOCK_Q must be 128 (two consumer warpgroups)");
static_assert(Bc == 64 || Bc == 128 || (FP8 && (Bc == 192 || Bc == 256)),
              "BLOCK_K must be 64 or 128 (FP8: 128, 192 or 256)");
static_assert(!FP8 || Bc == 128 || (Bc == 192 && d == 128) || (Bc == 256 && (d == 64 || P_SMEM)),
              "the FP8 build takes BLOCK_K 128, 192 at HEAD_DIM 128 or 256 (at HEAD_DIM 128 "
              "with P_SMEM=1)");

#include "common.cuh"
#include "online_softmax.cuh"
#include "hopper.cuh"
#include "pipeline.cuh"
#include "stream_k.cuh"
#include "fp8.cuh"

typedef unsigned short half_t;   // raw 16-bit elements: float16, or bfloat16 when BF16=1 or FP8=1
constexpr bool OUT_BF16 = BF16 || FP8;   // the output's type: FP8 builds write bfloat16

// A block's walk over the work: next() gives its next run, false when there is none. One block
// per item: the grid's own item (grid_item_tile in common.cuh). PERSISTENT, a grid of G blocks
// (one per SM): stream-K, the block's share of the line (struct Work); otherwise whole items,
// not causal items b, b + G, b + 2G, ... batch·head by batch·head; causal, the groups of
// bh_group batch·heads one after another, and in each group one item of every round of G of
// its items in the launch order (slots from the heaviest query tile), the rounds dealt in
// alternate directions (block b takes item b of even rounds and G - 1 - b of odd ones), so the
// block with the heaviest item of one round gets the lightest of the next.
struct Walk {
    // Whole items: `round` in the current group, whose first batch·head is `first`. Stream-K:
    // the next key tile x of the line (-1 before the first call), the current item `round`
    // and its first tile's position `first`. (One pair of registers serves both walks: the
    // producer thread runs this walk within 24 registers.)
    int round = 0, first = 0, x = -1;
    __device__ bool next(const Work& w, Run& r) {
        if (PERSISTENT && w.total > 0) return stream_k_next(w, round, first, x, r);
        if (!next_item(w, r.i, r.bh)) return false;
        r.j_lo = 0;
        r.j_hi = w.tiles(r.i);
        return true;
    }
    __device__ bool next_item(const Work& w, int& i, int& bh) {
        if (!PERSISTENT) return round++ == 0 && grid_item_tile(w.causal, w.bh_count, i, bh);
        const int G = gridDim.x, b = blockIdx.x;
        if (!w.causal) {                    // (items fit an int: 32-bit divisions, no calls)
            const unsigned v = (unsigned)round++ * G + b;
            if (v >= (unsigned)(w.Tr * w.bh_count)) return false;
            i = (int)(v % w.Tr);
            bh = (int)(v / w.Tr);
            return true;
        }
        while (first < w.bh_count) {
            const int group = min(w.bh_group, w.bh_count - first);
            const unsigned v = (unsigned)round * G + ((round & 1) ? G - 1 - b : b);
            if (v < (unsigned)(w.Tr * group)) {            // this round has an item for b
                ++round;
                i = w.Tr - 1 - (int)(v / group);
                bh = first + (int)(v % group);
                return true;
            }
            first += w.bh_group;                           // the group's items are all dealt
            round = 0;
        }
        return false;
    }
};

extern "C" __global__ void __launch_bounds__(THREADS, 1)
flash_wgmma(const __grid_constant__ TensorMap tm_q, const __grid_constant__ TensorMap tm_k,
            const __grid_constant__ TensorMap tm_v, half_t* __restrict__ O,
            float* __restrict__ lse, int seq_q, int seq_k, float scale, int causal, int bh_offset,
            int bh_count, int Tr, int bh_group, int stream_k_tiles, float* __restrict__ sk_part,
            int* __restrict__ sk_count,
            float* __restrict__ t_running_max, float* __restrict__ t_running_sum,
            float* __restrict__ t_rescale, float* __restrict__ t_tile_max,
            int* __restrict__ t_sm_id, u64* __restrict__ t_start_ns, u64* __restrict__ t_end_ns,
            const float* __restrict__ q_scale, const float* __restrict__ k_scale,
            const float* __restrict__ v_scale) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int Tc = tile_count(seq_k, Bc);
    // The work: items (query tile i, batch·head of this launch) of tiles(i) key tiles each.
    const Work work{Tr, Tc, seq_q, bh_count, bh_group, causal,
                    PERSISTENT && !TRACE && !FP8 ? stream_k_tiles : 0};

    // Shared memory from a 1024-byte boundary (the swizzle pattern's period): Q_STAGES x Q_i
    // slabs, then STAGES x K_j, STAGES x V_j, P_SMEM the consumers' P_ij, then the mbarriers.
    const unsigned base = (smem_addr(smem_raw) + 1023) & ~1023u;
    const unsigned sQ = base;
    const unsigned sK = sQ + Q_STAGES * Q_BYTES;
    const unsigned sV = sK + STAGES * KV_BYTES;
    const unsigned sP = sV + STAGES * KV_BYTES;   // P_SMEM: the consumers' P_ij
    const unsigned bars = sP + P_BYTES;
    auto q_full = [&](int qs) { return bars + 8 * qs; };
    auto q_empty = [&](int qs) { return bars + 8 * (Q_STAGES + qs); };
    constexpr int KV_BARS = 2 * Q_STAGES;       // the K_j / V_j mbarriers follow Q_i's
    auto k_full = [&](int s) { return bars + 8 * (KV_BARS + s); };
    auto v_full = [&](int s) { return bars + 8 * (KV_BARS + STAGES + s); };
    auto k_empty = [&](int s) { return bars + 8 * (KV_BARS + 2 * STAGES + s); };
    auto v_empty = [&](int s) { return bars + 8 * (KV_BARS + 3 * STAGES + s); };
    // Stream-K: whether this block merges the item it just ran part of (after the mbarriers).
    volatile int* const sk_merges = (volatile int*)(smem_raw + (bars - smem_addr(smem_raw))
                                                    + 8 * (KV_BARS + 4 * STAGES));

    if (tid == 0) {
#if PREFETCH_MAPS
        // The maps' descriptors travel while the mbarriers are set up.
        prefetch_tensor_map(&tm_q);
        prefetch_tensor_map(&tm_k);
        prefetch_tensor_map(&tm_v);
#endif
        for (int qs = 0; qs < Q_STAGES; ++qs) {
            mbar_init(q_full(qs), 1);
            mbar_init(q_empty(qs), CONSUMERS * 128);
        }
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(k_full(s), 1);
            mbar_init(v_full(s), 1);
            mbar_init(k_empty(s), CONSUMERS * 128);
            mbar_init(v_empty(s), CONSUMERS * 128);
        }
        mbar_init_fence();
    }
    __syncthreads();  // the mbarriers are initialised before any thread waits on them

    // The rings (RingPos, pipeline.cuh): the u-th K_j / V_j this block loads (counted across
    // its runs) goes to stage u mod STAGES, in that stage's (u / STAGES)-th phase; run n's Q_i
    // to buffer n mod Q_STAGES, likewise.
    if (warp < 4) {
        // ---- producer warpgroup: one thread drives the copy engine ----------------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
        if (tid == 0) {
            // Run n's Q_i into buffer n mod Q_STAGES, once the consumers are done reading the
            // run before the previous one there.
            auto load_q = [&](int n, const Run& run) {
                const auto q = RingPos<Q_STAGES>::at(n);
                const int qs = q.index;
                if (n >= Q_STAGES) mbar_wait(q_empty(qs), q.empty_parity());
                mbar_expect_bytes(q_full(qs), Q_BYTES);
                for (int h = 0; h < d / SLAB_COLS; ++h)
                    tma_load(sQ + qs * Q_BYTES + h * SLAB_Q, &tm_q, h * SLAB_COLS, run.i * Br,
                             run.bh + bh_offset, q_full(qs));
            };
            int u = 0, n = 0;
            Run r;
            for (Walk walk; walk.next(work, r); ++n) {
                const int bh = r.bh + bh_offset;
#if Q_AHEAD
                // Q_i a run ahead: run n + 1's goes out behind run n's first K_j and V_j (its
                // buffer was freed by run n - 1's last S_ij), so it has a whole run to arrive
                // instead of the last tile or two.
                Walk peek = walk;
                Run r_next;
                const bool more = peek.next(work, r_next);
                if (n == 0) load_q(0, r);
#else
                load_q(n, r);        // behind the previous run's last K_j and V_j
#endif
                for (int j = r.j_lo; j < r.j_hi; ++j, ++u) {
                    const auto kv = RingPos<STAGES>::at(u);
                    const int s = kv.index;
                    const unsigned parity = kv.empty_parity();        // the previous use of s
                    if (u >= STAGES) mbar_wait(k_empty(s), parity);
                    mbar_expect_bytes(k_full(s), KV_BYTES);
                    for (int h = 0; h < d / SLAB_COLS; ++h)
                        tma_load(sK + s * KV_BYTES + h * SLAB_KV, &tm_k, h * SLAB_COLS, j * Bc,
                                 bh, k_full(s));
                    if (u >= STAGES) mbar_wait(v_empty(s), parity);
                    mbar_expect_bytes(v_full(s), KV_BYTES);
                    if constexpr (FP8)              // V_jᵀ: d rows of the tile's Bc keys
                        for (int h = 0; h < Bc / VT_BOX; ++h)
                            tma_load(sV + s * KV_BYTES + h * VT_SLAB, &tm_v, j * Bc + h * VT_BOX,
                                     0, bh, v_full(s));
                    else
                        for (int h = 0; h < d / 64; ++h)
                            tma_load(sV + s * KV_BYTES + h * SLAB_KV, &tm_v, h * 64, j * Bc, bh,
                                     v_full(s));
#if Q_AHEAD
                    if (j == r.j_lo && more) load_q(n + 1, r_next);
#endif
                }
            }
        }
        return;
    }

    // ---- consumer warpgroups ----------------------------------------------------------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
    // consumer index: rows 64·wg .. of Q_i (from lane 0, so that ptxas sees one value a warp)
    const int wg = __shfl_sync(0xffffffffu, warp / 4 - 1, 0);
    const int wq = warp % 4;                     // warp in the warpgroup: 16 of those rows
    const int g = lane / 4, t = lane % 4;        // accumulator row group and column pair
    const float scale_log2 = scale * LOG2E;
    // The trace's and lse's unit of m_i and tile_max: raw scores times the softmax scale;
    // FP8, log2 units times ln 2.
    const float m_unit = FP8 ? LN2 : scale;

    // Turns (PINGPONG): consumer warpgroup wg issues its products after named barrier
    // BAR_TURN + wg completes (its 128 threads wait, the previous warpgroup's 128 arrive), then
    // passes the turn on. The last warpgroup hands the first turn out (at the block's first
    // item, so a block of a partial group that has none leaves no arrival behind) and skips its
    // very last hand-over, so every barrier sees as many arrivals as waits.
    static_assert(CONSUMERS <= MAX_TURNS, "a turn barrier for every consumer warpgroup");
    const unsigned my_turn = BAR_TURN + wg, next_turn = BAR_TURN + (wg + 1) % CONSUMERS;
    auto wait_turn = [&]() {
        if constexpr (TAKE_TURNS) asm volatile("bar.sync %0, 256;" :: "r"(my_turn) : "memory");
    };
    auto pass_turn = [&]() {
        if constexpr (TAKE_TURNS) asm volatile("bar.arrive %0, 256;" :: "r"(next_turn) : "memory");
    };
    // pass_turn() where `cond` holds, as one predicated instruction: a branch between a wgmma
    // and its wait would leave ptxas unsure which products are done, and it would wait for all.
    auto pass_turn_if = [&](bool cond) {
        if constexpr (TAKE_TURNS)
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p bar.arrive %0, 256;\n}"
                         :: "r"(next_turn), "r"((int)cond) : "memory");
    };

    // Descriptors. Q_i, K_j: K-major (d contiguous); a k-step (32 bytes: 16 columns, 32 FP8)
    // moves 32 bytes inside a swizzled row, and to the next slab at its end; 8-row groups are
    // 8 rows of SWIZZLE bytes apart. V_j, 16-bit: N-major (d contiguous, keys are K); a k-step
    // of 16 keys moves 16 rows (2048 bytes); the two 64-column slabs of d are SLAB_KV apart.
    // V_jᵀ, FP8: K-major (keys contiguous), one row of VT_BOX bytes per column of d in each box;
    // a k-step of 32 keys moves 32 bytes inside a row, and to the next box at its end.
    constexpr int STEPS_PER_SLAB = SWIZZLE / 32;
    constexpr int STEPS_PER_BOX = VT_BOX / 32;
    // Each descriptor: its matrix's fields built once here, plus an offset in 16-byte units.
    const SmemDesc<SWIZZLE> q_d(sQ + wg * 64 * SWIZZLE, 16, 8 * SWIZZLE);   // this warpgroup's rows
    const SmemDesc<SWIZZLE> k_d(sK, 16, 8 * SWIZZLE);
    const SmemDesc<FP8 ? VT_BOX : 128> v_d(sV, FP8 ? 16 : SLAB_KV, FP8 ? 8 * VT_BOX : 1024);
    auto q_desc = [&](int qs, int kk) {
        return q_d.at(qs * (Q_BYTES / 16) + ((kk / STEPS_PER_SLAB) * SLAB_Q
                                             + (kk % STEPS_PER_SLAB) * 32) / 16);
    };
    auto k_desc = [&](int s, int kk) {
        return k_d.at(s * (KV_BYTES / 16) + ((kk / STEPS_PER_SLAB) * SLAB_KV
                                             + (kk % STEPS_PER_SLAB) * 32) / 16);
    };
    auto v_desc = [&](int s, int kk) {
        if constexpr (FP8)
            return v_d.at(s * (KV_BYTES / 16) + ((kk / STEPS_PER_BOX) * VT_SLAB
                                                 + (kk % STEPS_PER_BOX) * 32) / 16);
        else return v_d.at(s * (KV_BYTES / 16) + kk * 16 * 128 / 16);
    };

    float S[S_REGS];                   // raw scores q·k of this tile; then exp2(...) in place
    float O_acc[O_REGS];               // unnormalised O_i
    unsigned P[P_SMEM ? 1 : Bc / K_STEP][4];  // P_ij as A fragments, one per k-step (16 or 32
                                       // keys); P_SMEM: one k-step's, on its way to sP
    float m_i[2], l_i[2];              // running max of raw scores (FP8: in log2 units); running
                                       // sum (own columns)
    float tile_max[2], rescale[2], row_sum[2];
#if TRACE
    float keep[4][2];   // trace values of the tile j with j mod 4 == t, stored 4 tiles at once
#endif

    // The current run r (its item: query tile i of batch·head bh) and what follows from it.
    Run r{}, next_run{};
    Walk walk;
    RingPos<Q_STAGES> q{0, 0};         // the current run's Q_i buffer
    int bh = 0, wg_row0 = 0, row[2] = {0, 0}, n_tiles = 0;
    // FP8: the run's Q_i scale; the V scale that O_acc is in units of (that of the last V_j
    // whose P V it holds; any positive value before the run's first tile, when O_acc = 0); the
    // K and V scales of the tile at hand, loaded before its products are issued (their latency
    // hidden behind them).
    float q_s = 1.f, v_cur = 1.f, k_s = 1.f, v_s = 1.f;
    auto load_scales = [&](int j) {
        if constexpr (FP8) {
            k_s = __ldg(k_scale + (u64)bh * Tc + j);
            v_s = __ldg(v_scale + (u64)bh * Tc + j);
        }
    };

    auto issue_qk = [&](int qs, int s) {
        #pragma unroll
        for (int kk = 0; kk < d / K_STEP; ++kk) wgmma_ss(S, q_desc(qs, kk), k_desc(s, kk), kk > 0);
        wgmma_commit();
    };
    // P_SMEM: this warpgroup's P_ij, K-major in 128-key slabs; a k-step moves 32 bytes.
    const SmemDesc<128> p_d(sP + wg * P_WG_BYTES, 16, 1024);
    auto issue_pv = [&](int s) {
#if P_SMEM
        // Every warp of the warpgroup has stored its rows of P_ij and fenced them for the
        // async proxy, before any of them issues the product that reads them all.
        asm volatile("bar.sync %0, 128;" :: "r"(BAR_P + wg) : "memory");
        #pragma unroll
        for (int kk = 0; kk < Bc / K_STEP; ++kk)
            wgmma_ss(O_acc, p_d.at(((kk / 4) * P_SLAB + (kk % 4) * 32) / 16), v_desc(s, kk), 1);
#else
        #pragma unroll
        for (int kk = 0; kk < Bc / K_STEP; ++kk) wgmma_rs(O_acc, P[kk], v_desc(s, kk));
#endif
        wgmma_commit();
    };
    // S_ij is done: release K_j's stage, and after the run's last S also Q_i's buffer.
    auto release_k = [&](int j, int s) {
        mbar_arrive(k_empty(s));
        if (j + 1 == r.j_hi) mbar_arrive(q_empty(q.index));
    };

    // Mask, new running max, rescale factor, S <- exp2(f·S - m), row sums; f: scale·log2e
    // (16-bit: m_i stays in raw scores), or, FP8, scale·log2e·q_scale·k_scale_j (m_i in log2
    // units, as every tile's raw scores have their own unit).
    auto softmax_scores = [&](int j) {
        float f = scale_log2;
        if constexpr (FP8) f = scale_log2 * q_s * k_s;
        const int k0 = j * Bc;
        // Causal: the tile needs the mask where its last key passes this warpgroup's first row.
        // (Bc > 64: a tile may start past all of its 64 rows, e.g. keys 192.. for rows 128..191
        // at Bc = 192; masked whole, it leaves m_i, l_i and O_i as they were, P = 0.)
        const bool diagonal = causal && k0 + Bc - 1 > wg_row0;
        if (diagonal || k0 + Bc > seq_k) {
            #pragma unroll
            for (int nn = 0; nn < Bc / 8; ++nn)
                #pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int c = k0 + nn * 8 + 2 * t + (e & 1);
                    if (c >= seq_k || (causal && c > row[e >> 1])) S[4 * nn + e] = neg_inf();
                }
        }
        #pragma unroll
        for (int h = 0; h < 2; ++h) row_sum[h] = 0.f;
#if TILE_MAX_BITS
        // A row's max from its scores' bits, two scores an instruction (a three-input integer
        // max): positive floats order as their bits do, so where the quad's row holds a score
        // >= +0 the largest int is the largest float's bits. A warp with a row of negative
        // scores only (its int max a negative float's bits) takes the float max below.
        // Two chains a row (columns 8nn.. of even and odd nn), four in all, for latency.
        int bits[2], odd[2];
        #pragma unroll
        for (int h = 0; h < 2; ++h) bits[h] = odd[h] = int(0x80000000u);  // -0.f: below +0
        auto Si = [&](int e) { return __float_as_int(S[e]); };
        #pragma unroll
        for (int nn = 0; nn < Bc / 8; nn += 2)
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                bits[h] = __vimax3_s32(bits[h], Si(4 * nn + 2 * h), Si(4 * nn + 2 * h + 1));
                odd[h] = __vimax3_s32(odd[h], Si(4 * nn + 4 + 2 * h), Si(4 * nn + 5 + 2 * h));
            }
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            bits[h] = quad_max(max(bits[h], odd[h]));
            tile_max[h] = __int_as_float(bits[h]);
        }
        if (__any_sync(0xffffffffu, (bits[0] | bits[1]) < 0))
#endif
        {
            #pragma unroll
            for (int h = 0; h < 2; ++h) tile_max[h] = neg_inf();
            #pragma unroll
            for (int nn = 0; nn < Bc / 8; ++nn) {
                tile_max[0] = fmaxf(tile_max[0], fmaxf(S[4 * nn], S[4 * nn + 1]));
                tile_max[1] = fmaxf(tile_max[1], fmaxf(S[4 * nn + 2], S[4 * nn + 3]));
            }
            #pragma unroll
            for (int h = 0; h < 2; ++h) tile_max[h] = quad_max(tile_max[h]);
        }
        float m_shift[2];
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            if constexpr (FP8) {
                tile_max[h] *= f;
                rescale[h] = online_softmax_step(m_i[h], tile_max[h], 1.f, m_shift[h]);
            } else {
                rescale[h] = online_softmax_step(m_i[h], tile_max[h], scale_log2, m_shift[h]);
            }
        }
        #pragma unroll
        for (int e = 0; e < S_REGS; ++e) {
            const int h = (e >> 1) & 1;
            S[e] = fast_exp2(fmaf(S[e], f, -m_shift[h]));
            row_sum[h] += S[e];
        }
    };

    // After the previous P V_j: rescale O_i (FP8: into V_j's scale too) and l_i, P_ij as A
    // fragments, the trace.
    auto finish_tile = [&](int j) {
        float o_rescale[2] = {rescale[0], rescale[1]};
        if constexpr (FP8) {
            const float ratio = __fdividef(v_cur, v_s);
            o_rescale[0] *= ratio;
            o_rescale[1] *= ratio;
            v_cur = v_s;
        }
        #pragma unroll
        for (int e = 0; e < O_REGS; ++e) O_acc[e] *= o_rescale[(e >> 1) & 1];
        #pragma unroll
        for (int h = 0; h < 2; ++h) l_i[h] = l_i[h] * rescale[h] + row_sum[h];
#if FP8
        // Keys 2t, 2t+1 of accumulator columns 8n.. and 8(n+1).., rows g and g + 8: the
        // fragment's slots 4t .. 4t + 3 in Vᵀ's key order (fp8.cuh, key_of_slot).
        #pragma unroll
        for (int kk = 0; kk < Bc / 32; ++kk) {
            const float* x = S + 16 * kk;
            unsigned (&w)[4] = P[P_SMEM ? 0 : kk];
            w[0] = pack_e4m3x4(x[0], x[1], x[4], x[5]);
            w[1] = pack_e4m3x4(x[2], x[3], x[6], x[7]);
            w[2] = pack_e4m3x4(x[8], x[9], x[12], x[13]);
            w[3] = pack_e4m3x4(x[10], x[11], x[14], x[15]);
#if P_SMEM
            // The four words are four 8 x 8 matrices of 16-bit pairs in stmatrix's fragment
            // order (rows g and g + 8, key slots 0-15 and 16-31 of the step); lane 8m + k
            // gives row k of matrix m, in the 128-byte swizzle (chunk c of row r at c ^ r % 8).
            const int m = lane / 8, rr = lane % 8;
            const int prow = wq * 16 + rr + 8 * (m & 1), kb = 32 * kk + 16 * (m >> 1);
            stmatrix_x4(sP + wg * P_WG_BYTES + (kb / 128) * P_SLAB + prow * 128
                        + ((((kb % 128) / 16) ^ rr) * 16), w);
#endif
        }
#if P_SMEM
        // P_ij's stores are seen by the tensor cores' reads (the async proxy).
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
#else
        #pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
            P[kk][0] = pack_pair<BF16>(S[8 * kk + 0], S[8 * kk + 1]);
            P[kk][1] = pack_pair<BF16>(S[8 * kk + 2], S[8 * kk + 3]);
            P[kk][2] = pack_pair<BF16>(S[8 * kk + 4], S[8 * kk + 5]);
            P[kk][3] = pack_pair<BF16>(S[8 * kk + 6], S[8 * kk + 7]);
        }
#endif
#if TRACE
        // Lane t keeps tile j = t (mod 4); every 4 tiles the quad stores 4 adjacent floats.
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float l_row = quad_sum(l_i[h]);
            if ((j & 3) == t) {
                keep[0][h] = m_i[h] * m_unit; keep[1][h] = l_row;
                keep[2][h] = rescale[h];      keep[3][h] = tile_max[h] * m_unit;
            }
        }
        if ((j & 3) == 3 || j + 1 == n_tiles) {
            const int jj = (j & ~3) + t;
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (jj <= j && row[h] < seq_q) {
                    const u64 at = ((u64)bh * seq_q + row[h]) * Tc + jj;
                    t_running_max[at] = keep[0][h]; t_running_sum[at] = keep[1][h];
                    t_rescale[at] = keep[2][h];     t_tile_max[at] = keep[3][h];
                }
            }
        }
#endif
    };

    if (!walk.next(work, r)) return;
#if TRACE
    u64 t_start = global_timer();
#endif
    // The block's first S_ij. Every later run's first S_ij is issued behind the last P V of
    // the run before it (the pipeline across runs, at the end of the loop below).
    RingPos<STAGES> kv{0, 0};          // the ring position of the run's first K_j, V_j
    if (wg == CONSUMERS - 1) pass_turn();
    mbar_wait(q_full(q.index), q.phase);
    wait_turn();
    mbar_wait(k_full(kv.index), kv.phase);
    wgmma_fence();
    issue_qk(q.index, kv.index);
    pass_turn();

    for (;;) {
        const int i = r.i;
        bh = r.bh + bh_offset;
        wg_row0 = i * Br + wg * 64;
        row[0] = wg_row0 + wq * 16 + g;
        row[1] = row[0] + 8;
        n_tiles = work.tiles(i);
        if constexpr (FP8) q_s = __ldg(q_scale + (u64)bh * Tr + i);
        const int j0 = r.j_lo, n_run = r.j_hi - r.j_lo;   // this run: tiles j0 .. j0 + n_run - 1

        // The next run, and for a part of an item (stream-K) the blocks that run its parts and
        // its slot in sk_part (block b > first posts to slot 2b: the item starts its share),
        // while S_ij0 is on the tensor cores.
        Walk ahead = walk;
        const bool last_run = !ahead.next(work, next_run);
        const bool part = n_run != n_tiles;
        int sk_first = 0, sk_last = 0, sk_slot0 = 0;
        if (part) {
            sk_first = work.first_part(r.start);
            sk_last = work.last_part(r.start, n_tiles);
            sk_slot0 = work.slot(sk_first, r.start);
        }
        float* const sk_mine = sk_part + (u64)(sk_first == blockIdx.x ? sk_slot0 : 2 * blockIdx.x)
                                         * SK_SLOT;

        // The run's first tile j0: S_ij0 (issued above the loop or behind the previous run's
        // last P V).
        wgmma_wait<0>();
        reg_fence(S);
        #pragma unroll
        for (int h = 0; h < 2; ++h) { m_i[h] = neg_inf(); l_i[h] = 0.f; }
        #pragma unroll
        for (int e = 0; e < O_REGS; ++e) O_acc[e] = 0.f;
        release_k(j0, kv.index);
        load_scales(j0);
        softmax_scores(j0);
        finish_tile(j0);

        // Tile j = j0 + x (its ring position cur, tile j - 1's prev): S_ij on the tensor
        // cores, then P_{i,j-1} V_{j-1} behind it; softmax of S_ij while the second product
        // runs.
        RingPos<STAGES> prev = kv;
        for (int x = 1; x < n_run; ++x) {
            const int j = j0 + x;
            const RingPos<STAGES> cur = prev.next();
            load_scales(j);                  // before the products: none is in flight here
            wait_turn();
            mbar_wait(k_full(cur.index), cur.phase);
            wgmma_fence();
            issue_qk(q.index, cur.index);
            mbar_wait(v_full(prev.index), prev.phase);
            issue_pv(prev.index);
            pass_turn();
            wgmma_wait<1>();                 // S_ij is done (P V may still run)
            reg_fence(S);
            release_k(j, cur.index);
            softmax_scores(j);
#if SOFTMAX_FENCE
            // ptxas would hoist the wait below to the top of the softmax (it has no operands,
            // and the O rescale and P's packing behind it make it look urgent), so this
            // warpgroup's exponentials would not overlap its own P V. A fence keeps it here:
            // ptxas does not move the wait or the exponentials across it.
            asm volatile("fence.acq_rel.cta;" ::: "memory");
#endif
            wgmma_wait<0>();                 // P_{i,j-1} V_{j-1} is done
            reg_fence(O_acc);
            mbar_arrive(v_empty(prev.index));
            finish_tile(j);
            prev = cur;
        }

        // The run's last P V, and behind it the next run's first S (its Q_i and first K_j
        // were loaded while this run's last tiles ran); the epilogue below runs while that S
        // is on the tensor cores.
        {
            const RingPos<STAGES> kv_next = prev.next();       // the next run's first K_j
            const RingPos<Q_STAGES> q_next = q.next();         // and its Q_i
            const int s = prev.index, s_next = kv_next.index;
            wait_turn();
            mbar_wait(v_full(s), prev.phase);
#if !PV_FIRST
            if (!last_run) {
                mbar_wait(q_full(q_next.index), q_next.phase);
                mbar_wait(k_full(s_next), kv_next.phase);
            }
#endif
            // PERSISTENT: after the block's last run, an S_ij of the same Q_i and K_j (nothing
            // overwrites them any more) whose result is not used: one code path for both
            // cases, since ptxas serialises every wgmma of the kernel when only one path issues
            // a product. One block per item: its only run is its last, so no S follows.
            wgmma_fence();
            issue_pv(s);
#if PV_FIRST
            // The next run's Q_i and first K_j, waited for once this run's last product runs.
            // No branch between the products (ptxas would serialise them): after the last run
            // each waits for the phase before the one that will not come, done long ago.
            mbar_wait(q_full(q_next.index), q_next.phase ^ (unsigned)last_run);
            mbar_wait(k_full(s_next), kv_next.phase ^ (unsigned)last_run);
            wgmma_fence();
#endif
            if constexpr (PERSISTENT)
                issue_qk(last_run ? q.index : q_next.index, last_run ? s : s_next);
            pass_turn_if(wg != CONSUMERS - 1 || !last_run);
            wgmma_wait<PERSISTENT>();        // this P V is done (the next S may still run)
            reg_fence(O_acc);
            mbar_arrive(v_empty(s));
            kv = kv_next;
            q = q_next;
        }

        // Stream-K, a run that is part of an item: post this part's state (each consumer
        // thread its O_acc, m_i, l_i, one float per thread in a row of SK_THREADS), then take
        // the item's ticket; the part that draws the last one merges, the others are done.
        bool writes = true;
        if (part) {
            const int c = tid - 128;
            #pragma unroll
            for (int e = 0; e < O_REGS; ++e) sk_mine[e * SK_THREADS + c] = O_acc[e];
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                sk_mine[(O_REGS + h) * SK_THREADS + c] = m_i[h];
                sk_mine[(O_REGS + 2 + h) * SK_THREADS + c] = l_i[h];
            }
            writes = take_ticket(sk_count + r.k, sk_last - sk_first, sk_merges, tid == 128, [] {
                named_barrier_sync<BAR_TICKET, SK_THREADS>();                 // consumers
            });
            // Merge the parts in block order (the same result whichever part merges), read
            // through L2 (ld.global.cg), this thread's own part too (its own writes): first the
            // row maxima over the parts, then l and O as sums of the parts' l and O, each
            // weighted by exp2(scale·log2e·(its m - m)). (Every run sets m_i, l_i and O_acc
            // anew, so a block that does not merge may clear them too.)
            auto part_of = [&](int b) {
                return sk_part + (u64)(b == sk_first ? sk_slot0 : 2 * b) * SK_SLOT + c;
            };
            #pragma unroll
            for (int h = 0; h < 2; ++h) { m_i[h] = neg_inf(); l_i[h] = 0.f; }
            #pragma unroll
            for (int e = 0; e < O_REGS; ++e) O_acc[e] = 0.f;
            for (int b = sk_first; writes && b <= sk_last; ++b) {
                #pragma unroll
                for (int h = 0; h < 2; ++h)
                    m_i[h] = fmaxf(m_i[h], __ldcg(part_of(b) + (O_REGS + h) * SK_THREADS));
            }
            for (int b = sk_first; writes && b <= sk_last; ++b) {
                const float* part = part_of(b);
                float w[2];
                #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    w[h] = part_weight(__ldcg(part + (O_REGS + h) * SK_THREADS), m_i[h],
                                       scale_log2);
                    l_i[h] = fmaf(w[h], __ldcg(part + (O_REGS + 2 + h) * SK_THREADS), l_i[h]);
                }
                #pragma unroll
                for (int e = 0; e < O_REGS; ++e)
                    O_acc[e] = fmaf(w[(e >> 1) & 1], __ldcg(part + e * SK_THREADS), O_acc[e]);
            }
        }

        // Epilogue (the producer is already loading the next run, whose first S runs):
        // full row sums, O_i / l_i, lse = scale·m + log(l), from registers to global memory
        // (WIDE_STORES: through a transpose within each quad).
        if (writes) {
            float inv_l[2];
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                l_i[h] = quad_sum(l_i[h]);
                inv_l[h] = __fdividef(1.f, l_i[h]);   // l >= 1: no slow path (a call)
                if constexpr (FP8) inv_l[h] *= v_cur;  // O_acc is in units of the last v_scale
                if (t == 0 && row[h] < seq_q)
                    lse[(u64)bh * seq_q + row[h]] = m_i[h] * m_unit + logf(l_i[h]);
            }
#if TRACE
            // Causal-skipped tiles carry the state forward (rescale 1, tile max -inf); the
            // quad's lanes take adjacent tiles.
            for (int jj = n_tiles + t; jj < Tc; jj += 4) {
                #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if (row[h] < seq_q) {
                        const u64 at = ((u64)bh * seq_q + row[h]) * Tc + jj;
                        t_running_max[at] = m_i[h] * m_unit; t_running_sum[at] = l_i[h];
                        t_rescale[at] = 1.f;                t_tile_max[at] = neg_inf();
                    }
                }
            }
#endif
            half_t* Ob = O + (u64)bh * seq_q * d;
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
#if WIDE_STORES
                // Each 8-column chunk of the row is spread over the quad, two columns a lane;
                // transposed within the quad, lane t holds chunk 4k + t whole and writes it
                // as 16 bytes, so the row leaves in whole sectors and a quarter of the
                // stores (4-byte stores of a warp touch 8 rows' sectors each, half full).
                #pragma unroll
                for (int k = 0; k < d / 32; ++k) {
                    unsigned w[4];
                    #pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int nn = 4 * k + i;
                        w[i] = pack_pair<OUT_BF16>(O_acc[4 * nn + 2 * h] * inv_l[h],
                                                   O_acc[4 * nn + 2 * h + 1] * inv_l[h]);
                    }
                    const uint4 chunk = quad_transpose(w, t);
                    if (row[h] < seq_q)
                        *(uint4*)(Ob + (u64)row[h] * d + 8 * (4 * k + t)) = chunk;
                }
#else
                if (row[h] < seq_q) {
                    unsigned* dst = (unsigned*)(Ob + (u64)row[h] * d + 2 * t);
                    #pragma unroll
                    for (int nn = 0; nn < d / 8; ++nn)
                        dst[nn * 4] = pack_pair<OUT_BF16>(O_acc[4 * nn + 2 * h] * inv_l[h],
                                                          O_acc[4 * nn + 2 * h + 1] * inv_l[h]);
                }
#endif
            }
        }

#if TRACE
        // The item's schedule record: the consumers meet on their named barrier, then one
        // thread records. The next item starts here (its first S is already running).
        named_barrier_sync<BAR_CONSUMERS, CONSUMERS * 128>();
        const u64 t_end = global_timer();
        if (tid == 128) {
            const int rec = bh * Tr + i;
            t_sm_id[rec] = sm_index();
            t_start_ns[rec] = t_start;
            t_end_ns[rec] = t_end;
        }
        t_start = t_end;
#endif
        if (last_run) {
            wgmma_wait<0>();                 // the unused S_ij, before the block exits
            break;
        }
        walk = ahead;
        r = next_run;
    }
}
