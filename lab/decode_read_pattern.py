"""Lab: is it the split kernel's way of reading the cache that holds Flash-Decoding at 85% of the
H200's DRAM bandwidth, where cuDNN's decode kernel reaches 97% with the same grid and bytes?

A read-only kernel on the decode grid (blocks (split, kv head, batch), 128 threads, 64-key tiles
of K and V, d 128, float16, contiguous cache (B, kv, seq_k, d)) copies every tile to shared
memory and does a fixed amount of arithmetic on it, in five ways:

  warp cp.async   each warp copies its own 16 keys' rows with 16-byte cp.async (L2::256B), rows
                  padded by 16 bytes: the split kernel's pattern
  block cp.async  the 128 threads copy the whole tile together, a block barrier a tile
  warp bulk row   each lane one 256-byte bulk copy (cp.async.bulk, the copy engine) of one
                  of its warp's K or V rows into a padded row; a barrier (mbarrier) a warp
  warp bulk 4K    one lane a warp copies its 16 K rows and 16 V rows as two 4 KB bulk copies
  block bulk 16K  one thread copies the tile's K and V as two 16 KB bulk copies

each with 2 or 3 tiles in flight (two blocks an SM), and "work" = 0 or n FFMA a lane a tile
(the split kernel issues about 1,200 instructions a lane a tile; 4 chains). Read bandwidth = K + V bytes over
the median of 20 launches (events); PyTorch's SDPA on the same cache beside it. No output is
checked (nothing is computed): this times the reads only.

--locality (run 13:50 UTC, logs/h200_2026-11-28_decode_fill.log: within 1% for the 4 KB copies,
so this read-only kernel does not show the paged cache's lead): does it matter which blocks read
neighbouring bytes at once? (With the copy engine, the split kernel ran 3-7% faster on a paged
cache than on a contiguous one, lab/NOTES.md.) The warp cp.async and warp bulk 4K copies, 2
stages, the work, on three ways of laying out and walking the cache:
  contiguous      (B, kv, seq_k, d), split s walks its own range of keys (the kernel's)
  interleaved     the same cache, split s walks tiles s, s + S, s + 2S, ... so a KV head's S
                  blocks read neighbouring tiles at once
  heads together  (B, seq_k / 64, kv, 64, d): the KV heads' rows of each 64 keys side by side,
                  as a paged cache of 64-row pages in order holds them; splits as the kernel's
--copies (run 13:50 UTC, same log: none reached the copy engine's rate): how 16-byte cp.async
copies might reach the rate cuDNN's decode kernel (cp.async too, sm_80 code) reads at: no L2
prefetch, the 256-byte prefetch (the kernel's), the prefetch with an evict-first L2 policy; 2 or
3 stages; 4 warps or 8 (each half the keys and half the work); the copy engine's 4 KB copies
beside.
The 12:03 UTC run (logs/h200_2026-11-28_decode_read_pattern.log) was of the script as it was
at commit 362647a (`git show 362647a:lab/decode_read_pattern.py`); the same copies have been
written with helpers since, which moves the address arithmetic, not the copies.
--phased (run 15:38 UTC, logs/h200_2026-11-28_decode_phased.log): cuDNN's order in one block, a
block-wide tile of 64 or 128 keys with K and V in buffers of their own (wait K_j, start V_j,
S's half of the work, start K_{j+1}, wait V_j, P V's half), by the copy engine or by cp.async,
beside the warp bulk 4K and block bulk 16K copies and SDPA on the same cache.
Run on a Hopper GPU: python3 lab/decode_read_pattern.py [--quick | --locality | --copies |
--phased]"""
import argparse
import sys

import numpy as np

