"""The figure protocol (:class:`stochastic_transformers.figures.spec.Figure`): every registered
figure declares it, and the spec does the common work (knobs, sweeps, costs, committed
results) the same way for all of them.

A new figure that breaks the protocol fails here, before its notebook is written.
"""

import inspect
import math

import matplotlib
import pytest

from stochastic_transformers import figures
from stochastic_transformers.figures import base, spec
from stochastic_transformers.figures import knobs as knob_checks

matplotlib.use("Agg")

FIGURES = figures.FIGURES


def test_the_registry_lists_every_figure_module_once():
    import importlib
    import pkgutil

    declared = []
    for source in spec.SOURCES:
        package = importlib.import_module(f"stochastic_transformers.figures.{source}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            if hasattr(module, "FIGURE"):
                assert module.FIGURE.source == source, info.name
                declared.append(module.FIGURE.id)
    assert sorted(declared) == sorted(FIGURES)


@pytest.mark.parametrize("fig_id", sorted(FIGURES))
def test_figure_declares_the_protocol(fig_id):
    figure = FIGURES[fig_id]
    assert figure.id == fig_id
    assert figure.description and "\n" not in figure.description
    assert tuple(figure.scales) == figures.SCALE_NAMES
    assert all(isinstance(k, dict) and k for k in figure.scales.values())
    for name in ("summary", "plot"):
        assert list(inspect.signature(getattr(figure, name)).parameters)[0] == "ds"
    if figure.cell is not None:
        # a sweep's cells are cached under a key that folds in the cell version
        assert isinstance(figure.cell_version, str) and figure.cell_version
        assert "seed" in inspect.signature(figure.cell).parameters
    # the module's public compute and cost are the spec's
    module = inspect.getmodule(figure.summary)
    assert module.compute == figure.compute and module.cost == figure.cost


@pytest.mark.parametrize("fig_id", sorted(FIGURES))
def test_every_knob_of_every_scale_has_a_check(fig_id):
    figure = FIGURES[fig_id]
    assert all(callable(check) for check in figure.schema.values())
    scale_knobs = set().union(*(set(k) for k in figure.scales.values()))
    if fig_id == "fig2":
        # the training fields are checked by training.TrainConfig; its own knobs here
        assert {"seeds", "inits"} <= set(figure.schema)
    else:
        assert scale_knobs <= set(knob_checks.KNOB_CHECKS) | set(figure.schema)
        assert set(figure.schema) <= scale_knobs, "a schema entry for a knob no scale has"
    for scale in figures.SCALE_NAMES:
        figure.knobs(scale)   # every scale passes its own checks and its plan


@pytest.mark.parametrize("fig_id", sorted(f for f, fig in FIGURES.items() if fig.work))
def test_a_sweep_projects_its_cost_for_every_scale(fig_id):
    figure = FIGURES[fig_id]
    assert math.isfinite(figure.seconds_per_work) and figure.seconds_per_work > 0
    costs = {}
    for scale in figures.SCALE_NAMES:
        costs[scale] = figure.cost(scale)
        assert isinstance(costs[scale], float), scale
        assert math.isfinite(costs[scale]) and costs[scale] > 0, scale
        assert costs[scale] == pytest.approx(figure.seconds_per_work
                                             * figure.work(figure.knobs(scale)))
    assert costs["paper"] >= costs["quick"] >= costs["smoke"]
    with pytest.raises(ValueError, match="scale"):
        figure.cost("huge")


@pytest.mark.parametrize("fig_id", sorted(FIGURES))
def test_an_unknown_knob_is_refused_before_any_compute(fig_id, monkeypatch):
    figure = FIGURES[fig_id]
    with pytest.raises(ValueError, match="no_such_knob"):
        figure.compute("smoke", progress=False, no_such_knob=1)


@pytest.mark.parametrize("fig_id", sorted(FIGURES))
def test_smoke_scale_computes_summarises_and_draws(fig_id, tmp_path):
    import matplotlib.pyplot as plt
    import xarray as xr

    figure = FIGURES[fig_id]
    ds = figure.compute("smoke", progress=False, cache_dir=tmp_path)
    assert isinstance(ds, xr.Dataset)
    assert ds.attrs["figure"] == fig_id and ds.attrs["scale"] == "smoke"
    summary = figure.summary(ds)
    assert isinstance(summary, dict) and summary
    fig = figure.plot(ds)
    assert isinstance(fig, matplotlib.figure.Figure)
    plt.close(fig)
    if figure.work is not None:
        # the rate measured on this run, applied to the scale it ran, gives back its own
        # cell time: work(knobs) and the work read from the dataset agree
        seconds = figure.cost("smoke", ds)
        assert math.isfinite(seconds) and seconds > 0
        assert seconds == pytest.approx(figure.measured(ds)[0], rel=1e-9)


# ----------------------------------------------------------------------------- the base

def test_resolve_scale_checks_every_knob_not_only_the_overridden():
    scales = {name: {"n_traj": 10, "T": 2.0, "L": 5, "t_min": 0.5} for name in figures.SCALE_NAMES}
    schema = {"t_min": knob_checks.real(0.0, lambda knobs: knobs["T"], strict_min=True)}
    assert knob_checks.resolve_scale(scales, "smoke", {}, schema)["t_min"] == 0.5
    bad = {**scales, "smoke": {**scales["smoke"], "n_traj": 0}}
    with pytest.raises(ValueError, match="n_traj must be an integer >= 1"):
        knob_checks.resolve_scale(bad, "smoke", {}, schema)            # a shared knob, not overridden
    with pytest.raises(ValueError, match="t_min must be > 0.0 and <= 2.0"):
        knob_checks.resolve_scale(scales, "smoke", {"t_min": 3.0}, schema)   # bound from another knob
    with pytest.raises(ValueError, match=r"T \* L must be a whole number"):
        knob_checks.resolve_scale(scales, "smoke", {"T": 0.3}, schema)
    with pytest.raises(ValueError, match="unknown knob.*bogus"):
        knob_checks.resolve_scale(scales, "smoke", {"bogus": 1}, schema)
    with pytest.raises(ValueError, match="scale"):
        knob_checks.resolve_scale(scales, "huge", {}, schema)
    # an override of None keeps the scale's value
    assert knob_checks.resolve_scale(scales, "smoke", {"n_traj": None}, schema)["n_traj"] == 10


def test_check_factories_name_the_knob_and_its_range():
    knobs = {"Ls": (10, 20), "T": 1.5}
    assert knob_checks.integers(1, distinct=True, sort=True)("Ls", [20, 10], knobs) == (10, 20)
    assert knob_checks.reals(0.0)("betas", 2, knobs) == (2.0,)       # one value is a list of one
    assert knob_checks.reals(0.0, empty=True)("factors", (), knobs) == ()
    assert knob_checks.choices(("a", "b"))("laws", "a", knobs) == ("a",)
    for check, value, message in [
        (knob_checks.integers(1), (), "Ls must hold at least one value"),
        (knob_checks.integers(1, distinct=True), (3, 3), "Ls must not repeat a value"),
        (knob_checks.reals(0.0, increasing=True), (2.0, 1.0), "Ls must be increasing"),
        (knob_checks.integer(3), 2, "Ls must be an integer >= 3"),
        (knob_checks.integers(lambda k: k["T"] + 1), (2,), r"Ls must be an integer >= 2.5"),
        (knob_checks.choice(("a", "b")), "c", "Ls must be one of 'a', 'b'"),
        (knob_checks.whole_layers("T", "Ls"), (10, 3), r"T \* Ls must be a whole number"),
    ]:
        with pytest.raises(ValueError, match=message):
            check("Ls", value, knobs)
    both = knob_checks.all_of(knob_checks.integers(1), knob_checks.whole_layers("T", "Ls"))
    assert both("Ls", (2, 4), knobs) == (2, 4)


def test_sweeps_name_the_sweep_and_pick_the_scheduler(monkeypatch):
    from stochastic_transformers import sweep

    calls = []
    monkeypatch.setattr(sweep, "run_sweep", lambda cell, grid, **kw: calls.append((cell, kw)))
    fig3 = FIGURES["fig3"]
    spec.Sweeps(fig3, "smoke")({"d": [4]}, fixed={}, seed=0)
    spec.Sweeps(fig3, "quick", "tcp://x:1")({"d": [4]}, fixed={}, seed=0, part="refine")
    spec.Sweeps(fig3, "paper")({"d": [4]}, fixed={}, seed=0, cell=len, name="legacy")
    assert [kw["name"] for _, kw in calls] == ["fig3-smoke", "fig3-quick-refine", "legacy"]
    assert [kw["scheduler"] for _, kw in calls] == ["synchronous", "tcp://x:1", "local"]
    assert calls[0][0] is fig3.cell and calls[2][0] is len
    # the figure's cell version enters every cache key
    assert all(kw["code_version"].endswith("+fig3.1") for _, kw in calls)


def test_a_figure_declares_either_a_sweep_or_a_run():
    scales = {name: {"seed": 0} for name in figures.SCALE_NAMES}
    common = dict(source="paper", description="x", scales=scales, summary=len, plot=len)
    with pytest.raises(ValueError, match="either run, or cell"):
        spec.Figure("x", **common)
    with pytest.raises(ValueError, match="source must be one of"):
        spec.Figure("x", **{**common, "source": "elsewhere"}, run=len)


def test_outcome_fractions_and_the_default_work_count():
    import numpy as np
    import xarray as xr

    ds = xr.Dataset({"n_single": ("beta", np.array([3, 0])), "n_antipodal": ("beta", [1, 4]),
                     "n_traj": ("beta", [4, 4])}, coords={"beta": [0.0, 1.0]},
                    attrs={"fixed_L": 10, "fixed_T": 2.0, "cell_time_s": 4.0})
    out = base.add_outcome_fractions(ds, ("single", "antipodal"))
    np.testing.assert_allclose(out.p_single, [0.75, 0.0])
    assert {"p_antipodal_low", "p_antipodal_high"} <= set(out)
    # without measured_work: the sweep's cell time per trajectory-layer (8 trajectories x 20)
    assert FIGURES["fig3"].measured(ds) == (4.0, 160.0)


def test_a_range_of_numbers_needs_its_step():
    assert knob_checks.parse_knob("Ls", "2:4", (1, 2)) == (2, 3, 4)          # integers: step 1
    assert knob_checks.parse_knob("betas", "0:1:0.5", (0.0,)) == (0.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="needs its step"):
        knob_checks.parse_knob("betas", "0:4", (0.0,))


def test_the_measured_work_is_the_work_of_the_knobs_a_dataset_ran():
    """From the knobs it records; for an older file, from its scale's knobs, refused where a
    knob its sweep held fixed, or an override, says it ran other ones."""
    import json

    import xarray as xr

    figure = FIGURES["homog_heads"]
    smoke = figure.knobs("smoke")
    ds = xr.Dataset(attrs={"scale": "smoke", "cell_time_s": 2.0, "fixed_L": smoke["L"]})
    assert figure.measured(ds) == (2.0, figure.work(smoke))
    ds.attrs["knobs"] = json.dumps({**smoke, "n_traj": 2 * smoke["n_traj"]})
    assert figure.measured(ds) == (2.0, 2 * figure.work(smoke))
    for attrs in ({"fixed_L": 2 * smoke["L"]}, {"overrides": "n_traj=10"}):
        with pytest.raises(ValueError, match="did not run its scale's knobs"):
            figure.measured(xr.Dataset(attrs={"scale": "smoke", "cell_time_s": 2.0, **attrs}))
