// Hopper (sm_90a) building blocks of the warpgroup-MMA kernels: tensor maps and bulk tensor
// copies (TMA), mbarriers, shared-memory matrix descriptors and the wgmma instructions.
// Included after common.cuh, by a kernel that defines BF16 (0: float16 operands, 1: bfloat16)
// and may define FP8 (1: float8 e4m3 operands, whatever BF16 says).
#ifndef FA_LAB_HOPPER_CUH
#define FA_LAB_HOPPER_CUH

#ifndef BF16
#error "define BF16 before including hopper.cuh"
#endif
#ifndef FP8
#define FP8 0
#endif
// The wgmma types of the accumulator, A and B, and the k of one instruction: always 32 bytes
// of a row, 16 elements of 16 bits or 32 of 8. 8-bit operands are K-major only, so their
// instructions take no transpose flags (MMA_TRANS_SS, MMA_TRANS_RS).
#if FP8
#define MMA_TYPES ".f32.e4m3.e4m3 "
#define MMA_K "k32"
#define MMA_TRANS_SS(tb) ""
#define MMA_TRANS_RS ""
#else
#if BF16
#define MMA_TYPES ".f32.bf16.bf16 "
#else
#define MMA_TYPES ".f32.f16.f16 "
#endif
#define MMA_K "k16"
#define MMA_TRANS_SS(tb) ", 0, " tb
#define MMA_TRANS_RS ", 1"
#endif

#include "tma.cuh"

// ---- warpgroup MMA ------------------------------------------------------------------------
// Shared-memory matrix descriptor: start address, leading and stride byte offsets (each
// stored >> 4) and the swizzle span of the rows, 128 bytes (layout 1) or 64 (layout 2).
template <int SWIZZLE_BYTES = 128>
__device__ __forceinline__ u64 smem_desc(unsigned addr, unsigned lead, unsigned stride) {
    static_assert(SWIZZLE_BYTES == 128 || SWIZZLE_BYTES == 64, "a 128- or 64-byte swizzle");
    constexpr u64 layout = SWIZZLE_BYTES == 128 ? 1 : 2;
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lead >> 4) << 16)
           | ((u64)(stride >> 4) << 32) | (layout << 62);
}
// The descriptors of one matrix in shared memory differ only in their start address, whose
// field (bits 0-13, in 16-byte units) takes no carry from an offset while the address stays
// under 256 KiB, as every shared address does: so build the fields once, and each descriptor
// is one 32-bit add (an offset in 16-byte units) instead of the masks and shifts again.
template <int SWIZZLE_BYTES = 128>
struct SmemDesc {
    unsigned lo, hi;
    __device__ __forceinline__ SmemDesc(unsigned addr, unsigned lead, unsigned stride) {
        const u64 d = smem_desc<SWIZZLE_BYTES>(addr, lead, stride);
        lo = (unsigned)d;
        hi = (unsigned)(d >> 32);
    }
    __device__ __forceinline__ u64 at(unsigned units16) const {
        return ((u64)hi << 32) | (lo + units16);
    }
};
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// Keep the compiler from touching accumulators across an in-flight wgmma.
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N]) {
    #pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}

// c (64 x 64) += A (64 x k, shared, K-major) · B (k x 64, shared: K-major, or N-major when
// TRANS_B = 1, 16-bit only); accumulate == 0: c = A · B. k: 16 (16-bit) or 32 (FP8).
template <int TRANS_B = 0>
__device__ __forceinline__ void wgmma_ss(float (&c)[32], u64 a_desc, u64 b_desc, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64" MMA_K MMA_TYPES
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1" MMA_TRANS_SS("%35") ";\n}\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31])
        : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(TRANS_B));
}

// c (64 x 128) += A (64 x k, shared, K-major) · B (k x 128, shared: K-major, or N-major
// when TRANS_B = 1, 16-bit only); accumulate == 0: c = A · B.
template <int TRANS_B = 0>
__device__ __forceinline__ void wgmma_ss(float (&c)[64], u64 a_desc, u64 b_desc, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128" MMA_K MMA_TYPES
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1" MMA_TRANS_SS("%67") ";\n}\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63])
        : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(TRANS_B));
}

