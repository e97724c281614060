"""Lab: P_ij through shared memory in the Hopper FP8 forward (kernels/hopper/flash_wgmma.cu,
P_SMEM = 1), and with it key tiles of 256 at d = 128. P_ij leaves the S accumulators as e4m3
words already in stmatrix's fragment order (eight stmatrix.x4 a thread a 256-key tile), lands
in one buffer a consumer warpgroup laid out as Q_i (K-major, 128-key slabs, the 128-byte
swizzle), and P V becomes an SS wgmma after a proxy fence and the warpgroup's named barrier.
P then holds no registers across the softmax: at 128 x 256, S 128 + O 64 fit the consumers'
240 (nvcc 13.0: no spills, no serialisation; the traced build spills 100 bytes), where P in
registers (S 128 + O 64 + P 32) spilled 144 bytes and serialised every wgmma. The switch, the
stmatrix helper, the barrier id and the registry's (128, 128, 256) shape are in
patches/fp8_p_smem.diff (`git apply` it onto commit 4f4dec1 first; from c597d17 on the
product has it, and its launcher sets P_SMEM at 128 x 256); this script adds P's buffers to the
shared memory of each build the launcher does not count them for. Each build is checked as lab/kv_stages.py checks it
(bytes, trace and output against the emulation at its block_k, output against float64), then
timed alternately (median of 30, the better of two rounds), d = 128, non-causal, B·H·N = 32k
tokens x 8 heads.
--switches: the 256-key build beside itself with the launcher's other switches flipped (the
softmax fence off, the float tile max, turns), each alone. --sync: the launcher's 128 x 256
with the warp's own __syncwarp in place of the warpgroup's barrier (P_WG_BARRIER=0: a warp's
part of the SS product reads only its own 16 rows of P_ij), and P stored before the O rescale
(P_FIRST=1), each alone and together; the two switches are in patches/fp8_p_sync.diff (`git
apply` it onto commit c7dc2e3 first).
Run on an H200, 2026-11-29 08:38 UTC: the warp's sync 0.2-1.3% slower, P first level; not kept.
Run on a Hopper GPU: python3 lab/fp8_p_smem.py [--switches | --sync | --epilogue]"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402

BUILDS = {
    "f16": (False, 128, {}),
    "fp8 192 (launcher)": (True, 192, {}),
    "fp8 192, P smem": (True, 192, {"P_SMEM": 1}),
    "fp8 256, P smem": (True, 256, {"P_SMEM": 1}),
    "fp8 192 again": (True, 192, {}),
}
SWITCHES = {
    "fp8 256, P smem": (True, 256, {"P_SMEM": 1}),
    "no softmax fence": (True, 256, {"P_SMEM": 1, "SOFTMAX_FENCE": 0}),
    "float tile max": (True, 256, {"P_SMEM": 1, "TILE_MAX_BITS": 0}),
    "turns": (True, 256, {"P_SMEM": 1, "PINGPONG": 1}),
    "fp8 256, P smem again": (True, 256, {"P_SMEM": 1}),
}
# --sync: how P_ij's stores meet the product that reads them, on the launcher's 128 x 256.
SYNC = {
    "fp8 256 (launcher)": (True, 256, {}),
    "syncwarp": (True, 256, {"P_WG_BARRIER": 0}),
    "P first": (True, 256, {"P_FIRST": 1}),
    "syncwarp, P first": (True, 256, {"P_WG_BARRIER": 0, "P_FIRST": 1}),
    "fp8 256 again": (True, 256, {}),
}
# --epilogue: O_i through the P buffer (O_THROUGH_P=1, patches/fp8_o_through_p.diff: each
# warp's 16 rows stored with stmatrix, read back two rows a load, written with 16-byte stores;
# no quad transposes), its read-back loop unrolled 8 (92 bytes of spills) or 1 (4 bytes).
# `git apply` the patch onto commit 2dd580e first. Run on an H200, 2026-11-29 08:46 UTC:
# 2.5-6% slower than the launcher's build at 2k-16k; not kept.
EPILOGUE = {
    "fp8 256 (launcher)": (True, 256, {}),
    "O through P": (True, 256, {"O_THROUGH_P": 1}),
    "O through P, unroll 1": (True, 256, {"O_THROUGH_P": 1, "OUT_UNROLL": 1}),
    "fp8 256 again": (True, 256, {}),
}
P_SLAB = 64 * 128            # bytes of one 128-key slab of a consumer's P_ij (the kernel's)


def use(name):
    """kv_stages.use, plus the two consumers' P_ij buffers where the build has P_SMEM (and
    the switch in the quantize kernel's compile too: one module, whose static_asserts take
    block_k 256 at d = 128 only with P_SMEM)."""
    from engine.gpu.launchers import core
    L, undo = plain_use(name)
    _, bk, defs, *_ = BUILDS[name]
    if defs.get("P_SMEM"):
        inner, inner_q = L.build, L.quantize_build

        def quantize_build(cfg):
            b = inner_q(cfg)
            return core.Build(b.source, b.function, (*b.options, "-DP_SMEM=1"), b.threads,
                              b.smem)
        L.quantize_build = quantize_build

        def build(cfg, trace):
            from engine.model.iomodel import p_through_smem
            b = inner(cfg, trace)
            extra = 0 if p_through_smem(cfg) else 2 * -(-bk // 128) * P_SLAB
            return core.Build(b.source, b.function, b.options, b.threads, b.smem + extra)
        L.build = build

        def undo_both():
            undo()
            L.quantize_build = inner_q
        return L, undo_both
    return L, undo


plain_use = kv_stages.use


def main():
    global BUILDS
    if "--switches" in sys.argv:
        BUILDS = SWITCHES
    if "--sync" in sys.argv:
        BUILDS = SYNC
    if "--epilogue" in sys.argv:
        BUILDS = EPILOGUE
    kv_stages.BUILDS = BUILDS
    kv_stages.use = use
    kv_stages.SEQS = (2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
