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

each with 2 or 3 tiles in flight (two blocks an SM), and "work" = 0 or n FFMA a lane a tile (the split kernel
issues about 1,200 instructions a lane a tile; 4 chains). Read bandwidth = K + V bytes over
the median of 20 launches (events); PyTorch's SDPA on the same cache beside it. No output is
checked (nothing is computed): this times the reads only.

--locality (prepared after the first run, not yet run): does it matter which blocks read
neighbouring bytes at once? (With the copy engine, the split kernel ran 3-7% faster on a paged
cache than on a contiguous one, lab/NOTES.md.) The warp cp.async and warp bulk 4K copies, 2
stages, the work, on three ways of laying out and walking the cache:
  contiguous      (B, kv, seq_k, d), split s walks its own range of keys (the kernel's)
  interleaved     the same cache, split s walks tiles s, s + S, s + 2S, ... so a KV head's S
                  blocks read neighbouring tiles at once
  heads together  (B, seq_k / 64, kv, 64, d): the KV heads' rows of each 64 keys side by side,
                  as a paged cache of 64-row pages in order holds them; splits as the kernel's
--copies (prepared after the first run, not yet run): how 16-byte cp.async copies might reach
the rate cuDNN's decode kernel (cp.async too, sm_80 code) reads at: no L2 prefetch, the
256-byte prefetch (the kernel's), the prefetch with an evict-first L2 policy; 2 or 3 stages;
4 warps or 8 (each half the keys and half the work); the copy engine's 4 KB copies beside.
Run on a Hopper GPU: python3 lab/decode_read_pattern.py [--quick | --locality | --copies]"""
import argparse
import sys

import numpy as np

SOURCE = r"""
#define D 128
#define BC 64
#ifndef WARPS
#define WARPS 4
#endif
#ifndef HINT
#define HINT 1
#endif
#define KW (BC / WARPS)
#define PAD 8
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
    const unsigned bar0 = (unsigned)__cvta_generic_to_shared(bars);
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
#if PATTERN == 0   // warp cp.async: warp w's 16 rows, lane copy i: row (lane+32i)/16, chunk %16
        for (int i = 0; i < KW * 16 / 32; ++i) {
            const int row = warp * KW + (lane + 32 * i) / 16, ch = (lane + 32 * i) % 16;
            const long long src = row_at(k0 + row) + ch * 8;
            const unsigned dk = (unsigned)__cvta_generic_to_shared(Ks + (st * BC + row) * STRIDE + ch * 8);
            const unsigned dv = (unsigned)__cvta_generic_to_shared(Vs + (st * BC + row) * STRIDE + ch * 8);
            cp16(dk, K + src);
            cp16(dv, V + src);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
#elif PATTERN == 1   // block cp.async: thread t copy i: chunk t + 128 i of the tile
        for (int i = 0; i < BC * 16 / (32 * WARPS); ++i) {
            const int idx = tid + 32 * WARPS * i, row = idx / 16, ch = idx % 16;
            const long long src = row_at(k0 + row) + ch * 8;
            const unsigned dk = (unsigned)__cvta_generic_to_shared(Ks + (st * BC + row) * STRIDE + ch * 8);
            const unsigned dv = (unsigned)__cvta_generic_to_shared(Vs + (st * BC + row) * STRIDE + ch * 8);
            cp16(dk, K + src);
            cp16(dv, V + src);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
#elif PATTERN == 2   // warp bulk row: lane l < 16 K row l of the warp, l >= 16 V row l - 16
        const unsigned bar = bar0 + 8 * (st * WARPS + warp);
        if (lane == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar), "r"(2 * KW * D * 2) : "memory");
        __syncwarp();
        const int row = warp * KW + lane % 16;
        const elem* src = (lane < 16 ? K : V) + row_at(k0 + row);
        const unsigned dst = (unsigned)__cvta_generic_to_shared((lane < 16 ? Ks : Vs) + (st * BC + row) * STRIDE);
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(dst), "l"(src), "r"(D * 2), "r"(bar) : "memory");
#elif PATTERN == 3   // warp bulk 4K: lane 0 two bulk copies of the warp's 16 rows
        const unsigned bar = bar0 + 8 * (st * WARPS + warp);
        if (lane == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar), "r"(2 * KW * D * 2) : "memory");
            const long long src = row_at(k0 + warp * KW);
            const unsigned dk = (unsigned)__cvta_generic_to_shared(Ks + (st * BC + warp * KW) * STRIDE);
            const unsigned dv = (unsigned)__cvta_generic_to_shared(Vs + (st * BC + warp * KW) * STRIDE);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(dk), "l"(K + src), "r"(KW * D * 2), "r"(bar) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(dv), "l"(V + src), "r"(KW * D * 2), "r"(bar) : "memory");
        }
