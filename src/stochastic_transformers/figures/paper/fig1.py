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
simulation: :func:`run` evaluates the field.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from ..._validation import EXP_BETA_MAX, check_real
from ...attention import attention_paths_last, tangent_projection
from ...style import palette
from ..base import laid_out
from ..knobs import integer, real
from ..spec import Figure
from ..words import verdict

_BASE = dict(beta=1.0, token_angles=(0.0, 120.0), attention="unnormalized")
SCALES = {
    "smoke": dict(_BASE, n_arrows=12, n_fine=361),
    "quick": dict(_BASE, n_arrows=24, n_fine=3601),
    "paper": dict(_BASE, n_arrows=24, n_fine=3601),
}


def _two_angles(name, value, knobs):
    """The check of ``token_angles``: two angles in degrees."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError(f"{name} must be two angles in degrees; got {value!r}")
    return tuple(check_real(f"{name}[{i}]", a) for i, a in enumerate(value))


def _unit(angle_rad):
    return np.stack([np.cos(angle_rad), np.sin(angle_rad)], axis=-1)


def rest_points(theta, speed):
    """Zeros of a periodic tangential speed sampled on ``theta`` (radians, one period):
    ``(angles, stable)``, the interpolated crossings and whether each attracts (the speed
    goes from positive to negative)."""
    theta, speed = np.asarray(theta, dtype=float), np.asarray(speed, dtype=float)
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
    r"""At the points X of angles ``theta``: X, the attention A from ``(X, tokens...)``,
    its tangent part, :math:`\langle X, A\rangle` and the tangent part along :math:`\tau`."""
    x = _unit(theta)
    seq = np.empty((len(tokens) + 1, 2, theta.size))   # one configuration per point
    seq[0], seq[1:] = x.T, tokens[:, :, None]
    a = attention_paths_last(seq, beta, attention)[0].T
    p = tangent_projection(x, a)
    tau = np.stack([-np.sin(theta), np.cos(theta)], axis=-1)
    return x, a, p, np.sum(a * x, axis=-1), np.sum(p * tau, axis=-1)


def run(knobs, sweeps):
    r"""The field on the circle (no sweep): ``position(theta, component)``, ``field``
    (:math:`A`), ``tangent_field`` (:math:`P^\perp_X A`), ``radial`` and ``tangential``
    (along X and :math:`\tau`; also on ``theta_fine``), the fixed ``tokens`` and the rest
    points of the projected flow (``rest_angle`` in degrees, ``rest_stable``)."""
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
    for coord in ("theta", "theta_fine"):
        ds[coord].attrs["units"] = "degree"
    ds.attrs.update(beta=beta, attention=attention, token_angles_deg=list(angles), B="identity")
    return ds


def pull_peak_angle(beta):
    r"""Angle (degrees) at which one token's tangential pull :math:`e^{\beta\cos\varphi}\sin\varphi`
    is largest: :math:`\cos\varphi^* = (\sqrt{1+4\beta^2}-1)/(2\beta)` (90 at beta = 0)."""
    b = float(beta)
    return 90.0 if b == 0.0 else math.degrees(math.acos((math.sqrt(1 + 4 * b * b) - 1) / (2 * b)))


def summary(ds) -> dict:
    """Numbers the page quotes: how radial the unnormalised field is (``field_points_outward``:
    positive radial part on the whole fine grid), how tangent its projection, the rest
    points, and what the midpoint of the shorter arc between the fixed tokens does.

    By symmetry that midpoint is a rest point; it attracts iff the half-separation is
    below :func:`pull_peak_angle`.  If it is the only rest point strictly inside the arc
    (``midpoint_only_rest_on_arc``), the flow on the circle being one-dimensional, a
    stable midpoint draws every token between the fixed ones (``midpoint_attracts_arc``).
    """
    a_norm = np.linalg.norm(ds.field.values, axis=-1)
    t1, t2 = (float(v) for v in ds.attrs["token_angles_deg"])
    gap = (t2 - t1) % 360.0
    # the shorter arc between the tokens: it leaves from ``start`` and spans 2 * half
    start, half = (t1, gap / 2) if gap <= 180 else (t2, (360.0 - gap) / 2)
    mid = (start + half) % 360.0
    rest = ds.rest_angle.values
    mid_idx = int(np.argmin(np.abs((rest - mid + 180.0) % 360.0 - 180.0))) if rest.size else -1
    offset = (rest - start) % 360.0
    on_arc = (offset > 1e-9) & (offset < 2 * half - 1e-9)   # strictly inside the arc
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
    """The page's words: ``verdict``, the rest points in degrees (``*_rest_text``) and
    ``midpoint_reading``, what the midpoint between the fixed tokens does."""
    beside = " or ".join(f"{v:.1f}°" for v in stats["stable_rest_on_arc"]) or "none"
    midpoint = ("attracts: a token placed anywhere between the two ends there"
                if stats["midpoint_attracts_arc"] else
                "attracts the tokens near it, but other rest points lie between the two"
                if stats["midpoint_stable"] else "repels: a token between the two is drawn "
                f"to the stable point beside the nearer one ({beside})")
    checks = [(stats["field_points_outward"],
               f"the unnormalised field points out of the circle everywhere (on average "
               f"{stats['mean_radial_share']:.0%} of an arrow is radial)",
               "with these settings the unnormalised field points into the circle in places"),
              (stats["max_abs_dot_x"] < 1e-12, "its projection is tangent to the circle up to "
               "rounding", "the projected field is not tangent to the circle")]
    return {"verdict": verdict(checks, ("Reproduced", "Partly reproduced", "Not reproduced")),
            "midpoint_reading": midpoint, "stable_rest_text": _degrees(stats["stable_rest"]),
            "unstable_rest_text": _degrees(stats["unstable_rest"])}


def plot(ds):
    """Left: the unnormalised field as arrows on the circle; right: its tangent projection."""
    import matplotlib.pyplot as plt

    arrow_c, rest_c, token_c = (palette(10)[i] for i in (0, 2, 3))
    x = ds.position.values
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 4.2))
    label = "A^U" if ds.attrs.get("attention", "unnormalized") == "unnormalized" else "A^S"
    titles = [rf"(a) ${label}_\beta(X, \mathbf{{X}})$",
              rf"(b) $P^\perp_X[{label}_\beta(X, \mathbf{{X}})]$"]
    for ax, var, title in zip(axes, ("field", "tangent_field"), titles):
        ax.plot(*_unit(np.linspace(0, 2 * math.pi, 400)).T, color="0.6", lw=1)
        v = ds[var].values
        # Each panel has its own arrow scale (the longest arrow is 0.7 of the radius).
        longest = float(np.linalg.norm(v, axis=-1).max())
        ax.quiver(x[:, 0], x[:, 1], v[:, 0], v[:, 1], angles="xy", scale_units="xy",
                  scale=longest / 0.7 if longest > 0 else 1.0, color=arrow_c, width=0.006,
                  headwidth=3.5, headlength=4, zorder=4)
        ax.plot(x[:, 0], x[:, 1], "o", ms=2.5, color="0.3", zorder=3)
        for k, tok in enumerate(ds.tokens.values, start=1):
            ax.plot(*tok, "o", ms=9, color=token_c, zorder=5)
            ax.annotate(rf"$X^{k}$", tok, xytext=0.76 * tok, ha="center", va="center",
                        color=token_c)
        ax.set(aspect="equal", xlim=(-1.75, 1.75), ylim=(-1.75, 1.75),
               title=f"{title}\nlongest arrow: {longest:.2f}")
        ax.axis("off")
    for stable, face in ((True, rest_c), (False, "white")):
        at = _unit(np.deg2rad(ds.rest_angle.values[ds.rest_stable.values == stable]))
        axes[1].plot(at[:, 0], at[:, 1], "o", ms=7, mfc=face, mec=rest_c, mew=1.5, zorder=6,
                     label=f"{'stable' if stable else 'unstable'} rest point")
    fig.legend(loc="lower center", ncol=2)
    angles = " and ".join(f"{v:g}°" for v in ds.attrs["token_angles_deg"])
    return laid_out(fig, rf"$\beta$ = {ds.attrs['beta']:g}, $Q = K = \mathrm{{Id}}$, "
                    rf"$X^1, X^2$ at {angles}", rect=(0, 0.06, 1, 0.94))


FIGURE = Figure.declared(
    globals(), "fig1", source="paper",
    description="attention field on the circle: unnormalised A^U vs its tangent projection "
                "(beta = 1)",
    schema={"beta": real(0.0, EXP_BETA_MAX), "token_angles": _two_angles,
                           "n_arrows": integer(4), "n_fine": integer(16)})
compute, cost = FIGURE.compute, FIGURE.cost