SOURCE = r"""
#define D 128
#ifndef BC
#define BC 64
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef HINT
#define HINT 1
#endif
#define KW (BC / WARPS)
#define PAD 8
#ifndef ENGINE
#define ENGINE 0
#endif
typedef unsigned short elem;
// one 16-byte cp.async: HINT 0 plain, 1 asking L2 for the 256 bytes around it (the kernel's),
// 2 the same with an evict-first L2 policy (the cache is read once)
__device__ __forceinline__ void cp16(unsigned dst, const elem* src) {
#if HINT == 0
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src));
#elif HINT == 1
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" :: "r"(dst), "l"(src));
#else
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "l"(policy));
#endif
}
__device__ __forceinline__ unsigned sa(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
// arrive on the mbarrier at `bar`, announcing the bytes the copies completing on it bring
__device__ __forceinline__ void expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}
// one bulk copy (the copy engine) of `bytes` from global to shared, completing on `bar`
__device__ __forceinline__ void bulk(unsigned dst, const elem* src, unsigned bytes,
                                     unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
extern "C" __global__ void __launch_bounds__(32 * WARPS)
read_tiles(const elem* __restrict__ K, const elem* __restrict__ V, float* out, int seq_k,
           int split_len, int work)
{
    const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z, kv = gridDim.y;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int k_begin = s * split_len, k_end = min(k_begin + split_len, seq_k);
#if INTERLEAVE   // split s takes tiles s, s + S, ... (seq_k a multiple of S · BC)
    const int n_tiles = seq_k / BC / gridDim.x;
    auto key0 = [&](int j) { return (j * (int)gridDim.x + s) * BC; };
#else
    const int n_tiles = (k_end - k_begin + BC - 1) / BC;
    auto key0 = [&](int j) { return k_begin + j * BC; };
#endif
    // element offset of key c's row of KV head g, sequence b
    auto row_at = [&](int c) -> long long {
#if HEADS_TOGETHER   // (B, seq_k / 64, kv, 64, D)
        return ((((long long)b * (seq_k / 64) + c / 64) * kv + g) * 64 + c % 64) * D;
#else                // (B, kv, seq_k, D)
        return (((long long)b * kv + g) * seq_k + c) * D;
#endif
    };
    extern __shared__ __align__(128) unsigned char smem[];
#if PADDED
    constexpr int STRIDE = D + PAD;
#else
    constexpr int STRIDE = D;
#endif
    elem* Ks = (elem*)smem;
    elem* Vs = Ks + STAGES * BC * STRIDE;
    unsigned long long* bars = (unsigned long long*)(Vs + STAGES * BC * STRIDE);  // STAGES x WARPS
    const unsigned bar0 = sa(bars);
#if PATTERN >= 2
    if (tid < STAGES * WARPS)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar0 + 8 * tid));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
#endif
    auto issue = [&](int j) {
        if (j >= n_tiles) {
#if PATTERN < 2
            asm volatile("cp.async.commit_group;" ::: "memory");
#endif
            return;
        }
        const int k0 = key0(j), st = j % STAGES;
        auto at = [&](elem* ring, int row) { return sa(ring + (st * BC + row) * STRIDE); };
        // the 16-byte chunk ch of row `row` of K_j and of V_j, by cp.async
        auto copy_chunk = [&](int row, int ch) {
            const long long src = row_at(k0 + row) + ch * 8;
            cp16(at(Ks, row) + ch * 16, K + src);
            cp16(at(Vs, row) + ch * 16, V + src);
        };
        // `rows` consecutive rows from `row` of K_j and of V_j, one bulk copy each, on `bar`
        auto copy_rows = [&](int row, int rows, unsigned bar) {
            expect(bar, 2 * rows * D * 2);
            bulk(at(Ks, row), K + row_at(k0 + row), rows * D * 2, bar);
            bulk(at(Vs, row), V + row_at(k0 + row), rows * D * 2, bar);
        };
#if PATTERN == 0   // warp cp.async: warp w's 16 rows, lane copy i: row (lane+32i)/16, chunk %16
        for (int i = 0; i < KW * 16 / 32; ++i)
            copy_chunk(warp * KW + (lane + 32 * i) / 16, (lane + 32 * i) % 16);
        asm volatile("cp.async.commit_group;" ::: "memory");
#elif PATTERN == 1   // block cp.async: thread t copy i: chunk t + 128 i of the tile
        for (int i = 0; i < BC * 16 / (32 * WARPS); ++i)
            copy_chunk((tid + 32 * WARPS * i) / 16, (tid + 32 * WARPS * i) % 16);
        asm volatile("cp.async.commit_group;" ::: "memory");
#elif PATTERN == 2   // warp bulk row: lane l < 16 K row l of the warp, l >= 16 V row l - 16
        const unsigned bar = bar0 + 8 * (st * WARPS + warp);
        if (lane == 0) expect(bar, 2 * KW * D * 2);
        __syncwarp();
        const int row = warp * KW + lane % 16;
        bulk(at(lane < 16 ? Ks : Vs, row), (lane < 16 ? K : V) + row_at(k0 + row), D * 2, bar);
#elif PATTERN == 3   // warp bulk 4K: lane 0 two bulk copies of the warp's 16 rows
        if (lane == 0) copy_rows(warp * KW, KW, bar0 + 8 * (st * WARPS + warp));
#else               // block bulk 16K: thread 0 two bulk copies of the tile, barrier of warp 0
        if (tid == 0) copy_rows(0, BC, bar0 + 8 * (st * WARPS));
#endif
    };
    for (int j = 0; j < STAGES - 1; ++j) issue(j);
    float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f, acc3 = 0.f;
    for (int j = 0; j < n_tiles; ++j) {
        const int st = j % STAGES;
#if PATTERN == 0
        asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 2) : "memory");
        __syncwarp();
#elif PATTERN == 1
        asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 2) : "memory");
        __syncthreads();
#else
        {
            const unsigned bar = bar0 + 8 * (st * WARPS + (PATTERN == 4 ? 0 : warp));
            const unsigned parity = (j / STAGES) & 1;
            asm volatile("{\n.reg .pred done;\nW%=:\n"
                         "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                         "@!done bra W%=;\n}\n" :: "r"(bar), "r"(parity) : "memory");
        }
#if PATTERN == 4
        __syncthreads();   // every warp is done with the buffer the next copy overwrites
#else
        __syncwarp();
#endif
#endif
        issue(j + STAGES - 1);
        // the arithmetic: each lane reads 16 bytes of K and of V of its warp's rows, then
        // `work` FFMA in 4 chains
        const int row = warp * KW + lane % KW, ch = lane / KW % 8;
        const uint4 kx = *(const uint4*)(Ks + (st * BC + row) * STRIDE + ch * 8);
        const uint4 vx = *(const uint4*)(Vs + (st * BC + row) * STRIDE + ch * 8);
        float a = __uint_as_float(kx.x ^ vx.y) * 1e-30f, c = __uint_as_float(kx.z ^ vx.w) * 1e-30f;
        for (int w = 0; w < work; w += 4) {
            acc0 = fmaf(acc0, 0.999f, a); acc1 = fmaf(acc1, 0.999f, c);
            acc2 = fmaf(acc2, 0.998f, a); acc3 = fmaf(acc3, 0.998f, c);
        }
    }
#if PATTERN < 2
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
    const float r = acc0 + acc1 + acc2 + acc3;
    if (r == 12345.f) out[tid] = r;   // keeps the arithmetic; never true for these inputs
}

// --phased: cuDNN's order in one block. A block-wide tile of BC keys, K and V each in a buffer
// of their own: wait K_j, start V_j, S's half of the work, start K_{j+1}, wait V_j, P V's half.
// So the block reads one tensor's BC rows at a time. ENGINE 1: thread 0 copies each tile with
// one bulk copy (the copy engine), rows unpadded; ENGINE 0: the 128 threads with 16-byte
// cp.async, rows padded.
extern "C" __global__ void __launch_bounds__(128)
read_phased(const elem* __restrict__ K, const elem* __restrict__ V, float* out, int seq_k,
            int split_len, int work)
{
    const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z, kv = gridDim.y, tid = threadIdx.x;
    const int k_begin = s * split_len, k_end = min(k_begin + split_len, seq_k);
    const int n_tiles = (k_end - k_begin) / BC;   // whole tiles (the caller's split lengths)
    const long long base = ((long long)b * kv + g) * seq_k * D;
    constexpr int STRIDE = ENGINE ? D : D + PAD;
    extern __shared__ __align__(128) unsigned char smem[];
    elem* Ks = (elem*)smem;
    elem* Vs = Ks + BC * STRIDE;
    const unsigned kbar = sa(Vs + BC * STRIDE), vbar = kbar + 8;
#if ENGINE
    if (tid < 2) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(kbar + 8 * tid));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
#endif
    auto load = [&](const elem* T, elem* buf, int j, unsigned bar) {
        const long long src = base + (long long)(k_begin + j * BC) * D;
#if ENGINE
        if (tid == 0) {
            expect(bar, BC * D * 2);
            bulk(sa(buf), T + src, BC * D * 2, bar);
        }
#else
        for (int i = 0; i < BC * 16 / 128; ++i) {
            const int c = tid + 128 * i, row = c / 16, ch = c % 16;
            cp16(sa(buf + row * STRIDE) + ch * 16, T + src + row * D + ch * 8);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
#endif
    };
    auto wait = [&](unsigned bar, int j, bool one_more_pending) {
#if ENGINE
        asm volatile("{\n.reg .pred done;\nW%=:\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                     "@!done bra W%=;\n}\n" :: "r"(bar), "r"(j & 1) : "memory");
#else
        if (one_more_pending) asm volatile("cp.async.wait_group 1;" ::: "memory");
        else asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
        __syncthreads();   // the tile has landed for every thread
    };
    float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f, acc3 = 0.f;
    auto crunch = [&](const elem* buf) {
        const int row = tid % BC, ch = tid / BC % 8;
        const uint4 x = *(const uint4*)(buf + row * STRIDE + ch * 8);
        float a = __uint_as_float(x.x ^ x.y) * 1e-30f, c = __uint_as_float(x.z ^ x.w) * 1e-30f;
        for (int w = 0; w < work / 2; w += 4) {
            acc0 = fmaf(acc0, 0.999f, a); acc1 = fmaf(acc1, 0.999f, c);
            acc2 = fmaf(acc2, 0.998f, a); acc3 = fmaf(acc3, 0.998f, c);
        }
    };
    if (n_tiles > 0) load(K, Ks, 0, kbar);
    for (int j = 0; j < n_tiles; ++j) {
        wait(kbar, j, false);                 // K_j (V_{j-1} was waited for already)
        load(V, Vs, j, vbar);                 // V_j under S_j
        crunch(Ks);
        __syncthreads();                      // every thread is done with K_j
        const bool next = j + 1 < n_tiles;
        if (next) load(K, Ks, j + 1, kbar);   // K_{j+1} under P_j V_j
        wait(vbar, j, next);
        crunch(Vs);
        __syncthreads();                      // every thread is done with V_j
    }
    const float r = acc0 + acc1 + acc2 + acc3;
    if (r == 12345.f) out[tid] = r;
}
"""