#else               // block bulk 16K: thread 0 two bulk copies of the tile, barrier of warp 0
        const unsigned bar = bar0 + 8 * (st * WARPS);
        if (tid == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar), "r"(2 * BC * D * 2) : "memory");
            const long long src = row_at(k0);
            const unsigned dk = (unsigned)__cvta_generic_to_shared(Ks + st * BC * STRIDE);
            const unsigned dv = (unsigned)__cvta_generic_to_shared(Vs + st * BC * STRIDE);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(dk), "l"(K + src), "r"(BC * D * 2), "r"(bar) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(dv), "l"(V + src), "r"(BC * D * 2), "r"(bar) : "memory");
        }
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
"""

NAMES = ["warp cp.async", "block cp.async", "warp bulk row", "warp bulk 4K", "block bulk 16K"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--locality", action="store_true", help="the layouts and walks (docstring)")
    ap.add_argument("--copies", action="store_true", help="the cp.async variants (docstring)")
    args = ap.parse_args()
    if args.locality:
        return locality()
    if args.copies:
        return copies()
    import cupy as cp
    import torch

    shapes = [(8, 131072, 4), (4, 32768, 8)]
    kv, d = 8, 128
    works = [0, 1200]
    stages_list = [2, 3]   # 4 padded stages leave one block an SM
    reps = 20
    out = cp.zeros(128, dtype=cp.float32)
    mods = {}
    for pattern in range(5):
        for stages in stages_list:
            padded = 1 if pattern in (0, 1, 2) else 0
            mod = cp.RawModule(code=SOURCE, options=(
                "-std=c++17", f"-DPATTERN={pattern}", f"-DSTAGES={stages}", f"-DPADDED={padded}"))
            fn = mod.get_function("read_tiles")
            stride = d + (8 if padded else 0)
            smem = 2 * stages * 64 * stride * 2 + 8 * stages * 4
            fn.max_dynamic_shared_size_bytes = smem
            mods[(pattern, stages)] = (fn, smem)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    print(f"{'B':>2} {'seq_k':>7} {'S':>2} {'work':>5} | " +
          " | ".join(f"{n} s{s}" for n in NAMES for s in stages_list[:1]) + " ... (TB/s)")
    for B, N, S in shapes:
        K = cp.random.random((B, kv, N, d), dtype=cp.float32).astype(cp.float16)
        V = cp.random.random((B, kv, N, d), dtype=cp.float32).astype(cp.float16)
        nbytes = 2 * K.nbytes
        split_len = -(-N // S)
        split_len = -(-split_len // 64) * 64
        for work in works:
            row = {}
            for (pattern, stages), (fn, smem) in mods.items():
                times = []
                for r in range(reps + 3):
                    start.record()
                    fn((S, kv, B), (128,), (K, V, out, np.int32(N), np.int32(split_len),
                                            np.int32(work)), shared_mem=smem)
                    stop.record()
                    stop.synchronize()
                    if r >= 3:
                        times.append(cp.cuda.get_elapsed_time(start, stop))
                ms = float(np.median(times))
                row[(pattern, stages)] = nbytes / ms / 1e9
            for pattern in range(5):
                print(f"{B:>2} {N:>7} {S:>2} {work:>5} | {NAMES[pattern]:<15}" +
                      "".join(f" s{st} {row[(pattern, st)]:5.2f}" for st in stages_list))
        # SDPA (GQA, one query token) on the same cache, and a device copy of the same bytes
        q = torch.randn(B, 32, 1, d, device="cuda", dtype=torch.float16)
        kt = torch.as_tensor(K, device="cuda")
        vt = torch.as_tensor(V, device="cuda")
        times = []
        for r in range(reps + 3):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.nn.functional.scaled_dot_product_attention(q, kt, vt, enable_gqa=True)
            e1.record()
            e1.synchronize()
            if r >= 3:
                times.append(e0.elapsed_time(e1))
        ms = float(np.median(times))
        dst = cp.empty_like(K)
        ctimes = []
        for r in range(reps + 3):
            start.record()
            dst[...] = K
            stop.record()
            stop.synchronize()
            if r >= 3:
                ctimes.append(cp.cuda.get_elapsed_time(start, stop))
        cms = float(np.median(ctimes))
        print(f"   SDPA {ms * 1e3:8.1f} µs = {nbytes / ms / 1e9:5.2f} TB/s read;"
              f" device copy of K: {2 * K.nbytes / cms / 1e9:5.2f} TB/s read + written")
        del K, V, kt, vt, dst
        cp.get_default_memory_pool().free_all_blocks()


def locality():
    import cupy as cp
    kv, d, reps, stages, work = 8, 128, 20, 2, 1200
    walks = {"contiguous": (0, 0), "interleaved": (1, 0), "heads together": (0, 1)}
    patterns = {"warp cp.async": 0, "warp bulk 4K": 3}
    out = cp.zeros(128, dtype=cp.float32)
    fns = {}
    for walk, (inter, together) in walks.items():
        for name, pattern in patterns.items():
            mod = cp.RawModule(code=SOURCE, options=(
                "-std=c++17", f"-DPATTERN={pattern}", f"-DSTAGES={stages}",
                f"-DPADDED={1 if pattern == 0 else 0}", f"-DINTERLEAVE={inter}",
                f"-DHEADS_TOGETHER={together}"))
            fn = mod.get_function("read_tiles")
            smem = 2 * stages * 64 * (d + (8 if pattern == 0 else 0)) * 2 + 8 * stages * 4
            fn.max_dynamic_shared_size_bytes = smem
            fns[(walk, name)] = (fn, smem)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    print(f"read TB/s, {stages} stages, {work} FFMA a lane a tile")
    print(f"{'B':>2} {'seq_k':>7} {'S':>3} | " + " | ".join(f"{w + ', ' + n:>28}" for w, n in fns))
    for B, N, S in [(8, 131072, 4), (4, 131072, 8), (1, 131072, 32), (4, 32768, 8)]:
        K = cp.random.random((B, kv, N, d), dtype=cp.float32).astype(cp.float16)
        V = cp.random.random((B, kv, N, d), dtype=cp.float32).astype(cp.float16)
        split_len = N // S
        rates = []
        for (fn, smem) in fns.values():
            times = []
            for r in range(reps + 3):
                start.record()
                fn((S, kv, B), (128,), (K, V, out, np.int32(N), np.int32(split_len),
                                        np.int32(work)), shared_mem=smem)
                stop.record()
                stop.synchronize()
                if r >= 3:
                    times.append(cp.cuda.get_elapsed_time(start, stop))
            rates.append(2 * K.nbytes / float(np.median(times)) / 1e9)
        print(f"{B:>2} {N:>7} {S:>3} | " + " | ".join(f"{x:>28.2f}" for x in rates), flush=True)
        del K, V
        cp.get_default_memory_pool().free_all_blocks()


def copies():
    import cupy as cp
    kv, d, reps = 8, 128, 20
    # name -> (pattern, hint, warps, stages, work a lane a tile)
    variants = {"no prefetch": (0, 0, 4, 2, 1200), "L2 256 (kernel)": (0, 1, 4, 2, 1200),
                "L2 256 evict-first": (0, 2, 4, 2, 1200), "L2 256, 3 stages": (0, 1, 4, 3, 1200),
                "evict-first, 3 st.": (0, 2, 4, 3, 1200), "8 warps": (0, 1, 8, 2, 600),
                "8 warps evict-first": (0, 2, 8, 2, 600), "copy engine 4K": (3, 1, 4, 2, 1200)}
    out = cp.zeros(256, dtype=cp.float32)
    fns = {}
    for name, (pattern, hint, warps, stages, work) in variants.items():
        padded = 1 if pattern == 0 else 0
        mod = cp.RawModule(code=SOURCE, options=(
            "-std=c++17", f"-DPATTERN={pattern}", f"-DSTAGES={stages}", f"-DPADDED={padded}",
            f"-DHINT={hint}", f"-DWARPS={warps}"))
        fn = mod.get_function("read_tiles")
        smem = 2 * stages * 64 * (d + 8 * padded) * 2 + 8 * stages * warps
        fn.max_dynamic_shared_size_bytes = smem
        fns[name] = (fn, smem, 32 * warps, work)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    print("read TB/s; work: FFMA a lane a tile (half for 8 warps, so a block's work is the same)")
    print(f"{'B':>2} {'seq_k':>7} {'S':>3} | " + " | ".join(f"{n:>19}" for n in fns))
    for B, N, S in [(8, 131072, 4), (4, 32768, 8), (1, 32768, 32)]:
        K = cp.random.random((B, kv, N, d), dtype=cp.float32).astype(cp.float16)
        V = cp.random.random((B, kv, N, d), dtype=cp.float32).astype(cp.float16)
        rates = []
        for fn, smem, threads, work in fns.values():
            times = []
            for r in range(reps + 3):
                start.record()
                fn((S, kv, B), (threads,), (K, V, out, np.int32(N), np.int32(N // S),
                                            np.int32(work)), shared_mem=smem)
                stop.record()
                stop.synchronize()
                if r >= 3:
                    times.append(cp.cuda.get_elapsed_time(start, stop))
            rates.append(2 * K.nbytes / float(np.median(times)) / 1e9)
        print(f"{B:>2} {N:>7} {S:>3} | " + " | ".join(f"{x:>19.2f}" for x in rates), flush=True)
        del K, V
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    sys.exit(main())
