"""engine.recorded.closest_recorded: which recorded GPU a page shows for each profile and for
a live GPU (the same name, else the same compute capability, else the nearest, the newer of
two equally near; the newest recording among equals), with fixture dicts, no files."""
import pytest

from engine import recorded
from engine.model.devices import PROFILES

H100 = "NVIDIA H100 80GB HBM3"


def rec(device: str, date: str, cc: str | None = "9.0", file: str | None = None) -> dict:
    dev = {"name": device} if cc is None else {"name": device, "compute_capability": cc}
    return {"device": dev, "date": date, "file": file or f"{device}_{date}.json"}


def profile(key: str) -> recorded.Target:
    p = PROFILES[key]
    return recorded.Target(p.name, p.compute_capability, key)


H200_ONLY = [rec("NVIDIA H200", "2026-11-21", file="bench_h200_sweep.json"),
             rec("NVIDIA H200", "2026-11-23", file="bench_h200_forward_2026-11-23.json")]
H200_H100 = [*H200_ONLY, rec(H100, "2026-11-25", file="bench_h100_forward.json")]


def test_no_files_no_choice():
    assert recorded.closest_recorded([], profile("T4")) == ([], None)


@pytest.mark.parametrize("key", PROFILES)
def test_only_h200_recorded_every_profile_gets_it(key):
    files, shown = recorded.closest_recorded(H200_ONLY, profile(key))
    assert [f["file"] for f in files] == ["bench_h200_forward_2026-11-23.json",
                                          "bench_h200_sweep.json"]       # newest first
    assert shown.name == "NVIDIA H200" and shown.date == "2026-11-23"
    assert shown.exact == (key == "H200")
    cc = PROFILES[key].compute_capability
    assert shown.match == ("name" if key == "H200" else "compute capability" if cc == "9.0"
                           else "nearest compute capability")


# With H200 and H100 recorded: each profile's own files, else the most recent of the two
# (both 9.0, equally near to every other profile).
EXPECTED = {"H200": "NVIDIA H200", "H100 SXM": H100, "A100 40GB": H100, "A100 80GB": H100,
            "L4": H100, "RTX 4090": H100, "T4": H100}


@pytest.mark.parametrize("key", PROFILES)
def test_h200_and_h100_recorded_every_profile(key):
    files, shown = recorded.closest_recorded(H200_H100, profile(key))
    assert shown.name == EXPECTED[key]
    assert {recorded.file_device(f) for f in files} == {EXPECTED[key]}   # one device only
    assert shown.exact == (PROFILES[key].name == EXPECTED[key])


def test_labels_say_which_gpu_and_why():
    _, own = recorded.closest_recorded(H200_H100, profile("H100 SXM"))
    assert own.label == f"Recorded on {H100} (2026-11-25): the chosen profile itself."
    _, t4 = recorded.closest_recorded(H200_ONLY, profile("T4"))
    assert t4.label == ("Recorded on NVIDIA H200 (2026-11-23), the closest recorded GPU to the "
                        "T4 profile (compute capability 9.0, the nearest to its 7.5); no T4 "
                        "recording is in benchmarks/results/. The T4's own figures on this "
                        "page are the model's.")
    _, h100 = recorded.closest_recorded(H200_ONLY, profile("H100 SXM"))
    assert "the closest recorded GPU to the H100 SXM profile (same compute capability, 9.0)" \
        in h100.label
    _, elsewhere = recorded.closest_recorded(H200_ONLY, profile("A100 40GB"), "tests/data/")
    assert "no A100 40GB recording is in tests/data/." in elsewhere.label


def test_live_gpu():
    live = recorded.Target("NVIDIA L40S", "8.9", "NVIDIA L40S", live=True)
    files, shown = recorded.closest_recorded(H200_H100, live)
    assert shown.name == H100 and not shown.exact
    assert "closest recorded GPU to this machine's NVIDIA L40S" in shown.label
    assert "measured live" in shown.label
    _, same = recorded.closest_recorded(H200_H100, recorded.Target("NVIDIA H200", "9.0",
                                                                   live=True))
    assert same.exact and same.label.endswith(": the GPU this app runs on.")


def test_the_name_wins_over_the_compute_capability():
    odd = [rec("NVIDIA H200", "2026-11-23"), rec("Tesla T4", "2020-01-01", cc="7.5")]
    files, shown = recorded.closest_recorded(odd, profile("T4"))
    assert shown.name == "Tesla T4" and shown.exact and shown.match == "name"
    # an L4 (8.9): nearer to 9.0 (1 step of a minor version) than to 7.5 (14)
    _, l4 = recorded.closest_recorded(odd, profile("L4"))
    assert l4.name == "NVIDIA H200"


def test_equally_near_capabilities_take_the_newer():
    """8.0 lies 5 minor steps from both 7.5 and 8.5: the 8.5 GPU is chosen, even when the
    7.5 one was recorded later."""
    files = [rec("Older GPU", "2027-01-01", cc="7.5"), rec("Newer GPU", "2026-01-01", cc="8.5")]
    _, shown = recorded.closest_recorded(files, profile("A100 40GB"))
    assert shown.name == "Newer GPU" and shown.match == "nearest compute capability"
    _, reversed_order = recorded.closest_recorded(files[::-1], profile("A100 40GB"))
    assert reversed_order.name == "Newer GPU"


def test_devices_of_one_capability_the_most_recent_then_by_name():
    same_day = [rec("GPU B", "2026-11-25"), rec("GPU A", "2026-11-25"),
                rec("GPU C", "2026-11-20")]
    _, shown = recorded.closest_recorded(same_day, profile("T4"))
    assert shown.name == "GPU A"
    _, shown = recorded.closest_recorded(same_day[::-1], profile("T4"))
    assert shown.name == "GPU A"


def test_a_capability_from_the_profile_or_unknown():
    """A file without compute_capability takes its device's datasheet profile's; a device no
    profile names is chosen only when nothing else is recorded."""
    files = [rec("NVIDIA H200", "2026-11-21", cc=None), rec("Fixture GPU", "2030-01-01", cc=None)]
    _, shown = recorded.closest_recorded(files, profile("T4"))
    assert shown.name == "NVIDIA H200" and shown.compute_capability == "9.0"
    _, fixture = recorded.closest_recorded(files[1:], profile("H200"))
    assert fixture.name == "Fixture GPU" and fixture.match == "unknown"
    assert "its compute capability is not recorded" in fixture.label


def test_within_a_device_newest_first_then_by_name_order():
    files = [rec(H100, "2026-11-24", file="a.json"), rec(H100, "2026-11-25", file="b.json"),
             rec(H100, "2026-11-24", file="c.json"), rec("NVIDIA H200", "2026-11-26")]
    chosen, shown = recorded.closest_recorded(files, profile("H100 SXM"))
    assert [f["file"] for f in chosen] == ["b.json", "a.json", "c.json"]
    assert shown.date == "2026-11-25"
