"""What the recording jobs share: the device record, the date, atomic JSON writes stamped with
the results schema (engine.recorded), a progress bar, option parsers and the entry point."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

from engine.recorded import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"     # what the app reads (engine.recorded)
LAB_RECORDS = ROOT / "lab" / "records"        # raw dated records (lab/README.md)


def stamped(kind: str, **fields) -> dict:
    """A results file's body: the schema's version and kind first, then the fields."""
    return {"schema_version": SCHEMA_VERSION, "kind": kind, **fields}


def device_record() -> dict:
    from engine.devices import device_info
    from engine.gpu.torch_reference import torch_version
    info = device_info()
    gpu = info.gpu
    return {"name": info.name, "kind": info.kind, "sms": gpu.sms,
            "compute_capability": gpu.compute_capability, "l2_bytes": gpu.l2_bytes,
            "memory_bytes": gpu.memory_bytes, "smem_per_block_optin": gpu.smem_per_block_optin,
            "driver": nvidia_driver(), "cuda_driver_api": info.driver,
            "cuda_runtime": info.cuda_runtime, "cupy_version": info.cupy_version,
            "torch_version": torch_version()}


def nvidia_driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        return ""


def today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def write_json(path: Path, data: dict):
    """Write through a temporary file, so that a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def scalars(info: dict) -> dict:
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool))}


def command_line() -> str:
    return " ".join(sys.argv[1:])


class Progress:
    """A plain-text progress bar on stderr."""

    def __init__(self, total: int, width: int = 30):
        self.total, self.width, self.done = max(total, 1), width, 0

    def step(self, label: str):
        self.done += 1
        filled = self.width * self.done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] "
                         f"{self.done}/{self.total} {label[:70]:<70}")
        sys.stderr.flush()

    def close(self):
        sys.stderr.write("\n")


def ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers; got {text!r}")


def names(allowed):
    def parse(text: str) -> list[str]:
        got = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in got if x not in allowed]
        if bad or not got:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(allowed)} (comma-separated); got {text!r}")
        return got
    return parse


def causal_choice(text: str) -> list[bool]:
    table = {"both": [False, True], "true": [True], "false": [False]}
    if text not in table:
        raise argparse.ArgumentTypeError(f"--causal is both, true or false; got {text!r}")
    return table[text]


def job_parser(doc: str, name: str) -> argparse.ArgumentParser:
    """A job's parser: its module docstring as the description, examples kept as written;
    name: the module's, as `python -m benchmarks.<name>` runs it."""
    return argparse.ArgumentParser(description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   prog=f"python -m benchmarks.{name}")


def run_job(p: argparse.ArgumentParser, job, argv: list[str] | None) -> int:
    """Parse argv, run job(args); a ValueError (a size out of range, no usable GPU) is one line
    on stderr and exit status 2, never a traceback."""
    args = p.parse_args(argv)
    try:
        return job(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
