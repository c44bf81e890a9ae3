"""One attention, many forms: every implementation agrees with ``attention.attention``.

``stochastic_transformers.attention.attention`` (the numba kernel every simulation uses) is
the definition: token i receives :math:`A_i = \\sum_j w_{ij} x_j` with
:math:`w_{ij} = \\operatorname{softmax}_j(\\beta x_i^\\top B x_j)` (softmax) or
:math:`e^{\\beta x_i^\\top B x_j}/N` (unnormalised).  The other forms — the paths-last numpy
version (Figure 1's field), the limit SDE's, the ViT's torch block, the two-token and two-cluster
closed forms of the weights — are checked against it on random configurations.
"""

import math

import numpy as np
import pytest

from stochastic_transformers import attention as att
from stochastic_transformers import theory
from stochastic_transformers.figures import fig1

ATTS = ["softmax", "unnormalized"]


def reference(x, beta, attention, B=None):
    """A_i of the numba kernel, undoing its exact rescaling (out = c_i A_i)."""
    n, d = x.shape
    b = np.eye(d) if B is None else np.asarray(B, dtype=float)
    out, bx, w, scale = np.empty((n, d)), np.empty((n, d)), np.empty(n), np.empty(n)
    att.attention(np.ascontiguousarray(x), b, float(beta), attention == "softmax", out, bx, w,
                  B is None, scale)
    return out / scale[:, None]


def _cloud(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("attention", ATTS)
def test_a_general_b_is_the_identity_kernel_with_transformed_keys(attention):
    rng = np.random.default_rng(0)
    for _ in range(20):
        n, d = rng.integers(2, 7), rng.integers(2, 6)
        x, beta = _cloud(rng, n, d), rng.uniform(0, 3)
        B = rng.standard_normal((d, d))
        logits = beta * x @ B @ x.T
        w = (np.exp(logits - logits.max(1, keepdims=True)) if attention == "softmax"
             else np.exp(logits) / n)
        if attention == "softmax":
            w /= w.sum(1, keepdims=True)
        np.testing.assert_allclose(reference(x, beta, attention, B), w @ x, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("attention", ATTS)
def test_the_paths_last_attention_is_the_kernel_for_every_configuration(attention):
    rng = np.random.default_rng(1)
    for _ in range(20):
        n, d, paths = rng.integers(2, 6), rng.integers(2, 5), rng.integers(1, 6)
        clouds = np.stack([_cloud(rng, n, d) for _ in range(paths)], axis=-1)   # (N, d, P)
        beta = rng.uniform(0, 3)
        got = att.attention_paths_last(clouds, beta, attention)
        for p in range(paths):
            np.testing.assert_allclose(got[..., p], reference(clouds[..., p], beta, attention),
                                       rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("attention", ATTS)
def test_figure_1_field_is_the_attention_of_the_sequence(attention):
    rng = np.random.default_rng(1)
    for _ in range(5):
        beta, angles = rng.uniform(0, 3), tuple(rng.uniform(-180, 180, 2))
        ds = fig1.compute("smoke", beta=beta, token_angles=angles, attention=attention)
        x, a, p = ds.position.values, ds.field.values, ds.tangent_field.values
        for i in range(x.shape[0]):
            seq = np.vstack([x[i], ds.tokens.values])
            np.testing.assert_allclose(a[i], reference(seq, beta, attention)[0], rtol=1e-12,
                                       atol=1e-13)
        np.testing.assert_array_equal(p, att.tangent_projection(x, a))
        np.testing.assert_allclose(ds.radial.values, np.sum(a * x, axis=1), rtol=1e-15)


def test_the_vit_block_attention_is_softmax_attention_with_its_bilinear_form():
    torch = pytest.importorskip("torch")
    from stochastic_transformers.vit import AttentionOnlyViT

    model = AttentionOnlyViT(depth=2, width=6, patch_size=4, image_size=8, channels=1,
                             num_classes=3, generator=torch.Generator().manual_seed(0))
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = _cloud(rng, 5, 6)
        B = rng.standard_normal((6, 6))
        got = model.attention(torch.tensor(x[None]), torch.tensor(B)).numpy()[0]
        np.testing.assert_allclose(got, reference(x, 1.0, "softmax", B), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("attention", ATTS)
def test_two_cluster_weights_are_the_kernel_on_a_two_point_configuration(attention):
    """theory.two_cluster_weights and attention.cluster_pair_weights against the kernel,
    on m1 copies of y1 and m2 of y2 (m1 = m2 = 1: the two-token weights)."""
    rng = np.random.default_rng(4)
    for m1, m2 in ((1, 1), (1, 2), (2, 3), (3, 1), (4, 4)):
        for _ in range(5):
            d = int(rng.integers(2, 6))
            y = _cloud(rng, 2, d)
            z, beta = float(y[0] @ y[1]), rng.uniform(0, 3)
            x = np.r_[np.repeat(y[:1], m1, 0), np.repeat(y[1:], m2, 0)]
            ref = reference(x, beta, attention)
            p1, q1, p2, q2 = theory.two_cluster_weights(z, beta, m1, m2, attention)
            np.testing.assert_allclose(ref[0], p1 * y[0] + q1 * y[1], rtol=1e-11, atol=1e-13)
            np.testing.assert_allclose(ref[-1], p2 * y[1] + q2 * y[0], rtol=1e-11, atol=1e-13)
            s = math.sqrt((1 - z) / 2)
            one, t1, t2, e1, e2, t_diff, e_diff, e_sum = att.cluster_pair_weights(
                s, beta, attention == "softmax", m1, m2)
            np.testing.assert_allclose([t1, t2, e1, e2], [p1 + q1, p2 + q2, q1 - p1, p2 - q2],
                                       rtol=1e-11, atol=1e-14)
            np.testing.assert_allclose([t_diff, e_diff, e_sum],
                                       [t2 - t1, e2 - e1, e1 + e2], rtol=1e-9, atol=1e-14)
            if m1 == m2 == 1:
                ksum, kdiff = att.pair_weights(s, beta, attention == "softmax")
                np.testing.assert_allclose([ksum, kdiff], [p1 + q1, p1 - q1], rtol=1e-11,
                                           atol=1e-14)
