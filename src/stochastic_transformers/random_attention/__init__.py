r"""The follow-up's model: fresh random keys, queries and values in every layer and head.

Koubbi, Geshkovski and Rigollet (2026, *Homogenized transformers*) resample every weight
matrix of every layer and head, as at initialisation.  With :math:`H` heads, one layer maps

.. math::

    x_i \leftarrow \operatorname{normalize}\Bigl(x_i + \frac{\eta}{H}\sum_{h=1}^H V_h\, m_h(x_i)\Bigr),
    \qquad m_h(x_i) = \sum_j \operatorname{softmax}_j\bigl(\beta\langle A_h x_i, x_j\rangle\bigr)\, x_j,

with, independently for every layer and head, :math:`V_h` a :math:`d\times d` matrix of
i.i.d. :math:`N(0,\sigma^2)` entries and :math:`A_h = W_h W_h'^\top`, :math:`W_h, W'_h` of
i.i.d. :math:`N(0,\sigma_{qk}^2)` entries.  The main paper's model is the case of one head
and a fixed :math:`A`; at :math:`\beta = 0` the two coincide in law (attention is uniform
whatever :math:`A`), which the tests check.

Two exact methods, both drawing inside the compiled loop from the trajectory's own
stream (:mod:`stochastic_transformers.rng`), so bits do not depend on threads or slicing:

``literal``
    draws :math:`W_h, W'_h, V_h` in full (:math:`3Hd^2` normals a layer) and applies them.
    The reference.
``subspace``
    uses that all three matrices only ever act on the span of the tokens, of dimension
    :math:`k \le \min(d, N)`.  Write :math:`X^\top = QC` (thin QR, :math:`C` is
    :math:`k\times N`, :math:`C^\top C` the Gram matrix).

    * Scores: :math:`\langle A x_i, x_j\rangle = c_i^\top (Q^\top W)(Q^\top W')^\top c_j`, and
      :math:`Q^\top W, Q^\top W'` are independent :math:`k\times d` Gaussian matrices.  Given
      the first, the columns of their product are :math:`N(0, \sigma_{qk}^4 S)` with
      :math:`S = Q^\top W W^\top Q \sim \text{Wishart}_k(d, I)`, so the product has the law
      of :math:`\sigma_{qk}^2\,\Lambda Y`: :math:`\Lambda` the Bartlett factor of that Wishart
      matrix (:math:`\Lambda_{aa} = \sqrt{\chi^2_{d-a}}`, :math:`\Lambda_{ab} \sim N(0,1)`
      below the diagonal) and :math:`Y` a :math:`k\times k` Gaussian matrix:
      :math:`k(k+1)/2 + k^2` numbers a head instead of :math:`2d^2`.
    * Values, all heads at once: the increments :math:`u_i = \frac{\eta}{H}\sum_h V_h m_{h,i}`
      are jointly Gaussian with :math:`\operatorname{Cov}(u_i, u_j) = \frac{\eta^2\sigma^2}{H^2}
      G_{ij} I_d`, :math:`G = \sum_h M_h^\top M_h` (:math:`M_h` the :math:`k\times N`
      coordinates of head h's outputs).  With :math:`R_F` the triangular factor of the
      stacked :math:`(Hk)\times N` matrix :math:`[M_1; \dots; M_H]` (so
      :math:`R_F^\top R_F = G`), :math:`U = \frac{\eta\sigma}{H} Z R_F` with :math:`Z` a
      :math:`d\times\min(Hk, N)` Gaussian matrix: at most :math:`dN` normals a layer for
      all heads instead of :math:`Hd^2`.

    Householder QR keeps both factorisations exact to rounding when tokens nearly
    coincide (a Cholesky factor of the Gram matrix would break down).
"""

from __future__ import annotations

#: Methods of this model; ``auto`` means ``subspace``.  Their compiled layers are in
#: :mod:`stochastic_transformers.kernels.random_attention`.
METHODS = ("literal", "subspace")


def noise_clock(n_layers, eta, sigma=1.0, n_heads=1):
    r"""The homogenised time :math:`\tau = n\,\eta^2\sigma^2/H` after ``n_layers`` layers.

    A layer adds to every token a centred Gaussian increment of covariance
    :math:`(\eta^2\sigma^2/H)\,c\,I_d` with :math:`c = O(1)` (the heads' outputs averaged);
    the limit diffusion runs on this clock (for the main paper's model, :math:`\tau = \sigma^2 T`).
    """
    return n_layers * eta * eta * sigma * sigma / n_heads


def normals_per_layer(n_tokens, d, n_heads, method):
    """Random numbers one layer draws (chi variables counted as one)."""
    if method == "literal":
        return 3 * n_heads * d * d
    k = min(d, n_tokens)
    return n_heads * (k * (k + 1) // 2 + k * k) + d * min(n_heads * k, n_tokens)
