r"""Figure 1: the attention field on the circle, before and after normalisation.

A moving token :math:`X` and two fixed tokens :math:`X^1, X^2` on :math:`S^1`, with
:math:`Q = K = \mathrm{Id}`: the unnormalised attention
:math:`A^U_\beta(X, \boldsymbol X) = \tfrac13\bigl(e^{\beta} X + e^{\beta\langle X, X^1\rangle}
X^1 + e^{\beta\langle X, X^2\rangle} X^2\bigr)` points mostly out of the circle, and its
tangent projection :math:`P^\perp_X[A] = A - \langle X, A\rangle X`, what normalisation
keeps when the value matrix is the identity, is a multiple of the unit tangent
:math:`\tau(\theta) = (-\sin\theta, \cos\theta)`:

.. math::

    \langle P^\perp_X[A^U], \tau\rangle = \tfrac13\sum_{k=1,2}
        e^{\beta\cos(\theta - \theta_k)}\sin(\theta_k - \theta).

Its zeros are the rest points of a third token under the deterministic flow.  No
simulation: :func:`run` evaluates the field with
:func:`stochastic_transformers.attention.attention_paths_last`.
"""


from __future__ import annotations

import math

import numpy as np
import xarray as xr

from ..._validation import check_real
from ...attention import attention_paths_last, tangent_projection
from ..base import laid_out
from ..knobs import integer, real
from ..spec import Figure

_BASE = dict(beta=1.0, token_angles=(0.0, 120.0), attention="unnormalized")
SCALES = {
    "smoke": dict(_BASE, n_arrows=12, n_fine=361),
    "quick": dict(_BASE, n_arrows=24, n_fine=3601),
    "paper": dict(_BASE, n_arrows=24, n_fine=3601),
}


