"""The reproduction scorecard (notebooks/scorecard.md): every numbered result of both papers
is listed, every page it links exists, every judge gives a verdict on the committed results,
and a judge fed worse numbers gives a worse verdict."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import pytest

from stochastic_transformers import scorecard
from stochastic_transformers.scorecard import RESULTS, VERDICTS, Result

ROOT = Path(__file__).resolve().parents[1]


def _numbered(kind: str, last: int, first: int = 1) -> list[str]:
    return [f"{kind} {k}" for k in range(first, last + 1)]


#: The numbered results of the paper (Fedorov, Sander, Elie, Marion, Lauriere), main text and
#: appendices (Lemmas 4 to 6 and Figures 8 and 9 are in the appendices).
PAPER = (["Table 1"] + _numbered("Figure", 9) + _numbered("Theorem", 2) + _numbered("Lemma", 6)
         + ["Proposition 1"])

#: The follow-up's (Koubbi, Geshkovski, Rigollet).  Its two tables carry no number, and the
#: lemmas after Lemma 1 are named by the section that states them.
FOLLOWUP = (_numbered("Theorem", 5) + _numbered("Corollary", 2) + _numbered("Proposition", 5)
            + ["Lemma 1"] + _numbered("Figure", 2)
            + ["Table (Section 2.2)", "Table (Section 2.3)", "Lemmas of Section 7.1",
               "Lemmas of Section 7.2", "Lemma of Section 7.4 (Step 1)",
               "Lemma of Section 7.4 (Step 2)"])

JUDGED = [r for r in RESULTS if r.judge is not None]


def _labels(paper: str) -> list[str]:
    return [r.label for r in RESULTS if r.paper == paper]


@pytest.mark.parametrize("paper, expected", [("paper", PAPER), ("followup", FOLLOWUP)])
def test_every_numbered_result_is_listed_once(paper, expected):
    labels = _labels(paper)
    assert len(labels) == len(set(labels)), "a label listed twice"
    missing = [label for label in expected if label not in labels]
    assert not missing, f"not in the scorecard: {missing}"


def test_every_result_is_valid():
    for r in RESULTS:
        assert isinstance(r, Result)
        assert r.claim and "\n" not in r.claim and len(r.claim) <= 120, r.label
        if r.judge is None:
            assert r.verdict in VERDICTS and r.evidence, r.label
        else:
            # A judge is a small module-level function of the scorecard, named _judge_...
            assert r.judge.__name__.startswith("_judge_"), r.label
            assert getattr(scorecard, r.judge.__name__) is r.judge, r.label
            assert len(inspect.getsource(r.judge).splitlines()) <= 20, r.label


@pytest.mark.parametrize("fields", [
    dict(paper="other", label="X", claim="c", verdict="reproduced"),
    dict(paper="paper", label="X", claim="c"),
    dict(paper="paper", label="X", claim="c", verdict="fine"),
    dict(paper="paper", label="X", claim="c", figure="fig3"),
    dict(paper="paper", label="X", claim="c", verdict="reproduced", figure="fig3",
         judge=lambda s: ("reproduced", "")),
])
def test_a_result_without_a_clear_verdict_is_refused(fields):
    with pytest.raises(ValueError):
        Result(**fields)


def test_every_page_exists_and_every_figure_is_registered():
    from stochastic_transformers import figures

    for r in RESULTS:
        if r.page is not None:
            folder, _, name = r.page.partition("/")
            assert folder in ("notebooks", "book"), r.page
            assert (ROOT / f"{r.page}.md").is_file(), r.page
        if r.figure is not None:
            assert r.figure in figures.FIGURES, r.figure


def test_links_point_to_the_built_pages():
    assert scorecard.link("notebooks/fig3_phase_transition") == \
        "[fig3_phase_transition](fig3_phase_transition.ipynb)"
    assert scorecard.link("book/limit") == "[limit](../book/limit.md)"
    assert scorecard.link(None) == "—"


@pytest.fixture(scope="module")
def summaries():
    """Each judged figure's summary of its committed result (what :func:`rows` computes)."""
    from stochastic_transformers import figures

    out = {}
    for fig_id in {r.figure for r in JUDGED}:
        figure = figures.get(fig_id)
        ds, _ = figure.obtain("paper")
        out[fig_id] = figure.summary(ds)
    return out


def test_every_judge_gives_a_verdict_on_the_committed_results(summaries):
    rows = scorecard.rows(summaries=summaries)
    assert len(rows) == len(RESULTS)
    for row in rows:
        assert row["verdict"] in VERDICTS, row
        assert row["evidence"] and "\n" not in row["evidence"], row
    for paper in ("paper", "followup"):
        table = scorecard.table(rows, paper, link=scorecard.link)
        assert len(table.splitlines()) == 2 + len(_labels(paper))
        # four columns: five unescaped pipes a line
        assert all(line.replace("\\|", "").count("|") == 5 for line in table.splitlines())
    assert sum(sum(n.values()) for n in scorecard.counts(rows).values()) == len(RESULTS)


