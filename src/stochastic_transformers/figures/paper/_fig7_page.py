r"""Figure 7's page: its discretisation check, its verdict and its tables (Markdown).

The page reruns the beta with the most losses at four times the layers per unit time
(:func:`.fig7.discretisation_check`) and compares the relative drops of the two-group
configurations at both steps (:func:`split_drop`, :func:`depth_check_verdicts`).
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


def _signed(x, digits=1) -> str:
    """``x`` with its sign (a true minus sign, U+2212), never ``-0.0``."""
    return f"{round(float(x), digits) + 0.0:+.{digits}f}".replace("-", "\u2212")


def verdict(stats, level_tol) -> str:
    """The opening's verdict on the paper's two claims (Markdown): clustering before T/10 at
    every beta, and a fraction with an antipodal pair that stays within ``level_tol`` of its
    value at T from ``t_ref`` on."""
    rows, t95 = stats["per_beta"], stats["t_clustered_95_max"]
    flat = [b for b, r in rows.items() if r["max_dev_after_ref"] <= level_tol]
    moved = [b for b in rows if b not in flat]
    early = bool(np.isfinite(t95) and t95 <= stats["T"] / 10)
    word = ("Reproduced" if early and not moved else
            "Not reproduced" if not (early or flat) else "Partly reproduced")
    clustering = (f"95% of the trajectories are clustered by $t$ = {t95:.3g} at every $\\beta$"
                  if early else "at some $\\beta$ fewer than 95% of the trajectories are "
                  "clustered by $T/10$")

    def betas(bs):
        return "$\\beta$ = " + _and_list(f"{b:g}" for b in bs)

    holds = (f"from $t$ = {stats['t_ref']:.0f} on the fraction with an antipodal pair stays "
             f"within {100 * level_tol:g} points of its value at $T$ at " + betas(flat)
             if flat else "the fraction with an antipodal pair moves after $t = T/10$ at every "
             "$\\beta$")
    if flat and moved:
        holds += ", but not at " + betas(moved)
    return f"**{word}:** {clustering}, and {holds}."


def tables(stats) -> dict[str, str]:
    """``table``: per beta the clustering time, the antipodal fraction at ``t_ref`` and at T,
    the trajectories lost and gained, and the two-group configurations by split;
    ``merged_table``: the merged splits against the reduction (empty without them)."""
    n, t_ref = stats["n_tokens"], stats["t_ref"]

    def when(t):
        return f"{t:.3g}" if np.isfinite(t) and t < stats["T"] else "–"

    splits = list(next(iter(stats["per_beta"].values()))["split_ref"])
    head = ("| $\\beta$ | 95% clustered by $t$ | ≤ 1% still change after $t$ "
            f"| antipodal at $t$ = {t_ref:.3g} | at $T$ [95% band] | lost | gained | "
            + " | ".join(f"{m} vs {n - m}" for m in splits) + " |\n"
            + "|---" * (7 + len(splits)) + "|\n")
    table = head + "\n".join(
        f"| {b:g} | {when(s['t_clustered_95'])} | {when(s['t_settle_99'])} "
        f"| {100 * s['p_ref']:.1f}% | {100 * s['p_final']:.1f}% [{100 * s['low_final']:.1f}, "
        f"{100 * s['high_final']:.1f}] | {s['lost']:,} | {s['gained']:,} | "
        + " | ".join(f"{s['split_ref'][m]:,} → {s['split_final'][m]:,}" for m in splits) + " |"
        for b, s in stats["per_beta"].items())
    rows = [f"| {b:g} | {m} vs {n - m} | {r['n_merged_final']:,} | {100 * r['p_final']:.1f}% "
            f"| {100 * r['predicted_final']:.1f}% | "
            + (f"{r['max_abs_z']:.1f} ({r['n_times_compared']})" if r["n_times_compared"]
               else "–") + " |"
            for b, s in stats["per_beta"].items() for m, r in s.get("merged", {}).items()]
    merged = ("| $\\beta$ | split | merged by $T$ | antipodal at $T$ | predicted "
              "| largest \\|z\\| (times) |\n|---|---|---|---|---|---|\n" + "\n".join(rows)
              if rows else "")
    return {"table": table, "merged_table": merged}


def check_text(ds, check, beta) -> str:
    """The discretisation check (Markdown): one sentence per split whose count falls, a
    sentence on the code of the two runs, and the table of drops at L and 4L."""
    n_tok, L = int(ds.attrs["fixed_n_tokens"]), int(ds.attrs["fixed_L"])
    coarse, fine = split_drop(ds, beta), split_drop(check, beta)
    verdicts = depth_check_verdicts(coarse, fine)
    said = " ".join(
        f"For {m} vs {n_tok - m} the drop "
        + ("is still there at the finer step" if v["persists"] else
           "is not clearly there at the finer step")
        + (" and smaller by more than two standard errors: part of it is the discretisation."
           if v["discretisation_part"] else
           f" and the same within two standard errors (z = {_signed(v['z'])}): the losses "
           "belong to the dynamics." if abs(v["z"]) <= 2 else
           " and larger by more than two standard errors.")
        for m, v in verdicts.items()) or "No split's count falls at the coarser step."
    match = check_matches(ds, check, beta)
    if not match["same_code"]:
        said += (f" The finer run comes from simulation code version "
                 f"{match['code_version_check'].split('+')[0]}, "
                 + ("which ran the full $N$-token map up to $T$" if match["reduced_check"] is
                    False else "which took the reduced path")
                 + "; the run shown continues on the exact two-cluster chain once the tokens "
                   "occupy two points. Both agree in law (chapter *Reproducing*), so the "
                   "comparison stands, though it is not like for like.")

    def drop(d):
        if not np.isfinite(d["drop"]):
            return "none formed"
        if d["final"] >= d["ref"]:
            return f"none ({d['ref']:,} → {d['final']:,})"
        return f"{100 * d['drop']:.0f} ± {100 * d['se']:.0f}% ({d['ref']:,} → {d['final']:,})"

    rows = "\n".join(f"| {m} vs {n_tok - m} | {drop(coarse[m])} | {drop(fine[m])} | "
                     + (_signed(verdicts[m]["z"]) if m in verdicts else "–") + " |"
                     for m in coarse)
    return (f"{said}\n\n| split | drop at $L$ = {L} | at $L$ = {4 * L} | z |\n"
            f"|---|---|---|---|\n{rows}")
