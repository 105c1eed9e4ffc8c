"""The screen of a sweep (runner/reporting/progress.py): each stage and every running
check, told by the events sessions and workers say (runner/events.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from rich.console import Console

from runner import events
from runner.planning.planner import Image, PlanCheck, PlanConfig, Workers, make_plan
from runner.reporting.progress import NowDoing


def plan(*checks: tuple[str, float, str], images: int = 3, boot_s: float = 0.0,
         build_s: float = 0.0, image_of: dict[str, str] | None = None):
    """A real plan (runner.planning.planner.make_plan): ``images`` contexts under a
    base booting in ``boot_s``, each built in ``build_s``; every check runs in
    the image ``image_of`` names (k0 by default)."""
    tree = {"base": Image("base", None, boot_s, "measured")}
    tree.update({f"k{i}": Image(f"k{i}", "base", build_s, "estimated") for i in range(images)})
    image_of = image_of or {}
    planned = [PlanCheck(p, 0, "generic", s, src, 2**20, image_of.get(p, "k0"), 120.0, i)
               for i, (p, s, src) in enumerate(checks)]
    return make_plan(planned, tree, "base", Workers(1, 2), PlanConfig(dispatch_s=0.0))


def screen(now: NowDoing) -> str:
    console = Console(record=True, width=120)
    console.print(now)
    return console.export_text()


def test_each_stage_is_named_with_its_image_count():
    now = NowDoing(plan(("a", 10.0, "map"), ("b", 30.0, "map")), workers=2)
    assert now.event(events.Event("boot", name="HOL Light")) == "booting HOL Light"
    assert "now: booting HOL Light" in screen(now)
    assert now.event(events.Event("booted", name="HOL Light")) == "HOL Light is up"
    line = now.event(events.Event("image", key="k1", name="the context of b"))
    assert line == "building image 1 of 3: the context of b"
    assert "now: building image 1 of 3: the context of b" in screen(now)
    now.event(events.Event("imaged", key="k1", name="the context of b"))
    assert "now: checking" in screen(now)


def test_a_check_runs_against_its_limit_only_once_its_image_is_loaded():
    now = NowDoing(plan(("a", 10.0, "map"), ("b", 30.0, "map")), workers=2)
    started = time.monotonic()
    now.event(events.Event("check", at=started - 40, name="b", worker="host/1/w0", limit_s=120))
    text = screen(now)
    assert "w0" in text and "waiting to start" in text and "40 s" not in text
    now.event(events.Event("forked", at=started - 28, name="b", limit_s=120))
    text = screen(now)
    assert "28 s" in text and "120 s" in text and "waiting" not in text
    now.event(events.Event("checked", name="b", worker="host/1/w0"))
    assert "b " not in screen(now).split("now:")[1].split("\n", 1)[1]


def test_the_eta_comes_from_the_plan_and_shrinks_as_checks_finish():
    now = NowDoing(plan(("a", 10.0, "map"), ("b", 30.0, "profile")), workers=2)
    assert now.eta_s() == 20.0
    now.finished("b", 0)
    assert now.eta_s() == 5.0
    assert "ETA 0:00:05 (estimated from the plan)" in screen(now)


def test_the_eta_counts_the_boot_and_the_images_still_to_build():
    """Issue 23: the ETA read 0 s while workers waited minutes for images,
    and sat still through a 175 s boot."""
    now = NowDoing(plan(("a", 10.0, "map"), ("b", 30.0, "map"), boot_s=100.0, build_s=50.0,
                        image_of={"a": "k1", "b": "k2"}), workers=2)
    # Before the boot: the boot, then both checks and both images over 2 workers.
    assert now.eta_s() == 100.0 + (10 + 30 + 50 + 50) / 2
    now.event(events.Event("boot", at=time.monotonic(), key="base", name="HOL Light"))
    assert "the boot is running" in screen(now)
    now.event(events.Event("booted", key="base", name="HOL Light"))
    assert now.eta_s() == (10 + 30 + 50 + 50) / 2
    assert "2 images to build" in screen(now)
    now.event(events.Event("image", key="k2", name="the context of b"))
    now.event(events.Event("imaged", key="k2", name="the context of b"))
    assert now.eta_s() == (10 + 30 + 50) / 2
    now.finished("a", 0)             # a's row: its image was built too, wherever it ran
    assert now.eta_s() == 30 / 2
    assert "images to build" not in screen(now)


def test_the_eta_scales_the_builds_left_by_the_builds_measured():
    """Issue 46: image builds took 2.5-5x the plan's time, and the ETA was
    the plan's. A build measured at 4x its plan makes the builds left 4x
    theirs, on the screen and in status.json, and both say so."""
    made = plan(("a", 10.0, "map"), ("b", 30.0, "map"), ("c", 20.0, "map"), build_s=50.0,
                image_of={"a": "k0", "b": "k1", "c": "k2"})
    now = NowDoing(made, workers=2)
    now.event(events.Event("booted", key="base", name="HOL Light"))
    assert now.eta_s() == (10 + 30 + 20 + 3 * 50) / 2
    assert "estimated from the plan (no image build measured yet); 3 images to build" in screen(now)
    # k0 took 200 s of a planned 50: the two builds left are expected at 200 s each.
    started = time.monotonic() - 200
    for e in (events.Event("image", at=started, key="k0", name="the context of a"),
              events.Event("imaged", at=started + 200, key="k0", name="the context of a")):
        now.event(e)
    assert abs(now.eta_s() - (10 + 30 + 20 + 2 * 200) / 2) < 0.01
    assert ("estimated from the plan, corrected by what was measured: image builds so far took "
            "4.0x the plan's time (1 measured), and those left are scaled by it; 2 images to build"
            ) in " ".join(screen(now).split())


def test_the_heartbeat_s_eta_scales_the_builds_left_by_the_builds_measured(tmp_path):
    from runner.results.done import Done
    from runner.results.heartbeat import Heartbeat, read
    from runner.planning.work_left import WorkLeft

    made = plan(("a", 10.0, "map"), ("b", 30.0, "map"), build_s=50.0, image_of={"a": "k0", "b": "k1"})
    beat = Heartbeat(tmp_path, total=2, done=Done(), skipped=0, workers=2, resume="proofbatch run")
    beat.plan(made, WorkLeft(made))
    started = time.monotonic() - 150
    beat.event(events.Event("image", at=started, key="k0", name="the context of a"))
    beat.event(events.Event("imaged", at=started + 150, key="k0", name="the context of a"))
    beat.publish("running")
    published = read(tmp_path)
    assert abs(published["expected_left_s"] - (10 + 30 + 3 * 50)) < 0.01
    assert published["eta_basis"].startswith("estimated from the plan, corrected by what was "
                                             "measured: image builds so far took 3.0x")


def test_no_eta_without_measured_durations():
    now = NowDoing(plan(("a", 1.0, "default")), workers=1)
    assert now.eta_s() is None
    assert "no ETA: no profile or timeout map gives expected times" in screen(now)


def test_the_profile_table_never_cuts_a_problem_id():
    """Bench ids share 20-character prefixes: cut, every row read the same."""
    from runner.commands.profile import profile_table

    ids = [f"arm.bignum_montsqr_p256_alt.BIGNUM_MONTSQR_P256_ALT_{n}_CORRECT" for n in ("A", "B")]
    result = SimpleNamespace(
        path="profiles/bench", runs=ids,
        stats=[{"problem_id": pid, "runs": 3, "min": 1.0, "median": 1.5, "max": 2.0 + i,
                "spread": 2.0, "peak_rss_mb": [400.0]} for i, pid in enumerate(ids)])
    console = Console(record=True, width=80)
    console.print(profile_table(result))
    text = console.export_text()
    # Folded onto three lines each, with what tells them apart kept whole.
    assert "ALT_A_CORRECT" in text and "ALT_B_CORRECT" in text and "…" not in text


def test_prepare_says_it_reads_big_contexts(tmp_path, monkeypatch):
    """Issue 24: a 50 MB setup.ml gave 25 s of silence before the sweep began."""
    from runner import sweep
    from ..helpers import demo_config

    heard: list[str] = []
    now = NowDoing(None, 1)
    stop = events.listen(lambda e: heard.append(now.event(e) or ""))
    try:
        sweep.prepare(demo_config(tmp_path / "quiet"))
        assert not any(line.startswith("reading the contexts") for line in heard), heard
        monkeypatch.setattr(sweep, "LOUD_CONTEXTS_BYTES", 1)
        sweep.prepare(demo_config(tmp_path / "loud"))
    finally:
        stop()
    said = [line for line in heard if line.startswith("reading the contexts of ")]
    assert len(said) == 1 and "of setup files) to plan their images" in said[0], heard