// c (64 x 192) += A (64 x k, shared, K-major) · B (k x 192, shared, K-major); accumulate == 0:
// c = A · B. The FP8 build's S_ij at Bc = 192 (one instruction, as the N of an 8-bit wgmma
// may be any multiple of 8 up to 256); 16-bit builds do not use it.
template <int TRANS_B = 0>
__device__ __forceinline__ void wgmma_ss(float (&c)[96], u64 a_desc, u64 b_desc, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192" MMA_K MMA_TYPES
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1" MMA_TRANS_SS("%99") ";\n}\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63]), "+f"(c[64]), "+f"(c[65]), "+f"(c[66]), "+f"(c[67]), "+f"(c[68]), "+f"(c[69]), "+f"(c[70]), "+f"(c[71]), "+f"(c[72]), "+f"(c[73]), "+f"(c[74]), "+f"(c[75]), "+f"(c[76]), "+f"(c[77]), "+f"(c[78]), "+f"(c[79]), "+f"(c[80]), "+f"(c[81]), "+f"(c[82]), "+f"(c[83]), "+f"(c[84]), "+f"(c[85]), "+f"(c[86]), "+f"(c[87]), "+f"(c[88]), "+f"(c[89]), "+f"(c[90]), "+f"(c[91]), "+f"(c[92]), "+f"(c[93]), "+f"(c[94]), "+f"(c[95])
        : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(TRANS_B));
}

// c (64 x 256) += A (64 x k, shared, K-major) · B (k x 256, shared, K-major); accumulate == 0:
// c = A · B. The FP8 build's S_ij at Bc = 256 (head_dim 64); 16-bit builds do not use it.
template <int TRANS_B = 0>
__device__ __forceinline__ void wgmma_ss(float (&c)[128], u64 a_desc, u64 b_desc, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256" MMA_K MMA_TYPES
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1" MMA_TRANS_SS("%131") ";\n}\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63]), "+f"(c[64]), "+f"(c[65]), "+f"(c[66]), "+f"(c[67]), "+f"(c[68]), "+f"(c[69]), "+f"(c[70]), "+f"(c[71]), "+f"(c[72]), "+f"(c[73]), "+f"(c[74]), "+f"(c[75]), "+f"(c[76]), "+f"(c[77]), "+f"(c[78]), "+f"(c[79]), "+f"(c[80]), "+f"(c[81]), "+f"(c[82]), "+f"(c[83]), "+f"(c[84]), "+f"(c[85]), "+f"(c[86]), "+f"(c[87]), "+f"(c[88]), "+f"(c[89]), "+f"(c[90]), "+f"(c[91]), "+f"(c[92]), "+f"(c[93]), "+f"(c[94]), "+f"(c[95]), "+f"(c[96]), "+f"(c[97]), "+f"(c[98]), "+f"(c[99]), "+f"(c[100]), "+f"(c[101]), "+f"(c[102]), "+f"(c[103]), "+f"(c[104]), "+f"(c[105]), "+f"(c[106]), "+f"(c[107]), "+f"(c[108]), "+f"(c[109]), "+f"(c[110]), "+f"(c[111]), "+f"(c[112]), "+f"(c[113]), "+f"(c[114]), "+f"(c[115]), "+f"(c[116]), "+f"(c[117]), "+f"(c[118]), "+f"(c[119]), "+f"(c[120]), "+f"(c[121]), "+f"(c[122]), "+f"(c[123]), "+f"(c[124]), "+f"(c[125]), "+f"(c[126]), "+f"(c[127])
        : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(TRANS_B));
}

// c (64 x 64) += A (64 x k, registers) · B (k x 64, shared; N-major (transposed) for 16-bit,
// K-major for FP8).
__device__ __forceinline__ void wgmma_rs(float (&c)[32], const unsigned (&a)[4], u64 b_desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64" MMA_K MMA_TYPES
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1" MMA_TRANS_RS ";\n}\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}

// c (64 x 128) += A (64 x k, registers) · B (k x 128, shared; as above).
__device__ __forceinline__ void wgmma_rs(float (&c)[64], const unsigned (&a)[4], u64 b_desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128" MMA_K MMA_TYPES
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1" MMA_TRANS_RS ";\n}\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}

// Four 8 x 8 matrices of 16-bit elements -> shared memory: register r of each lane holds row
// lane / 4, columns 2 (lane % 4) and + 1 of matrix r; lane 8 m + k gives the address of row
// k of matrix m.
__device__ __forceinline__ void stmatrix_x4(unsigned addr, const unsigned (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
// Four 8 x 8 matrices of 16-bit elements -> shared memory, transposed: register r of each lane
// holds row lane / 4, columns 2 (lane % 4) and + 1 of matrix r; lane 8 m + k gives the
// address of row k of matrix m as stored, i.e. of column k of the fragment.
__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, const unsigned (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
// global[dst .. dst + bytes) += shared[src ..) as float32, asynchronously (bytes: a multiple
// of 16, both addresses 16-byte aligned); completes with this thread's bulk_group.
__device__ __forceinline__ void bulk_add_f32(float* dst, unsigned src, unsigned bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                 :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Wait until this thread's committed bulk copies have read their shared-memory sources.
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// ... and until they are complete.
__device__ __forceinline__ void bulk_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
#endif  // FA_LAB_HOPPER_CUH
