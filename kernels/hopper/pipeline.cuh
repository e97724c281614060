// What passes between the warpgroups of the warp-specialised Hopper kernels (flash_wgmma.cu,
// flash_backward_wgmma.cu): the ids of their named barriers, and positions in the rings of
// shared-memory buffers that a producer fills and consumers drain. Included after common.cuh.
#ifndef FA_LAB_PIPELINE_CUH
#define FA_LAB_PIPELINE_CUH

// Named barriers (bar.sync / bar.arrive take an id and a thread count). Id 0 is the one
// __syncthreads() uses; the others gather a subset of the block's warpgroups.
enum NamedBarrier : unsigned {
    BAR_CONSUMERS = 1,   // every consumer warpgroup, not the producer: both write a tile the
                         // other reads (the backward's dS_ij), or meet to record the schedule
    BAR_TURN = 2,        // BAR_TURN + wg: consumer warpgroup wg's turn to issue its products
                         // (ping-pong; waited by wg, arrived at by the warpgroup before it)
    MAX_TURNS = 2,       // consumer warpgroups that take turns, at most
    BAR_TICKET = 4,      // the consumers around a stream-K ticket (stream_k.cuh)
    BAR_P = 5,           // BAR_P + wg: consumer warpgroup wg's P_ij is in shared memory
};
static_assert(BAR_TURN + MAX_TURNS <= BAR_TICKET, "the turn barriers have ids of their own");

// bar.sync on a named barrier: wait until `threads` threads (a multiple of 32, the caller's
// among them) have arrived.
template <unsigned ID, int THREADS>
__device__ __forceinline__ void named_barrier_sync() {
    asm volatile("bar.sync %0, %1;" :: "n"(ID), "n"(THREADS) : "memory");
}

// A position in a ring of STAGES shared-memory buffers, each with a "full" mbarrier (its
// copies have landed) and an "empty" one (its readers are done): the u-th use of the ring
// (counted from 0, across a block's runs) is stage u mod STAGES, in that stage's
// (u / STAGES)-th phase. A reader waits on "full" for `phase`; the producer, before it
// refills the stage, waits on "empty" for empty_parity(), the release of the stage's previous
// use (none on the first lap, u < STAGES, which it skips).
template <int STAGES>
struct RingPos {
    int index;           // the stage
    unsigned phase;      // the parity of the stage's phase for this use

    __device__ static RingPos at(int u) { return {u % STAGES, (unsigned)(u / STAGES) & 1u}; }
    // The next use: the next stage, the phase flipping where the ring wraps.
    __device__ void advance() {
        if (++index == STAGES) {
            index = 0;
            phase ^= 1u;
        }
    }
    __device__ RingPos next() const {
        RingPos p = *this;
        p.advance();
        return p;
    }
    __device__ unsigned empty_parity() const { return phase ^ 1u; }
};

#endif  // FA_LAB_PIPELINE_CUH
