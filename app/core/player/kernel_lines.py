"""Which lines of a teaching kernel's CUDA source each phase of a loop animation runs.

The source marks them itself: a `// [phase <name>]` line opens each phase, and the phase is the
paragraph that line opens (down to the next blank line). Reading the marks, rather than keeping
line numbers here, keeps the highlight on the right lines when the source changes;
tests/test_player.py checks that every phase each animation names is marked in its kernel."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from engine.model import registry

KERNEL_DIR = Path(__file__).resolve().parents[3] / "kernels"
MARK = re.compile(r"^\s*//\s*\[phase\s+(\w+)\]\s*$")

# phase -> its name on screen, in the order a loop step runs them
PHASES = {
    "load_q": "load Q_i (O_i = 0, m_i = -inf, l_i = 0)",
    "load_kv": "load K_j, V_j",
    "scores": "S_ij = Q_i K_jᵀ",
    "softmax": "row max m_i, rescale α = exp(m_old − m_new), row sum l_i",
    "pv": "O_i += P̃_ij V_j",
    "write_o": "write O_i = O_i / l_i and the log-sum-exp",
}

# The backward teaching kernel's phases (one thread block per key tile j, query tiles i
# streaming past), in the order a step of its loop runs them
BACKWARD_PHASES = {
    "load_kv": "load K_j, V_j (dK_j = dV_j = 0 on chip)",
    "load_q": "load Q_i, dO_i, lse_i, D_i",
    "rebuild_p": "P_ij = exp(S_ij − lse_i), dS_ij = P_ij ∘ (dO_i V_jᵀ − D_i)",
    "dkv": "dV_j += P_ijᵀ dO_i, dK_j += scale · dS_ijᵀ Q_i",
    "dq": "dQ_i += scale · dS_ij K_j (atomicAdd in HBM)",
    "write_dkv": "write dK_j, dV_j",
}

# the registry's kernel -> the phases its animation names (and their names on screen)
PHASES_OF = {"teaching": PHASES, "backward teaching": BACKWARD_PHASES}


@dataclass(frozen=True)
class KernelLines:
    path: str                              # under the repository: kernels/<role>/<name>.cu
    lines: tuple[str, ...]                 # the source, one entry a line
    phases: dict[str, tuple[int, int]]     # phase -> (first, last) line, 1-based, inclusive


def phase_lines(text: str) -> dict[str, tuple[int, int]]:
    """phase -> (first, last) 1-based line of the paragraph its `// [phase name]` line opens;
    ValueError for a phase marked twice."""
    lines = text.splitlines()
    found: dict[str, tuple[int, int]] = {}
    for n, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        if m.group(1) in found:
            raise ValueError(f"phase {m.group(1)!r} is marked twice (lines "
                             f"{found[m.group(1)][0]} and {n + 1})")
        last = n
        while last + 1 < len(lines) and lines[last + 1].strip():
            last += 1
        found[m.group(1)] = (n + 1, last + 1)
    return found


@functools.lru_cache(maxsize=8)
def kernel_lines(key: str = "teaching", directory: Path = KERNEL_DIR) -> KernelLines:
    """The source of the registry's kernel `key` and its phases' lines (read once per
    process)."""
    source = registry.kernel(key).source
    text = (directory / source).read_text()
    return KernelLines(path=f"kernels/{source}", lines=tuple(text.splitlines()),
                       phases=phase_lines(text))
