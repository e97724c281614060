"""DecodeConfig: one decode step (a few query tokens at the end of a KV cache), validated,
and what follows from it alone: the split of the cache, the automatic split count, the
paged layout and its block table.

Every allowed value of a decode step lives here and every error message quotes it. The
byte formulas are in engine.model.iomodel (decode_*), the server limits in engine.model.limits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from .config import (DTYPES, FORWARD_ONLY_DTYPES, HEAD_DIMS, MAX_SEED, ConfigError, _check_choice,
                     _is_int, _is_real, forward_only_message)

MAX_DECODE_QUERIES = 4         # query tokens per step (speculative decoding checks a few)
MAX_GROUP_ROWS = 32            # query rows one thread block holds: heads/kv_heads × seq_q
MAX_SPLITS = 128
MAX_DECODE_SEQ = 1 << 20
MAX_DECODE_BATCH_HEADS = 65535   # so that kv_heads and batch fit gridDim.y and .z
PAGE_SIZES = (8, 16, 32, 64, 128, 256)
AUTO = "auto"
# The "auto" rule: the largest power of two of splits whose blocks (batch · kv_heads · splits)
# are at most AUTO_BLOCKS_PER_SM per SM of the device profile, and no split shorter than
# MIN_SPLIT_KEYS keys (its partial O_s, m_s, l_s and the merge then cost little beside the
# keys it reads). Measured on the H200 (lab/NOTES.md, "Flash-Decoding (H200)"): with
# the merge fused into the split kernel (Version 4), two blocks per SM at a power of two was
# the fastest count measured in 10 of the 12 (batch, seq_k) cells of the decode sweep and
# within 0.2% in the other two, up to 8% faster than a full wave of BLOCKS_PER_SM (the rule
# before); a wave and a bit (1.3 waves) was the worst count, up to 20% slower.
# BLOCKS_PER_SM is what fits an H200 SM at the decode targets' shape (d 128, 16 bits: 75 KB of
# shared memory per block).
BLOCKS_PER_SM = 3
AUTO_BLOCKS_PER_SM = 2
MIN_SPLIT_KEYS = 256
# Key tiles of K_j and V_j one block keeps in its cp.async ring: 2 (double buffering). Three
# and four were slower on the H200 (fewer blocks fit an SM; lab/NOTES.md).
DECODE_STAGES = 2


def decode_block_k(head_dim: int) -> int:
    """Keys per tile inside a split (the kernel's Bc, and the emulation's): 64, or 32 at
    head_dim 256 so that the double-buffered K_j and V_j tiles keep two blocks on an SM."""
    return 32 if head_dim > 128 else 64


def decode_warp_keys(head_dim: int, threads: int = 128) -> int:
    """Keys of each tile one warp owns (KW in the kernel): the tile's decode_block_k keys
    shared by the block's warps; the copy engine's box of a warp is this many rows."""
    return decode_block_k(head_dim) // (threads // 32)


def decode_tile_copies(cfg: "DecodeConfig", num_splits: int = 1) -> bool:
    """Whether the copy-engine build (decode_tma) brings each key tile whole, thread 0 copying
    decode_block_k rows a box onto one barrier a stage (the kernel's TILE_COPIES), rather than
    each warp its decode_warp_keys rows: on a contiguous cache, or on pages of whole tiles
    with every split starting on a tile, so that no tile spans two pages."""
    block_k = decode_block_k(cfg.head_dim)
    if not cfg.paged:
        return True
    return cfg.page_size % block_k == 0 and (
        num_splits == 1 or split_length(cfg.seq_k, num_splits) % block_k == 0)


# The copy engine's build only where the grid gives the SMs at least this many blocks on
# average. Measured on the H200 (lab/NOTES.md, "Decoding: the copy engine" and "Decoding:
# where the copy engine pays"), both builds in one run: at the auto counts (two blocks an SM)
# it was level with the cp.async build or up to 4.4% faster; with at most one block an SM
# (8-128 blocks), where each warp is alone on its scheduler and waits out every tile, its
# steps took 20-27% longer than the cp.async build's. Between one and two blocks an SM was
# not measured.
TMA_MIN_BLOCKS_PER_SM = 1.5


def decode_tma(cfg: "DecodeConfig", compute_capability: str, threads: int = 128,
               num_splits: int | None = None, sms: int | None = None) -> bool:
    """Whether the split kernel's K and V rows come by the copy engine (its TMA_COPIES build)
    on a GPU of this compute capability: sm_90 and later, a 16-bit cache, head_dim a multiple
    of 64 (whole 128-byte boxes), and a contiguous cache, or pages of whole groups of a warp's
    keys (decode_block_k / warps) with every split starting on such a group, so that no warp's
    box of keys spans two pages; and, given the split count and the GPU's SMs, a grid of at
    least TMA_MIN_BLOCKS_PER_SM blocks an SM (num_splits, sms None: that part unchecked)."""
    major = int(str(compute_capability).split(".")[0])
    warp_keys = decode_warp_keys(cfg.head_dim, threads)
    if major < 9 or cfg.itemsize != 2 or cfg.head_dim % 64:
        return False
    if (num_splits is not None and sms is not None
            and cfg.batch * cfg.kv_heads * num_splits < TMA_MIN_BLOCKS_PER_SM * sms):
        return False
    if not cfg.paged:
        return True
    aligned = (num_splits is None or num_splits == 1
               or split_length(cfg.seq_k, num_splits) % warp_keys == 0)
    return cfg.page_size % warp_keys == 0 and aligned


def split_length(seq_k: int, num_splits: int) -> int:
    """Keys per split: ceil(seq_k / num_splits); the last split holds the rest (ragged)."""
    return -(-seq_k // num_splits)


def splits_without_empty(seq_k: int, num_splits: int) -> bool:
    """True when every one of num_splits splits of split_length keys holds a key."""
    return (num_splits - 1) * split_length(seq_k, num_splits) < seq_k


def largest_full_split_count(seq_k: int, at_most: int) -> int:
    """The largest split count <= at_most whose splits all hold keys."""
    s = max(1, min(at_most, seq_k))
    while not splits_without_empty(seq_k, s):
        s -= 1
    return s


def auto_splits(batch: int, kv_heads: int, seq_k: int, sms: int) -> int:
    """The rule of num_splits="auto": the largest power of two at most
    AUTO_BLOCKS_PER_SM · SMs / (batch · kv_heads), seq_k / MIN_SPLIT_KEYS and MAX_SPLITS, at
    least 1, lowered to the nearest count with no empty split."""
    fill = AUTO_BLOCKS_PER_SM * sms // (batch * kv_heads)
    longest = max(1, seq_k // MIN_SPLIT_KEYS)
    at_most = max(1, min(fill, longest, MAX_SPLITS))
    return largest_full_split_count(seq_k, 1 << (at_most.bit_length() - 1))


@dataclass(frozen=True)
class DecodeConfig:
    """One decode step: seq_q query tokens per sequence, the last seq_q positions of a cache
    of seq_k keys, attending to the whole cache (causal among themselves); query head h reads
    KV head h // (heads // kv_heads)."""

    batch: int = 1
    heads: int = 32
    kv_heads: int = 8
    seq_q: int = 1
    seq_k: int = 4096
    head_dim: int = 128
    dtype: str = "float16"
    num_splits: int | str = AUTO
    page_size: int | None = None
    scale: float | None = None
    seed: int = 0

    def __post_init__(self):
        for name in ("batch", "heads", "kv_heads", "seq_k"):
            val = getattr(self, name)
            if not _is_int(val) or not 1 <= val <= MAX_DECODE_SEQ:
                raise ConfigError(f"{name} must be a whole number from 1 to {MAX_DECODE_SEQ}; "
                                  f"got {val!r}.")
        if self.batch * self.heads > MAX_DECODE_BATCH_HEADS:
            raise ConfigError(f"batch × heads must be at most {MAX_DECODE_BATCH_HEADS}; got "
                              f"{self.batch * self.heads}.")
        if self.heads % self.kv_heads:
            divisors = [k for k in range(1, self.heads + 1) if self.heads % k == 0]
            raise ConfigError(f"heads must be a multiple of kv_heads (grouped-query attention: "
                              f"each KV head serves heads / kv_heads query heads); got heads="
                              f"{self.heads}, kv_heads={self.kv_heads}. kv_heads may be "
                              f"{', '.join(map(str, divisors))}.")
        if not _is_int(self.seq_q) or not 1 <= self.seq_q <= MAX_DECODE_QUERIES:
            raise ConfigError(f"seq_q (query tokens per step) must be a whole number from 1 to "
                              f"{MAX_DECODE_QUERIES}; got {self.seq_q!r}.")
        if self.seq_q > self.seq_k:
            raise ConfigError(f"seq_q must be at most seq_k (the queries are the cache's last "
                              f"{self.seq_q} positions); got seq_q={self.seq_q}, "
                              f"seq_k={self.seq_k}.")
        if self.rows > MAX_GROUP_ROWS:
            raise ConfigError(f"(heads / kv_heads) × seq_q must be at most {MAX_GROUP_ROWS} (the "
                              f"query rows one thread block holds); got {self.group} × "
                              f"{self.seq_q} = {self.rows}. Use more kv_heads or fewer query "
                              f"tokens.")
        _check_choice("head_dim", self.head_dim, HEAD_DIMS)
        if isinstance(self.dtype, str) and self.dtype in FORWARD_ONLY_DTYPES:
            raise ConfigError(forward_only_message("a decode step", self.dtype))
        _check_choice("dtype", self.dtype, DTYPES)
        if self.num_splits != AUTO:
            if not _is_int(self.num_splits) or not 1 <= self.num_splits <= MAX_SPLITS:
                raise ConfigError(f"num_splits must be 'auto' or a whole number from 1 to "
                                  f"{MAX_SPLITS}; got {self.num_splits!r}.")
            if not splits_without_empty(self.seq_k, self.num_splits):
                best = largest_full_split_count(self.seq_k, self.num_splits)
                raise ConfigError(
                    f"num_splits={self.num_splits} at seq_k={self.seq_k} gives splits of "
                    f"{split_length(self.seq_k, self.num_splits)} keys, so the last ones hold "
                    f"none; every split must hold a key (num_splits={best} is the largest "
                    f"below that does), or use 'auto'.")
        if self.page_size is not None:
            _check_choice("page_size", self.page_size, PAGE_SIZES + (None,))
        if self.scale is not None and (not _is_real(self.scale) or not math.isfinite(self.scale)
                                       or self.scale <= 0):
            raise ConfigError(f"scale must be a finite number > 0, or None for 1/sqrt(head_dim); "
                              f"got {self.scale!r}.")
        if not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"seed must be a whole number from 0 to {MAX_SEED}; got "
                              f"{self.seed!r}.")

    # ---- derived quantities ----------------------------------------------------------
    @property
    def group(self) -> int:
        """Query heads per KV head (1: multi-head attention; heads: multi-query)."""
        return self.heads // self.kv_heads

    @property
    def rows(self) -> int:
        """Query rows sharing one KV head: group × seq_q (row r = head-in-group · seq_q + t)."""
        return self.group * self.seq_q

    @property
    def softmax_scale(self) -> float:
        return float(self.scale) if self.scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def paged(self) -> bool:
        return self.page_size is not None

    @property
    def pages_per_seq(self) -> int:
        """Pages one sequence's cache takes (the last one ragged); 0 when contiguous."""
        return -(-self.seq_k // self.page_size) if self.paged else 0

    @property
    def num_pages(self) -> int:
        """Physical pages in the pool: every sequence's, batch · pages_per_seq."""
        return self.batch * self.pages_per_seq

    @property
    def cache_shape(self) -> tuple[int, ...]:
        """k_cache and v_cache: (batch, kv_heads, seq_k, d) contiguous, or
        (num_pages, kv_heads, page_size, d) paged."""
        if self.paged:
            return (self.num_pages, self.kv_heads, self.page_size, self.head_dim)
        return (self.batch, self.kv_heads, self.seq_k, self.head_dim)

    @property
    def q_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq_q, self.head_dim)

    def splits_on(self, sms: int) -> int:
        """The split count that runs on a GPU of `sms` SMs: num_splits, or the "auto" rule."""
        if self.num_splits == AUTO:
            return auto_splits(self.batch, self.kv_heads, self.seq_k, sms)
        return int(self.num_splits)

    def with_(self, **changes) -> "DecodeConfig":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def split_bounds(seq_k: int, num_splits: int) -> np.ndarray:
    """(num_splits + 1,) int64: split s holds keys [bounds[s], bounds[s + 1])."""
    length = split_length(seq_k, num_splits)
    return np.minimum(np.arange(num_splits + 1, dtype=np.int64) * length, seq_k)


def block_table(cfg: DecodeConfig) -> np.ndarray:
    """(batch, pages_per_seq) int32: the physical page of each sequence's logical page j,
    a permutation of the pool drawn from cfg.seed (its own stream), so consecutive logical
    pages sit in scattered physical pages. Empty (batch, 0) for a contiguous cache."""
    if not cfg.paged:
        return np.zeros((cfg.batch, 0), dtype=np.int32)
    perm = np.random.default_rng([cfg.seed, 2]).permutation(cfg.num_pages)
    return perm.reshape(cfg.batch, cfg.pages_per_seq).astype(np.int32)


def key_positions(cfg: DecodeConfig, table: np.ndarray, keys: np.ndarray):
    """Where keys (positions 0..seq_k-1) of every sequence live in the paged pool:
    (physical page (batch, len(keys)), row in the page (len(keys),))."""
    return table[:, keys // cfg.page_size], keys % cfg.page_size


def visible_until(cfg: DecodeConfig) -> np.ndarray:
    """(seq_q,) the last key each query token sees: token t is position seq_k - seq_q + t
    and sees keys c <= that position (bottom-right causal among the new tokens)."""
    return cfg.seq_k - cfg.seq_q + np.arange(cfg.seq_q)
