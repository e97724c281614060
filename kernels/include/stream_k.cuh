// Stream-K for the tensor-core forward kernels (ampere/flash_tensorcore.cu,
// hopper/flash_wgmma.cu): the work as one line of key tiles, a block's even share of it, and
// the merge of an item cut across blocks. The same arithmetic as engine/model/stream_k.py.
// Included after common.cuh by a kernel that defines Br and Bc (its query and key tile sizes).
//
// The line: item after item (an item is one query tile i of one batch·head of the launch; it
// holds tiles(i) key tiles). Causal, in pairs of levels p = 0, 1, ... (query tiles Tr - 1 - p
// and p, the heaviest and the lightest left), each batch·head's two items side by side, then
// the middle query tile of an odd Tr, so that no share collects many light items; not causal,
// batch·head by batch·head. Each item opens with SK_HEAD positions of no key tile (a kernel
// sets it to its fixed cost of an item in tiles, so that a share that opens items holds fewer
// key tiles; 0 unless defined), its key tile j at position start + SK_HEAD + j. Block b of G
// (gridDim.x) takes positions [b·W/G, (b+1)·W/G) of the W on the line, cutting items at its
// share's ends; a share that ends in an item's head runs none of that item. A block that ran
// part of an item posts its unnormalised state (O, m, l) to a slot of the workspace (2b for
// its first run, 2b + 1 for its last: a block cuts at most those two), makes it visible
// device-wide and takes a ticket from the item's counter; the part that draws the last
// ticket merges every part in block order (the same result whichever part finished last),
// writes O_i and lse, and sets the counter back to 0 for the next launch (ticket.cuh).
#ifndef FA_LAB_STREAM_K_CUH
#define FA_LAB_STREAM_K_CUH
#include "causal_tiles.cuh"
#include "ticket.cuh"
#ifndef SK_HEAD
#define SK_HEAD 0
#endif

// The launch's work: Tr query tiles of bh_count batch·heads, Tc key tiles; bh_group the
// batch·heads per group of the whole-item order (common.cuh); stream-K (total > 0): `total`
// positions on the line, key tiles and heads (the launcher counts them).
struct Work {
    int Tr, Tc, seq_q, bh_count, bh_group, causal, total;
    // Key tiles of query tile i: under causal, tile j runs iff j·Bc <= the last row of Q_i.
    __device__ int tiles(int i) const { return seen_key_tiles(i, Br, Bc, seq_q, Tc, causal); }
    // Item k of the line: its query tile i and batch·head bh.
    __device__ void item(int k, int& i, int& bh) const {
        if (!causal) { i = k % Tr; bh = k / Tr; return; }
        const int p = k / (2 * bh_count), e = k % (2 * bh_count);
        if (p < Tr / 2) { i = (e & 1) ? p : Tr - 1 - p; bh = e / 2; }
        else            { i = Tr / 2;                   bh = k - Tr / 2 * 2 * bh_count; }
    }
    // Block b's share starts at position share_start(b) of the line; block_at(x) holds x.
    // 32-bit unsigned arithmetic (the launcher keeps total · blocks under 2^32): a 64-bit
    // division is a call, and no call may sit where a wgmma is in flight.
    __device__ int share_start(int b) const {
        return (int)((unsigned)b * (unsigned)total / gridDim.x);
    }
    __device__ int block_at(int x) const {
        return (int)(((unsigned)(x + 1) * gridDim.x + (unsigned)total - 1) / (unsigned)total) - 1;
    }
    // The slot that block b's part of the item starting at `start` posts to.
    __device__ int slot(int b, int start) const { return 2 * b + (share_start(b) < start); }
    // The blocks that run parts of the item of n key tiles starting at `start`: first to last.
    __device__ int first_part(int start) const { return block_at(start + SK_HEAD); }
    __device__ int last_part(int start, int n) const { return block_at(start + SK_HEAD + n - 1); }
};

// A run of key tiles [j_lo, j_hi) of one item (query tile i, batch·head bh of the launch); the
// item is whole when the run covers all its tiles. Stream-K: the item's index k on the line
// and its head's position there.
struct Run { int i, bh, j_lo, j_hi, k, start; };

// The next run of this block's share: false when the share is done. x: the next position of
// the line (-1 before the first call); k and start: the current item and its head's position
// (the caller keeps the three between calls).
__device__ __forceinline__ bool stream_k_next(const Work& w, int& k, int& start, int& x, Run& r) {
    if (x < 0) {                  // first call: the share's start, and its item
        x = w.share_start(blockIdx.x);
        if (w.causal) {           // skip whole pairs of levels, then pairs of items
            for (int p = 0;; ++p) {
                const int heavy = w.tiles(w.Tr - 1 - p) + SK_HEAD;
                const int n = p < w.Tr / 2 ? heavy + w.tiles(p) + SK_HEAD : heavy;
                if (x < start + w.bh_count * n) {
                    const int skip = (x - start) / n;
                    k = p * 2 * w.bh_count + (p < w.Tr / 2 ? 2 * skip : skip);
                    start += skip * n;
                    if (p < w.Tr / 2 && x >= start + heavy) { ++k; start += heavy; }
                    break;
                }
                start += w.bh_count * n;
            }
        } else {
            k = x / (w.Tc + SK_HEAD);
            start = k * (w.Tc + SK_HEAD);
        }
    }
    const int hi = w.share_start(blockIdx.x + 1);
    for (;;) {    // (with heads: past a share's end in an item's head, which runs no tile)
        if (x >= hi) return false;
        w.item(k, r.i, r.bh);
        const int n = w.tiles(r.i);
        r.k = k;
        r.start = start;
        r.j_lo = SK_HEAD ? max(0, x - start - SK_HEAD) : x - start;
        r.j_hi = min(n, hi - start - SK_HEAD);
        x = start + SK_HEAD + r.j_hi;
        if (r.j_hi == n) { start += SK_HEAD + n; ++k; }
        if (SK_HEAD == 0 || r.j_hi > r.j_lo) return true;
    }
}

// The weight of a part whose row maximum is m_p in a merge whose row maximum is m:
// exp2(scale·log2e·(m_p - m)), 1 where they are equal (also when both are -inf).
__device__ __forceinline__ float part_weight(float m_p, float m, float scale_log2) {
    return m_p == m ? 1.f : fast_exp2((m_p - m) * scale_log2);
}

#endif  // FA_LAB_STREAM_K_CUH
