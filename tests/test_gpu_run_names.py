"""benchmarks/gpu_run.sh names its files after the GPU's model number (bench_h100_forward.json),
the driver's name's last word when the name has none."""
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_run.sh"
NAMES = {"NVIDIA H100 80GB HBM3": "h100", "NVIDIA H200": "h200", "Tesla T4": "t4",
         "NVIDIA L4": "l4", "NVIDIA A100-SXM4-40GB": "a100", "NVIDIA A100-SXM4-80GB": "a100",
         "NVIDIA GeForce RTX 4090": "4090", "Tesla V100-SXM2-16GB": "v100"}


@pytest.mark.parametrize("name,short", NAMES.items())
def test_short_gpu_name(name, short):
    function = subprocess.run(["sed", "-n", "/^short_gpu_name()/,/^}/p", str(SCRIPT)],
                              capture_output=True, text=True, check=True).stdout
    assert function.startswith("short_gpu_name()")
    out = subprocess.run(["bash", "-c", f'{function}\nshort_gpu_name "$1"', "_", name],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == short
