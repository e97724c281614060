// The ticket protocol of the kernels whose last block merges what other blocks posted: the
// stream-K forward kernels (the parts of a cut item, stream_k.cuh) and Flash-Decoding (the
// splits of a sequence's keys). Each posting block writes its part to global memory, then
// takes a ticket from a counter the parts share; the block that draws the last ticket knows
// every other part is complete and visible, reads them back through L2 (__ldcg: ld.global.cg,
// never L1, which other SMs' writes do not update) and merges them; it sets the counter back
// to 0, so that the next launch finds it as the first did. Included after common.cuh.
#ifndef FA_LAB_TICKET_CUH
#define FA_LAB_TICKET_CUH

// The ticket of a posted part, after every thread of the block has stored its share of the
// part: `sync` gathers the threads, then `leader` takes the ticket from *counter with one
// acquire-release atomic at GPU scope; true in every thread of the block when this part drew
// the last one (last_ticket = parts - 1) and so merges. *flag: a shared int that carries the
// answer. The atomic's release is cumulative over every write the barrier ordered before it
// (PTX memory model), as in a grid-wide barrier; its acquire makes the other parts, released
// by their own tickets, visible to the merging block (after the second barrier, to all its
// threads). nvcc 13.0, sm_90a: one MEMBAR.ALL.GPU before the atomic and none after it, where
// __threadfence() before and after an atomicAdd is a MEMBAR.SC.GPU each.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* counter, int value) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
                 : "=r"(old) : "l"(counter), "r"(value) : "memory");
    return old;
}
template <typename Sync>
__device__ __forceinline__ bool take_ticket(int* counter, int last_ticket, volatile int* flag,
                                            bool leader, Sync sync) {
    sync();           // every thread has stored its share of the part before the release
    if (leader) {
        const int merges = atomic_add_acq_rel_gpu(counter, 1) == last_ticket;
        if (merges)
            *counter = 0;     // all tickets are drawn: the next launch finds 0
        *flag = merges;
    }
    sync();           // the answer is in shared memory before the threads read it
    return *flag;
}

// N consecutive floats of a posted part read through L2, as one load (__ldcg of a float4 or a
// float2: p 16- or 8-byte aligned) or N = 1.
template <int N>
__device__ __forceinline__ void ldcg(const float* p, float (&out)[N]) {
    static_assert(N == 1 || N == 2 || N == 4, "1, 2 or 4 floats");
    if constexpr (N == 4) {
        const float4 v = __ldcg((const float4*)p);
        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    } else if constexpr (N == 2) {
        const float2 v = __ldcg((const float2*)p);
        out[0] = v.x; out[1] = v.y;
    } else {
        out[0] = __ldcg(p);
    }
}

#endif  // FA_LAB_TICKET_CUH
