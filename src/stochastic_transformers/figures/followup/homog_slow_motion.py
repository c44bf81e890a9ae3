r"""The slow motion of the follow-up's Theorem 4, measured on the attention itself.

Theorem 4 puts the overlap of two tokens, in the mean-field limit with :math:`\beta \gg d^2`
and on the time :math:`td`, on :math:`dR = -R(1-R^2)\,dt + dM`; its Step 2 expansion gives
the constant :math:`3/2`, ours :math:`2`.  The constant :math:`k = -D/(R(1-R^2))` of the
drift :math:`D` is computed from :math:`c_{xy} = E\langle m(x), m(y)\rangle` and
:math:`c_{xx}` of the softmax attention (:mod:`...random_attention.slow_motion`): over the
mean-field sea at finite and infinite :math:`\beta` (exact draws, any :math:`d`), and over
finite seas of :math:`n` tokens (the literal softmax), which approach the mean field only
once they resolve the softmax's cap.
"""

from __future__ import annotations

import math

import numpy as np

from ...random_attention.slow_motion import CONSTANTS, mean_field_kernel, sea_kernel
from ...stats import normal_quantile, weighted_least_squares
from ...style import palette
from ..base import laid_out
from ..knobs import integer, integers, real, reals
from ..spec import Figure
from ..words import listed, markdown_table

