// Device helpers shared by the kernels of kernels/. Included as "common.cuh": nvcc finds it
// with -I kernels/include, and kernels/loader.py pastes it in (as it does every header a source
// includes, beside the source or in kernels/include/) before NVRTC compiles a source.
#ifndef FA_LAB_COMMON_CUH
#define FA_LAB_COMMON_CUH

typedef unsigned short half_bits;   // float16 kept as raw bits: no CUDA header needed
struct bf16_bits { unsigned short bits; };   // bfloat16 as raw bits (a distinct type)
typedef unsigned long long u64;

// ---- float32 <-> float16 / bfloat16 bits ----
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(half_bits x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
}
// bfloat16 is the top half of a float32
__device__ __forceinline__ float to_f32(bf16_bits x) { return __uint_as_float((unsigned)x.bits << 16); }
__device__ __forceinline__ void store_as(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_as(bf16_bits* p, float x) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
    p->bits = h;
}
__device__ __forceinline__ void store_as(half_bits* p, float x) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    *p = h;
}
// two floats -> one register of two float16 (lo in the low half), as mma operands want them
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    unsigned r;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else   // Turing has no paired conversion: two conversions, then the halves side by side
    asm("{ .reg .f16 l, h; cvt.rn.f16.f32 l, %1; cvt.rn.f16.f32 h, %2; mov.b32 %0, {l, h}; }"
        : "=r"(r) : "f"(lo), "f"(hi));
#endif
    return r;
}
// the same for two bfloat16
__device__ __forceinline__ unsigned pack_bf162(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ---- arithmetic ----
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// dst[0], dst[1] += x, y in global memory: one vector reduction where the GPU has it.
__device__ __forceinline__ void red_add2(float* dst, float x, float y) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" :: "l"(dst), "f"(x), "f"(y) : "memory");
#else
    atomicAdd(dst, x);
    atomicAdd(dst + 1, y);
#endif
}

// dst[0..3] += x, y, z, w in global memory (16-byte aligned): one vector reduction on sm_90
// and later, two before.
__device__ __forceinline__ void red_add4(float* dst, float x, float y, float z, float w) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "l"(dst), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
#else
    red_add2(dst, x, y);
    red_add2(dst + 2, z, w);
#endif
}

// ---- reductions across the 32 lanes of a warp: every lane gets the result ----
__device__ __forceinline__ float warp_max(float x) {
    for (int offset = 16; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}
__device__ __forceinline__ float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

// Max (is_max) or sum of one value per thread over a block of num_warps warps; every thread
// gets it. `partials` is num_warps + 1 floats of shared memory; call it from every thread.
template <int num_warps>
__device__ float block_reduce(float x, bool is_max, float* partials) {
    x = is_max ? warp_max(x) : warp_sum(x);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) partials[warp] = x;
    __syncthreads();  // every warp's partial is in shared memory before thread 0 combines them
    if (threadIdx.x == 0) {
        float total = partials[0];
        for (int w = 1; w < num_warps; ++w)
            total = is_max ? fmaxf(total, partials[w]) : total + partials[w];
        partials[num_warps] = total;
    }
    __syncthreads();  // the combined value is written before any thread reads it
    const float total = partials[num_warps];
    __syncthreads();  // all threads have read it before the next call reuses `partials`
    return total;
}

// ---- reductions across the 4 threads of a quad (one row of an mma fragment) ----
__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
// The same over ints (the Hopper forward's tile max from the scores' bits).
__device__ __forceinline__ int quad_max(int x) {
    x = max(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return max(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---- a 4 x 4 transpose of 32-bit words across a quad -------------------------------------
// x[i] becomes x[(i - t) & 3] for lane t of its quad: a rotation by t, as selects.
__device__ __forceinline__ void rotate_by_lane(unsigned (&x)[4], int t) {
    if (t & 1) { const unsigned x3 = x[3]; x[3] = x[2]; x[2] = x[1]; x[1] = x[0]; x[0] = x3; }
    if (t & 2) {
        const unsigned x0 = x[0], x1 = x[1];
        x[0] = x[2]; x[1] = x[3]; x[2] = x0; x[3] = x1;
    }
}
// Lane t of a quad holds word t of each of four chunks (w[i]: chunk i); it gets back chunk t
// whole, its words in order: three shuffles; in round r each lane reads lane t + r and sends
// lane t - r the word that lane wants, w[(t - r) & 3].
__device__ __forceinline__ uint4 quad_transpose(const unsigned (&w)[4], int t) {
    unsigned a[4] = {w[0], w[3], w[2], w[1]};
    rotate_by_lane(a, t);                                  // a[r] = w[(t - r) & 3]
    unsigned got[4] = {a[0], 0u, 0u, 0u};
    #pragma unroll
    for (int r = 1; r < 4; ++r) got[r] = __shfl_sync(0xffffffffu, a[r], (t + r) & 3, 4);
    rotate_by_lane(got, t);                                // got[r] came from lane t + r
    return make_uint4(got[0], got[1], got[2], got[3]);
}

// ---- shared-memory address as the 32-bit form that PTX shared-space operands take ----
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
                 : "=r"(a) : "l"(p));
    return a;
}
// Two floats from / to shared memory at a 32-bit shared-window address (8-byte aligned):
// one register for the address where a generic pointer needs two.
__device__ __forceinline__ float2 lds_f2(unsigned addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
}
__device__ __forceinline__ void sts_f2(unsigned addr, float x, float y) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(addr), "f"(x), "f"(y) : "memory");
}
// The same for one float (4-byte aligned) and four (16-byte aligned).
__device__ __forceinline__ void sts_f1(unsigned addr, float x) {
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(addr), "f"(x) : "memory");
}
__device__ __forceinline__ void sts_f4(unsigned addr, float x, float y, float z, float w) {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}

