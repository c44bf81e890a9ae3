"""The figure protocol (``stochastic_transformers.figures``): every registered module follows it,
and the base (``figures.base``) does the common work the same way for all of them.

A new figure that breaks the protocol fails here, before its notebook is written.
"""

import inspect
import math

import matplotlib
import pytest

from stochastic_transformers import figures
from stochastic_transformers.figures import base

matplotlib.use("Agg")

MODULES = figures.available()


def test_every_registered_figure_is_implemented():
    assert set(MODULES) == set(figures.REGISTRY)


@pytest.mark.parametrize("fig_id", sorted(MODULES))
def test_module_declares_the_protocol(fig_id):
    module = MODULES[fig_id]
    assert module.ID == fig_id
    assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION
    assert "\n" not in module.DESCRIPTION
    assert tuple(module.SCALES) == figures.SCALE_NAMES
    assert all(isinstance(k, dict) and k for k in module.SCALES.values())
    params = inspect.signature(module.compute).parameters
    assert list(params)[0] == "scale" and params["scale"].default == "quick"
    for name in ("scheduler", "cache_dir", "progress"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for name in ("summary", "plot"):
        assert callable(getattr(module, name)), name
        assert list(inspect.signature(getattr(module, name)).parameters)[0] == "ds"
    if hasattr(module, "cell"):
        # a sweep's cells are cached under a key that folds in CELL_VERSION
        assert isinstance(module.CELL_VERSION, str) and module.CELL_VERSION
        assert "seed" in inspect.signature(module.cell).parameters
    if hasattr(module, "_finish"):
        # one shape of the step from the raw sweep to the dataset: (raw, scale, *, extras)
        finish = list(inspect.signature(module._finish).parameters.values())
        assert finish[1].name == "scale"
        assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in finish[:2])
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in finish[2:])
    assert not hasattr(module, "finish"), "the finishing step is private: _finish"
    # one way to check knobs (KNOB_SCHEMA), to count work (base.measured), to load results
    for name in ("check_knobs", "_check_knobs", "_measured", "load_paper_result"):
        assert not hasattr(module, name), f"{name}: replaced by the base"


@pytest.mark.parametrize("fig_id", sorted(MODULES))
def test_every_knob_of_every_scale_has_a_check(fig_id):
    module = MODULES[fig_id]
    schema = module.KNOB_SCHEMA
    assert all(callable(check) for check in schema.values())
    scale_knobs = set().union(*(set(k) for k in module.SCALES.values()))
    if fig_id == "fig2":
        # the training fields are checked by training.TrainConfig; its own knobs here
        assert set(module.OWN_KNOBS) <= set(schema)
        return
    assert scale_knobs <= set(base.KNOB_CHECKS) | set(schema)
    assert set(schema) <= scale_knobs, "a schema entry for a knob no scale has"
    for scale in figures.SCALE_NAMES:
        base.module_knobs(module, scale)   # every scale passes its own checks


@pytest.mark.parametrize("fig_id", sorted(f for f, m in MODULES.items() if hasattr(m, "cell")))
def test_a_sweep_projects_its_cost_for_every_scale(fig_id):
    module = MODULES[fig_id]
    assert list(inspect.signature(module.cost).parameters) == ["scale", "ds"]
    assert module.cost.__module__ == module.__name__ and "SECONDS_PER_WORK" in module.cost.__doc__
    assert math.isfinite(module.SECONDS_PER_WORK) and module.SECONDS_PER_WORK > 0
    costs = {}
    for scale in figures.SCALE_NAMES:
        costs[scale] = module.cost(scale)
        assert isinstance(costs[scale], float), scale
        assert math.isfinite(costs[scale]) and costs[scale] > 0, scale
        assert costs[scale] == pytest.approx(module.SECONDS_PER_WORK
                                             * module.work(module.SCALES[scale]))
    assert costs["paper"] >= costs["quick"] >= costs["smoke"]
    with pytest.raises(ValueError, match="scale"):
        module.cost("huge")


@pytest.mark.parametrize("fig_id", sorted(MODULES))
def test_an_unknown_knob_is_refused_before_any_compute(fig_id, monkeypatch):
    module = MODULES[fig_id]
    with pytest.raises(ValueError, match="no_such_knob"):
        module.compute("smoke", progress=False, no_such_knob=1)


