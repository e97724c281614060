"""Which flash kernel takes which config: the one catalog that dispatch, error messages, the
sidebar and the tests quote. Pure Python (no CuPy), so the app reads it on every machine.

kernel="teaching" takes any head_dim, tile size and dtype whose tiles fit the GPU's shared
memory (engine.model.iomodel.smem_budget). kernel="tensorcore" names two builds: the mma.sync kernel
(kernels/flash_tensorcore.cu, any GPU of compute capability 8.0 or later) and, on Hopper
(compute capability 9.x), the warpgroup-MMA kernel (kernels/flash_wgmma.cu) for its shapes.
Its backward pass likewise: kernels/flash_backward_mma.cu everywhere and, on Hopper for its
shapes, kernels/flash_backward_wgmma.cu.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import AttentionConfig, ConfigError


@dataclass(frozen=True)
class TensorCoreBuild:
    name: str            # "mma.sync" or "wgmma"
    source: str          # kernels/<source>
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, int, int], ...]    # (head_dim, block_q, block_k)
    hopper_only: bool

    def takes(self, cfg: AttentionConfig) -> bool:
        return cfg.dtype in self.dtypes and (cfg.head_dim, cfg.block_q, cfg.block_k) in self.shapes

    def shapes_text(self) -> str:
        by_d = {}
        for d, bq, bk in self.shapes:
            by_d.setdefault(d, []).append(f"{bq}×{bk}")
        return "; ".join(f"head_dim {d} with block_q×block_k {', '.join(p)}"
                         for d, p in sorted(by_d.items()))

    def text(self) -> str:
        return f"dtype {' or '.join(self.dtypes)}: {self.shapes_text()}"


# Four warps per block, each owning block_q / 4 query rows; every build keeps its values in
# registers (no spills), traced or not (benchmarks/NOTES.md has the ptxas figures).
MMA_SYNC = TensorCoreBuild(
    "mma.sync", "flash_tensorcore.cu", ("float16", "bfloat16"),
    ((64, 64, 32), (64, 64, 64), (64, 64, 128), (64, 128, 32), (64, 128, 64),
     (128, 64, 32), (128, 64, 64), (128, 128, 32)), hopper_only=False)
# block_q / 64 consumer warpgroups of 64 query rows each and one producer warpgroup; block_k
# is the N of the S = Q Kᵀ wgmma.
WGMMA = TensorCoreBuild(
    "wgmma", "flash_wgmma.cu", ("float16", "bfloat16"),
    ((64, 128, 128), (128, 128, 64), (128, 128, 128)), hopper_only=True)
TENSORCORE_BUILDS = (WGMMA, MMA_SYNC)       # dispatch order: the first that takes cfg runs

# The backward pass of kernel="tensorcore" (kernels/flash_backward_mma.cu): one block per key
# tile of block_k rows, block_k / 16 warps of 16 keys each, query tiles of block_q rows; the
# shapes whose dK_j, dV_j, S_ijᵀ and dP_ijᵀ fit in registers without spills.
BACKWARD_MMA = TensorCoreBuild(
    "backward mma.sync", "flash_backward_mma.cu", ("float16", "bfloat16"),
    ((64, 64, 64), (64, 64, 128), (64, 128, 128), (128, 64, 128)), hopper_only=False)
# Its Hopper build (kernels/flash_backward_wgmma.cu): one producer warpgroup (bulk tensor
# copies of Q_i, dO_i) and block_k / 64 consumer warpgroups of 64 keys each, the products on
# warpgroup MMA; the shapes whose dK_j, dV_j, S_ijᵀ and dP_ijᵀ fit a consumer's registers.
BACKWARD_WGMMA = TensorCoreBuild(
    "backward wgmma", "flash_backward_wgmma.cu", ("float16", "bfloat16"),
    ((64, 128, 128), (128, 64, 128)), hopper_only=True)
BACKWARD_BUILDS = (BACKWARD_WGMMA, BACKWARD_MMA)   # dispatch order, as TENSORCORE_BUILDS


def supported_text() -> str:
    """What kernel="tensorcore" takes, in words (every error message and the sidebar)."""
    return (f"{MMA_SYNC.text()}; on GPUs of compute capability 9.x also, in "
            f"{' or '.join(WGMMA.dtypes)}, {WGMMA.shapes_text()} (wgmma kernel)")


def _refusal(cfg: AttentionConfig, build: TensorCoreBuild, name: str,
             supported: str) -> ConfigError:
    """The error naming what of cfg `build` does not take, and everything that runs."""
    problems = []
    if cfg.dtype not in build.dtypes:
        problems.append(f"dtype={cfg.dtype}")
    if (cfg.head_dim, cfg.block_q, cfg.block_k) not in build.shapes:
        problems.append(f"head_dim={cfg.head_dim}, block_q={cfg.block_q}, block_k={cfg.block_k}")
    return ConfigError(f"The {name} does not take {'; '.join(problems)}. It supports {supported}.")


def tensorcore_build(cfg: AttentionConfig, hopper: bool) -> TensorCoreBuild:
    """The build that runs cfg with kernel="tensorcore" (hopper: the GPU is compute
    capability 9.x); ConfigError with the supported list when none takes it."""
    for build in TENSORCORE_BUILDS:
        if build.takes(cfg) and (hopper or not build.hopper_only):
            return build
    raise _refusal(cfg, MMA_SYNC, "tensor-core kernel", supported_text())


def backward_supported_text() -> str:
    """What the tensor-core backward takes, in words (its error messages)."""
    return (f"{BACKWARD_MMA.text()} (the mma.sync kernel; on GPUs of compute capability 9.x "
            f"the wgmma kernel runs, in {' or '.join(BACKWARD_WGMMA.dtypes)}, "
            f"{BACKWARD_WGMMA.shapes_text()})")


def backward_build(cfg: AttentionConfig, hopper: bool) -> TensorCoreBuild:
    """The build of the tensor-core backward pass for cfg (hopper: the GPU is compute
    capability 9.x); ConfigError with the supported list when none takes cfg."""
    for build in BACKWARD_BUILDS:
        if build.takes(cfg) and (hopper or not build.hopper_only):
            return build
    raise _refusal(cfg, BACKWARD_MMA, "tensor-core backward kernel", backward_supported_text())


def forward_for_backward(cfg: AttentionConfig, hopper: bool) -> AttentionConfig:
    """The config whose tensor-core forward makes O and lse for the tensor-core backward of
    cfg: cfg itself when the forward takes its tiles, else the same problem with the first
    forward tiles catalogued for its head_dim and dtype (O and lse do not depend on the
    tiles, only their rounding does)."""
    if tensorcore_takes(cfg, hopper):
        return cfg
    for build in TENSORCORE_BUILDS:
        if cfg.dtype in build.dtypes and (hopper or not build.hopper_only):
            for d, bq, bk in build.shapes:
                if d == cfg.head_dim:
                    return cfg.with_(block_q=bq, block_k=bk)
    raise ConfigError(f"No tensor-core forward takes head_dim={cfg.head_dim}, dtype={cfg.dtype}."
                      f" It supports {supported_text()}.")


def tensorcore_takes(cfg: AttentionConfig, hopper: bool) -> bool:
    try:
        tensorcore_build(cfg, hopper)
    except ConfigError:
        return False
    return True


@dataclass(frozen=True)
class DecodeBuild:
    """The Flash-Decoding kernel (kernels/flash_decode.cu): one block per (split, KV head,
    sequence), the last of each (KV head, sequence) to finish merging the splits, in one
    launch; compiled per head_dim, dtype, query rows per block, query tokens and page size."""

    name: str
    source: str
    function: str
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]

    def text(self) -> str:
        return (f"dtype {', '.join(self.dtypes)}; head_dim {', '.join(map(str, self.head_dims))}"
                f"; any num_splits, kv_heads and page size that DecodeConfig allows")


DECODE = DecodeBuild("flash-decoding", "flash_decode.cu", "flash_decode_split",
                     ("float32", "float16", "bfloat16"), (16, 32, 64, 128, 256))


def decode_build(cfg) -> DecodeBuild:
    """The decode build for a DecodeConfig; ConfigError naming what it takes otherwise."""
    if cfg.dtype in DECODE.dtypes and cfg.head_dim in DECODE.head_dims:
        return DECODE
    raise ConfigError(f"The Flash-Decoding kernel does not take dtype={cfg.dtype}, head_dim="
                      f"{cfg.head_dim}. It supports {DECODE.text()}.")