// ---- tensor-core building blocks (mma.sync kernels: sm_80 and later, and Turing, sm_75) ----
// Shared-memory tiles are rows of CHUNKS 16-byte chunks, chunk index XOR (row mod 8), so the
// 8 rows an ldmatrix reads sit in 8 different bank groups (CHUNKS >= 8).
template <int CHUNKS>
__device__ __forceinline__ int swizzle(int row, int chunk) {
    return row * CHUNKS + (chunk ^ (row & 7));
}

// Copy 16 (or 4) bytes global -> shared; zero-fill when `valid` is false. From sm_80 the copy
// is asynchronous (cp.async: it lands by the matching cp_async_wait); Turing has no cp.async,
// so there the copy goes through registers and is done when the call returns, and commit and
// wait have nothing left to do. Either way the kernels' __syncthreads() after the wait make
// the tile visible to the whole block.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(n) : "memory");
#else
    uint4 v = valid ? __ldcg(static_cast<const uint4*>(src)) : make_uint4(0, 0, 0, 0);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#endif
}
__device__ __forceinline__ void cp_async4(unsigned dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    int n = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                 :: "r"(dst), "l"(src), "r"(n) : "memory");
#else
    unsigned v = valid ? *static_cast<const unsigned*>(src) : 0u;
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(dst), "r"(v) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
#endif
}

// ROWS x COLS tile (16-bit elements) of a (seq, COLS) matrix into swizzled shared memory,
// spread over THREADS threads; rows past seq become zeros.
template <int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void load_tile(unsigned dst, const unsigned short* src, int row0,
                                          int seq, int tid) {
    constexpr int CHUNKS = COLS / 8;
    static_assert((ROWS * CHUNKS) % THREADS == 0, "tile must split evenly over the threads");
    #pragma unroll
    for (int it = 0; it < ROWS * CHUNKS / THREADS; ++it) {
        int idx = tid + it * THREADS;
        int row = idx / CHUNKS, chunk = idx % CHUNKS;
        bool valid = row0 + row < seq;
        const unsigned short* g = src + (u64)(valid ? row0 + row : 0) * COLS + chunk * 8;
        cp_async16(dst + swizzle<CHUNKS>(row, chunk) * 16, g, valid);
    }
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// c += a (16x16, row) · b (16x8, col), float32 accumulators; inputs float16, or bfloat16
// when IsBf16. Turing's tensor cores take k = 8 per instruction (m16n8k8, float16 only): there
// the product is two of them, k 0-7 from a[0], a[1], b0 and k 8-15 from a[2], a[3], b1, which
// is how the m16n8k16 fragments split, so every caller keeps one register layout.
template <bool IsBf16>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
#if __CUDA_ARCH__ < 800
    static_assert(!IsBf16, "bfloat16 tensor-core products need sm_80 or later");
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[2]), "r"(a[3]), "r"(b1));
#else
    if constexpr (IsBf16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
#endif
}

// Two floats -> one register of the mma input type (float16, or bfloat16 when IsBf16).
template <bool IsBf16>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
    if constexpr (IsBf16) return pack_bf162(lo, hi);
    else return pack_half2(lo, hi);
}
// ... and back: the two floats of one register of the mma input type.
template <bool IsBf16>
__device__ __forceinline__ float2 unpack_pair(unsigned r) {
    if constexpr (IsBf16) return make_float2(__uint_as_float(r << 16), __uint_as_float(r & 0xffff0000u));
    else return make_float2(to_f32((half_bits)(r & 0xffff)), to_f32((half_bits)(r >> 16)));
}

// ---- forward work items: (query tile i, batch·head) in launch order ----
// The order: groups of bh_group batch·heads one after another; within a group, query tile
// slot by slot, every batch·head of the group at each slot. Causal: slots from the heaviest
// query tile down (longest processing time first: the long items start early, the short
// ones fill the gaps at the end), groups sized by the launcher to a few waves, so the K and
// V the running items read stay a bounded set in L2. Not causal: bh_group = 1, so batch·head
// by batch·head, the blocks running at once sharing K and V
// (engine.gpu.launchers.core.causal_bh_group, item_grid).
//
// The order as a grid of one block per item, (bh_group, Tr, groups), read from the
// block index alone (nothing held in registers for it): x the batch·head within its group,
// y the slot, z the group. False for the blocks of a last, partial group past bh_count
// (they exit at once).
__device__ __forceinline__ bool grid_item_tile(int causal, int bh_count, int& i, int& bh) {
    i = causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y;
    bh = blockIdx.z * gridDim.x + blockIdx.x;
    return bh < bh_count;
}
// The backward's work items (key tile j, batch·head) in the same order; under causal the
// heaviest is key tile 0 (every query tile sees it), so slot y is key tile y.
__device__ __forceinline__ bool grid_key_tile(int bh_count, int& j, int& bh) {
    return grid_item_tile(0, bh_count, j, bh);
}

// threadIdx.x read by an instruction the compiler may not move or merge: what a loop body
// derives from it is recomputed in every iteration instead of held in registers across the
// loop.
__device__ __forceinline__ int thread_index_anew() {
    int x;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(x));
    return x;
}

// ---- the block schedule: which SM runs this block, and the global nanosecond clock ----
__device__ __forceinline__ int sm_index() {
    int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}
__device__ __forceinline__ u64 global_timer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#endif  // FA_LAB_COMMON_CUH
