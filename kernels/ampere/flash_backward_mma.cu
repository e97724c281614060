// Tensor-core FlashAttention-2 backward pass (float16 or bfloat16 in, float32 accumulate),
// sm_80 and later. Three kernels, launched in this order:
//
//   backward_delta      D_r = rowsum(dO ∘ O) in float32, and zeros into the dQ accumulator.
//   flash_backward_mma  one thread block per (key tile j, batch·head): blockIdx.x = j,
//                       blockIdx.y = bh. K_j, V_j sit in shared memory; each of the Bc / 16
//                       warps owns 16 keys and keeps their dK_j, dV_j rows in registers. The
//                       block loops over query tiles i (causal: from the first that sees
//                       tile j), Q_i, dO_i, lse_i, D_i double-buffered with cp.async
//                       (or, where the GPU's shared memory takes only one buffer, loaded
//                       after the last warp is done with the tile before):
//                         S_ijᵀ = K_j Q_iᵀ,  P_ijᵀ = exp2(S·scale·log2e − lse·log2e)
//                         dP_ijᵀ = V_j dO_iᵀ, dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i)
//                         dV_j += P_ijᵀ dO_i,  dK_j += dS_ijᵀ Q_i
//                         dQ_i += dS_ij K_j    (dS_ijᵀ through two shared buffers, computed
//                                               after the next tile's barrier; red.add into
//                                               a float32 buffer all key tiles share)
//                       Working with transposed S and dP puts each warp's keys in the
//                       accumulator rows, so P_ijᵀ and dS_ijᵀ feed the dV / dK products
//                       straight from registers.
//   backward_dq_cast    dQ = scale · accumulator, in the input dtype.
//
// Compile-time switches (-D): HEAD_DIM (64 or 128), BLOCK_Q (Br: 64 or 128), BLOCK_K (Bc: 64
// or 128, Bc / 16 warps), BF16 (0: float16, 1: bfloat16), QUERY_STAGES (2, the default: the
// next query tile loads while this one computes; 1: one buffer each of Q_i, dO_i, lse_i and
// D_i, for GPUs whose block cannot hold two, as head_dim 128 on a 99 KiB block).

#include "tile_shape.cuh"

constexpr int d = HEAD_DIM;
constexpr int Br = BLOCK_Q;
constexpr int Bc = BLOCK_K;
#ifndef QUERY_STAGES
#define QUERY_STAGES 2
#endif
constexpr int Q_STAGES = QUERY_STAGES;  // buffers of Q_i, dO_i, lse_i, D_i
constexpr int WARPS = Bc / 16;           // each warp owns 16 keys of K_j
constexpr int THREADS = WARPS * 32;
constexpr int CHUNKS = d / 8;            // 16-byte chunks per row of Q, K, V, dO
constexpr int ROW_BYTES = d * 2;
constexpr int S_CHUNKS = Br / 8;         // 16-byte chunks per row of dS_ijᵀ (one row a key)
constexpr int S_ROW_BYTES = Br * 2;
constexpr int Q_TILES = Br / 8;          // n-tiles of 8 queries in a warp's strip of S_ijᵀ
constexpr int D_TILES = d / 8;           // n-tiles of 8 columns of dK_j, dV_j
// dQ_i (Br x d) is cut into units of 32 rows (two m16 tiles, so each K_j fragment feeds two
// products) x DQ_N columns, shared evenly by the warps.
constexpr int ROW_TILES_Q = Br / 32;
constexpr int COL_SPLITS = (WARPS / ROW_TILES_Q > d / 32) ? WARPS / ROW_TILES_Q : d / 32;
constexpr int DQ_N = d / COL_SPLITS;
constexpr int DQ_UNITS = ROW_TILES_Q * COL_SPLITS;
// Where a tile computes the previous tile's dQ: after its dK_j product where the registers
// allow it (head_dim 64), else first, before S_ijᵀ (head_dim 128: after dK_j its values would
// not fit in registers). lab/NOTES.md has the timings of both places.
constexpr bool DQ_AFTER_DK = d == 64;
constexpr float LOG2E = 1.4426950408889634f;