NAMES = ["warp cp.async", "block cp.async", "warp bulk row", "warp bulk 4K", "block bulk 16K"]
KV, D, REPS = 8, 128, 20


def build(pattern: int, stages: int, warps: int = 4, **defines):
    """(function, shared memory, threads) of one variant of SOURCE: rows padded for the
    patterns that copy rows into padded buffers (0-2), unpadded for the 4 KB and 16 KB copies;
    defines: more -D switches (HINT, INTERLEAVE, HEADS_TOGETHER)."""
    import cupy as cp
    padded = 1 if pattern in (0, 1, 2) else 0
    switches = {"PATTERN": pattern, "STAGES": stages, "PADDED": padded, "WARPS": warps,
                **defines}
    mod = cp.RawModule(code=SOURCE, options=("-std=c++17",
                                             *(f"-D{k}={v}" for k, v in switches.items())))
    fn = mod.get_function("read_tiles")
    smem = 2 * stages * 64 * (D + 8 * padded) * 2 + 8 * stages * warps
    fn.max_dynamic_shared_size_bytes = smem
    return fn, smem, 32 * warps


def build_phased(bc: int, engine: int):
    """(function, shared memory, threads) of read_phased: BC keys a tile, copy engine or not."""
    import cupy as cp
    mod = cp.RawModule(code=SOURCE, options=("-std=c++17", f"-DBC={bc}", f"-DENGINE={engine}",
                                             "-DSTAGES=2", "-DPATTERN=3", "-DPADDED=0"))
    fn = mod.get_function("read_phased")
    smem = 2 * bc * (D + 8 * (1 - engine)) * 2 + 16
    fn.max_dynamic_shared_size_bytes = smem
    return fn, smem, 128


