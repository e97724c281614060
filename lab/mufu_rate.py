"""Lab: how many exp2 results the special-function unit gives a clock, in each form the FP8
forward could use: ex2.approx.ftz.f32 (one MUFU.EX2 a value, as the kernel now), ex2.approx.f16x2
(nvcc 13.0, sm_90a: two MUFU.EX2.F16 and a PRMT a pair) and ex2.approx.ftz.bf16x2 (two
MUFU.EX2.BF16 and a PRMT). If the 16-bit forms issue faster per value, part of the softmax's
exponentials could move there. Each thread runs 8 independent chains x <- 2^-x, 4 blocks of 512
threads an SM; the rate is exp2 values a clock an SM at the SM clock nvidia-smi reads during
the run (CUDA events, median of 5).
Run on an H200, 2026-11-29 09:52 UTC: 15.3-15.6 a clock an SM in every form.
Run on a Hopper GPU: python3 lab/mufu_rate.py"""
import subprocess

import cupy
import numpy as np

SOURCE = r"""
// Throughput of the special-function unit's exp2 in its forms (lab microbenchmark).
template <int MODE>
__global__ void bench(float* out, int iters) {
    unsigned x[8];
    float f[8];
    #pragma unroll
    for (int k = 0; k < 8; ++k) { f[k] = 0.1f * (threadIdx.x % 7 + k); x[k] = 0x38003800u + k; }
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) {
            if constexpr (MODE == 0) {
                asm volatile("{.reg .f32 t; neg.f32 t, %0; ex2.approx.ftz.f32 %0, t;}" : "+f"(f[k]));
            } else if constexpr (MODE == 1) {
                asm volatile("{.reg .b32 t; neg.f16x2 t, %0; ex2.approx.f16x2 %0, t;}" : "+r"(x[k]));
            } else if constexpr (MODE == 2) {
                asm volatile("{.reg .b32 t; neg.bf16x2 t, %0; ex2.approx.ftz.bf16x2 %0, t;}" : "+r"(x[k]));
            }
        }
    }
    float s = 0.f;
    #pragma unroll
    for (int k = 0; k < 8; ++k) s += f[k] + __uint_as_float(x[k]);
    if (s == 12345.f) out[0] = s;
}
"""
MODES = {0: ("ex2.approx.ftz.f32", 1), 1: ("ex2.approx.f16x2", 2), 2: ("ex2.approx.ftz.bf16x2", 2)}


def sm_clock() -> float:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return float(out.split()[0])


def main():
    mod = cupy.RawModule(code=SOURCE, options=("-arch=sm_90a",),
                         name_expressions=[f"bench<{m}>" for m in MODES])
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    out = cupy.zeros(1, cupy.float32)
    iters, threads, blocks = 4096, 512, 4 * sms
    for m, (name, per) in MODES.items():
        fn = mod.get_function(f"bench<{m}>")
        fn((blocks,), (threads,), (out, np.int32(16)))
        times, clocks = [], []
        for _ in range(5):
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            fn((blocks,), (threads,), (out, np.int32(iters)))
            b.record()
            b.synchronize()
            times.append(cupy.cuda.get_elapsed_time(a, b) * 1e-3)
            clocks.append(sm_clock())
        t = float(np.median(times))
        values = blocks * threads * iters * 8 * per
        mhz = float(np.median(clocks))
        print(f"{name:24} {t * 1e3:8.3f} ms  {values / t / 1e12:6.2f} T values/s  "
              f"{values / t / sms / (mhz * 1e6):5.2f} a clock an SM (at {mhz:.0f} MHz)", flush=True)


if __name__ == "__main__":
    main()