static_assert(d == 64 || d == 128, "HEAD_DIM must be 64 or 128");
static_assert(Br == 64 || Br == 128, "BLOCK_Q must be 64 or 128");
static_assert(Bc == 64 || Bc == 128, "BLOCK_K must be 64 or 128");
static_assert(DQ_UNITS % WARPS == 0 && DQ_N % 16 == 0, "dQ units must split over the warps");
static_assert(2 * Br <= THREADS, "one thread per lse_i and D_i element");
static_assert(Q_STAGES == 1 || Q_STAGES == 2, "QUERY_STAGES must be 1 or 2");

#include "common.cuh"
#include "causal_tiles.cuh"

typedef unsigned short half_t;   // raw 16-bit elements: float16, or bfloat16 when BF16=1

// Shared-memory layout (bytes): K_j, V_j, Q_STAGES buffers each of Q_i and dO_i, two of dS_ijᵀ,
// then Q_STAGES buffers each of lse_i and D_i (float32).
constexpr int SMEM_K = 0;
constexpr int SMEM_V = SMEM_K + Bc * ROW_BYTES;
constexpr int SMEM_Q = SMEM_V + Bc * ROW_BYTES;
constexpr int SMEM_DO = SMEM_Q + Q_STAGES * Br * ROW_BYTES;
constexpr int SMEM_DS = SMEM_DO + Q_STAGES * Br * ROW_BYTES;
constexpr int SMEM_L = SMEM_DS + 2 * Bc * S_ROW_BYTES;
constexpr int SMEM_D = SMEM_L + Q_STAGES * Br * 4;

__device__ __forceinline__ float elem_f32(unsigned short bits) {
#if BF16
    return to_f32(bf16_bits{bits});
#else
    return to_f32((half_bits)bits);
#endif
}

// D_r = sum_c dO[r, c] · O[r, c] for `rows` rows of d elements; d / 8 threads per row, 8
// elements (16 bytes) each. The same threads zero the row's dQ accumulator.
extern "C" __global__ void __launch_bounds__(256)
backward_delta(const half_t* __restrict__ O, const half_t* __restrict__ dO,
               float* __restrict__ D, float* __restrict__ dQacc, long long rows) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long r = idx / CHUNKS;
    const int chunk = (int)(idx % CHUNKS);
    float sum = 0.f;
    if (r < rows) {
        const uint4 o = *(const uint4*)(O + r * d + chunk * 8);
        const uint4 g = *(const uint4*)(dO + r * d + chunk * 8);
        const unsigned ow[4] = {o.x, o.y, o.z, o.w}, gw[4] = {g.x, g.y, g.z, g.w};
        #pragma unroll
        for (int w = 0; w < 4; ++w)
            sum += elem_f32(ow[w] & 0xffff) * elem_f32(gw[w] & 0xffff)
                 + elem_f32(ow[w] >> 16) * elem_f32(gw[w] >> 16);
        float4* acc = (float4*)(dQacc + r * d + chunk * 8);
        acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
        acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    // The row's CHUNKS threads are adjacent lanes of one warp (CHUNKS divides 32).
    #pragma unroll
    for (int offset = CHUNKS / 2; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (r < rows && chunk == 0) D[r] = sum;
}

// dQ = scale · dQacc in the input dtype, 8 elements per thread.
extern "C" __global__ void __launch_bounds__(256)
backward_dq_cast(const float* __restrict__ dQacc, half_t* __restrict__ dQ, float scale,
                 long long n_chunks) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_chunks) return;
    const float4 a = ((const float4*)dQacc)[2 * idx], b = ((const float4*)dQacc)[2 * idx + 1];
    ((uint4*)dQ)[idx] = make_uint4(pack_pair<BF16>(a.x * scale, a.y * scale),
                                   pack_pair<BF16>(a.z * scale, a.w * scale),
                                   pack_pair<BF16>(b.x * scale, b.y * scale),
                                   pack_pair<BF16>(b.z * scale, b.w * scale));
}