def median_ms(launch) -> float:
    """The median of REPS timed calls of launch() (CUDA events), after 3 untimed."""
    import cupy as cp
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for r in range(REPS + 3):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        if r >= 3:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def caches(B: int, N: int):
    """K and V of the decode grid's shape (B, KV, N, D), float16."""
    import cupy as cp
    return [cp.random.random((B, KV, N, D), dtype=cp.float32).astype(cp.float16)
            for _ in range(2)]


def read_rate(variant, K, V, splits: int, split_len: int, work: int) -> float:
    """TB/s of K and V read by one variant (build's triple) on the grid (splits, KV, B)."""
    import cupy as cp
    fn, smem, threads = variant
    out = cp.zeros(threads, dtype=cp.float32)
    args = (K, V, out, np.int32(K.shape[2]), np.int32(split_len), np.int32(work))
    ms = median_ms(lambda: fn((splits, KV, K.shape[0]), (threads,), args, shared_mem=smem))
    return (K.nbytes + V.nbytes) / ms / 1e9


def release():
    import cupy as cp
    cp.get_default_memory_pool().free_all_blocks()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--locality", action="store_true", help="the layouts and walks (docstring)")
    ap.add_argument("--copies", action="store_true", help="the cp.async variants (docstring)")
    ap.add_argument("--phased", action="store_true", help="cuDNN's order (docstring)")
    args = ap.parse_args()
    if args.locality:
        return locality()
    if args.copies:
        return copies()
    if args.phased:
        return phased()
    import cupy as cp
    import torch

    works = [0, 1200]
    stages_list = [2, 3]   # 4 padded stages leave one block an SM
    variants = {(p, st): build(p, st) for p in range(5) for st in stages_list}
    print(f"{'B':>2} {'seq_k':>7} {'S':>2} {'work':>5} | " +
          " | ".join(f"{n} s{s}" for n in NAMES for s in stages_list[:1]) + " ... (TB/s)")
    for B, N, S in [(8, 131072, 4), (4, 32768, 8)]:
        K, V = caches(B, N)
        nbytes = K.nbytes + V.nbytes
        split_len = -(-N // S)
        split_len = -(-split_len // 64) * 64      # whole 64-key tiles
        for work in works:
            row = {key: read_rate(v, K, V, S, split_len, work) for key, v in variants.items()}
            for pattern in range(5):
                print(f"{B:>2} {N:>7} {S:>2} {work:>5} | {NAMES[pattern]:<15}" +
                      "".join(f" s{st} {row[(pattern, st)]:5.2f}" for st in stages_list))
        # SDPA (GQA, one query token) on the same cache, and a device copy of the same bytes
        q = torch.randn(B, 32, 1, D, device="cuda", dtype=torch.float16)
        kt, vt = torch.as_tensor(K, device="cuda"), torch.as_tensor(V, device="cuda")
        ms = median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
            q, kt, vt, enable_gqa=True))
        dst = cp.empty_like(K)

        def copy():
            dst[...] = K
        cms = median_ms(copy)
        print(f"   SDPA {ms * 1e3:8.1f} µs = {nbytes / ms / 1e9:5.2f} TB/s read;"
              f" device copy of K: {2 * K.nbytes / cms / 1e9:5.2f} TB/s read + written")
        del K, V, kt, vt, dst
        release()


