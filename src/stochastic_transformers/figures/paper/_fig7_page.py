r"""Figure 7's page: its discretisation check, the sentences that read its summary, its tables.

The page reruns the beta with the most losses at four times the layers per unit time
(:func:`.fig7.discretisation_check`) and compares the relative drops of the two-group
configurations at both steps (:func:`split_drop`, :func:`depth_check_verdicts`).  The
verdict sentences (:func:`phrases`, :func:`check_phrases`; Markdown for ``{glue:md}``) and
the tables are built here from :func:`.fig7.summary` and the two runs, so that the
notebook's only hidden code is the glue call.
"""

from __future__ import annotations

import numpy as np

from ...stats import difference_z, relative_drop

#: The simulation code version (``SIMULATION_CODE_VERSION``, the part of a result's
#: ``code_version`` before "+") from which N >= 3 tokens take the reduced path; results of
#: earlier versions ran the full N-token map to T.
REDUCED_PATH_FROM = 2


def split_drop(ds, beta, t_ref=None) -> dict:
    """Per group split ``m``: how many two-group configurations at ``t_ref`` (default T/10)
    and at T, the relative drop and its binomial standard error
    (:func:`stochastic_transformers.stats.relative_drop`).  Runs that differ only in ``L``
    compare by it: the same drop at a finer step says the losses belong to the dynamics."""
    times = ds.time.values
    t_ref = times[-1] / 10 if t_ref is None else float(t_ref)
    i_ref = min(int(np.searchsorted(times, t_ref)), times.size - 1)
    sub = ds.sel(beta=beta)
    out = {}
    for j, m in enumerate(ds.minority.values):
        ref, fin = int(sub.n_split.values[i_ref, j]), int(sub.n_split.values[-1, j])
        drop, se = relative_drop(ref, fin)
        out[int(m)] = {"ref": ref, "final": fin, "drop": drop, "se": se,
                       "t_ref": float(times[i_ref]), "L": int(ds.attrs["fixed_L"])}
    return out


def depth_check_verdicts(coarse, fine) -> dict:
    """Per split with a positive drop at L (``coarse``) and one at 4L (``fine``, both
    :func:`split_drop`): ``z`` (their difference in standard errors), ``persists`` (the fine
    drop exceeds two of its standard errors: not only a discretisation artefact) and
    ``discretisation_part`` (z > 2: significantly smaller at the finer step)."""
    out = {}
    for m in coarse:
        c, f = coarse[m], fine[m]
        if not (np.isfinite(c["drop"]) and np.isfinite(f["drop"])) or c["drop"] <= 0:
            continue
        z = difference_z(c["drop"], c["se"], f["drop"], f["se"])
        out[m] = {"z": float(z), "persists": bool(f["drop"] > 2 * f["se"]),
                  "discretisation_part": bool(z > 2)}
    return out


def _simulation_version(code_version):
    """The simulation part of a ``code_version`` ("2+fig7.2" -> 2), or None if unreadable."""
    try:
        return int(str(code_version).split("+", 1)[0])
    except ValueError:
        return None