// dQ = scale · dQacc from the Hopper backward's tile order (kernels/hopper/, its DQ_PART):
// query tile i of batch·head bh is Br · d / 4096 parts of 64 x 64 floats (by rows where
// Br = 128, by columns where d = 128), float4 f of warpgroup thread x
// at (f · 128 + x) · 4 holding rows 16 (x / 32) + (x / 4) % 8 (+ 8 for its last two floats)
// and columns 8 f + 2 (x % 4) + (0, 1). One thread per quad of x and f: its 64 contiguous
// bytes are 8 columns of two rows, two 16-byte stores; rows past seq_q are not written.
extern "C" __global__ void __launch_bounds__(256)
backward_dq_cast_tiles(const float* __restrict__ dQacc, half_t* __restrict__ dQ, float scale,
                       long long n_quads, int seq_q, int Tr) {
    constexpr int PART = 64 * 64, COL_PARTS = d / 64, PARTS = Br * d / PART;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_quads) return;
    const int quad = (int)(idx % 32), f = (int)(idx / 32 % 8);
    const long long rest = idx / 256;
    const int part = (int)(rest % PARTS);
    const long long tile = rest / PARTS;                 // bh · Tr + i
    const int i = (int)(tile % Tr);
    const long long bh = tile / Tr;
    // float4 f of threads 4 quad .. 4 quad + 3, 16 consecutive floats: (f · 128 + 4 quad) · 4
    const float4* src = (const float4*)(dQacc + tile * Br * d + part * PART + f * 512
                                        + quad * 16);
    const float4 v[4] = {src[0], src[1], src[2], src[3]};     // t = 0 .. 3
    const int row = 64 * (part / COL_PARTS) + 16 * (quad / 8) + quad % 8;
    const int col = 64 * (part % COL_PARTS) + 8 * f;
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int q = i * Br + row + 8 * h;
        if (q >= seq_q) continue;
        unsigned w[4];
        #pragma unroll
        for (int t = 0; t < 4; ++t)
            w[t] = h ? pack_pair<BF16>(v[t].z * scale, v[t].w * scale)
                     : pack_pair<BF16>(v[t].x * scale, v[t].y * scale);
        *(uint4*)(dQ + (bh * seq_q + q) * d + col) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// Q_i, dO_i, lse_i and D_i into buffer `buf` (rows past seq_q: zeros, so they add nothing).
__device__ __forceinline__ void load_query_tile(unsigned smem, int buf, int i, const half_t* Qb,
                                                const half_t* dOb, const float* Lb,
                                                const float* Db, int seq_q, int tid) {
    const int q0 = i * Br;
    load_tile<Br, d, THREADS>(smem + SMEM_Q + buf * Br * ROW_BYTES, Qb, q0, seq_q, tid);
    load_tile<Br, d, THREADS>(smem + SMEM_DO + buf * Br * ROW_BYTES, dOb, q0, seq_q, tid);
    if (tid < 2 * Br) {
        const int r = tid % Br;
        const bool valid = q0 + r < seq_q;
        const float* src = (tid < Br ? Lb : Db) + (valid ? q0 + r : 0);
        cp_async4(smem + (tid < Br ? SMEM_L : SMEM_D) + (buf * Br + r) * 4, src, valid);
    }
}

