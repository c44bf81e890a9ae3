"""The figures of the book, one :class:`~.spec.Figure` each, grouped by source.

A figure module (in :mod:`.paper`, :mod:`.followup` or :mod:`.ours`) holds its settings
(``SCALES``), its sweep cell, ``summary`` and ``plot``, and declares them once as
``FIGURE``; the protocol is :class:`.spec.Figure`, and ``CONTRIBUTING.md`` says how to add
one (Figure 3, :mod:`.paper.fig3`, is the worked example).  :data:`FIGURES` is the
registry, in the book's order; ``reproduce ID`` and the notebooks find a figure there.
"""

from __future__ import annotations

from pathlib import Path

from .._validation import SCALE_NAMES, check_choice
from ..style import use_style
from .followup import (homog_heads, homog_hemisphere, homog_laws, homog_limits, homog_logistic,
                       homog_mean_field, homog_meet, homog_noise, homog_rate, homog_regimes,
                       homog_scaling, homog_simplex, homog_slow_motion)
from .base import load_committed
from .knobs import parse_settings
from .ours import (clusters, ff_pairs, ff_threshold, ff_tokens, norm_clock, norm_pairs, norm_tokens,
                   train_phase, train_width)
from .paper import (fig1, fig2, fig3, fig4, fig6, fig7, fig8, fig9, overlap, persistence_long, thm1,
                    universality, weak_order)
from .spec import Figure

__all__ = ["FIGURES", "Figure", "SCALE_NAMES", "get", "load_committed", "obtain",
           "parse_settings", "reproduce", "save_figure", "settings"]

#: Every figure by id, in the book's order.
FIGURES: dict[str, Figure] = {module.FIGURE.id: module.FIGURE for module in (
    fig1, fig2, overlap, fig3, fig4, fig6, fig7, clusters, persistence_long, fig8, fig9,
    ff_pairs, ff_threshold, ff_tokens, norm_pairs, norm_clock, norm_tokens, train_phase,
    train_width,
    thm1,
    weak_order,
    universality,
    homog_regimes, homog_meet, homog_logistic, homog_hemisphere, homog_simplex, homog_limits,
    homog_rate, homog_heads, homog_noise, homog_scaling, homog_laws, homog_slow_motion, homog_mean_field)}


def get(fig_id: str) -> Figure:
    """The figure ``fig_id``, or a ValueError listing the ids."""
    if isinstance(fig_id, Figure):
        return fig_id
    if fig_id not in FIGURES:
        raise ValueError(f"figure id must be one of {', '.join(FIGURES)}; got {fig_id!r}")
    return FIGURES[fig_id]


def obtain(figure, scale: str, **options):
    """:meth:`.spec.Figure.obtain` of ``figure`` (a Figure, its module or its id)."""
    return get(getattr(figure, "FIGURE", figure)).obtain(scale, **options)


def settings(fig_id: str, scale: str) -> dict:
    """Every knob of figure ``fig_id`` at ``scale`` with its value: what ``--set`` accepts."""
    return get(fig_id).settings(scale)


def save_figure(fig, out_dir, fig_id: str) -> list[Path]:
    """Write ``fig`` as ``ID.png`` (raster) and ``ID.svg`` (vector) in ``out_dir``."""
    from ..io import atomic_path

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext, kwargs in (("png", {"dpi": 150}), ("svg", {})):
        path = out_dir / f"{fig_id}.{ext}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, bbox_inches="tight", **kwargs)
        paths.append(path)
    return paths


def reproduce(fig_id: str, scale: str = "quick", out="out", *, scheduler=None,
              cache_dir=None, progress=True, **overrides):
    """Compute figure ``fig_id`` at ``scale``, then write ``ID.nc``, ``ID.png`` and ``ID.svg``.

    Returns the dataset.  ``scheduler`` is a Dask scheduler address (or ``None``
    for a local cluster); ``cache_dir`` holds finished sweep cells so that a
    killed run resumes.  ``compute`` checks the scale and the knobs before anything is
    computed or written.  The file's ``load_average_start`` and ``load_average_end`` are
    those of this whole call (a sweep's own describe that sweep alone); a dataset that
    records no ``wall_time_s`` of its own (a figure without a sweep) gets the compute's.
    """
    import time

    from ..io import load_average, writable_folder, write_netcdf

    figure = get(fig_id)
    check_choice("scale", scale, SCALE_NAMES)
    figure.knobs(scale, overrides)
    # The output folder is checked before the compute: an unwritable one must not cost a run.
    out = writable_folder(out, "out")
    load_start = load_average()
    start = time.perf_counter()
    ds = figure.compute(scale, scheduler=scheduler, cache_dir=cache_dir, progress=progress,
                        **overrides)
    elapsed = time.perf_counter() - start
    ds.attrs["overrides"] = "; ".join(f"{k}={v!r}" for k, v in overrides.items()) or "none"
    ds.attrs.setdefault("wall_time_s", elapsed)
    for key, value in (("load_average_start", load_start), ("load_average_end", load_average())):
        if value is not None:
            ds.attrs[key] = value
    write_netcdf(ds, out / f"{fig_id}.nc")
    use_style()
    save_figure(figure.plot(ds), out, fig_id)
    return ds
