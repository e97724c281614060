"""Memory and IO model: shared memory per thread block, occupancy by shared memory, HBM
bytes moved by naive and flash attention for an exact config, and peak device memory.

Every byte count of the project lives here: shared memory per kernel layout, HBM traffic,
peak device memory, the trace's size and the bytes a run must move at least (for the
timing ceilings); `format_bytes` is the one way they are written for people.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import AttentionConfig
from .devices import GpuProfile

RESERVED_SMEM_PER_BLOCK = 1024  # the CUDA runtime reserves 1 KB per block (cc 8.0 and later)
SCHEDULE_RECORD_BYTES = 4 + 8 + 8   # per thread block: SM id (int32), start and end (uint64)


@dataclass(frozen=True)
class SmemBudget:
    parts: dict          # tile name -> bytes
    total: int
    limit: int           # per-block opt-in limit of the GPU
    fits: bool
    blocks_per_sm: int   # resident blocks per SM allowed by shared memory alone


def smem_parts(cfg: AttentionConfig, kernel: str = "teaching") -> dict:
    """Dynamic shared memory of one thread block, tile by tile, as each kernel lays it out.

    "teaching": Q_i, K_j, V_j in the input dtype, then S_ij/P_ij, O_i, m_i, l_i in float32.
    "mma.sync": Q_i and two buffers (cp.async double buffering) each of K_j and V_j, 16-bit;
    S_ij, O_i, m_i and l_i live in registers.
    "wgmma": the same tiles in the 128-byte swizzle, plus the mbarriers (128 bytes) and up
    to 1024 bytes to align the swizzle pattern.
    """
    Br, Bc, d, e = cfg.block_q, cfg.block_k, cfg.head_dim, cfg.itemsize
    if kernel == "teaching":
        return {"Q_i": Br * d * e, "K_j": Bc * d * e, "V_j": Bc * d * e,
                "S_ij": Br * Bc * 4, "O_i": Br * d * 4, "m_i": Br * 4, "l_i": Br * 4}
    tiles = {"Q_i": Br * d * 2, "K_j (2 buffers)": 2 * Bc * d * 2,
             "V_j (2 buffers)": 2 * Bc * d * 2}
    if kernel == "mma.sync":
        return tiles
    if kernel == "wgmma":
        return {**tiles, "mbarriers": 128, "swizzle alignment": 1024}
    raise ValueError(f"kernel must be teaching, mma.sync or wgmma; got {kernel!r}.")


def smem_bytes(cfg: AttentionConfig, kernel: str = "teaching") -> int:
    """Dynamic shared memory of one thread block of `kernel` (see smem_parts)."""
    return sum(smem_parts(cfg, kernel).values())


def smem_budget(cfg: AttentionConfig, gpu: GpuProfile, kernel: str = "teaching") -> SmemBudget:
    parts = smem_parts(cfg, kernel)
    total = sum(parts.values())
    fits = total <= gpu.smem_per_block_optin
    per_block = total + RESERVED_SMEM_PER_BLOCK
    blocks = min(gpu.smem_per_sm // per_block, gpu.max_blocks_per_sm) if fits else 0
    return SmemBudget(parts=parts, total=total, limit=gpu.smem_per_block_optin, fits=fits,
                      blocks_per_sm=int(blocks))


def largest_fitting_tiles(cfg: AttentionConfig, gpu: GpuProfile) -> list[tuple[int, int]]:
    """(block_q, block_k) pairs from the allowed sizes that fit, largest area first."""
    from .config import BLOCK_SIZES
    fit = [(bq, bk) for bq in BLOCK_SIZES for bk in BLOCK_SIZES
           if smem_budget(cfg.with_(block_q=bq, block_k=bk), gpu).fits]
    fit.sort(key=lambda t: (-t[0] * t[1], -t[0]))
    best = fit[0][0] * fit[0][1] if fit else 0
    return [t for t in fit if t[0] * t[1] == best]


def _processed(cfg: AttentionConfig) -> np.ndarray:
    from .cpu.forward import processed_tiles
    return processed_tiles(cfg)


@dataclass(frozen=True)
class HbmTraffic:
    read: int
    written: int
    parts: dict          # what -> bytes

    @property
    def total(self) -> int:
        return self.read + self.written


def naive_hbm(cfg: AttentionConfig) -> HbmTraffic:
    """Naive attention's compulsory traffic: S and P (input dtype) go through HBM.

    QKᵀ reads Q, K and writes S; the row softmax reads S, writes P and the row lse (float32);
    PV reads P, V and writes O. (Re-reads inside the matmuls are not counted.)
    """
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    qo, kv, s = bh * nq * d * e, bh * nk * d * e, bh * nq * nk * e
    lse = bh * nq * 4
    parts = {"read Q": qo, "read K": kv, "write S": s, "read S": s, "write P": s,
             "write lse": lse, "read P": s, "read V": kv, "write O": qo}
    read = qo + 2 * kv + 2 * s
    return HbmTraffic(read=read, written=2 * s + qo + lse, parts=parts)


def flash_hbm(cfg: AttentionConfig, trace: bool = False) -> HbmTraffic:
    """FA2 order: each query tile reads Q_i once and writes O_i and its lse once, and reads
    K_j, V_j for every key tile it processes (so K and V are read Tr times when not causal)."""
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    proc = _processed(cfg)
    key_rows = np.minimum(np.arange(1, cfg.Tc + 1) * cfg.block_k, cfg.seq_k) - \
        np.arange(cfg.Tc) * cfg.block_k
    kv_rows = int((proc * key_rows[None, :]).sum())      # key rows loaded, over all (i, j)
    qo = bh * cfg.seq_q * d * e
    kv = bh * kv_rows * d * e
    lse = bh * cfg.seq_q * 4
    parts = {"read Q": qo, "read K": kv, "read V": kv, "write O": qo, "write lse": lse}
    written = qo + lse
    if trace:
        tb = trace_array_bytes(cfg)
        parts["write trace"] = tb
        written += tb
    return HbmTraffic(read=qo + 2 * kv, written=written, parts=parts)


def paper_theta_bytes(cfg: AttentionConfig, gpu: GpuProfile) -> dict:
    """The paper's asymptotic HBM accesses, in bytes: Θ(N·d + N²) naive and Θ(N²·d²/M) flash
    (M = shared memory per SM in elements). Orders of magnitude, constants dropped."""
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    M = gpu.smem_per_sm / e
    return {"naive": bh * (nq * d + nq * nk) * e,
            "flash": bh * nq * nk * d * d / M * e,
            "M_elements": M}


def compulsory_bytes(cfg: AttentionConfig, algorithm: str, trace: bool = False) -> int:
    """Bytes any implementation must move through device memory (the timing ceilings' check):
    naive reads and writes S and P (naive_hbm); flash reads Q, K, V once and writes O and
    lse, and with the trace also the four trace arrays and the per-block schedule records."""
    if algorithm == "naive":
        return naive_hbm(cfg).total
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    total = bh * (2 * cfg.seq_q + 2 * cfg.seq_k) * d * e + 4 * bh * cfg.seq_q
    if trace:
        total += trace_array_bytes(cfg) + SCHEDULE_RECORD_BYTES * bh * cfg.Tr
    return total


def qkv_elements(cfg: AttentionConfig) -> int:
    return cfg.bh * (cfg.seq_q + 2 * cfg.seq_k) * cfg.head_dim


def trace_array_bytes(cfg: AttentionConfig) -> int:
    """The four float32 trace arrays, each (B, H, seq_q, Tc), as a kernel writes them."""
    return 4 * 4 * cfg.bh * cfg.seq_q * cfg.Tc


def trace_bytes(cfg: AttentionConfig) -> int:
    """A traced result: the four arrays plus the (Tr, Tc) processed map."""
    return trace_array_bytes(cfg) + cfg.Tr * cfg.Tc


def naive_bytes(cfg: AttentionConfig) -> int:
    """S and P, each B·H·seq_q·seq_k float32 (the CPU emulation's precision)."""
    return 2 * 4 * cfg.bh * cfg.seq_q * cfg.seq_k


def peak_memory(cfg: AttentionConfig, algorithm: str, trace: bool = False) -> int:
    """Device bytes held at the peak: inputs, output, lse, and S and P (naive) or the trace."""
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    base = bh * (2 * cfg.seq_q + 2 * cfg.seq_k) * d * e + bh * cfg.seq_q * 4
    if algorithm == "naive":
        return base + 2 * bh * cfg.seq_q * cfg.seq_k * e
    if trace:
        base += trace_bytes(cfg)
    return base


def format_bytes(n: float) -> str:
    """Bytes for people, in decimal units: 512 B, 4.1 kB, 268 MB, 1.07 GB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"
