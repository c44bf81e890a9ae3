"""The figure protocol (``stochastic_transformers.figures``): every registered module follows it.

A new figure that breaks the protocol fails here, before its notebook is written.
"""

import inspect
import math

import matplotlib
import pytest

from stochastic_transformers import figures

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


@pytest.mark.parametrize("fig_id", sorted(f for f, m in MODULES.items() if hasattr(m, "cell")))
def test_a_sweep_projects_its_cost_for_every_scale(fig_id):
    module = MODULES[fig_id]
    assert list(inspect.signature(module.cost).parameters) == ["scale", "ds"]
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
        assert seconds == pytest.approx(module._measured(ds)[0], rel=1e-9)
