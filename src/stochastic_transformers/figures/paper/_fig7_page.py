"""Figure 7's discretisation check: the beta with the most losses again at four times the
layers per unit time (:func:`.fig7.discretisation_check`), the relative drops of the two-group
configurations at both steps compared (:func:`split_drop`, :func:`depth_check_verdicts`)."""

from __future__ import annotations

import numpy as np

from ...stats import difference_z, relative_drop
from ..words import markdown_table, signed

#: The simulation code version from which N >= 3 tokens take the reduced path (earlier
#: results ran the full N-token map to T).
REDUCED_PATH_FROM = 2


def reference_index(times) -> int:
    """The first recorded time from T/10 on."""
    return min(int(np.searchsorted(times, times[-1] / 10)), times.size - 1)


def split_drop(ds, beta) -> dict:
    """Per split ``m`` at ``beta``: the two-group configurations at the first recorded
    time from T/10 on and at T, the relative drop and its binomial standard error
    (:func:`~stochastic_transformers.stats.relative_drop`).  The same drop at a finer step
    says the losses belong to the dynamics."""
    i_ref, sub = reference_index(ds.time.values), ds.sel(beta=beta)
    out = {}
    for j, m in enumerate(ds.minority.values):
        ref, fin = int(sub.n_split.values[i_ref, j]), int(sub.n_split.values[-1, j])
        drop, se = relative_drop(ref, fin)
        out[int(m)] = {"ref": ref, "final": fin, "drop": drop, "se": se}
    return out


def depth_check_verdicts(coarse, fine) -> dict:
    """Per split with a positive drop at L (``coarse``) and one at 4L (``fine``, both
    :func:`split_drop`): ``z`` (their difference in standard errors), ``persists`` (the fine
    drop exceeds two of its standard errors) and ``discretisation_part`` (z > 2)."""
    out = {}
    for m, c in coarse.items():
        f = fine[m]
        if np.isfinite(c["drop"]) and np.isfinite(f["drop"]) and c["drop"] > 0:
            z = float(difference_z(c["drop"], c["se"], f["drop"], f["se"]))
            out[m] = {"z": z, "persists": bool(f["drop"] > 2 * f["se"]),
                      "discretisation_part": bool(z > 2)}
    return out


def check_matches(ds, ds_check, beta) -> dict:
    """Whether ``ds_check`` is the discretisation check of ``ds`` at ``beta`` (``usable``):
    four times the layers per unit time, half the trajectories, every other setting and the
    reference time T/10 (to within a layer of ``ds``) equal; ``same_code``, both
    ``code_version``s and whether each run took the reduced path (``reduced``,
    ``reduced_check``: simulation version >= :data:`REDUCED_PATH_FROM`, None if unreadable)."""
    a, c = ds.attrs, ds_check.attrs
    same = all(str(a.get(f"fixed_{k}")) == str(c.get(f"fixed_{k}"))
               for k in ("n_tokens", "T", "d", "attention", "tol"))
    # the recorded times are snapped to each run's layers, so they differ by up to a layer
    t_ref = [float(x.time.values[reference_index(x.time.values)]) for x in (ds, ds_check)]
    times = (ds.sizes.get("time") == ds_check.sizes.get("time")
             and abs(t_ref[0] - t_ref[1]) <= 1.0 / int(a["fixed_L"]) + 1e-12)
    usable = bool(ds_check.beta.size == 1 and float(ds_check.beta.values[0]) == float(beta)
                  and int(c["fixed_L"]) == 4 * int(a["fixed_L"])
                  and int(ds_check.n_traj.values.max()) == max(1, int(ds.n_traj.values.max()) // 2)
                  and same and times)
    out = {"usable": usable, "code_version": str(a.get("code_version", "")),
           "code_version_check": str(c.get("code_version", ""))}
    for key, version in (("reduced", out["code_version"]),
                         ("reduced_check", out["code_version_check"])):
        simulation = version.split("+", 1)[0]
        out[key] = int(simulation) >= REDUCED_PATH_FROM if simulation.isdigit() else None
    return out | {"same_code": out["code_version"] == out["code_version_check"]}


def check_text(ds, check, beta) -> str:
    """The discretisation check: a sentence per split whose count falls, one on the code of
    the two runs, and the table of drops at L and 4L."""
    n_tok, L = int(ds.attrs["fixed_n_tokens"]), int(ds.attrs["fixed_L"])
    coarse, fine = split_drop(ds, beta), split_drop(check, beta)
    verdicts = depth_check_verdicts(coarse, fine)
    said = " ".join(
        f"For {m} vs {n_tok - m} the drop "
        + ("is still there at the finer step" if v["persists"] else
           "is not clearly there at the finer step")
        + (" and smaller by more than two standard errors: part of it is the discretisation."
           if v["discretisation_part"] else
           f" and the same within two standard errors (z = {signed(v['z'], 1)}): the losses "
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
        counts = f"({d['ref']:,} → {d['final']:,})"
        return (f"none {counts}" if d["final"] >= d["ref"] else
                f"{100 * d['drop']:.0f} ± {100 * d['se']:.0f}% {counts}")

    return said + "\n\n" + markdown_table(
        ["split", f"drop at $L$ = {L}", f"at $L$ = {4 * L}", "z"],
        [[f"{m} vs {n_tok - m}", drop(coarse[m]), drop(fine[m]),
          signed(verdicts[m]["z"], 1) if m in verdicts else None] for m in coarse])