def _two_angles(name, value, knobs):
    """The check of ``token_angles``: the two fixed tokens' angles, in degrees."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError(f"{name} must be two angles in degrees; got {value!r}")
    return tuple(check_real(f"{name}[{i}]", a) for i, a in enumerate(value))


def _unit(angle_rad):
    angle_rad = np.asarray(angle_rad, dtype=float)
    return np.stack([np.cos(angle_rad), np.sin(angle_rad)], axis=-1)


def rest_points(theta, speed):
    """Zeros of a periodic tangential speed sampled on ``theta`` (radians, one period).

    Returns ``(angles, stable)``: linearly interpolated zero crossings and whether each
    attracts (the speed goes from positive to negative as theta increases).
    """
    theta = np.asarray(theta, dtype=float)
    speed = np.asarray(speed, dtype=float)
    nxt_t = np.append(theta[1:], theta[0] + 2 * math.pi)
    nxt_s = np.append(speed[1:], speed[0])
    angles, stable = [], []
    for t0, t1, s0, s1 in zip(theta, nxt_t, speed, nxt_s):
        if s0 == 0.0:
            angles.append(t0)
            stable.append(bool(s1 < 0))
        elif s0 * s1 < 0:
            angles.append(t0 + (t1 - t0) * s0 / (s0 - s1))
            stable.append(bool(s0 > 0))
    return np.mod(np.array(angles), 2 * math.pi), np.array(stable, dtype=bool)


def _field(theta, tokens, beta, attention):
    r"""At the points X of angles ``theta``: X, the attention A it receives from
    ``(X, tokens...)``, its tangent part, :math:`\langle X, A\rangle` and the signed
    length of the tangent part along the counter-clockwise unit tangent."""
    x = _unit(theta)
    seq = np.empty((len(tokens) + 1, 2, theta.size))   # one configuration per point
    seq[0] = x.T
    seq[1:] = tokens[:, :, None]
    a = attention_paths_last(seq, beta, attention)[0].T
    p = tangent_projection(x, a)
    tau = np.stack([-np.sin(theta), np.cos(theta)], axis=-1)
    return x, a, p, np.sum(a * x, axis=-1), np.sum(p * tau, axis=-1)


def run(knobs, sweeps):
    r"""Evaluate the field on the circle (no sweep: ``sweeps`` is unused).

    Returns a dataset with ``position(theta, component)``, ``field`` (the attention
    :math:`A`), ``tangent_field`` (its projection :math:`P^\perp_X A`), ``radial(theta)``
    and ``tangential(theta)`` (the components along X and along the unit tangent), the
    same two on a fine grid (``radial_fine``, ``tangential_fine`` over ``theta_fine``), the
    fixed ``tokens(token, component)``, and the rest points of the projected flow
    (``rest_angle(rest)`` in degrees, ``rest_stable(rest)``).
    """
    beta, attention, angles = knobs["beta"], knobs["attention"], knobs["token_angles"]
    tokens = _unit(np.deg2rad(angles))
    theta = np.linspace(0.0, 2 * math.pi, knobs["n_arrows"], endpoint=False)
    theta_fine = np.linspace(0.0, 2 * math.pi, knobs["n_fine"], endpoint=False)
    x, a, p, radial, tangential = _field(theta, tokens, beta, attention)
    *_, radial_f, tangential_f = _field(theta_fine, tokens, beta, attention)
    rest, stable = rest_points(theta_fine, tangential_f)
    vector = ("theta", "component")
    ds = xr.Dataset(
        {"position": (vector, x),
         "field": (vector, a, {"long_name": "attention A_beta(X, (X, X1, X2))"}),
         "tangent_field": (vector, p, {"long_name": "tangent projection P_X^perp[A]"}),
         "radial": (("theta",), radial, {"long_name": "<X, A>"}),
         "tangential": (("theta",), tangential, {"long_name": "<P_X^perp A, tau>"}),
         "radial_fine": (("theta_fine",), radial_f),
         "tangential_fine": (("theta_fine",), tangential_f),
         "tokens": (("token", "component"), tokens),
         "rest_angle": (("rest",), np.rad2deg(rest), {"units": "degree"}),
         "rest_stable": (("rest",), stable)},
        coords={"theta": np.rad2deg(theta), "theta_fine": np.rad2deg(theta_fine),
                "component": ["x", "y"], "token": [1, 2]})
    ds.theta.attrs["units"] = "degree"
    ds.theta_fine.attrs["units"] = "degree"
    ds.attrs.update(beta=beta, attention=attention, token_angles_deg=list(angles), B="identity")
    return ds


def pull_peak_angle(beta):
    r"""Angle (degrees) at which one token's tangential pull :math:`e^{\beta\cos\varphi}\sin\varphi`
    is largest: :math:`\cos\varphi^* = (\sqrt{1+4\beta^2}-1)/(2\beta)` (90 at beta = 0)."""
    beta = float(beta)
    if beta == 0.0:
        return 90.0
    return math.degrees(math.acos((math.sqrt(1.0 + 4.0 * beta * beta) - 1.0) / (2.0 * beta)))


def summary(ds) -> dict:
    """Numbers the page quotes: how radial the unnormalised field is, how tangent its
    projection, the rest points, and whether the midpoint of the shorter arc between the
    fixed tokens attracts.

    By symmetry that midpoint is a rest point; it attracts iff the half-separation is
    below :func:`pull_peak_angle` (beyond it each token's pull weakens with distance).
    ``stable_rest_on_arc`` and ``unstable_rest_on_arc`` are the rest points strictly
    inside that shorter arc, and ``midpoint_only_rest_on_arc`` says whether the midpoint is
    the only one: then, the flow on the circle being one-dimensional, a stable midpoint
    draws every token placed between the two fixed tokens (``midpoint_attracts_arc``).
    ``field_points_outward`` says whether the radial component of the unnormalised field
    is positive everywhere on the fine grid (the field points out of the circle).
    """
    a_norm = np.linalg.norm(ds.field.values, axis=-1)
    t1, t2 = (float(v) for v in ds.attrs["token_angles_deg"])
    gap = (t2 - t1) % 360.0
    half = gap / 2 if gap <= 180 else (360.0 - gap) / 2
    mid = (t1 + gap / 2) % 360.0 if gap <= 180 else (t2 + (360.0 - gap) / 2) % 360.0
    rest = ds.rest_angle.values
    mid_idx = int(np.argmin(np.abs((rest - mid + 180.0) % 360.0 - 180.0))) if rest.size else -1
    # rest points strictly inside the shorter arc (its start: the token the arc leaves from)
    start = t1 if gap <= 180 else t2
    offset = (rest - start) % 360.0
    on_arc = (offset > 1e-9) & (offset < 2 * half - 1e-9)
    stable = ds.rest_stable.values.astype(bool)
    others = [i for i in np.flatnonzero(on_arc) if i != mid_idx]
    mid_stable = bool(stable[mid_idx]) if mid_idx >= 0 else None
    only = bool(mid_idx >= 0 and on_arc[mid_idx] and not others)
    return {
        "stable_rest_on_arc": [float(v) for v in rest[on_arc & stable]],
        "unstable_rest_on_arc": [float(v) for v in rest[on_arc & ~stable]],
        "midpoint_only_rest_on_arc": only,
        "midpoint_attracts_arc": bool(only and mid_stable),
        "midpoint": mid, "half_separation": half,
        "pull_peak_angle": pull_peak_angle(ds.attrs["beta"]),
        "midpoint_stable": mid_stable,
        "beta": float(ds.attrs["beta"]),
        "token_angles": [float(v) for v in ds.attrs["token_angles_deg"]],
        "min_radial": float(ds.radial_fine.min()),
        "field_points_outward": bool(float(ds.radial_fine.min()) > 0),
        "mean_radial_share": float(np.mean(np.abs(ds.radial.values) / a_norm)),
        "max_abs_dot_x": float(np.abs(np.sum(ds.tangent_field.values * ds.position.values,
                                             axis=-1)).max()),
        "stable_rest": [float(v) for v in rest[stable]],
        "unstable_rest": [float(v) for v in rest[~stable]],
    }


def _degrees(values) -> str:
    return ", ".join(f"{v:.1f}°" for v in values) if values else "none"


def phrases(stats) -> dict[str, str]:
    """The page's words (plain text): ``verdict`` (whether the paper's point is reproduced),
    the rest points in degrees (``stable_rest_text``, ``unstable_rest_text``) and
    ``midpoint_reading``, what the midpoint between the fixed tokens does."""
    tangent = stats["max_abs_dot_x"] < 1e-12
    if stats["field_points_outward"] and tangent:
        verdict = (f"Reproduced: the unnormalised field points out of the circle everywhere "
                   f"(on average {stats['mean_radial_share']:.0%} of an arrow is radial), and "
                   "its projection is tangent to the circle up to rounding.")
    elif tangent:
        verdict = ("Partly reproduced: the projection is tangent to the circle, but with these "
                   "settings the unnormalised field points into the circle in places.")
    else:
        verdict = "Not reproduced: the projected field is not tangent to the circle."
    if stats["midpoint_attracts_arc"]:
        midpoint = "attracts: a token placed anywhere between the two ends there"
    elif stats["midpoint_stable"]:
        midpoint = "attracts the tokens near it, but other rest points lie between the two"
    else:
        beside = " or ".join(f"{v:.1f}°" for v in stats["stable_rest_on_arc"]) or "none"
        midpoint = ("repels: a token between the two is drawn to the stable point beside the "
                    f"nearer one ({beside})")
    return {"verdict": verdict, "midpoint_reading": midpoint,
            "stable_rest_text": _degrees(stats["stable_rest"]),
            "unstable_rest_text": _degrees(stats["unstable_rest"])}


def plot(ds):
    """Left: the unnormalised field as arrows on the circle; right: its tangent projection."""
    import matplotlib.pyplot as plt

    from ...style import palette

    col = palette(10)
    arrow_c, token_c, rest_c = col[0], col[3], col[2]
    x = ds.position.values
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 4.2))
    circle = np.linspace(0, 2 * math.pi, 400)
    label = "A^U" if ds.attrs.get("attention", "unnormalized") == "unnormalized" else "A^S"
    titles = [rf"(a) ${label}_\beta(X, \mathbf{{X}})$",
              rf"(b) $P^\perp_X[{label}_\beta(X, \mathbf{{X}})]$"]
    for ax, var, title in zip(axes, ("field", "tangent_field"), titles):
        ax.plot(np.cos(circle), np.sin(circle), color="0.6", lw=1)
        v = ds[var].values
        # Each panel has its own arrow scale (the longest arrow is 0.7 of the radius);
        # the true lengths are in the titles.
        longest = float(np.linalg.norm(v, axis=-1).max())
        ax.quiver(x[:, 0], x[:, 1], v[:, 0], v[:, 1], angles="xy", scale_units="xy",
                  scale=longest / 0.7 if longest > 0 else 1.0, color=arrow_c, width=0.006,
                  headwidth=3.5, headlength=4, zorder=4)
        ax.plot(x[:, 0], x[:, 1], "o", ms=2.5, color="0.3", zorder=3)
        for k, tok in enumerate(ds.tokens.values, start=1):
            ax.plot(*tok, "o", ms=9, color=token_c, zorder=5)
            ax.annotate(rf"$X^{k}$", tok, xytext=(0.76 * tok[0], 0.76 * tok[1]), ha="center",
                        va="center", color=token_c)
        ax.set(aspect="equal", xlim=(-1.75, 1.75), ylim=(-1.75, 1.75),
               title=f"{title}\nlongest arrow: {longest:.2f}")
        ax.axis("off")
    ax = axes[1]
    for ang, stable in zip(ds.rest_angle.values, ds.rest_stable.values):
        ax.plot(*_unit(np.deg2rad(ang)), marker="o", ms=7, mfc=rest_c if stable else "white",
                mec=rest_c, mew=1.5, ls="none", zorder=6)
    ax.plot([], [], "o", ms=7, color=rest_c, label="stable rest point")
    ax.plot([], [], "o", ms=7, mfc="white", mec=rest_c, mew=1.5, label="unstable rest point")
    fig.legend(loc="lower center", ncol=2)
    angles = " and ".join(f"{v:g}°" for v in ds.attrs["token_angles_deg"])
    return laid_out(fig, rf"$\beta$ = {ds.attrs['beta']:g}, $Q = K = \mathrm{{Id}}$, "
                    rf"$X^1, X^2$ at {angles}", rect=(0, 0.06, 1, 0.94))


FIGURE = Figure.declared(
    globals(), "fig1", source="paper",
    description="attention field on the circle: unnormalised A^U vs its tangent projection "
                "(beta = 1)",
    schema={"beta": real(0.0), "token_angles": _two_angles,
                           "n_arrows": integer(4), "n_fine": integer(16)})
compute, cost = FIGURE.compute, FIGURE.cost
