"""The screen of a sweep (runner/progress.py): each stage and every running
check, told by the events sessions and workers say (runner/events.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from rich.console import Console

from runner import events
from runner.progress import NowDoing


def plan(*checks: tuple[str, float, str], images: int = 3):
    return SimpleNamespace(
        images={f"k{i}": None for i in range(images)},
        checks=[SimpleNamespace(problem_id=p, attempt=0, expected_s=s, source=src)
                for p, s, src in checks])


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
    assert "ETA 0:00:05 (from the plan)" in screen(now)


def test_no_eta_without_measured_durations():
    now = NowDoing(plan(("a", 1.0, "default")), workers=1)
    assert now.eta_s() is None
    assert "no ETA: no profile or timeout map gives expected times" in screen(now)


def test_the_profile_table_never_cuts_a_problem_id():
    """Bench ids share 20-character prefixes: cut, every row read the same."""
    from runner.commands.profile import print_profile

    ids = [f"arm.bignum_montsqr_p256_alt.BIGNUM_MONTSQR_P256_ALT_{n}_CORRECT" for n in ("A", "B")]
    result = SimpleNamespace(
        path="profiles/bench", runs=ids, defects=[],
        stats=[{"problem_id": pid, "runs": 3, "min": 1.0, "median": 1.5, "max": 2.0 + i,
                "spread": 2.0, "peak_rss_mb": [400.0]} for i, pid in enumerate(ids)])
    console = Console(record=True, width=80)
    print_profile(result, console)
    text = console.export_text()
    # Folded onto three lines each, with what tells them apart kept whole.
    assert "ALT_A_CORRECT" in text and "ALT_B_CORRECT" in text and "…" not in text
