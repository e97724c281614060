"""The recorded GPU each page shows: with an H100 and an H200 file of each kind recorded, the
H100 SXM profile shows the H100's file and numbers with "the chosen profile itself", the H200
profile the H200's, and the T4 profile the closest recorded GPU (both are compute capability
9.0: the one recorded most recently) with that wording. Files are copies of committed results,
their device, date and (for the H100) times changed."""
import datetime
import json

import pytest

from apptest_helpers import assert_clean, open_page, recorded_date, specs, texts
from app.core.results_dir import BENCH_DIR_ENV
from engine import recorded

H100 = "NVIDIA H100 80GB HBM3"
SLOWER = 1.25        # the H100 copies' times: the H200's × SLOWER
# page -> (its kind's committed H200 file, the H100 copy's name)
FILES = {"timings": ("bench_h200_forward.json", "bench_h100_forward.json"),
         "overview": ("bench_h200_forward.json", "bench_h100_forward.json"),
         "backward": ("bench_h200_backward.json", "bench_h100_backward.json"),
         "tile_sizes": ("tiles_h200_2026-11-23.json", "tiles_h100_2026-11-25.json"),
         "decoding": ("decode_h200_2026-11-28.json", "decode_h100_2026-11-25.json")}
OWN = ": the chosen profile itself."


def h100_copy(data: dict, date: str) -> dict:
    """The H200's file as if recorded on an H100 (its method text names the H100 too)."""
    data = json.loads(json.dumps(data).replace("NVIDIA H200", H100))
    data["device"] = {**data["device"], "name": H100, "compute_capability": "9.0"}
    data["date"] = date
    for row in data["results"]:
        for name in ("median_ms", "p10_ms", "p90_ms"):
            row[name] *= SLOWER
        if "tflops" in row:
            row["tflops"] /= SLOWER
    return data


def day_after(data: dict) -> str:
    """The H100 copy's date: the day after the H200 file's, so the copy is the more recent."""
    return str(datetime.date.fromisoformat(data["date"]) + datetime.timedelta(days=1))


def results_dir(tmp_path, page: str, h100_date: str | None = None):
    source, copy = FILES[page]
    data = json.loads((recorded.BENCH_DIR / source).read_text())
    (tmp_path / source).write_text(json.dumps(data))
    (tmp_path / copy).write_text(json.dumps(h100_copy(data, h100_date or day_after(data))))
    recorded.load_file(tmp_path / copy)                  # the copy follows the schema
    return source, copy, data


def label_of(body: str) -> str:
    return next(line for line in body.splitlines() if line.startswith("Recorded on ")
                and ("profile itself" in line or "closest recorded GPU" in line))


@pytest.mark.parametrize("page", FILES)
@pytest.mark.parametrize("profile", ["H100 SXM", "H200", "T4"])
def test_each_page_shows_the_closest_recorded_gpu(monkeypatch, tmp_path, page, profile):
    source, copy, data = results_dir(tmp_path, page)
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page(page, profile=profile, backend="numpy")
    assert_clean(at)
    body = texts(at)
    label = label_of(body)
    shown, hidden = (source, copy) if profile == "H200" else (copy, source)
    if profile == "H200":
        assert label == f"Recorded on NVIDIA H200 ({data['date']}){OWN}"
    elif profile == "H100 SXM":
        assert label == f"Recorded on {H100} ({day_after(data)}){OWN}"
    else:
        assert label.startswith(f"Recorded on {H100} ({day_after(data)}), the closest recorded "
                                f"GPU to the T4 profile (compute capability 9.0, the nearest to "
                                f"its 7.5); no T4 recording is in {tmp_path}/.")
    device = "NVIDIA H200" if profile == "H200" else H100
    everything = body + json.dumps(specs(at)) + "".join(
        str(s.options) for s in at.selectbox)
    assert shown in everything and hidden not in everything
    assert device in everything
    other = H100 if profile == "H200" else "NVIDIA H200"
    assert other not in everything.replace(label, "")         # no chart mixes the two


def recorded_medians(at) -> set:
    frame = at.dataframe[-1].value
    return {round(v, 9) for v in frame["median_ms"]}


@pytest.mark.parametrize("page", ["timings", "backward"])
def test_the_numbers_are_the_chosen_gpus(monkeypatch, tmp_path, page):
    source, copy, data = results_dir(tmp_path, page)
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    h200 = {round(r["median_ms"], 9) for r in data["results"]}
    h100 = {round(r["median_ms"] * SLOWER, 9) for r in data["results"]}
    for profile, mine, theirs in (("H100 SXM", h100, h200), ("H200", h200, h100)):
        at = open_page(page, profile=profile, backend="numpy")
        assert_clean(at)
        shown = recorded_medians(at)
        assert shown and shown <= mine and not shown & (theirs - mine)


def test_a_more_recent_h200_is_the_t4s_closest(monkeypatch, tmp_path):
    """Both GPUs are compute capability 9.0: the T4 profile gets the one recorded last."""
    results_dir(tmp_path, "timings", h100_date="2026-11-20")
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("timings", profile="T4", backend="numpy")
    assert_clean(at)
    h200_date = recorded_date(FILES["timings"][0])
    assert label_of(texts(at)).startswith(f"Recorded on NVIDIA H200 ({h200_date}), the "
                                          "closest recorded GPU to the T4 profile")
    assert all(o.startswith("bench_h200_") for o in at.selectbox(key="rec_file").options)


def test_the_kernel_page_shows_the_chosen_gpus_facts_and_schedules(monkeypatch, tmp_path):
    for source, copy in (("kernel_facts_h200.json", "kernel_facts_h100.json"),
                         ("schedule_h200_teaching.json", "schedule_h100_teaching.json")):
        data = json.loads((recorded.BENCH_DIR / source).read_text())
        (tmp_path / source).write_text(json.dumps(data))
        moved = json.loads(json.dumps(data).replace("NVIDIA H200", H100))
        moved["device"]["compute_capability"] = "9.0"
        (tmp_path / copy).write_text(json.dumps({**moved, "date": "2026-11-25"}))
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    for profile, mine, theirs in (("H100 SXM", "h100", "h200"), ("H200", "h200", "h100")):
        at = open_page("kernel", profile=profile, backend="numpy")
        assert_clean(at)
        body = texts(at)
        assert f"(kernel_facts_{mine}.json)" in body and f"kernel_facts_{theirs}" not in body
        assert body.count(OWN) == 2                      # the facts and the schedule
        device = H100 if mine == "h100" else "NVIDIA H200"
        options = at.selectbox(key="schedule_shown").options
        assert options and all(device in o for o in options)


@pytest.mark.parametrize("page", ["timings", "backward", "tile_sizes", "decoding"])
def test_changing_the_profile_changes_the_recorded_gpu(monkeypatch, tmp_path, page):
    """The recorded panel's own choosers follow a new profile without an error."""
    source, copy, data = results_dir(tmp_path, page)
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page(page, backend="numpy")                  # the H200 profile
    assert_clean(at)
    assert label_of(texts(at)).startswith("Recorded on NVIDIA H200 (")
    at.selectbox(key="profile").select("H100 SXM").run()
    assert_clean(at)
    assert label_of(texts(at)) == f"Recorded on {H100} ({day_after(data)}){OWN}"
    assert all(source not in str(s.options) for s in at.selectbox)
