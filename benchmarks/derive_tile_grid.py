"""Derive a partial recorded tile grid (benchmarks/tiles_*.json, the format engine.recorded
reads) from the tensor-core kernel's tile sweep recorded on an H200 on 2026-11-21
(tensorcore_2026-11-21_run3.json: every supported shape timed at B = 2, H = 16, N = 1024 to
8192, d = 64 and 128, float16, causal and not). Only measured rows are copied, untraced ones,
with the build's registers, threads and shared memory from the same file's kernel facts; the
teaching kernel was not swept there, so the grid holds no teaching rows.

  python benchmarks/derive_tile_grid.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "tensorcore_2026-11-21_run3.json"
OUT = HERE / "tiles_h200_tensorcore_2026-11-21.json"
KEEP = ("kernel", "batch", "heads", "seq_q", "seq_k", "head_dim", "dtype", "causal", "block_q",
        "block_k", "trace", "median_ms", "p10_ms", "p90_ms", "reps", "tflops", "peak_bytes")


def main() -> None:
    run = json.loads(SOURCE.read_text())
    facts = {(f["head_dim"], f["block_q"], f["block_k"]): f for f in run["kernel_facts"]
             if "-DTRACE=0" in f["compile_options"]}
    results = []
    for r in run["results"]:
        if r["kernel"] != "tensorcore" or r["trace"]:
            continue
        row = {k: r[k] for k in KEEP}
        f = facts.get((r["head_dim"], r["block_q"], r["block_k"]))
        if f is not None:
            row.update(registers_per_thread=f["registers_per_thread"],
                       threads_per_block=f["threads_per_block"],
                       smem_bytes=f["dynamic_smem_bytes"])
        results.append(row)
    OUT.write_text(json.dumps({
        "device": run["device"], "date": run["date"], "method": run["method"],
        "derived_from": SOURCE.name,
        "note": "Tensor-core (mma.sync) kernel only; copied from the file named in "
                "derived_from by benchmarks/derive_tile_grid.py. No teaching-kernel rows: "
                "record them with `python -m engine tiles`.",
        "results": results, "skipped": []}, indent=1))
    print(f"wrote {OUT.name}: {len(results)} rows")


if __name__ == "__main__":
    main()
