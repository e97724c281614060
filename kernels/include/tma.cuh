// Bulk tensor copies (TMA) and the mbarriers they complete on, sm_90 and later: the Hopper
// kernels' and the decode kernel's. Included after common.cuh (u64); a kernel built for an
// older GPU includes it too and never calls it.
#ifndef FA_LAB_TMA_CUH
#define FA_LAB_TMA_CUH

// The driver's tensor map (CUtensorMap), opaque here; passed by value as a kernel parameter.
struct alignas(128) TensorMap { u64 opaque[16]; };

// ---- mbarriers ----------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
// Make the barriers this thread initialised visible to the copy engine (the async proxy)
// before any copy completes on them; the block barrier after it orders them for the threads.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Arrive and announce the bytes the copies completing on this barrier will bring.
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}
// Wait until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n"
                 "}\n" :: "r"(bar), "r"(parity) : "memory");
}

// Fetch a tensor map into the copy engine's descriptor cache ahead of its first copy.
__device__ __forceinline__ void prefetch_tensor_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(map) : "memory");
}

// One box of the (batch·head, seq, d) tensor -> shared memory, completing on `bar`.
// Coordinates, innermost first: column, row, batch·head.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int col, int row,
                                         int bh, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(map), "r"(col), "r"(row), "r"(bh), "r"(bar) : "memory");
}

// This thread's generic-proxy writes to shared memory become visible to the async proxy
// (wgmma operands, bulk copies) of later operations.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

#endif  // FA_LAB_TMA_CUH
