r"""Classify token configurations from their Gram matrices.

At tolerance ``tol`` (the paper uses :math:`10^{-3}`) a pair of tokens is

* *together* if :math:`\langle x_i, x_j\rangle \ge 1 - \mathrm{tol}`,
* *antipodal* if :math:`\langle x_i, x_j\rangle \le -1 + \mathrm{tol}`,

and a configuration is *clustered* when every pair is one or the other.  For two
tokens the outcomes are "single" (one cluster), "antipodal", or "unclustered".
For :math:`N\ge3` the figures use "has an antipodal pair" and the number of clusters
(connected components of the *together* graph).

Every function takes an array of Gram matrices of shape ``(..., N, N)`` and works on
the leading axes elementwise.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_real

#: Integer codes of the two-token outcomes.
UNCLUSTERED, SINGLE, ANTIPODAL = 0, 1, 2
OUTCOME_NAMES = {UNCLUSTERED: "unclustered", SINGLE: "single", ANTIPODAL: "antipodal"}


def _gram(gram, tol):
    tol = check_real("tol", tol, 0.0, 1.0, strict_min=True)
    gram = np.asarray(gram, dtype=float)
    if gram.ndim < 2 or gram.shape[-1] != gram.shape[-2] or gram.shape[-1] < 2:
        raise ValueError(f"gram must have shape (..., N, N) with N >= 2; got {gram.shape}")
    return gram, tol


def _off_diagonal(n):
    return ~np.eye(n, dtype=bool)


def together(gram, tol=1e-3):
    """Boolean (..., N, N): pair (i, j) is together (diagonal True)."""
    gram, tol = _gram(gram, tol)
    return gram >= 1.0 - tol


def antipodal(gram, tol=1e-3):
    """Boolean (..., N, N): pair (i, j) is antipodal (diagonal False)."""
    gram, tol = _gram(gram, tol)
    return gram <= -1.0 + tol


def is_clustered(gram, tol=1e-3):
    """True where every pair of tokens is together or antipodal."""
    gram, tol = _gram(gram, tol)
    settled = (gram >= 1.0 - tol) | (gram <= -1.0 + tol)
    return np.all(settled | ~_off_diagonal(gram.shape[-1]), axis=(-2, -1))


def has_antipodal_pair(gram, tol=1e-3):
    """True where at least one pair of tokens is antipodal."""
    return np.any(antipodal(gram, tol), axis=(-2, -1))


def n_clusters(gram, tol=1e-3):
    """Number of connected components of the *together* graph (1 to N).

    For a clustered configuration this is the number of clusters; an unclustered one
    still gets a count, the number of groups of mutually close tokens.
    """
    gram, tol = _gram(gram, tol)
    adj = gram >= 1.0 - tol
    n = gram.shape[-1]
    # Label propagation: each token takes the smallest label among its neighbours until
    # nothing changes; N rounds always suffice.
    labels = np.broadcast_to(np.arange(n), gram.shape[:-1]).copy()
    for _ in range(n):
        candidate = np.where(adj, labels[..., None, :], n).min(axis=-1)
        new = np.minimum(labels, candidate)
        if np.array_equal(new, labels):
            break
        labels = new
    sorted_labels = np.sort(labels, axis=-1)
    return 1 + np.sum(np.diff(sorted_labels, axis=-1) != 0, axis=-1)


def token_geometry(gram, tol=1e-3) -> dict:
    r"""The geometry of unit tokens from their Gram matrices (..., N, N), elementwise over
    the leading axes: ``mean_overlap`` (the mean of the off-diagonal overlaps),
    ``antipodal_share`` (the share of pairs within ``tol`` of -1), ``n_clusters``
    (:func:`n_clusters`) and ``effective_rank``, :math:`\exp(-\sum_k p_k \log p_k)` with
    :math:`p_k` the eigenvalues of the Gram matrix divided by their sum (N for N distinct
    orthogonal tokens, 1 for tokens on one line, a pair of antipodal clusters included)."""
    gram, tol = _gram(gram, tol)
    n = gram.shape[-1]
    off = _off_diagonal(n)
    eig = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    p = eig / eig.sum(axis=-1, keepdims=True)
    entropy = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)
    return {"mean_overlap": np.sum(np.where(off, gram, 0.0), axis=(-2, -1)) / (n * (n - 1)),
            "antipodal_share": np.sum(off & (gram <= -1.0 + tol), axis=(-2, -1)) / (n * (n - 1)),
            "n_clusters": n_clusters(gram, tol), "effective_rank": np.exp(entropy)}


def two_token_outcome(one_minus_overlap, one_plus_overlap=None, tol=1e-3):
    """Outcome codes of token pairs: SINGLE, ANTIPODAL or UNCLUSTERED.

    Give the gaps :math:`1 - z` and :math:`1 + z` (as the overlap chain returns them,
    at full relative precision), or a single array of overlaps ``z`` as the first
    argument with ``one_plus_overlap=None``.
    """
    tol = check_real("tol", tol, 0.0, 1.0, strict_min=True)
    if one_plus_overlap is None:
        z = np.asarray(one_minus_overlap, dtype=float)
        gap_single, gap_anti = 1.0 - z, 1.0 + z
    else:
        gap_single = np.asarray(one_minus_overlap, dtype=float)
        gap_anti = np.asarray(one_plus_overlap, dtype=float)
    out = np.full(np.broadcast(gap_single, gap_anti).shape, UNCLUSTERED, dtype=np.int8)
    out[gap_single <= tol] = SINGLE
    out[gap_anti <= tol] = ANTIPODAL
    return out


def direction_gram(gram):
    """The Gram matrices of the tokens' directions, :math:`G_{ij}/\\sqrt{G_{ii}G_{jj}}`:
    the overlaps of tokens that have left the sphere (pre- and peri-LN layers)."""
    gram = np.asarray(gram, dtype=float)
    diag = np.sqrt(np.diagonal(gram, axis1=-2, axis2=-1))
    return gram / (diag[..., :, None] * diag[..., None, :])


def outcome_counts(ds, tol=1e-3, time=None):
    """Counts of each two-token outcome in a :func:`simulate` dataset.

    Uses the full-precision gaps when the dataset has them, and the directions' overlaps
    (:func:`direction_gram`) when the tokens left the sphere.  With ``time`` the counts at
    that recorded time (``gram_t``) instead of at T.
    """
    suffix = "_t" if time is not None else ""
    if f"one_minus_overlap{suffix}" in ds:
        a = ds[f"one_minus_overlap{suffix}"]
        b = ds[f"one_plus_overlap{suffix}"]
        if time is not None:
            a, b = a.sel(time=time), b.sel(time=time)
        codes = two_token_outcome(a.values, b.values, tol=tol)
    else:
        g = (ds["gram_t"].sel(time=time) if time is not None else ds["gram"]).values
        if ds.attrs.get("norm") in ("pre", "peri"):
            g = direction_gram(g)
        codes = two_token_outcome(g[..., 0, 1], tol=tol)
    return {name: int(np.sum(codes == code)) for code, name in OUTCOME_NAMES.items()}