_BASE = dict(r=0.5, dims=(8, 32, 128, 512), betas=(0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0,
                                                   1000.0),
             rs=(0.25, 0.5, 0.75), limit_dims=(16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
             sea_dims=(4, 8), ns=(100, 1000, 10_000, 100_000), sea_betas=(3.0, 10.0, 30.0, 100.0),
             seed=0)
SCALES = {
    "smoke": dict(_BASE, dims=(8, 64), betas=(1.0, 10.0, 100.0), limit_dims=(16, 64, 256, 1024),
                  sea_dims=(4,), ns=(100, 1000), sea_betas=(10.0,), n_samples=4000,
                  sea_samples=200),
    "quick": dict(_BASE, ns=(100, 1000, 10_000), n_samples=50_000, sea_samples=1000),
    "paper": dict(_BASE, n_samples=400_000, sea_samples=4000),
}
#: Seconds per draw-token-dimension of a finite sea, measured on the committed run (cores shared).
SECONDS_PER_WORK = 1.53e-7
#: Two-sided 5% over the constants tested at every R: the level at which a constant is said
#: to fit or to be excluded.
LEVEL = 0.95


def _check_constants(knobs):
    for name, values in (("r", [knobs["r"]]), ("rs", knobs["rs"])):
        bad = [v for v in values if v == 0.0 or abs(v) >= 1.0]
        if bad:
            raise ValueError(f"{name} must lie in (-1, 0) or (0, 1) (the constant divides by "
                             f"R(1 - R^2)); got {bad}")
    if len(knobs["limit_dims"]) < 4:
        raise ValueError("limit_dims needs at least 4 values of d (the extrapolation fits "
                         f"k0 + a/d + b/d^2 with a residual); got {list(knobs['limit_dims'])}")


def cell(*, d, n_tokens, beta, r, n_samples, seed):
    """One finite sea: the constant k and the kernel of the literal softmax over n tokens."""
    return sea_kernel(r, d, beta, n_tokens, n_samples=n_samples, seed=seed)


def run(knobs, sweeps):
    """The finite seas (a sweep), then the mean field: ``k_field`` over (d, beta), its
    Laplace limit ``k_limit`` over (R, d) with ``qv_limit`` (the quadratic variation over
    2(1 - R^2)^2), and ``k_sea_field`` beside each sea."""
    ds = sweeps({"d": list(knobs["sea_dims"]), "n_tokens": list(knobs["ns"]),
                 "beta": list(knobs["sea_betas"])},
                fixed={"r": knobs["r"], "n_samples": knobs["sea_samples"]}, seed=knobs["seed"])
    ds = ds.rename(d="sea_d", beta="sea_beta")
    r, n, seed = knobs["r"], knobs["n_samples"], knobs["seed"]

    def field(rr, d, beta, k):
        out = mean_field_kernel(rr, d, beta, n_samples=n, seed=seed + 7919 * k)
        # the quadratic variation over its limit 2(1 - R^2)^2: 1 where the clocks agree
        qv = (out["c_xx"] - out["c_xy"] * rr) / (1.0 - rr * rr)
        return out["k"], out["k_se"], out["c_xx"], qv

    grids = {"k_field": (("d", "beta"), knobs["dims"], knobs["betas"], r),
             "k_sea_field": (("sea_d", "sea_beta"), knobs["sea_dims"], knobs["sea_betas"], r),
             "k_limit": (("r", "limit_d"), knobs["limit_dims"], None, None)}
    for k, (name, (dims, rows, cols, rr)) in enumerate(grids.items()):
        if cols is None:          # the Laplace limit, one row per R
            vals = np.array([[field(a, d, math.inf, 1000 * k + 10 * i + j) for j, d in
                              enumerate(rows)] for i, a in enumerate(knobs["rs"])])
            coords = {"r": list(knobs["rs"]), "limit_d": list(rows)}
        else:
            vals = np.array([[field(rr, d, b, 1000 * k + 10 * i + j) for j, b in
                              enumerate(cols)] for i, d in enumerate(rows)])
            coords = {dims[0]: list(rows), dims[1]: list(cols)}
        ds = ds.assign_coords(coords)
        ds[name], ds[f"{name}_se"] = (dims, vals[..., 0]), (dims, vals[..., 1])
        if name == "k_field":
            ds["c_xx_field"] = (dims, vals[..., 2])
        if name == "k_limit":
            ds["qv_limit"] = (dims, vals[..., 3])
    ds.attrs.update(r=r, n_samples=n)
    return ds


def work(knobs) -> float:
    """Draw-token-dimensions of the finite seas (the mean field is cheap beside them)."""
    return float(knobs["sea_samples"] * len(knobs["sea_betas"])
                 * sum(n * d for n in knobs["ns"] for d in knobs["sea_dims"]))


def measured_work(ds):
    """(seconds of the finite seas, their draw-token-dimensions)."""
    return float(ds.attrs["cell_time_s"]), work({
        "sea_samples": int(ds.attrs["fixed_n_samples"]), "sea_betas": ds.sea_beta.values,
        "ns": ds.n_tokens.values, "sea_dims": ds.sea_d.values})


def _fit(d, k, se, degree):
    """k(d) = k0 + a/d + b/d^2 (+ c/d^3): the coefficients, and the s.e. of k0 inflated by the
    misfit where chi-square exceeds its degrees of freedom."""
    X = np.vander(1.0 / d, degree + 1, increasing=True)
    c, cov, chi2 = weighted_least_squares(X, k, se)
    dof = max(d.size - degree - 1, 1)
    return c, math.sqrt(cov[0, 0] * max(1.0, chi2 / dof)), float(chi2), dof


def _extrapolated(ds):
    """Per R the constant at d = infinity, ``k0``: a weighted quadratic in 1/d over every d,
    with ``spread``, the largest move of k0 under other fits (from the second d on, or
    cubic), and ``err``, its s.e. and that spread combined."""
    d = ds.limit_d.values.astype(float)
    out = []
    for r in ds.r.values:
        k, se = ds.k_limit.sel(r=r).values, ds.k_limit_se.sel(r=r).values
        c, k0_se, chi2, dof = _fit(d, k, se, 2)
        spread = max(abs(_fit(d[1:], k[1:], se[1:], 2)[0][0] - c[0]),
                     abs(_fit(d, k, se, 3)[0][0] - c[0]))
        err = math.hypot(k0_se, spread)
        out.append(dict(r=float(r), k0=float(c[0]), se=k0_se, spread=float(spread), err=err,
                        a=float(c[1]), b=float(c[2]), chi2=chi2, dof=dof,
                        **{f"z_{name}": (float(c[0]) - v) / err for name, v in CONSTANTS.items()}))
    return out


def _cap_tokens(n, d, beta):
    """Tokens of a uniform sea of n expected within the softmax's cap, of angular radius
    sqrt(d / kappa) with the typical concentration kappa = beta |Ax| = beta d (sigma_qk = 1)."""
    from scipy import special

    r = min(math.sqrt(1.0 / beta), math.pi)
    half = 0.5 * special.betainc(0.5 * (d - 1), 0.5, math.sin(r) ** 2)
    return (n - 2) * (half if r <= 0.5 * math.pi else 1.0 - half)


def summary(ds) -> dict:
    """The constant at d = infinity per R (``limit``) with its distance in errors to each
    candidate; at the largest d the constant per beta and ``laplace_gaps``, its distance to
    the beta = infinity value there; ``beta_gap``: beta times that distance at the largest
    beta, per d; per finite sea the gap to the mean field in s.e. at the smallest and largest
    n and the tokens expected in the softmax's cap at the largest."""
    limit = _extrapolated(ds)
    z = normal_quantile(1.0 - (1.0 - LEVEL) / (len(CONSTANTS) * len(limit)))
    fits = {name: all(abs(row[f"z_{name}"]) <= z for row in limit) for name in CONSTANTS}
    big, r0, n_max = ds.isel(d=-1), ds.attrs["r"], int(ds.n_tokens.max())
    gap = (ds.k - ds.k_sea_field) / np.hypot(ds.k_se, ds.k_sea_field_se)
    seas = [dict(d=int(d), beta=float(b), **{f"z_{end}": float(gap.sel(sea_d=d, sea_beta=b)
                                                             .isel(n_tokens=i))
                                             for end, i in (("small", 0), ("large", -1))},
                 k_large=float(ds.k.sel(sea_d=d, sea_beta=b).isel(n_tokens=-1)),
                 k_field=float(ds.k_sea_field.sel(sea_d=d, sea_beta=b)),
                 cap_tokens=_cap_tokens(n_max, int(d), float(b)))
            for d in ds.sea_d.values for b in ds.sea_beta.values]
    b_max = float(ds.beta.max())
    return {"limit": limit, "z_level": z, "fits": fits,
            "k0_min": min(r["k0"] for r in limit), "k0_max": max(r["k0"] for r in limit),
            "err_max": max(r["err"] for r in limit),
            "qv_at_limit_d_max": [float(v) for v in ds.qv_limit.isel(limit_d=-1).values],
            # d (2q - k): d times the drift of atanh R over R at beta = infinity, largest d
            "outward": [float(v) for v in ((2 * ds.qv_limit - ds.k_limit) * ds.limit_d)
                        .isel(limit_d=-1).values],
            "d_max": int(big.d), "k_at_d_max": {float(b): float(big.k_field.sel(beta=b))
                                                  for b in ds.beta.values},
            "laplace_gaps": [float(v) for v in (big.k_field - ds.k_limit.sel(
                r=r0, limit_d=int(big.d))).values] if int(big.d) in ds.limit_d else None,
            "beta_max": b_max, "beta_gap": [b_max * float(
                ds.k_field.sel(d=d, beta=b_max) - ds.k_limit.sel(r=r0, limit_d=d))
                for d in ds.d.values if d in ds.limit_d],
            "gap_dims": [int(d) for d in ds.d.values if d in ds.limit_d],
            "limit_d_max": int(ds.limit_d.max()), "seas": seas, "n_max": n_max,
            "n_min": int(ds.n_tokens.min()), "r": float(r0),
            "sea_samples": int(ds.attrs["fixed_n_samples"]),
            "n_samples": int(ds.attrs["n_samples"])}


#: The verdict's word from which constants fit (ours, Theorem 4's), as on the scorecard.
WORDS = {(True, False): "Disputed", (False, True): "Reproduced", (False, False): "Not reproduced",
         (True, True): "Undecided"}


_NAMES = {"ours": "our 2", "printed expansion": "the 3/2 of its printed expansion (put in the "
          "drift)", "Theorem 4": "Theorem 4's 1"}


def phrases(stats) -> dict:
    """The verdict on Theorem 4's drift constant, the finite seas and the fits' table."""
    fits = stats["fits"]
    verdict = (f"**{WORDS[fits['ours'], fits['Theorem 4']]}** (the drift's constant): over a "
               "uniform sea the softmax attention's constant tends, as $\\beta$ and $d$ grow, "
               f"to $k$ = {stats['k0_min']:.4f} to {stats['k0_max']:.4f} at every $R$ (error at "
               f"most {stats['err_max']:.0e}, other fits in $d$ included): " + ", ".join(
                   f"{_NAMES[name]} {'fits' if fits[name] else 'does not'}"
                   for name in CONSTANTS) + ". The diffusion part agrees with the "
               "follow-up's; its bound on the displacement is not tested.")
    close = [s for s in stats["seas"] if abs(s["z_large"]) <= stats["z_level"]]
    far = [s for s in stats["seas"] if abs(s["z_large"]) > stats["z_level"]]
    seas = (f"At n = {stats['n_max']:,} the literal softmax over a finite sea is consistent "
            f"with the mean field at {len(close)} of {len(stats['seas'])} (d, $\\beta$) points"
            + (f", each with at least {min(s['cap_tokens'] for s in close):.0f} tokens expected "
               "in the softmax's cap" if close else "") + (
                "; it is not at " + ", ".join(
                    f"d = {s['d']}, $\\beta$ = {s['beta']:g} ({s['k_large']:.2f} against "
                    f"{s['k_field']:.2f}, {s['cap_tokens']:.1f} tokens in the cap)" for s in far)
                if far else "") + ".")
    table = markdown_table(
        ("R", "k at d = infinity", "s.e.", "spread over fits", "a", "b", "chi-square / dof"),
        [[f"{r['r']:g}", f"{r['k0']:.5f}", f"{r['se']:.1e}", f"{r['spread']:.1e}",
          f"{r['a']:.2f}", f"{r['b']:.1f}", f"{r['chi2']:.1f} / {r['dof']}"]
         for r in stats["limit"]], numeric=True,
        caption="The fit $k(d) = k_0 + a/d + b/d^2$ at $\\beta = \\infty$:")
    qv = listed(stats["qv_at_limit_d_max"], ".4f") + " at $R$ = " + listed(
        [r["r"] for r in stats["limit"]], "g")
    gap = (listed(stats["beta_gap"], ".1f") + " at $d$ = " + listed(stats["gap_dims"], "d")
           if stats["gap_dims"] else "not measured (no $d$ is on both grids)")
    return {"verdict": verdict, "seas": seas, "table": table, "qv_text": qv, "gap_text": gap,
            "outward_text": listed(stats["outward"], ".1f")}


_STYLE = {"ours": ("k", "-"), "printed expansion": ("0.45", "--"), "Theorem 4": ("0.45", ":")}


def _candidates(ax, label=True):
    for name, v in CONSTANTS.items():
        colour, ls = _STYLE[name]
        ax.axhline(v, color=colour, ls=ls, lw=1.0, label=f"{name}: k = {v:g}" if label else None)


def plot(ds):
    """(a) the mean-field constant against beta, one curve per d; (b) its Laplace limit
    against 1/d with the fit, per R; (c, d) finite seas against n at d = 4 and 8, the mean
    field dashed."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(7.2, 6.6))
    (ax, axl), seas = axes[0], axes[1]
    for colour, d in zip(palette(ds.sizes["d"]), ds.d.values):
        sub = ds.sel(d=d)
        ax.errorbar(ds.beta, sub.k_field, yerr=2 * sub.k_field_se, fmt="o-", ms=3, lw=1,
                    color=colour, label=f"d = {d}")
    _candidates(ax, label=False)
    ax.set(xscale="log", xlabel=r"$\beta$ ($\sigma_{qk}$ = 1)", ylabel="drift constant k",
           title=f"(a) mean-field sea, R = {ds.attrs['r']:g}")
    ax.legend(loc="lower right")
    inv = np.linspace(0.0, 1.0 / float(ds.limit_d.min()), 50)
    for colour, row in zip(palette(ds.sizes["r"]), _extrapolated(ds)):
        sub = ds.sel(r=row["r"])
        axl.errorbar(1.0 / sub.limit_d, sub.k_limit, yerr=2 * sub.k_limit_se, fmt="o", ms=3,
                     color=colour, label=f"R = {row['r']:g}")
        axl.plot(inv, row["k0"] + row["a"] * inv + row["b"] * inv**2, color=colour, lw=0.8)
    _candidates(axl)
    axl.set(xlabel="1/d", ylim=(0.9, 2.1), title=r"(b) $\beta = \infty$: k against 1/d")
    axl.legend(loc="lower left", ncol=2)
    for axs, d in zip(seas, ds.sea_d.values):
        for colour, b in zip(palette(ds.sizes["sea_beta"]), ds.sea_beta.values):
            sub = ds.sel(sea_d=d, sea_beta=b)
            axs.errorbar(ds.n_tokens, sub.k, yerr=2 * sub.k_se, fmt="o-", ms=3, lw=1,
                         color=colour, label=fr"$\beta$ = {b:g}")
            axs.axhline(float(sub.k_sea_field), color=colour, ls="--", lw=0.8)
        axs.set(xscale="log", xlabel="tokens n", ylabel="drift constant k",
                title=f"({'cd'[list(ds.sea_d.values).index(d)]}) finite sea, d = {d} "
                      "(dashed: mean field)")
        axs.legend(loc="upper right")
    for extra in seas[ds.sizes["sea_d"]:]:
        extra.set_visible(False)
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_slow_motion", source="followup",
    description="Theorem 4's slow motion: the drift constant of two tracers' overlap under "
                "the softmax attention, mean-field sea and finite seas, against 1, 3/2 and 2",
    schema={"r": real(-1.0, 1.0, strict_min=True), "dims": integers(3, 1 << 16),
            "betas": reals(0.0, 1e4, strict_min=True), "rs": reals(-1.0, 1.0, strict_min=True),
            "limit_dims": integers(3, 1 << 20, distinct=True), "sea_dims": integers(3, 64),
            "ns": integers(2, 1 << 20), "sea_betas": reals(0.0, 1e4, strict_min=True),
            "n_samples": integer(2), "sea_samples": integer(2)},
    plan=_check_constants)
compute, cost = FIGURE.compute, FIGURE.cost
