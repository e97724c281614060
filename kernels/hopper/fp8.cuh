// FP8 (e4m3) pieces of the Hopper forward's FP8 build (flash_wgmma.cu with -DFP8=1): the
// quantize kernel that turns 16- or 32-bit Q, K, V into e4m3 tiles with a scale each, and
// the packing of P into the A fragments of an 8-bit wgmma. Included after common.cuh; the
// definitions exist only in FP8 builds.
//
// Why V goes in transposed: an 8-bit wgmma reads both operands K-major, and in O += P V the
// K dimension is the keys, so V_j must sit in shared memory as d rows of Bc keys (Vᵀ). The
// quantize pass reads V and writes V8 anyway, so it writes V8ᵀ at no extra bytes.
// Why its keys are permuted: thread (g, t) of a warp holds S (and so P) at key columns
// 8 n + 2 t and + 1 of its rows, while the A fragment of an 8-bit wgmma wants keys 4 t .. 4 t + 3
// of each 16. Rather than shuffle P between lanes, the product is taken over the keys in
// another order: slot s of each group of 16 keys of Vᵀ holds key key_of_slot(s), the key whose
// P value the fragment has at that slot. The sum over keys is the same.
#ifndef FA_LAB_FP8_CUH
#define FA_LAB_FP8_CUH
#if FP8

// 448 is the largest finite e4m3 value; values below 464 (half a step above it) round to at
// most 448 anyway, past it the cast clips them: those are the saturated ones.
constexpr float E4M3_CLIPS = 464.f;

// The key of a 16-key group that slot s (0..15) of the A fragment holds: slots 4 t .. 4 t + 3
// are keys 2 t, 2 t + 1, 2 t + 8, 2 t + 9.
__device__ __forceinline__ int key_of_slot(int s) {
    return 2 * (s >> 2) + (s & 1) + 8 * ((s >> 1) & 1);
}

// Four floats -> one register of four e4m3 (a in the lowest byte), rounded to nearest even,
// saturating at ±448.
__device__ __forceinline__ unsigned pack_e4m3x4(float a, float b, float c, float e) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(e), "f"(c));
    return (unsigned)lo | ((unsigned)hi << 16);
}

// x · inv, counting it in *saturated when the cast will clip it (|x · inv| > 464).
__device__ __forceinline__ float scaled_for_e4m3(float x, float inv, unsigned* saturated) {
    const float y = x * inv;
    if (fabsf(y) > E4M3_CLIPS) atomicAdd(saturated, 1u);
    return y;
}

// X (rows × d per batch·head, float32, contiguous) -> e4m3, each value times the inverse scale
// of its tile of tile_rows rows (inv[bh · tiles + row / tile_rows]). One thread writes 4 bytes:
// transpose == 0: out (bh, rows, d), 4 columns of a row; transpose == 1: out (bh, d, cols),
// 4 key slots of one column, key_of_slot order within each 16, zeros past `rows` (cols: rows
// rounded up to 16).
extern "C" __global__ void quantize_fp8(const float* __restrict__ x, const float* __restrict__ inv,
                                        unsigned* __restrict__ out, int bh_count, int rows,
                                        int d, int tile_rows, int transpose, int cols,
                                        unsigned* __restrict__ saturated) {
    const int tiles = (rows + tile_rows - 1) / tile_rows;
    const long long words = (long long)bh_count * (transpose ? (long long)d * cols : (long long)rows * d) / 4;
    for (long long w = blockIdx.x * (long long)blockDim.x + threadIdx.x; w < words;
         w += (long long)gridDim.x * blockDim.x) {
        float v[4];
        if (!transpose) {
            const long long e = 4 * w;                     // (bh, row, col) in row-major order
            const int bh = (int)(e / ((long long)rows * d));
            const int row = (int)(e / d % rows);
            const float s = inv[(long long)bh * tiles + row / tile_rows];
            #pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = scaled_for_e4m3(x[e + u], s, saturated);
        } else {
            const long long e = 4 * w;                     // (bh, col, slot)
            const int bh = (int)(e / ((long long)d * cols));
            const int col = (int)(e / cols % d);
            const int slot0 = (int)(e % cols);
            #pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int slot = slot0 + u;
                const int key = (slot & ~15) + key_of_slot(slot & 15);
                v[u] = key < rows
                     ? scaled_for_e4m3(x[((long long)bh * rows + key) * d + col],
                                       inv[(long long)bh * tiles + key / tile_rows], saturated)
                     : 0.f;
            }
        }
        out[w] = pack_e4m3x4(v[0], v[1], v[2], v[3]);
    }
}

#endif  // FP8
#endif  // FA_LAB_FP8_CUH
