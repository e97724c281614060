// Device helpers shared by the kernels of this folder. Included as "common.cuh": nvcc finds it
// beside the source; kernels/loader.py pastes it in before NVRTC compiles a source.
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
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
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
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---- shared-memory address as the 32-bit form that PTX shared-space operands take ----
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
                 : "=r"(a) : "l"(p));
    return a;
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