@pytest.mark.parametrize("fig_id", sorted(MODULES))
def test_smoke_scale_computes_summarises_and_draws(fig_id, tmp_path):
    import matplotlib.pyplot as plt
    import xarray as xr

    module = MODULES[fig_id]
    ds = module.compute("smoke", progress=False, cache_dir=tmp_path)
    assert isinstance(ds, xr.Dataset)
    summary = module.summary(ds)
    assert isinstance(summary, dict) and summary
    fig = module.plot(ds)
    assert isinstance(fig, matplotlib.figure.Figure)
    plt.close(fig)
    if hasattr(module, "cell"):
        # the rate measured on this run, applied to the scale it ran, gives back its own
        # cell time: work(knobs) and the work read from the dataset agree
        seconds = module.cost("smoke", ds)
        assert math.isfinite(seconds) and seconds > 0
        assert seconds == pytest.approx(base.measured(module, ds)[0], rel=1e-9)


# ----------------------------------------------------------------------------- the base

def test_resolve_scale_checks_every_knob_not_only_the_overridden():
    scales = {name: {"n_traj": 10, "T": 2.0, "L": 5, "t_min": 0.5} for name in figures.SCALE_NAMES}
    schema = {"t_min": base.real(0.0, lambda knobs: knobs["T"], strict_min=True)}
    assert base.resolve_scale(scales, "smoke", {}, schema)["t_min"] == 0.5
    bad = {**scales, "smoke": {**scales["smoke"], "n_traj": 0}}
    with pytest.raises(ValueError, match="n_traj must be an integer >= 1"):
        base.resolve_scale(bad, "smoke", {}, schema)            # a shared knob, not overridden
    with pytest.raises(ValueError, match="t_min must be > 0.0 and <= 2.0"):
        base.resolve_scale(scales, "smoke", {"t_min": 3.0}, schema)   # bound from another knob
    with pytest.raises(ValueError, match=r"T \* L must be a whole number"):
        base.resolve_scale(scales, "smoke", {"T": 0.3}, schema)
    with pytest.raises(ValueError, match="unknown knob.*bogus"):
        base.resolve_scale(scales, "smoke", {"bogus": 1}, schema)
    with pytest.raises(ValueError, match="scale"):
        base.resolve_scale(scales, "huge", {}, schema)
    # an override of None keeps the scale's value
    assert base.resolve_scale(scales, "smoke", {"n_traj": None}, schema)["n_traj"] == 10


def test_check_factories_name_the_knob_and_its_range():
    knobs = {"Ls": (10, 20), "T": 1.5}
    assert base.integers(1, distinct=True, sort=True)("Ls", [20, 10], knobs) == (10, 20)
    assert base.reals(0.0)("betas", 2, knobs) == (2.0,)       # one value is a list of one
    assert base.reals(0.0, empty=True)("factors", (), knobs) == ()
    assert base.choices(("a", "b"))("laws", "a", knobs) == ("a",)
    for check, value, message in [
        (base.integers(1), (), "Ls must hold at least one value"),
        (base.integers(1, distinct=True), (3, 3), "Ls must not repeat a value"),
        (base.reals(0.0, increasing=True), (2.0, 1.0), "Ls must be increasing"),
        (base.integer(3), 2, "Ls must be an integer >= 3"),
        (base.integers(lambda k: k["T"] + 1), (2,), r"Ls must be an integer >= 2.5"),
        (base.choice(("a", "b")), "c", "Ls must be one of 'a', 'b'"),
        (base.whole_layers("T", "Ls"), (10, 3), r"T \* Ls must be a whole number"),
    ]:
        with pytest.raises(ValueError, match=message):
            check("Ls", value, knobs)
    both = base.all_of(base.integers(1), base.whole_layers("T", "Ls"))
    assert both("Ls", (2, 4), knobs) == (2, 4)


def test_figure_sweep_names_the_sweep_and_picks_the_scheduler(monkeypatch):
    from stochastic_transformers import sweep

    calls = []
    monkeypatch.setattr(sweep, "run_sweep", lambda cell, grid, **kw: calls.append((cell, kw)))
    fig3 = MODULES["fig3"]
    base.figure_sweep(fig3.__name__, "smoke", {"d": [4]}, fixed={}, seed=0)
    base.figure_sweep(fig3, "quick", {"d": [4]}, fixed={}, seed=0, part="refine",
                      scheduler="tcp://x:1")
    base.figure_sweep(fig3, "paper", {"d": [4]}, fixed={}, seed=0, cell=len, name="legacy")
    assert [kw["name"] for _, kw in calls] == ["fig3-smoke", "fig3-quick-refine", "legacy"]
    assert [kw["scheduler"] for _, kw in calls] == ["synchronous", "tcp://x:1", "local"]
    assert calls[0][0] is fig3.cell and calls[2][0] is len


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
    assert base.measured(MODULES["fig3"], ds) == (4.0, 160.0)


def test_obtain_is_public():
    assert figures.obtain is base.obtain and figures.load_committed is base.load_committed
