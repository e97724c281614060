"""Lab: P's e4m3 bytes packed inside the exponentials' issue gaps (kernels/hopper/flash_wgmma.cu,
PACK_EARLY = 1, FP8 only). In the kernel's SASS (nvcc 13.0, FP8 128 x 192), a consumer's 96
MUFU.EX2 a tile go out one every 8 cycles (the special-function unit's rate), each followed by
one FADD of the row sums and 7 cycles of stall, and the 48 F2FP that pack P run after the
softmax fence and the wait for P V, beside the 64 FMUL of the O rescale, on the path to the
next products. P cannot be packed earlier in place: the P V in flight still reads P's
registers. The switch packs into P_early, a second set of 24 registers, before the fence
(ptxas then places the F2FP among the exponentials), and moves it into P after the wait (24
MOV in place of 48 F2FP on that path). A use of P after the wait keeps P live until then, so
that ptxas gives P_early registers of its own (without it, ptxas reused P's registers and
serialised every wgmma). SASS: no spills, no serialisation in the untraced build (the traced
build serialises; only the untraced one is timed).

Each build is checked as lab/kv_stages.py checks it (the emulation and float64 at block_k
192, traced and not), then timed alternately (median of 30, the better of two rounds),
non-causal, d = 128, B·H·N = 32k tokens x 8 heads. The switch is in
patches/fp8_pack_early.diff: `git apply` it onto commit cf0bc4c first.
Run on a Hopper GPU: python3 lab/fp8_pack_early.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    kv_stages.BUILDS = {
        "f16": (False, 128, {}),
        "fp8 192": (True, 192, {}),
        "fp8 192 pack early": (True, 192, {"PACK_EARLY": 1}),
        "fp8 192 again": (True, 192, {}),
        "fp8 192 pack early again": (True, 192, {"PACK_EARLY": 1}),
        "f16 again": (False, 128, {}),
    }
    kv_stages.SEQS = (2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