def _set(path, value):
    """A change to a summary: ``path`` a tuple of keys; ``"*"`` stands for every key."""
    def apply(s):
        *head, last = path
        nodes = [s]
        for key in head:
            nodes = [v for n in nodes for v in (n.values() if key == "*" else [n[key]])]
        for n in nodes:
            for k in (n if last == "*" else [last]):
                n[k] = value
    return apply


#: For each judge, changes to its figure's summary that a failed reproduction would show.
WORSE = {
    "_judge_fig1": [_set(("field_points_outward",), False), _set(("max_abs_dot_x",), 0.1)],
    "_judge_fig2": [_set(("verdict",), "identity_better")],
    "_judge_fig3": [_set(("n_positive_below",), 3)],
    "_judge_thm2": [_set(("n_zero_above",), 2)],
    "_judge_fig4": [_set(("verdict",), "not reproduced")],
    "_judge_prop1": [_set(("verdict",), "not reproduced")],
    "_judge_fig6": [_set(("verdict",), "not reproduced")],
    "_judge_fig7": [_set(("t_clustered_95_max",), float("inf")),
                    _set(("per_beta", "*", "max_dev_after_ref"), 0.5)],
    "_judge_fig8": [_set(("settled_early",), False), _set(("flat",), False),
                    _set(("agrees_with_theory",), False)],
    "_judge_lemma5": [_set(("agrees_with_theory",), False)],
    "_judge_fig9": [_set(("verdicts", k), False) for k in (
        "comparable_small", "one_cluster_small", "faster_large", "deterministic_plateaus",
        "stochastic_no_plateau")],
    "_judge_thm1": [_set(("verdict",), "poor_fit"), _set(("weak_error_largest_L",), 1.0)],
    "_judge_lemma4": [_set(("verdict",), "poor_fit"), _set(("weak_error_largest_L",), 1.0)],
    "_judge_universality": [_set(("laws_agree",), False)],
    "_judge_lemma6": [_set(("min_gap",), 0.0)],
    "_judge_homog_thm1": [_set(("orders", "diffusive", "holds"), False)],
    "_judge_homog_cor2": [lambda s: [c.update(label="none") for c in s["cells"]]],
    "_judge_homog_fig1": [_set(("n_definite_agree",), 0)],
    "_judge_homog_table": [_set(("all_verdicts_hold",), False),
                           _set(("scored_on_curve",), False)],
    "_judge_homog_cor1": [_set(("scored_on_curve",), False)],
    "_judge_homog_thm2": [_set(("gap_shrinks_with_d",), False), _set(("slows_with_b",), False)],
    "_judge_homog_fig2": [_set(("slows_with_b",), False)],
    "_judge_homog_thm3": [_set(("rate_verdict", "*"), False)],
    "_judge_homog_thm3_hemisphere": [_set(("rate_verdict", "*"), False)],
    "_judge_weak_thm1": [_set(("by_model", "*", "holds"), 0)],
    "_judge_lemma2": [_set(("by_model", "*", "holds"), 0)],
    "_judge_lemma3": [_set(("by_model", "*", "holds"), 0)],
    "_judge_homog_data_table": [_set(("mitigated_at_every_d", "simplex"), False),
                                _set(("by_d", "hemisphere", "*", "mitigated"), True)],
    "_judge_homog_overlap": [_set(("pairs", "common", "agree"), False)],
    "_judge_homog_prop4": [_set(("vanishes_at",), [])],
    "_judge_homog_heads": [lambda s: [r.update(agrees=False) for r in s["rows"]]],
    "_judge_conjecture": [lambda s: s.update(by_n={n: [4.0] for n in s["by_n"]})],
    "_judge_homog_thm4": [_set(("fits", "*"), False)],
    "_judge_homog_laplace": [_set(("laplace_gaps",), [0.01, 0.02])],
}


def test_every_judge_has_its_worse_numbers():
    assert sorted(WORSE) == sorted({r.judge.__name__ for r in JUDGED})


@pytest.mark.parametrize("result", JUDGED, ids=lambda r: f"{r.paper}-{r.label}")
def test_a_judge_fed_worse_numbers_says_not_reproduced(result, summaries):
    committed = summaries[result.figure]
    worse = copy.deepcopy(committed)
    for change in WORSE[result.judge.__name__]:
        change(worse)
    verdict, evidence = result.judge(worse)
    assert verdict == "not reproduced", (result.label, verdict, evidence)
    # and the scorecard says so: rows() takes the changed summary
    row, = scorecard.rows([result], summaries={result.figure: worse})
    assert row["verdict"] == "not reproduced"


def test_a_better_run_of_the_cpu_study_is_at_most_partly_reproduced(summaries):
    better = dict(summaries["fig2"], verdict="gaussian_better")
    judge = next(r.judge for r in RESULTS if r.figure == "fig2")
    assert judge(better)[0] == "partly reproduced"
