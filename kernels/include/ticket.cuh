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
// part: each thread fences (release), `sync` gathers them, then `leader` takes the ticket from
// *counter; true in every thread of the block when this part drew the last one
// (last_ticket = parts - 1) and so merges. *flag: a shared int that carries the answer.
// A lab switch: LEADER_FENCE_ONLY=1 leaves out each thread's own fence before the barrier and
// keeps only the leader's after it, which is cumulative over what the barrier ordered before
// it (PTX memory model); 0 in every build the launchers make.
#ifndef LEADER_FENCE_ONLY
#define LEADER_FENCE_ONLY 0
#endif
template <typename Sync>
__device__ __forceinline__ bool take_ticket(int* counter, int last_ticket, volatile int* flag,
                                            bool leader, Sync sync) {
    if (!LEADER_FENCE_ONLY)
        __threadfence();  // release: this thread's part reaches the whole GPU first
    sync();           // every thread has fenced its part before the ticket is taken
    if (leader) {
        __threadfence();  // the leader's fence after the barrier orders the block's writes
                          // (cumulatively) before the ticket
        const int merges = atomicAdd(counter, 1) == last_ticket;
        if (merges) {
            __threadfence();      // acquire: the other parts, fenced before their tickets,
            *counter = 0;         // are visible; all tickets are drawn
        }
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