// dQ_i += dS_ij K_j for the query tile at row q0 whose dS_ijᵀ is in dS buffer `buf` (scale
// applied by backward_dq_cast), reduced into float32 HBM. s_off, t_off: the lane's ldmatrix
// offsets of the kernel below.
__device__ __forceinline__ void dq_tile(unsigned sbase, int buf, int q0, float* dQb, int seq_q,
                                        int warp, int lane, unsigned s_off, unsigned t_off) {
    const int g = lane / 4, t = lane % 4;
    const unsigned sdS = sbase + SMEM_DS + buf * Bc * S_ROW_BYTES;
    #pragma unroll 1   // one unit at a time: its accumulators are all it keeps
    for (int u = 0; u < DQ_UNITS / WARPS; ++u) {
        const int unit = warp + u * WARPS;
        const int rt = unit % ROW_TILES_Q, cs = unit / ROW_TILES_Q;
        float acc[2][DQ_N / 8][4];
        #pragma unroll
        for (int m = 0; m < 2; ++m)
            #pragma unroll
            for (int n = 0; n < DQ_N / 8; ++n)
                #pragma unroll
                for (int e = 0; e < 4; ++e) acc[m][n][e] = 0.f;
        #pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
            unsigned a[2][4];
            #pragma unroll
            for (int m = 0; m < 2; ++m)
                ldmatrix_x4_trans(sdS + kk * 16 * S_ROW_BYTES + (s_off ^ ((2 * rt + m) * 32)), a[m]);
            #pragma unroll
            for (int n2 = 0; n2 < DQ_N / 16; ++n2) {
                unsigned b[4];
                ldmatrix_x4_trans(sbase + SMEM_K + kk * 16 * ROW_BYTES
                                  + (t_off ^ ((cs * DQ_N / 16 + n2) * 32)), b);
                #pragma unroll
                for (int m = 0; m < 2; ++m) {
                    mma16816<BF16>(acc[m][2 * n2], a[m], b[0], b[1]);
                    mma16816<BF16>(acc[m][2 * n2 + 1], a[m], b[2], b[3]);
                }
            }
        }
        #pragma unroll
        for (int m = 0; m < 2; ++m) {
            const int r = q0 + (2 * rt + m) * 16 + g;
            float* row_g = dQb + (u64)r * d + cs * DQ_N + 2 * t;
            float* row_g8 = row_g + 8 * d;
            #pragma unroll
            for (int n = 0; n < DQ_N / 8; ++n) {
                if (r < seq_q) red_add2(row_g + n * 8, acc[m][n][0], acc[m][n][1]);
                if (r + 8 < seq_q) red_add2(row_g8 + n * 8, acc[m][n][2], acc[m][n][3]);
            }
        }
    }
}

