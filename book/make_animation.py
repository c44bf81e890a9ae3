r"""The landing page's animation: 24 tokens on the sphere S^2, without and with random values.

    .venv/bin/python book/make_animation.py            # simulate, then draw
    .venv/bin/python book/make_animation.py --draw     # draw from the committed run

Both panels start from the same 24 tokens, uniform on :math:`S^2`, with
:math:`Q^\top K = \mathrm{Id}`, :math:`\beta = 3`, softmax attention and :math:`L = 20`
layers per unit of time, for :math:`T = 40`.  Left, the deterministic flow (every value
matrix the identity: the hybrid model at :math:`\varepsilon = 0`); right, the paper's
model, with an independent Gaussian value matrix in every layer.  The run records every
Gram matrix at the frame times (``results/landing_tokens.nc``, with its provenance); the
drawing reads only that file, so the animation is made from a committed run.

A Gram matrix fixes the tokens up to a rotation of the sphere.  Random value matrices
rotate all tokens together, which carries the whole picture around; the drawing removes
that common rotation (each frame is the rotation of the Gram matrix's embedding that best
matches the previous frame, an orthogonal Procrustes fit), so what moves is the tokens
relative to each other, which is what clustering is about.  This is one sample each: with
random values two tokens end antipodal with positive probability, not always.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "landing_tokens.nc"
OUT = Path(__file__).resolve().parent / "images" / "tokens_on_the_sphere.gif"
SETTINGS = dict(n_tokens=24, d=3, beta=3.0, L=20, T=40.0, frame_step=0.25, seed=1)


def simulate_both() -> "xr.Dataset":
    """Gram matrices of both models at the frame times, from the same start."""
    import xarray as xr

    from stochastic_transformers import ModelConfig, RunConfig, simulate
    from stochastic_transformers.io import load_average, provenance

    s = SETTINGS
    start, load_start = time.perf_counter(), load_average()
    x0 = np.random.default_rng(s["seed"]).normal(size=(s["n_tokens"], s["d"]))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    n_frames = int(round(s["T"] / s["frame_step"])) + 1
    times = tuple(np.round(np.arange(n_frames) * s["frame_step"], 10))
    models = {"flow": ModelConfig(d=s["d"], beta=s["beta"], kind="hybrid", epsilon=0.0),
              "random_values": ModelConfig(d=s["d"], beta=s["beta"])}
    grams = [simulate(model, RunConfig(n_tokens=s["n_tokens"], n_traj=1, L=s["L"], T=s["T"],
                                       times=times, x0=x0, seed=s["seed"],
                                       method="literal")).gram_t.values[0]
             for model in models.values()]
    ds = xr.Dataset({"gram_t": (("model", "time", "i", "j"), np.stack(grams))},
                    coords={"model": list(models), "time": list(times)})
    ds.attrs.update({**s, **provenance(load_start), "wall_time_s": time.perf_counter() - start,
                     "models": "flow: hybrid, epsilon = 0 (every V = I); random_values: "
                               "the paper's model, Gaussian V"})
    return ds


def embed(gram: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """Points (N, 3) with this Gram matrix, rotated to best match ``previous``."""
    values, vectors = np.linalg.eigh(gram)
    points = vectors[:, -3:] * np.sqrt(np.clip(values[-3:], 0.0, None))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    if previous is not None:
        u, _, vt = np.linalg.svd(points.T @ previous)
        points = points @ (u @ vt)
    return points


def draw(ds, out: Path = OUT) -> Path:
    """The two panels as an animated GIF (about 1 MB, 10 frames a second)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    from stochastic_transformers.style import use_style

    use_style()
    paths = {}
    for model in ds.model.values:
        frames, previous = [], None
        for gram in ds.gram_t.sel(model=model).values:
            previous = embed(gram, previous)
            frames.append(previous)
        paths[model] = np.array(frames)
    titles = {"flow": "identity values: one cluster",
              "random_values": "random values: two antipodal clusters"}
    fig = plt.figure(figsize=(6.4, 3.3), dpi=100)
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    dots, axes = {}, []
    for k, model in enumerate(paths):
        ax = fig.add_subplot(1, 2, k + 1, projection="3d", computed_zorder=False)
        ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v),
                          color="0.85", lw=0.4)
        ax.set_axis_off()
        ax.set_box_aspect((1, 1, 1), zoom=1.45)
        ax.view_init(elev=20, azim=30)
        ax.set_title(titles[model])
        p = paths[model][0]
        dots[model] = ax.scatter(p[:, 0], p[:, 1], p[:, 2], s=26, color=f"C{k}",
                                 depthshade=False, zorder=3)
        axes.append(ax)
    fig.subplots_adjust(left=0.0, right=1.0, bottom=0.06, top=0.93, wspace=0.0)
    clock = fig.text(0.5, 0.03, "", ha="center")

    def frame(n):
        for model, path in paths.items():
            dots[model]._offsets3d = tuple(path[n].T)
        t = float(ds.time[n])
        clock.set_text(f"t = {t:.2f}, layer {round(t * int(ds.attrs['L']))}")
        return list(dots.values())

    anim = FuncAnimation(fig, frame, frames=len(ds.time), blit=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    anim.save(out, writer=PillowWriter(fps=10))
    plt.close(fig)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draw", action="store_true", help="draw from the committed run")
    args = parser.parse_args(argv)
    import xarray as xr

    from stochastic_transformers.io import write_netcdf

    if not args.draw:
        write_netcdf(simulate_both(), RUN)
    with xr.open_dataset(RUN) as ds:
        out = draw(ds.load())
    print(f"{out.relative_to(ROOT)}: {out.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
