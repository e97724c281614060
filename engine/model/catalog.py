"""Which flash kernel takes which config: the one catalog that dispatch, error messages, the
sidebar and the tests quote, over the rows of the kernel registry (engine.model.registry).
Pure Python (no CuPy), so the app reads it on every machine.

kernel="teaching" takes any head_dim, tile size and dtype whose tiles fit the GPU's shared
memory (engine.model.iomodel.smem_budget). kernel="tensorcore" names two builds: the mma.sync kernel
(kernels/ampere/flash_tensorcore.cu, any GPU of compute capability 8.0 or later) and, on Hopper
(compute capability 9.x), the warpgroup-MMA kernel (kernels/hopper/flash_wgmma.cu) for its shapes.
Its backward pass likewise: kernels/ampere/flash_backward_mma.cu everywhere and, on Hopper for its
shapes, kernels/hopper/flash_backward_wgmma.cu. An FP8 config (dtype float8_e4m3, forward only)
has one build, the FP8 wgmma kernel (registry "wgmma fp8", Hopper only), whatever kernel= says.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import AttentionConfig, ConfigError
from .registry import BY_KEY, Kernel, builds, fp8_builds

# The tensor-core builds are rows of the kernel registry (engine.model.registry): their
# sources, dtypes, shapes and whether they need Hopper live there.
TensorCoreBuild = Kernel
MMA_SYNC = BY_KEY["mma.sync"]
WGMMA = BY_KEY["wgmma"]
# The 16-bit builds in dispatch order (the first that takes cfg runs); FP8's apart.
FP8_BUILDS = fp8_builds()
FP8_WGMMA = BY_KEY["wgmma fp8"]
TENSORCORE_BUILDS = tuple(b for b in builds("tensorcore") if b not in FP8_BUILDS)
# The backward pass of kernel="tensorcore": the mma.sync build everywhere, the wgmma build on
# Hopper for its shapes.
BACKWARD_MMA = BY_KEY["backward mma.sync"]
BACKWARD_WGMMA = BY_KEY["backward wgmma"]
BACKWARD_BUILDS = builds("tensorcore", "backward")   # dispatch order, as TENSORCORE_BUILDS


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


def fp8_supported_text() -> str:
    """What the FP8 forward takes, in words."""
    return (f"{FP8_WGMMA.text()}, on GPUs of compute capability 9.x (Hopper: FP8 tensor "
            f"cores); backend='numpy' runs its emulation at any tile size")


def fp8_build(cfg: AttentionConfig, hopper: bool) -> TensorCoreBuild:
    """The build that runs an FP8 config on a GPU (hopper: compute capability 9.x);
    ConfigError naming what it takes otherwise."""
    for build in FP8_BUILDS:
        if build.takes(cfg) and (hopper or not build.hopper_only):
            return build
    if FP8_WGMMA.takes(cfg):
        raise ConfigError(f"The FP8 kernel runs on GPUs of compute capability 9.x only (FP8 "
                          f"tensor cores, warpgroup MMA); backend='numpy' runs its emulation. "
                          f"It supports {fp8_supported_text()}.")
    raise _refusal(cfg, FP8_WGMMA, "FP8 kernel", fp8_supported_text())


def tensorcore_build(cfg: AttentionConfig, hopper: bool) -> TensorCoreBuild:
    """The build that runs cfg with kernel="tensorcore" (hopper: the GPU is compute
    capability 9.x; an FP8 config: fp8_build); ConfigError with the supported list when none
    takes it."""
    if cfg.is_fp8:
        return fp8_build(cfg, hopper)
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
    """The Flash-Decoding kernel (registry row "decode", kernels/decode/flash_decode.cu): one block
    per (split, KV head, sequence), the last of each (KV head, sequence) to finish merging the
    splits, in one launch."""

    name: str
    source: str
    function: str
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]

    def text(self) -> str:
        return (f"dtype {', '.join(self.dtypes)}; head_dim {', '.join(map(str, self.head_dims))}"
                f"; any num_splits, kv_heads and page size that DecodeConfig allows")


_DECODE = BY_KEY["decode"]
DECODE = DecodeBuild(_DECODE.key, _DECODE.source, _DECODE.function, _DECODE.dtypes,
                     _DECODE.head_dims)


def decode_build(cfg) -> DecodeBuild:
    """The decode build for a DecodeConfig; ConfigError naming what it takes otherwise."""
    if cfg.dtype in DECODE.dtypes and cfg.head_dim in DECODE.head_dims:
        return DECODE
    raise ConfigError(f"The Flash-Decoding kernel does not take dtype={cfg.dtype}, head_dim="
                      f"{cfg.head_dim}. It supports {DECODE.text()}.")
