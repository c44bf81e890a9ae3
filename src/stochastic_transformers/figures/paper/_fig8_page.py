r"""Figure 8's page: the sentences that read :func:`.fig8.summary`.

The verdict phrases (:func:`phrases`, Markdown without math for ``{glue:md}``) and the plain
phrases (:func:`texts`, for ``{glue:text}``, the chapter's included) are built here, so that
the notebook's only hidden code is the glue call.
"""

from __future__ import annotations

#: What a projection from a smoke run is worth (shared wording of the figures' cost notes).
SMOKE_CAVEAT = ("This projection comes from a smoke run, dominated by fixed overheads; the "
                "quick scale gives a truer one.")


def texts(stats) -> dict:
    """The page's plain-text phrases: ``d_list``, ``antipodal_list`` per beta (the antipodal
    fraction at T with the limit in brackets, by d) and ``horizon_reading`` (the sentence the
    chapter quotes)."""
    per_beta = stats["per_beta"]
    cl = stats["closest_threshold"]
    if stats["settled_early"]:
        side = "below" if cl["distance"] < 0 else "above"
        horizon = (
            f"every point (β, d) has settled by t = {stats['max_settle']:.3g}, "
            f"{stats['max_settle_fraction']:.0%} of the longest horizon followed "
            f"(T = {stats['T']:g}), so that away from the thresholds β_c(d) the transition does "
            f"not hinge on the choice of horizon (the point nearest to a threshold is "
            f"β = {cl['beta']:g}, d = {cl['d']}, {abs(cl['distance']):.3f} {side} "
            f"β_c({cl['d']})); close to a threshold the antipodal fraction can still change "
            "with the horizon, which this figure follows at a few points only")
    else:
        horizon = (f"at this scale not every point (β, d) has settled well within the longest "
                   f"horizon followed (T = {stats['T']:g}), so the horizon still matters here")
    return {"d_list": ", ".join(str(d) for d in next(iter(per_beta.values()))["p_antipodal_T"]),
            "antipodal_list": {b: ", ".join(f"{s['p_antipodal_T'][d]:.3f} ({s['p_limit'][d]:.3f})"
                                            for d in s["p_antipodal_T"])
                               for b, s in per_beta.items()},
            "horizon_reading": horizon}


#: The page's words for the verdicts of :func:`summary` (Markdown without math): key ->
#: (verdict, words where it holds, words where not), formatted with the summary's numbers.
VERDICT_WORDS = {
    "verdict_text": ("agrees_with_paper", "agrees with it", "only partly agrees with it"),
    "settled_text": ("settled_early", "every point has settled by a small fraction of the "
                     "horizon,", "not every point has settled well before the horizon (see the "
                     "settling times above),"),
    "flat_text": ("flat", "the outcome fractions are flat over the last decade of time,",
                  "the outcome fractions still move by up to {max_abs_late_change:.3f} over the "
                  "last decade of time,"),
    "agree_text": ("agrees_with_theory", "and they match the long-time theory within the "
                   "statistical error.", "and they deviate from the long-time theory by more "
                   "than the statistical error allows at some points (largest {max_abs_z:.1f} "
                   "standard errors)."),
    "last_settle_text": ("all_settled", "the last one at *t* = {max_settle:.3g}, that is at "
                         "{max_settle_fraction:.0%} of *T*",
                         "the other {n_unsettled} have not settled by *T*"),
    "transient_opening": ("visited", "Pairs also visit the neighbourhood of the antipodal pole "
                          "where it does not attract.", "No pair comes within the tolerance of "
                          "the antipodal pole where it does not attract."),
}
#: The words of the readings of :func:`summary` with more than two values.
READING_WORDS = {
    "t_half_reading": {
        "all": "(higher dimensions cluster no later, within the grid's resolution)",
        "some": "(for those, higher dimensions cluster no later, within the grid's resolution)",
        "none": "(here higher dimensions do not cluster faster)"},
    "transient_reading": {
        "transient": "These visits are transient: a horizon of a few time units would count such "
                     "pairs as antipodal, a long one does not.",
        "persistent": "So the horizon is not long enough for all of them to leave: a longer one "
                      "would count fewer pairs as antipodal.",
        "none": "A longer horizon cannot change that."},
    "regime_text": {"none": "the antipodal pair attracts for no d of the grid",
                    "all": "the antipodal pair attracts for every d of the grid",
                    "some": "the antipodal pair attracts for d = {d_list}"},
}


def phrases(stats, scale: str) -> dict[str, str]:
    """The page's verdict phrases (Markdown without math) from :func:`summary`'s verdicts
    (:data:`VERDICT_WORDS`, :data:`READING_WORDS`), per beta ``regime_text`` and
    ``settle_text``; ``cost_caveat`` says what a projection from a run at ``scale`` is worth."""
    values = {**stats, "visited": stats["transient_antipodal"]["visited"],
              "n_unsettled": stats["n_points"] - stats["n_settled"]}
    out = {key: (yes if values[verdict] else no).format(**values)
           for key, (verdict, yes, no) in VERDICT_WORDS.items()}
    out["t_half_reading"] = READING_WORDS["t_half_reading"][stats["t_half_trend"]]
    out["transient_reading"] = READING_WORDS["transient_reading"][
        stats["transient_antipodal"]["reading"]]
    for b, s in stats["per_beta"].items():
        out[f"regime_text.{b:g}"] = READING_WORDS["regime_text"][s["attracting"]].format(
            d_list=", ".join(map(str, s["attracting_d"])))
        out[f"settle_text.{b:g}"] = (f"from *t* = {s['max_settle']:.3g} on" if s["settled"] else
                                     "at no time from which it stays there within the horizon")
    out["cost_caveat"] = (SMOKE_CAVEAT if scale == "smoke" else
                          "This projection scales the rate measured on this run.")
    return out