def locality():
    stages, work = 2, 1200
    walks = {"contiguous": (0, 0), "interleaved": (1, 0), "heads together": (0, 1)}
    patterns = {"warp cp.async": 0, "warp bulk 4K": 3}
    variants = {(walk, name): build(pattern, stages, INTERLEAVE=inter, HEADS_TOGETHER=together)
                for walk, (inter, together) in walks.items()
                for name, pattern in patterns.items()}
    print(f"read TB/s, {stages} stages, {work} FFMA a lane a tile")
    print(f"{'B':>2} {'seq_k':>7} {'S':>3} | "
          + " | ".join(f"{w + ', ' + n:>28}" for w, n in variants))
    for B, N, S in [(8, 131072, 4), (4, 131072, 8), (1, 131072, 32), (4, 32768, 8)]:
        K, V = caches(B, N)
        rates = [read_rate(v, K, V, S, N // S, work) for v in variants.values()]
        print(f"{B:>2} {N:>7} {S:>3} | " + " | ".join(f"{x:>28.2f}" for x in rates), flush=True)
        del K, V
        release()


def copies():
    # name -> (pattern, hint, warps, stages, work a lane a tile)
    table = {"no prefetch": (0, 0, 4, 2, 1200), "L2 256 (kernel)": (0, 1, 4, 2, 1200),
             "L2 256 evict-first": (0, 2, 4, 2, 1200), "L2 256, 3 stages": (0, 1, 4, 3, 1200),
             "evict-first, 3 st.": (0, 2, 4, 3, 1200), "8 warps": (0, 1, 8, 2, 600),
             "8 warps evict-first": (0, 2, 8, 2, 600), "copy engine 4K": (3, 1, 4, 2, 1200)}
    variants = {name: (build(pattern, stages, warps, HINT=hint), work)
                for name, (pattern, hint, warps, stages, work) in table.items()}
    print("read TB/s; work: FFMA a lane a tile (half for 8 warps, so a block's work is the same)")
    print(f"{'B':>2} {'seq_k':>7} {'S':>3} | " + " | ".join(f"{n:>19}" for n in variants))
    for B, N, S in [(8, 131072, 4), (4, 32768, 8), (1, 32768, 32)]:
        K, V = caches(B, N)
        rates = [read_rate(v, K, V, S, N // S, work) for v, work in variants.values()]
        print(f"{B:>2} {N:>7} {S:>3} | " + " | ".join(f"{x:>19.2f}" for x in rates), flush=True)
        del K, V
        release()


def phased():
    import torch
    work = 1200   # a lane's FFMA a 64-key tile, twice that for 128 keys
    variants = {"warp bulk 4K": (build(3, 2), work), "block bulk 16K": (build(4, 2), work)}
    for bc in (64, 128):
        for engine, name in ((1, "engine"), (0, "cp.async")):
            variants[f"phased {name} {bc}"] = (build_phased(bc, engine), work * bc // 64)
    print(f"read TB/s, {work} FFMA a lane a 64 keys; SDPA on the same cache")
    print(f"{'B':>2} {'seq_k':>7} {'S':>3} | " + " | ".join(f"{n:>18}" for n in variants)
          + " |  SDPA")
    for B, N, S in [(8, 131072, 4), (4, 131072, 8), (1, 131072, 32), (4, 32768, 8),
                    (1, 32768, 32)]:
        K, V = caches(B, N)
        rates = [read_rate(v, K, V, S, N // S, w) for v, w in variants.values()]
        q = torch.randn(B, 32, 1, D, device="cuda", dtype=torch.float16)
        kt, vt = torch.as_tensor(K, device="cuda"), torch.as_tensor(V, device="cuda")
        ms = median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
            q, kt, vt, enable_gqa=True))
        print(f"{B:>2} {N:>7} {S:>3} | " + " | ".join(f"{x:>18.2f}" for x in rates)
              + f" | {(K.nbytes + V.nbytes) / ms / 1e9:5.2f}", flush=True)
        del K, V, kt, vt
        release()


if __name__ == "__main__":
    sys.exit(main())
