"""pass@k: the unbiased estimator against hand-computed values, then the
report of a real HOL Light sweep of the attempts fixture
(examples/hol_light_demo_attempts), with and without early stop.

The fixture has n = 5 attempts for each of 7 problems. Its expected verdicts
give these OK counts c, by hand:

    arith.add_comm 3, arith.false_claim 0       (arith)
    logic.drinker 2, logic.taut_contrapos 3     (logic)
    sets.union_comm 5 (sets), lists.append_nil 0 (lists), isolation.redefine 3 (defs)

and one CHEATING attempt in each of arith.add_comm, arith.false_claim,
logic.taut_contrapos and isolation.redefine. With C(5, k) in the
denominator, 1 - C(5-c, k)/C(5, k) is c/5 for k = 1; for k = 2 it is 0.9
(c = 3), 0.7 (c = 2), 1 (c = 5), 0 (c = 0); for k = 4 and 5 it is 1 for any
c >= 1 (the 5 - c failures cannot fill 4 draws).
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from rich.console import Console

from runner import cli
from runner.reporting import passk
from runner.errors import InputError
from runner.reporting.passk import ProblemTally, compute, pass_at_k

from ..helpers import sweep_attempts

KS = (1, 2, 4, 5)
# The hand-computed figures of the fixture (see the module docstring).
OVERALL = {1: Fraction(3 + 0 + 2 + 3 + 5 + 0 + 3, 35), 2: Fraction(9 + 0 + 7 + 9 + 10 + 0 + 9, 70),
           4: Fraction(5, 7), 5: Fraction(5, 7)}
BY_CATEGORY_1 = {"arith": Fraction(3, 10), "logic": Fraction(5, 10), "sets": Fraction(1),
                 "lists": Fraction(0), "defs": Fraction(3, 5)}
CHEAT_1 = Fraction(4, 35)
DISTRIBUTION = {0: 2, 2: 1, 3: 3, 5: 1}


# -- the estimator --------------------------------------------------------------------

@pytest.mark.parametrize("n, c, k, want", [
    (5, 2, 1, Fraction(2, 5)),
    (5, 2, 2, 1 - Fraction(3, 10)),            # C(3,2)=3, C(5,2)=10
    (5, 2, 3, 1 - Fraction(1, 10)),            # C(3,3)=1, C(5,3)=10
    (5, 2, 4, Fraction(1)),                    # 3 failures cannot fill 4 draws
    (5, 0, 5, Fraction(0)),
    (5, 5, 1, Fraction(1)),
    (32, 1, 8, Fraction(8, 32)),               # one success: k/n
    (10, 3, 4, 1 - Fraction(35, 210)),         # C(7,4)=35, C(10,4)=210
])
def test_pass_at_k_matches_hand_computed_values(n, c, k, want):
    assert pass_at_k(n, c, k) == pytest.approx(float(want), abs=1e-15)


def test_pass_at_k_is_exact_for_large_n():
    # C(1000, 500) has 300 digits: no float overflow, and the closed form for
    # one success still holds.
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5, abs=1e-15)
    assert pass_at_k(1000, 999, 1) == pytest.approx(0.999, abs=1e-15)
    assert math.comb(1000, 500) > 10**299


def test_fewer_attempts_than_k_is_refused():
    with pytest.raises(ValueError, match="n=3 attempts are fewer than k=4"):
        pass_at_k(3, 1, 4)
    problems = [ProblemTally("a", "x", 8, 1, 0, 8, 0, 1.0), ProblemTally("b", "x", 3, 1, 0, 3, 0, 1.0)]
    with pytest.raises(InputError) as e:
        compute(problems, (1, 4))
    assert "problem b has 3 attempts, fewer than k=4" in str(e.value)
    assert "use k of at most 3" in str(e.value)
    assert compute(problems, (1, 3)).overall[3] == pytest.approx((3 / 8 + 1) / 2)


@pytest.mark.parametrize("text", ["", "0", "1,x", "-1", "1;4"])
def test_bad_k_lists_are_input_errors(text):
    with pytest.raises(InputError, match="--k"):
        passk.parse_ks(text)


def test_k_list_is_parsed_sorted_and_unique():
    assert passk.parse_ks("8,1, 4,4") == (1, 4, 8)


# -- the report of a real sweep ---------------------------------------------------------

@pytest.fixture(scope="module")
def sweeps(hol_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("passk")
    full, _ = sweep_attempts(hol_session, root / "full")
    early, _ = sweep_attempts(hol_session, root / "early", stop_on_first_ok=True)
    return full.out, early.out


@pytest.mark.hol
def test_report_of_the_fixture_matches_the_hand_computed_figures(sweeps):
    r = passk.report_sweep(sweeps[0], KS)
    for k in KS:
        assert r.overall[k] == pytest.approx(float(OVERALL[k]), abs=1e-12), k
    assert {c: v[1] for c, v in r.by_category.items()} == pytest.approx(
        {c: float(f) for c, f in BY_CATEGORY_1.items()})
    assert r.by_category["logic"][2] == pytest.approx((0.7 + 0.9) / 2)
    # CHEATING is never a success, and has its own figure.
    assert r.cheat[1] == pytest.approx(float(CHEAT_1))
    assert r.distribution == DISTRIBUTION
    assert r.solved == 5 and r.attempts == 35
    assert (r.checks, r.deduplicated, r.skipped) == (29, 6, 0)
    assert not r.lower_bound


@pytest.mark.hol
def test_cost_per_solved_problem_comes_from_the_checks_wall_time(sweeps):
    r = passk.report_sweep(sweeps[0], KS)
    wall = sum(p.wall_secs for p in r.problems)
    assert wall > 0
    assert r.check_core_hours == pytest.approx(wall / 3600)
    assert r.core_hours_per_solved == pytest.approx((wall / 3600 + r.image_core_hours) / 5)


@pytest.mark.hol
def test_more_k_than_attempts_is_refused_for_a_sweep(sweeps):
    with pytest.raises(InputError) as e:
        passk.report_sweep(sweeps[0], (1, 6))
    assert str(sweeps[0]) in str(e.value) and "fewer than k=6" in str(e.value)


@pytest.mark.hol
def test_early_stop_report_is_a_lower_bound_and_exact_at_n(sweeps):
    full, early = (passk.report_sweep(out, KS) for out in sweeps)
    assert early.lower_bound and early.skipped == 19
    assert early.attempts == 35                         # skipped attempts still count in n
    assert early.overall[5] == pytest.approx(float(OVERALL[5]))   # solved or not: exact
    assert early.overall[1] == pytest.approx(5 / 35)     # one OK counted per solved problem
    assert early.overall[1] <= full.overall[1]
    assert early.checks < full.checks
    assert early.check_core_hours < full.check_core_hours


@pytest.mark.hol
def test_two_runs_compared_and_rendered(sweeps):
    cmp = passk.compare(sweeps[0], sweeps[1], (1, 5))
    assert cmp.only_a == cmp.only_b == 0
    assert cmp.a.overall[1] == pytest.approx(float(OVERALL[1]))
    assert cmp.b.overall[1] == pytest.approx(5 / 35)

    console = Console(record=True, width=140)
    for renderable in passk.tables(cmp.a, "full"):
        console.print(renderable)
    console.print(passk.comparison_table(cmp, "full", "early stop"))
    text = console.export_text()
    assert "45.71%" in text                              # pass@1 = 16/35
    assert "71.43%" in text                              # pass@5 = 5/7
    assert "-31.43 pts" in text                          # 5/35 - 16/35
    assert "4 CHEATING attempts" in text

    fragment = passk.html_fragment(passk.report_sweep(sweeps[1], (1, 5)))
    assert fragment.startswith('<section class="passk">') and fragment.endswith("</section>")
    assert "<th>pass@1</th>" in fragment and "lower bound" in fragment
    assert "<td>14.29%</td>" in fragment


@pytest.mark.hol
def test_proofbatch_report_k_prints_and_writes_pass_at_k(sweeps, tmp_path, capsys):
    page = tmp_path / "report.html"
    assert cli.main(["report", str(sweeps[0]), "--k", "1,5", "--html", str(page)]) == 0
    text = capsys.readouterr().out
    assert "pass@1" in text and "45.71%" in text and "71.43%" in text
    html = page.read_text()
    assert '<section class="passk">' in html and html.index("passk") < html.index("</body>")

    assert cli.main(["report", str(sweeps[0]), str(sweeps[1]), "--k", "1,5"]) == 0
    assert "-31.43 pts" in capsys.readouterr().out


@pytest.mark.hol
@pytest.mark.parametrize("k, message", [("1,6", "fewer than k=6"), ("0", "--k")])
def test_proofbatch_report_refuses_a_bad_k_in_one_line(sweeps, k, message, capsys):
    assert cli.main(["report", str(sweeps[0]), "--k", k]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert captured.out == ""       # refused before anything was printed
