// The online-softmax step of one row (FlashAttention-2, Algorithm 1, lines 9-10), as the
// tensor-core forward kernels and Flash-Decoding run it: in exp2, with the softmax scale and
// log2(e) folded into one factor. (The teaching kernel writes the same step out in natural
// units, with the paper's names, where the reader meets it first.) Included after common.cuh.
#ifndef FA_LAB_ONLINE_SOFTMAX_CUH
#define FA_LAB_ONLINE_SOFTMAX_CUH

// The two halves of the step, for a kernel that needs them apart (Flash-Decoding computes its
// P before the rescale factor, which keeps fewer values live across its shuffles):
// The factor exp2((m_old - m_new) · scale_log2) that rescales the running sum and the output
// of the keys seen so far when the running maximum (of raw scores) moves from m_old to m_new:
// exactly 1 where it did not move, also while the row has seen no key (both -inf, whose
// difference would be NaN).
__device__ __forceinline__ float max_rescale(float m_old, float m_new, float scale_log2) {
    return (m_new == m_old) ? 1.f : fast_exp2((m_old - m_new) * scale_log2);
}
// The running maximum m times scale_log2, 0 while it is still -inf, so that
// P = exp2(x · scale_log2 - shift) of a hidden key (x = -inf) is 0, not NaN.
__device__ __forceinline__ float max_shift(float m, float scale_log2) {
    return (m == neg_inf()) ? 0.f : m * scale_log2;
}

// The step: the row's running maximum m moves to max(m, tile_max); returns max_rescale, and
// m_shift is max_shift of the new maximum. Scores already in exp2 units take scale_log2 = 1.
__device__ __forceinline__ float online_softmax_step(float& m, float tile_max, float scale_log2,
                                                     float& m_shift) {
    const float m_new = fmaxf(m, tile_max);
    const float rescale = max_rescale(m, m_new, scale_log2);
    m_shift = max_shift(m_new, scale_log2);
    m = m_new;
    return rescale;
}

#endif  // FA_LAB_ONLINE_SOFTMAX_CUH