def check_matches(ds, ds_check, beta) -> dict:
    """Whether ``ds_check`` is the discretisation check of ``ds`` at ``beta``, and with what code.

    The check reruns ``beta`` with four times the layers per unit time and half the
    trajectories, every other setting (N, d, T, attention, tolerance, the number of recorded
    times, and the reference time T/10 to within a layer of ``ds``) equal: ``usable`` (a
    page may then reuse a stored check), ``same_code`` (both carry the same
    ``code_version``), ``code_version`` and ``code_version_check``, and ``reduced`` and
    ``reduced_check`` (each run took the reduced path: simulation version at least
    :data:`REDUCED_PATH_FROM`; None if unreadable).
    """
    a, c = ds.attrs, ds_check.attrs
    same = all(str(a.get(f"fixed_{k}")) == str(c.get(f"fixed_{k}"))
               for k in ("n_tokens", "T", "d", "attention", "tol"))
    # the recorded times are snapped to each run's layers, so they differ by up to a coarse
    # layer; the check compares the two runs at their first recorded time from T/10 on
    t_ref = [float(x.time.values[min(int(np.searchsorted(x.time.values, x.time.values[-1] / 10)),
                                     x.sizes["time"] - 1)]) for x in (ds, ds_check)]
    times = (ds.sizes.get("time") == ds_check.sizes.get("time")
             and abs(t_ref[0] - t_ref[1]) <= 1.0 / int(a["fixed_L"]) + 1e-12)
    usable = bool(ds_check.beta.size == 1 and float(ds_check.beta.values[0]) == float(beta)
                  and int(c["fixed_L"]) == 4 * int(a["fixed_L"])
                  and int(ds_check.n_traj.values.max()) == max(1, int(ds.n_traj.values.max()) // 2)
                  and same and times)
    v, vc = str(a.get("code_version", "")), str(c.get("code_version", ""))
    sv, svc = _simulation_version(v), _simulation_version(vc)
    return {"usable": usable, "same_code": v == vc, "code_version": v,
            "code_version_check": vc,
            "reduced": None if sv is None else sv >= REDUCED_PATH_FROM,
            "reduced_check": None if svc is None else svc >= REDUCED_PATH_FROM}


def _and_list(items) -> str:
    items = list(items)
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def others_text(stats) -> dict[str, str]:
    """For the chapter: the betas other than the one with the most losses, and their
    fractions with an antipodal pair at ``t_ref`` and at T, as text."""
    others = {b: s for b, s in stats["per_beta"].items() if b != stats["most_lost_beta"]}
    return {"betas": _and_list(f"{b:g}" for b in others),
            "p_ref": _and_list(f"{s['p_ref']:.3f}" for s in others.values()),
            "p_final": _and_list(f"{s['p_final']:.3f}" for s in others.values())}


def phrases(stats, scale, *, z_max, min_merged) -> dict[str, str]:
    """``persist_reading`` (merged splits within ``z_max`` standard errors of their
    prediction, at the times with ``min_merged``), ``balanced_reading``, ``loss_reading``,
    ``compare_reading`` (the paper's claims) and ``timing_note``."""
    agree, holds, t_cl = (stats.get("persist_agree"), stats["most_lost"]["balanced_holds"],
                          stats["t_clustered_95_max"])
    steady = [b for b, s in stats["per_beta"].items() if s["unchanged"]]
    moving = [b for b in stats["per_beta"] if b not in steady]
    compare = (
        (f"95% of the trajectories are clustered by $t$ = {t_cl:.3g} at every $\\beta$ "
         f"({stats['t_clustered_95_share']:.1%} of the horizon)" if np.isfinite(t_cl) else
         "at some $\\beta$ fewer than 95% of the trajectories are clustered by $T$")
        + ("; the claim holds exactly at $\\beta$ = " + _and_list(f"{b:g}" for b in steady)
           + ": not one trajectory changes status after $t = T/10$" if steady else "")
        + ("; at $\\beta$ = " + _and_list(f"{b:g}" for b in moving) + " the fraction moves "
           "between $t = T/10$ and $T$ (the first table's columns *lost* and *gained*)"
           if moving else "") + ".")
    return {
        "persist_reading": (
            "No split has enough merged trajectories to compare with its prediction."
            if agree is None else
            f"Every compared time is within {z_max:g} standard errors of the limit prediction "
            f"(times with at least {min_merged} merged trajectories)." if agree else
            f"**Some compared time is more than {z_max:g} standard errors from the limit "
            "prediction.**"),
        "balanced_reading": ("with an odd $N$ there are no equal groups" if holds is None else
                             "the count with equal groups does not fall" if holds else
                             "the count with equal groups falls too"),
        "loss_reading": (
            "Such losses are what a merely metastable antipodal state would produce, unless "
            "they come from the finite step $1/\\sqrt{L}$; the check below tests that."
            if stats["lost_total"] else
            "**No antipodal pair breaks up** in this run, at any $\\beta$."),
        "compare_reading": compare,
        "timing_note": (
            "A smoke run is too small to time: compilation and start-up dominate."
            if scale == "smoke" else
            "The median over cells leaves out the one-off compilation that the first cell of a "
            "fresh process pays.")}


def check_phrases(ds, check, beta) -> dict[str, str]:
    """``check_reading`` (what the drops at L and 4L say, split by split) and
    ``check_code_reading`` (whether both runs come from the same simulation code)."""
    n_tok, L_run = int(ds.attrs["fixed_n_tokens"]), int(ds.attrs["fixed_L"])
    match = check_matches(ds, check, beta)
    verdicts = depth_check_verdicts(split_drop(ds, beta), split_drop(check, beta))
    text = "; ".join(
        f"for {m} vs {n_tok - m} the losses "
        + ("persist at the finer step, so they are not only a discretisation artefact"
           if v["persists"] else "do not clearly persist at the finer step")
        + ("; the drop is smaller there by more than two standard errors, so part of it "
           "may come from the discretisation" if v["discretisation_part"] else
           "; the two drops agree within two standard errors" if abs(v["z"]) <= 2
           else "; the drop is larger there by more than two standard errors")
        for m, v in verdicts.items())
    code = (
        "Both runs come from the same version of the simulation code." if match["same_code"] else
        "The two runs come from different versions of the simulation code: the finer one "
        f"(version {match['code_version_check']}) "
        + ("ran the full $N$-token map up to $T$" if match["reduced_check"] is False else
           "took the reduced path")
        + f", the run at $L$ = {L_run} (version {match['code_version']}) "
        + ("took the reduced path, which continues on the exact two-cluster chain once the "
           "tokens occupy two points" if match["reduced"] else "ran the full $N$-token map")
        + ". The chain is exact in law for two-point configurations, and the reduced path's "
          "outcomes agree in law with the full map's (chapter *Reproducing*, section *Does the "
          "two-cluster reduction change outcomes?*), so the comparison stands, but it is not "
          "like for like: rerunning the finer step with the current code would make it so.")
    return {"check_reading": (text[0].upper() + text[1:] + "." if text else
                              "No split's count falls at the coarser step, so there is no drop "
                              "to compare."),
            "check_code_reading": code}


def persistence_table(stats):
    """Per beta: when 95% are clustered, when at most 1% still change, the antipodal fraction
    at ``t_ref`` and at T, the trajectories lost and gained, the two-group configurations."""
    import pandas as pd

    def when(t):
        return f"{t:.3g}" if np.isfinite(t) and t < stats["T"] else "–"

    n_tok = stats["n_tokens"]
    return pd.DataFrame([{
        "β": f"{b:g}",
        "95% clustered from t": when(s["t_clustered_95"]),
        "clustered at T": f"{100 * s['p_clustered_final']:.0f}%",
        "≤ 1% change after t": when(s["t_settle_99"]),
        f"antipodal at t = {stats['t_ref']:g}": f"{100 * s['p_ref']:.1f}%",
        "at T [95% band]": f"{100 * s['p_final']:.1f}% [{100 * s['low_final']:.1f}, "
                           f"{100 * s['high_final']:.1f}]%",
        "lost": f"{s['lost']:,}", "gained": f"{s['gained']:,}",
        "largest distance": f"{100 * s['max_dev_after_ref']:.1f} points",
        **{f"{m} vs {n_tok - m}": f"{s['split_ref'][m]:,} → {s['split_final'][m]:,}"
           for m in s["split_ref"]},
    } for b, s in stats["per_beta"].items()]).set_index("β")


def merged_table(stats):
    """Per beta and split: the trajectories merged by T, their antipodal fraction at T
    against the prediction, z at T and the largest |z| over the times compared (None
    without merged splits)."""
    import pandas as pd

    n_tok = stats["n_tokens"]
    rows = [{"β": f"{b:g}", "split": f"{m} vs {n_tok - m}", "merged": f"{r['n_merged_final']:,}",
             "antipodal at T": f"{100 * r['p_final']:.1f}%",
             "predicted": f"{100 * r['predicted_final']:.1f}%", "z at T": f"{r['z_final']:+.1f}",
             "times compared": r["n_times_compared"],
             "largest |z|": f"{r['max_abs_z']:.1f}" if r["n_times_compared"] else "–"}
            for b, s in stats["per_beta"].items() for m, r in s.get("merged", {}).items()]
    return pd.DataFrame(rows).set_index(["β", "split"]) if rows else None


def check_table(ds, check, beta):
    """Per split: the relative drop at L and at 4L (± one standard error) and their z."""
    import pandas as pd

    def drop(d):
        if not np.isfinite(d["drop"]):
            return "none formed"
        if d["final"] >= d["ref"]:
            return f"no drop ({d['ref']:,} → {d['final']:,})"
        return f"{100 * d['drop']:.0f} ± {100 * d['se']:.0f}% ({d['ref']:,} → {d['final']:,})"

    n_tok, L_run = int(ds.attrs["fixed_n_tokens"]), int(ds.attrs["fixed_L"])
    coarse, fine = split_drop(ds, beta), split_drop(check, beta)
    verdicts = depth_check_verdicts(coarse, fine)
    return pd.DataFrame([{
        "split": f"{m} vs {n_tok - m}", f"drop at L = {L_run}": drop(coarse[m]),
        f"at L = {4 * L_run}": drop(fine[m]),
        "z (difference / SE)": f"{verdicts[m]['z']:+.1f}" if m in verdicts else "–"}
        for m in coarse]).set_index("split")


def fraction_table(ds):
    """The fraction with an antipodal pair at about 13 of the recorded times, per beta."""
    n_t = ds.sizes["time"]
    shown = np.unique(np.r_[np.arange(0, n_t, max(1, n_t // 12)), n_t - 1])
    return ds.p_antipodal_pair.isel(time=shown).to_pandas().T.round(3)
