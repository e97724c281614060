"""Which recorded GPU the pages show: among the files of one kind in the results folder,
those of the GPU closest to the one the sidebar chose (the emulated profile, or the live GPU),
picked by engine.recorded.closest_recorded, with its one-line label for a caption."""
from __future__ import annotations

from pathlib import Path

import engine
from engine.facade import recorded
from app.core.results_dir import bench_dir


def recorded_target(device: engine.DeviceInfo) -> recorded.Target:
    """The GPU whose recordings a page looks for: the live GPU, else the emulated profile."""
    gpu = device.gpu
    if device.kind == "gpu":
        return recorded.Target(gpu.name, gpu.compute_capability, gpu.name, live=True)
    return recorded.Target(gpu.name, gpu.compute_capability, device.profile_key or gpu.name)


def folder_text(folder: Path | None = None) -> str:
    """The results folder (bench_dir() unless given) as the labels name it."""
    folder = Path(folder or bench_dir())
    return ("benchmarks/results/" if folder.resolve() == recorded.BENCH_DIR.resolve()
            else f"{folder}/")


def closest_files(files: list[dict], device: engine.DeviceInfo
                  ) -> tuple[list[dict], recorded.RecordedDevice | None]:
    """The files (of one kind) of the recorded GPU closest to `device`, newest first, and
    which GPU that is (None when no file is recorded)."""
    return recorded.closest_recorded(files, recorded_target(device), folder_text())