// One block per SM is all the launch bound promises: the register allocator may then take
// up to 255 registers, so that every catalogued build stays out of local memory whichever
// compiler builds it (nvcc, or NVRTC at run time); a bound on the threads alone lets the
// allocator aim at more blocks per SM, with fewer registers each.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
flash_backward_mma(const half_t* __restrict__ Q, const half_t* __restrict__ K,
                   const half_t* __restrict__ V, const half_t* __restrict__ dO,
                   const float* __restrict__ lse, const float* __restrict__ Dvec,
                   float* __restrict__ dQacc, half_t* __restrict__ dK, half_t* __restrict__ dV,
                   int seq_q, int seq_k, float scale, int causal) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int j = blockIdx.x, bh = blockIdx.y;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;   // mma fragment row group and column pair
    const int Tr = tile_count(seq_q, Br);
    const int k0 = j * Bc;
    const unsigned sbase = smem_addr(smem);
    const half_t* Qb = Q + (u64)bh * seq_q * d;
    const half_t* dOb = dO + (u64)bh * seq_q * d;
    const float* Lb = lse + (u64)bh * seq_q;
    const float* Db = Dvec + (u64)bh * seq_q;
    float* dQb = dQacc + (u64)bh * seq_q * d;

    // Causal: query tile i sees key tile j iff its last row >= j·Bc (causal_tiles.cuh); none
    // (i_first = Tr) when the tile starts past the last query row: then the block writes
    // zeros for dK_j and dV_j.
    const int i_first = first_query_tile(j, Br, Bc, seq_q, Tr, causal);

    // Prologue: K_j, V_j and the first query tile in one group.
    load_tile<Bc, d, THREADS>(sbase + SMEM_K, K + (u64)bh * seq_k * d, k0, seq_k, tid);
    load_tile<Bc, d, THREADS>(sbase + SMEM_V, V + (u64)bh * seq_k * d, k0, seq_k, tid);
    if (i_first < Tr) load_query_tile(sbase, 0, i_first, Qb, dOb, Lb, Db, seq_q, tid);
    cp_async_commit();

    // ldmatrix row addresses of this lane (chunk 2·kk XOR the swizzle equals the offset XOR
    // 32·kk bytes, so loops need no tables):
    //   a: A fragments of this warp's 16 rows of K_j / V_j (row-major, k = head dim)
    //   b: B fragments from rows of Q_i / dO_i (n = query, k = head dim)
    //   t: B fragments, transposed, from rows of dO_i / Q_i / K_j (k = row)
    //   s: A fragments, transposed, of dS_ij from dS_ijᵀ (k = key)
    // Derived from the thread index read anew (thread_index_anew, common.cuh) in every query
    // tile: what derives from them is recomputed where used instead of being hoisted out of
    // the query-tile loop, where it would occupy registers throughout.
    struct LaneOffsets { unsigned a, b, t, s; };
    auto lane_offsets = [] {
        const int tid_anew = thread_index_anew(), lane = tid_anew % 32, warp = tid_anew / 32;
        const unsigned a = (warp * 16 + (lane & 15)) * ROW_BYTES
                           + (((lane >> 4) ^ (lane & 7)) * 16);
        const unsigned b = ((lane & 7) + ((lane >> 4) << 3)) * ROW_BYTES
                           + ((((lane >> 3) & 1) ^ (lane & 7)) * 16);
        const unsigned t = (lane & 15) * ROW_BYTES + (((lane >> 4) ^ (lane & 7)) * 16);
        const unsigned s = ((lane & 7) + ((lane >> 4) << 3)) * S_ROW_BYTES
                           + ((((lane >> 3) & 1) ^ (lane & 7)) * 16);
        return LaneOffsets{a, b, t, s};
    };
    const float scale_log2 = scale * LOG2E;
    const int key_row = warp * 16 + g;      // this thread's keys: key_row and key_row + 8

    float dK_acc[D_TILES][4], dV_acc[D_TILES][4];
    #pragma unroll
    for (int n = 0; n < D_TILES; ++n)
        #pragma unroll
        for (int e = 0; e < 4; ++e) dK_acc[n][e] = dV_acc[n][e] = 0.f;

    for (int i = i_first; i < Tr; ++i) {
        const int buf = (i - i_first) & 1;               // the dS_ijᵀ buffer
        const int qbuf = Q_STAGES == 2 ? buf : 0;        // the Q_i, dO_i, lse_i, D_i buffer
        const int q0 = i * Br;
        const unsigned sQ = sbase + SMEM_Q + qbuf * Br * ROW_BYTES;
        const unsigned sdO = sbase + SMEM_DO + qbuf * Br * ROW_BYTES;
        const float* sL = (const float*)(smem + SMEM_L) + qbuf * Br;
        const float* sD = (const float*)(smem + SMEM_D) + qbuf * Br;
        const auto [a_off, b_off, t_off, s_off] = lane_offsets();
        cp_async_wait<0>();
        // Tile i has landed for every thread; every warp is done with tile i − 1 (its Q_i,
        // dO_i buffer may be overwritten, its dS_ijᵀ is complete) and with dQ_{i−2} (whose
        // dS buffer tile i overwrites).
        __syncthreads();
        if (Q_STAGES == 2 && i + 1 < Tr)
            load_query_tile(sbase, buf ^ 1, i + 1, Qb, dOb, Lb, Db, seq_q, tid);
        cp_async_commit();

        // dQ_{i−1} from the other dS buffer, deferred to this tile so that one barrier per
        // tile serves both the tile loads and dS: here, or after dK_j where registers allow.
        if (!DQ_AFTER_DK && i > i_first)
            dq_tile(sbase, buf ^ 1, q0 - Br, dQb, seq_q, warp, lane, s_off, t_off);

        // S_ijᵀ = K_j Q_iᵀ for this warp's 16 keys.
        float S[Q_TILES][4];
        #pragma unroll
        for (int n = 0; n < Q_TILES; ++n) S[n][0] = S[n][1] = S[n][2] = S[n][3] = 0.f;
        #pragma unroll
        for (int kk = 0; kk < d / 16; ++kk) {
            unsigned a[4];
            ldmatrix_x4(sbase + SMEM_K + (a_off ^ (kk * 32)), a);
            #pragma unroll
            for (int n2 = 0; n2 < Q_TILES / 2; ++n2) {
                unsigned b[4];
                ldmatrix_x4(sQ + n2 * 16 * ROW_BYTES + (b_off ^ (kk * 32)), b);
                mma16816<BF16>(S[2 * n2], a, b[0], b[1]);
                mma16816<BF16>(S[2 * n2 + 1], a, b[2], b[3]);
            }
        }

        // P_ijᵀ rebuilt from lse_i, 0 where masked (masks only on diagonal tiles under causal
        // and on ragged last tiles), kept as 16-bit A fragments P_a[kk] (k = queries).
        const bool masked = (causal && k0 + Bc - 1 > q0) || k0 + Bc > seq_k || q0 + Br > seq_q;
        unsigned P_a[Br / 16][4];
        #pragma unroll
        for (int n = 0; n < Q_TILES; ++n) {
            const float2 L = *(const float2*)(sL + n * 8 + 2 * t);
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                float p = fast_exp2(fmaf(S[n][e], scale_log2, -((e & 1) ? L.y : L.x) * LOG2E));
                if (masked) {
                    const int c = k0 + key_row + (e >> 1) * 8;
                    const int r = q0 + n * 8 + 2 * t + (e & 1);
                    if (c >= seq_k || r >= seq_q || (causal && c > r)) p = 0.f;
                }
                S[n][e] = p;
            }
            P_a[n / 2][(n & 1) * 2] = pack_pair<BF16>(S[n][0], S[n][1]);
            P_a[n / 2][(n & 1) * 2 + 1] = pack_pair<BF16>(S[n][2], S[n][3]);
        }

        // dP_ijᵀ = V_j dO_iᵀ.
        float dP[Q_TILES][4];
        #pragma unroll
        for (int n = 0; n < Q_TILES; ++n) dP[n][0] = dP[n][1] = dP[n][2] = dP[n][3] = 0.f;
        #pragma unroll
        for (int kk = 0; kk < d / 16; ++kk) {
            unsigned a[4];
            ldmatrix_x4(sbase + SMEM_V + (a_off ^ (kk * 32)), a);
            #pragma unroll
            for (int n2 = 0; n2 < Q_TILES / 2; ++n2) {
                unsigned b[4];
                ldmatrix_x4(sdO + n2 * 16 * ROW_BYTES + (b_off ^ (kk * 32)), b);
                mma16816<BF16>(dP[2 * n2], a, b[0], b[1]);
                mma16816<BF16>(dP[2 * n2 + 1], a, b[2], b[3]);
            }
        }

        // dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i) from the rounded P, as 16-bit A fragments dS_a[kk]
        // and into this tile's dS buffer (dQ_i needs every warp's keys).
        unsigned char* sdS = smem + SMEM_DS + buf * Bc * S_ROW_BYTES;
        unsigned dS_a[Br / 16][4];
        #pragma unroll
        for (int n = 0; n < Q_TILES; ++n) {
            const float2 Dv = *(const float2*)(sD + n * 8 + 2 * t);
            const float2 p_lo = unpack_pair<BF16>(P_a[n / 2][(n & 1) * 2]);
            const float2 p_hi = unpack_pair<BF16>(P_a[n / 2][(n & 1) * 2 + 1]);
            const unsigned lo = pack_pair<BF16>(p_lo.x * (dP[n][0] - Dv.x),
                                                p_lo.y * (dP[n][1] - Dv.y));
            const unsigned hi = pack_pair<BF16>(p_hi.x * (dP[n][2] - Dv.x),
                                                p_hi.y * (dP[n][3] - Dv.y));
            dS_a[n / 2][(n & 1) * 2] = lo;
            dS_a[n / 2][(n & 1) * 2 + 1] = hi;
            *(unsigned*)(sdS + swizzle<S_CHUNKS>(key_row, n) * 16 + t * 4) = lo;
            *(unsigned*)(sdS + swizzle<S_CHUNKS>(key_row + 8, n) * 16 + t * 4) = hi;
        }

        // dV_j += P_ijᵀ dO_i.
        #pragma unroll
        for (int kk = 0; kk < Br / 16; ++kk)
            #pragma unroll
            for (int n2 = 0; n2 < D_TILES / 2; ++n2) {
                unsigned b[4];
                ldmatrix_x4_trans(sdO + kk * 16 * ROW_BYTES + (t_off ^ (n2 * 32)), b);
                mma16816<BF16>(dV_acc[2 * n2], P_a[kk], b[0], b[1]);
                mma16816<BF16>(dV_acc[2 * n2 + 1], P_a[kk], b[2], b[3]);
            }

        // dK_j += dS_ijᵀ Q_i.
        #pragma unroll
        for (int kk = 0; kk < Br / 16; ++kk)
            #pragma unroll
            for (int n2 = 0; n2 < D_TILES / 2; ++n2) {
                unsigned b[4];
                ldmatrix_x4_trans(sQ + kk * 16 * ROW_BYTES + (t_off ^ (n2 * 32)), b);
                mma16816<BF16>(dK_acc[2 * n2], dS_a[kk], b[0], b[1]);
                mma16816<BF16>(dK_acc[2 * n2 + 1], dS_a[kk], b[2], b[3]);
            }

        if (DQ_AFTER_DK && i > i_first)
            dq_tile(sbase, buf ^ 1, q0 - Br, dQb, seq_q, warp, lane, s_off, t_off);

        if (Q_STAGES == 1 && i + 1 < Tr) {
            __syncthreads();   // every warp is done reading Q_i, dO_i, lse_i and D_i
            load_query_tile(sbase, 0, i + 1, Qb, dOb, Lb, Db, seq_q, tid);
            cp_async_commit();
        }
    }
    __syncthreads();   // every warp's keys of the last dS_ijᵀ are in shared memory
    if (i_first < Tr) {
        const LaneOffsets last = lane_offsets();
        dq_tile(sbase, (Tr - 1 - i_first) & 1, (Tr - 1) * Br, dQb, seq_q, warp, lane, last.s,
                last.t);
    }
    cp_async_wait<0>();
    __syncthreads();   // every warp is done reading K_j and V_j: their rows become staging

    // Stage this warp's 16 rows of scale·dK_j and dV_j in its own rows of the K_j / V_j
    // buffers, then store 16 B per lane, coalesced. Only this warp touches those rows.
    #pragma unroll
    for (int n = 0; n < D_TILES; ++n) {
        *(unsigned*)(smem + SMEM_K + swizzle<CHUNKS>(key_row, n) * 16 + t * 4) =
            pack_pair<BF16>(dK_acc[n][0] * scale, dK_acc[n][1] * scale);
        *(unsigned*)(smem + SMEM_K + swizzle<CHUNKS>(key_row + 8, n) * 16 + t * 4) =
            pack_pair<BF16>(dK_acc[n][2] * scale, dK_acc[n][3] * scale);
        *(unsigned*)(smem + SMEM_V + swizzle<CHUNKS>(key_row, n) * 16 + t * 4) =
            pack_pair<BF16>(dV_acc[n][0], dV_acc[n][1]);
        *(unsigned*)(smem + SMEM_V + swizzle<CHUNKS>(key_row + 8, n) * 16 + t * 4) =
            pack_pair<BF16>(dV_acc[n][2], dV_acc[n][3]);
    }
    __syncwarp();
    half_t* dKb = dK + (u64)bh * seq_k * d;
    half_t* dVb = dV + (u64)bh * seq_k * d;
    #pragma unroll
    for (int it = 0; it < 16 * CHUNKS / 32; ++it) {
        const int idx = lane + it * 32;
        const int row = warp * 16 + idx / CHUNKS, chunk = idx % CHUNKS;
        if (k0 + row < seq_k) {
            const u64 at = (u64)(k0 + row) * d + chunk * 8;
            *(uint4*)(dKb + at) = *(const uint4*)(smem + SMEM_K + swizzle<CHUNKS>(row, chunk) * 16);
            *(uint4*)(dVb + at) = *(const uint4*)(smem + SMEM_V + swizzle<CHUNKS>(row, chunk) * 16);
        }
    }
}
