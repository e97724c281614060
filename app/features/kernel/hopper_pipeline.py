"""A model of one thread block of the wgmma forward kernel (kernels/hopper/flash_wgmma.cu) in
time: the producer warpgroup's bulk tensor copies (TMA) of Q_i into its buffers and of
K_j, V_j into the ring of STAGES stages, and the consumer warpgroups' products on the tensor
cores and softmax, in the order of the kernel's own waits and arrivals (its mbarriers "full"
and "empty", RingPos in kernels/hopper/pipeline.cuh, and with PINGPONG the turn barriers),
over the runs of a persistent block.

The order of every step is the kernel's; the durations are not measured: one product of
64 query rows × Bc keys × d (S_ij = Q_i K_jᵀ, or O_i += P_ij V_j) takes 1 unit, the rest is
set against it (DURATIONS). One tensor-core queue serves the block's warpgroups in issue
order; one copy engine serves its loads in issue order. Pure Python: no GPU, no NumPy."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

KERNEL = Path(__file__).resolve().parents[3] / "kernels" / "hopper" / "flash_wgmma.cu"

# model time units (a product of 64 × Bc × d on the tensor cores = 1)
DURATIONS = {
    "S": 1.0,          # S_ij = Q_i K_jᵀ, one consumer's 64 rows (wgmma, both operands in smem)
    "PV": 1.0,         # O_i += P_ij V_j (wgmma, P_ij from registers)
    "softmax": 1.4,    # mask, row max, exp2, row sums: exp2 alone takes half as long as
                       # the two products (a 64 × Bc tile of exponentials, d = 128)
    "finish": 0.3,     # rescale O_i and l_i, P_ij to 16-bit fragments
    "epilogue": 1.2,   # O_i / l_i, lse, straight from registers to global memory
    "Q": 0.6,          # a bulk tensor copy of Q_i (128 rows)
    "K": 0.6,          # ... of K_j or V_j (mostly from L2: every query tile of a batch·head
    "V": 0.6,          # reads the same K_j, V_j)
}


@dataclass(frozen=True)
class KernelShape:
    """What the model reads from the kernel's source: the ring's stages, Q_i's buffers and
    the consumer warpgroups (BLOCK_Q / 64)."""
    stages: int
    q_stages: int
    consumers: int


def kernel_shape(text: str | None = None) -> KernelShape:
    """The ring's stages, Q_i's buffers and the consumer warpgroups as flash_wgmma.cu declares
    them by default (its `#define KV_STAGES ...`, `Q_BUFFERS`, `CONSUMERS = Br / 64` and the
    BLOCK_Q it asserts); a launch may ask for other buffers (build_shape)."""
    text = KERNEL.read_text() if text is None else text

    def number(pattern: str) -> int:
        m = re.search(pattern, text)
        if not m:
            raise ValueError(f"{KERNEL.name} no longer matches {pattern!r}")
        return int(m.group(1))

    block_q = number(r"static_assert\(Br == (\d+),")
    per = number(r"constexpr int CONSUMERS = Br / (\d+);")
    return KernelShape(stages=number(r"#define KV_STAGES (\d+)"),
                       q_stages=number(r"#define Q_BUFFERS (\d+)"),
                       consumers=block_q // per)


def build_shape(cfg) -> KernelShape:
    """The shape of the build that runs cfg: the source's consumers, the buffers its launcher
    asks for (engine.model.iomodel.wgmma_ring)."""
    from engine.model.iomodel import wgmma_ring
    q_stages, stages = wgmma_ring(cfg)
    return KernelShape(stages=stages, q_stages=q_stages, consumers=kernel_shape().consumers)


def ring_pos(u: int, stages: int) -> tuple[int, int]:
    """RingPos<STAGES>::at(u): the u-th use of a ring is stage u mod STAGES, in phase parity
    (u / STAGES) & 1 (the phase flips each time the ring wraps)."""
    return u % stages, (u // stages) & 1


@dataclass
class Span:
    lane: str          # "producer", "consumer 0", ... or "stage 0 K", "Q buffer 1"
    row: str           # the sub-row: "copies", "tensor cores", "threads", "ring"
    kind: str          # Q, K, V, S, PV, softmax, finish, epilogue, wait, held
    label: str
    start: float
    end: float
    item: int = -1     # the block's run (0, 1, ...)
    j: int = -1        # key tile
    stage: int = -1
    phase: int = -1    # parity of the stage's phase for this use
    use: int = -1      # the u-th use of the ring, counted across the block's runs


@dataclass
class Pipeline:
    shape: KernelShape
    turns: bool
    runs: list[int]                                    # key tiles of each run
    spans: list[Span] = field(default_factory=list)
    # (barrier, stage, phase number) -> time that phase completed
    completed: dict = field(default_factory=dict)
    # (agent, barrier, stage, phase number, parity, since, passed): every mbarrier wait
    waits: list = field(default_factory=list)
    end: float = 0.0


class _Deadlock(RuntimeError):
    pass


def _producer(shape: KernelShape, runs: list[int]):
    """The producer warpgroup's thread 0, as in the kernel: run n's Q_i into buffer
    n mod Q_STAGES once the run Q_STAGES before has released it (with two buffers, a run
    ahead: behind run n - 1's first K_j and V_j, Q_AHEAD; with one, before the run's own
    tiles); per key tile, K_j into stage u mod STAGES once that stage's previous K was
    released, then V_j likewise."""
    ahead = shape.q_stages == 2

    def load_q(n, u):
        qs, _ = ring_pos(n, shape.q_stages)
        if n >= shape.q_stages:
            yield ("wait", "q_empty", qs, n // shape.q_stages - 1)
        yield ("copy", "Q", qs, n // shape.q_stages, n, -1, u)

    u = 0
    for n, tiles in enumerate(runs):
        if not ahead or n == 0:
            yield from load_q(n, u)
        for j in range(tiles):
            s = u % shape.stages
            if u >= shape.stages:
                yield ("wait", "k_empty", s, u // shape.stages - 1)
            yield ("copy", "K", s, u // shape.stages, n, j, u)
            if u >= shape.stages:
                yield ("wait", "v_empty", s, u // shape.stages - 1)
            yield ("copy", "V", s, u // shape.stages, n, j, u)
            u += 1
            if ahead and j == 0 and n + 1 < len(runs):
                yield from load_q(n + 1, u)


def _consumer(wg: int, shape: KernelShape, runs: list[int], turns: bool):
    """Consumer warpgroup wg, step by step as the kernel's consumer loop (PERSISTENT, whole
    items): the block's first S_ij; per run its first tile's softmax, then per tile S_ij and
    P_{i,j-1} V_{j-1} issued together in its turn, the softmax of S_ij while P V runs; the
    run's last P V with the next run's first S behind it, and the epilogue."""
    C, ST, QS = shape.consumers, shape.stages, shape.q_stages
    last_wg = wg == C - 1

    def wait_turn():
        return [("turn_wait", wg)] if turns else []

    def pass_turn():
        return [("turn_pass", (wg + 1) % C)] if turns else []

    u = 0                      # this warpgroup's count of K_j / V_j uses (the ring position)
    if last_wg:
        yield from pass_turn()
    yield ("wait", "q_full", 0, 0)
    yield from wait_turn()
    yield ("wait", "k_full", 0, 0)
    yield ("mma", "S", 0, 0, 0, 0)
    yield from pass_turn()
    for n, tiles in enumerate(runs):
        last_run = n == len(runs) - 1
        q_buf = n % QS
        yield ("mma_wait", "S")
        yield ("arrive", "k_empty", u % ST, u // ST)
        if tiles == 1:
            yield ("arrive", "q_empty", q_buf, n // QS)
        yield ("work", "softmax", n, 0, u)
        yield ("work", "finish", n, 0, u)
        prev = u
        for j in range(1, tiles):
            cur = prev + 1
            yield from wait_turn()
            yield ("wait", "k_full", cur % ST, cur // ST)
            yield ("mma", "S", n, j, cur, q_buf)
            yield ("wait", "v_full", prev % ST, prev // ST)
            yield ("mma", "PV", n, j - 1, prev, q_buf)
            yield from pass_turn()
            yield ("mma_wait", "S")
            yield ("arrive", "k_empty", cur % ST, cur // ST)
            if j + 1 == tiles:
                yield ("arrive", "q_empty", q_buf, n // QS)
            yield ("work", "softmax", n, j, cur)
            yield ("mma_wait", "PV")
            yield ("arrive", "v_empty", prev % ST, prev // ST)
            yield ("work", "finish", n, j, cur)
            prev = cur
        nxt = prev + 1
        yield from wait_turn()
        yield ("wait", "v_full", prev % ST, prev // ST)
        yield ("mma", "PV", n, tiles - 1, prev, q_buf)
        if not last_run:   # the next run's Q_i and first K_j, once this last P V is issued
            yield ("wait", "q_full", (n + 1) % QS, (n + 1) // QS)
            yield ("wait", "k_full", nxt % ST, nxt // ST)
        if last_run:       # an S of the same Q_i, K_j whose result is not used (one code path)
            yield ("mma", "S unused", n, tiles - 1, prev, q_buf)
        else:
            yield ("mma", "S", n + 1, 0, nxt, (n + 1) % QS)
        if not (last_wg and last_run):
            yield from pass_turn()
        yield ("mma_wait", "PV")
        yield ("arrive", "v_empty", prev % ST, prev // ST)
        u = nxt
        yield ("work", "epilogue", n, tiles - 1, prev)
        if last_run:
            yield ("mma_wait", "S unused")


def simulate(runs: list[int], turns: bool = True, shape: KernelShape | None = None,
             durations: dict | None = None) -> Pipeline:
    """The block's timeline for runs of runs[n] key tiles each: every agent (the producer and
    each consumer warpgroup) steps in time order; a wait holds it until the barrier phase it
    waits for completes; products queue on the one tensor-core queue, copies on the copy
    engine. RuntimeError if the agents wait on each other for ever."""
    shape = shape or kernel_shape()
    dur = {**DURATIONS, **(durations or {})}
    C, ST = shape.consumers, shape.stages
    out = Pipeline(shape=shape, turns=turns, runs=list(runs))
    names = ["producer"] + [f"consumer {w}" for w in range(C)]
    agents = [_producer(shape, runs)] + [_consumer(w, shape, runs, turns) for w in range(C)]
    clock = [0.0] * len(agents)
    pending = [next(a, None) for a in agents]
    free = {"tensor": 0.0, "copy": 0.0}
    arrivals: dict = {}                       # (barrier, stage, phase) -> arrival times
    turn_arrivals: dict = {w: [] for w in range(C)}
    turn_waits = [0] * C
    issued: dict = {w: [] for w in range(C)}  # per consumer: (kind, done time) not yet waited

    def when(a: int) -> float | None:
        req = pending[a]
        if req is None:
            return None
        if req[0] == "wait":
            t = out.completed.get(req[1:4])
            return None if t is None else max(clock[a], t)
        if req[0] == "turn_wait":
            got = turn_arrivals[req[1]]
            n = turn_waits[req[1]]
            return None if n >= len(got) else max(clock[a], got[n])
        if req[0] == "mma_wait":
            done = next((t for k, t in issued[a - 1] if k == req[1]), None)
            return None if done is None else max(clock[a], done)
        return clock[a]

    while any(p is not None for p in pending):
        ready = [(t, a) for a in range(len(agents)) if (t := when(a)) is not None]
        if not ready:
            raise _Deadlock("the model's agents wait on each other: "
                            + "; ".join(f"{names[a]} at {p}" for a, p in enumerate(pending)
                                        if p is not None))
        t, a = min(ready)
        req, name = pending[a], names[a]
        op = req[0]
        if op == "wait":
            _, bar, stage, phase_no = req
            if t > clock[a]:
                out.spans.append(Span(name, "threads", "wait", f"waits on {bar}[{stage}]",
                                      clock[a], t, stage=stage, phase=phase_no & 1))
            out.waits.append((name, bar, stage, phase_no, phase_no & 1, clock[a], t))
            clock[a] = t
        elif op == "turn_wait":
            if t > clock[a]:
                out.spans.append(Span(name, "threads", "wait", "waits for its turn", clock[a], t))
            turn_waits[req[1]] += 1
            clock[a] = t
        elif op == "turn_pass":
            turn_arrivals[req[1]].append(t)
        elif op == "mma_wait":
            k = next(x for x, (kind, _) in enumerate(issued[a - 1]) if kind == req[1])
            issued[a - 1].pop(k)
            if t > clock[a]:
                out.spans.append(Span(name, "threads", "wait", f"wgmma.wait ({req[1]})",
                                      clock[a], t))
            clock[a] = t
        elif op == "arrive":
            key = req[1:4]
            arrivals.setdefault(key, []).append(t)
            if len(arrivals[key]) == C:          # every consumer thread has arrived
                out.completed[key] = t
        elif op == "copy":
            _, kind, stage, phase_no, n, j, u = req
            start = max(t, free["copy"])
            end = free["copy"] = start + dur[kind]
            bar = {"Q": "q_full", "K": "k_full", "V": "v_full"}[kind]
            out.completed[(bar, stage, phase_no)] = end
            what = f"Q_i of run {n} → buffer {stage}" if kind == "Q" else \
                f"{kind}_{j} (run {n}) → stage {stage}"
            out.spans.append(Span(name, "copies", kind, what, start, end, n, j, stage,
                                  phase_no & 1, u if kind != "Q" else -1))
        elif op == "mma":
            _, kind, n, j, u, q_buf = req
            start = max(t, free["tensor"])
            end = free["tensor"] = start + dur["S" if kind == "S unused" else kind]
            issued[a - 1].append((kind, end))
            text = {"S": f"S = Q Kᵀ, tile {j}", "PV": f"O += P V, tile {j}",
                    "S unused": "S not used (one code path)"}[kind]
            out.spans.append(Span(name, "tensor cores", kind, f"{text} (run {n})", start, end, n, j,
                                  u % ST, (u // ST) & 1, u))
        elif op == "work":
            _, kind, n, j, u = req
            end = t + dur[kind]
            text = {"softmax": f"softmax of S, tile {j}", "finish": f"rescale O, P, tile {j}",
                    "epilogue": f"write O_i (run {n})"}[kind]
            out.spans.append(Span(name, "threads", kind, f"{text} (run {n})" if kind !=
                                   "epilogue" else text, t, end, n, j, u % ST,
                                   (u // ST) & 1, u))
            clock[a] = end
        pending[a] = next(agents[a], None)
    out.end = max([s.end for s in out.spans] + clock)
    out.spans += ring_spans(out)
    return out


def ring_spans(p: Pipeline) -> list[Span]:
    """Each use of a ring stage's K half and V half as a "held" span: from the start of its
    copy until every consumer released it (its "empty" phase completed: K_j after S_ij,
    V_j after P_ij V_j); each Q_i buffer likewise, until the run's last S_ij released it."""
    ST, QS = p.shape.stages, p.shape.q_stages
    out = []
    for s in p.spans:
        if s.kind in ("K", "V"):
            bar = "k_empty" if s.kind == "K" else "v_empty"
            free = p.completed.get((bar, s.stage, s.use // ST), p.end)
            out.append(Span(f"stage {s.stage} {s.kind}", "ring", "held",
                            f"{s.kind}_{s.j} (run {s.item}), phase {s.phase}",
                            s.start, free, s.item, s.j, s.stage, s.phase, s.use))
        elif s.kind == "Q":
            free = p.completed.get(("q_empty", s.stage, s.item // QS), p.end)
            out.append(Span(f"Q buffer {s.stage}", "ring", "held",
                            f"Q_i of run {s.item}, phase {s.phase}", s.start, free, s.item,
                            -1, s.stage, s.phase))
    return out
