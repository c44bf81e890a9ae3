r"""The attention-only Vision Transformer of the paper's Figure 2, in one file.

Section 6 of the paper trains a deep Vision Transformer whose blocks are the
discrete model (4) and nothing else: one attention head, no MLP, a residual
scaled by :math:`L^{-1/2}` and a normalisation of every token after the
residual.  This module builds that network in plain PyTorch.

The network
-----------
An image is cut into ``P x P`` patches; each patch is mapped linearly to a
token of width :math:`d`, a learned positional embedding is added and (with
``pool="cls"``) a learned class token is prepended.  The :math:`N` tokens are
RMS-normalised, which places them on the sphere of radius :math:`\sqrt d`,

.. math::

    \operatorname{rms}(x) = \frac{x}{\sqrt{\tfrac1d \lVert x\rVert^2 + \varepsilon}},
    \qquad x \in \mathbb R^d,

and then pass through :math:`L` blocks.  Block :math:`n \to n+1` acts on every
token :math:`i` as

.. math::

    X^i_{n+1} = \operatorname{rms}\Big( X^i_n + L^{-1/2}\, V_{n+1}
        \sum_{j=1}^N w^{ij}_n X^j_n \Big), \qquad
    w^{ij}_n = \operatorname{softmax}_j\Big( \frac{(Q X^i_n)^\top (K X^j_n)}{\sqrt d} \Big).

Writing :math:`u = x / \sqrt d` for the tokens on the unit sphere, this is
exactly the paper's discrete model :math:`X_{n+1} = \mathrm{normalize}(X_n +
L^{-1/2} V_{n+1} A_\beta(X_n))` with softmax attention and
:math:`\beta\, Q^\top K \to \sqrt d\, Q^\top K`.  There is no separate output
projection: :math:`V_{n+1}` is the only value map.

The classifier reads the class token (``pool="cls"``) or the mean of the tokens
(``pool="mean"``) after the last block with one linear layer.

Parameters shared across depth
------------------------------
* :math:`Q` and :math:`K` are two :math:`d \times d` matrices, initialised once
  with i.i.d. :math:`\mathcal N(0, 1/d)` entries and used by **every** block;
  they are trained.
* The value matrices depend on ``value_init``:

  ``"identity"``
      one matrix :math:`V` shared by all blocks, :math:`V_n = V`, starting at
      :math:`V = I_d` (the "constant weights" of the paper);
  ``"gaussian"``
      one matrix per block, :math:`V_1, \dots, V_L`, with i.i.d.
      :math:`\mathcal N(0, \sigma^2)` entries, :math:`\sigma = 1` by default
      (the "random weights" of the paper, the common noise of the theory).

  Both kinds are trained.

* The attention form starts random (``qk_init="random"``: :math:`Q, K` as above, so that
  :math:`\sqrt d\,Q^\top K` has entries of order one and the scores
  :math:`\langle u_i, \sqrt d\,Q^\top K u_j\rangle` are of order one) or at the paper's
  model (``qk_init="identity"``: :math:`Q^\top K/\sqrt d = (\beta/d)\,I`, so that the scores
  are :math:`\beta\langle u_i, u_j\rangle`, Theorem 2's case :math:`B = I`).

A horizon
---------
The residual is scaled by :math:`\sqrt{T/L}` (``horizon`` :math:`T`, 1 by default): the
:math:`L` blocks are then :math:`L` steps of size :math:`T/L` (:math:`L/T` layers per unit
time) of the paper's model run to time :math:`T`, so that depth refines the step and :math:`T` sets how far the tokens move.

The network is described by one frozen :class:`ViTConfig`; the paper's is depth
:math:`L = 128` and width :math:`d = 96` on CIFAR-10 (:data:`PAPER_CONFIG`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from ._validation import check_choice, check_int, check_real

__all__ = ["AttentionOnlyViT", "PAPER_CONFIG", "POOLS", "QK_INITS", "VALUE_INITS", "ViTConfig",
           "default_patch_size", "rms_normalize"]

VALUE_INITS = ("identity", "gaussian")
QK_INITS = ("random", "identity")
POOLS = ("cls", "mean")
#: The largest depth and width :meth:`ViTConfig.validate` accepts (a guard against typos).
MAX_DEPTH = MAX_WIDTH = 4096
#: The largest horizon and inverse temperature accepted (beyond them the scores overflow
#: float32's exponential or a block's step exceeds the token itself many times over).
MAX_HORIZON, MAX_BETA = 1000.0, 50.0


def default_patch_size(image_size: int) -> int:
    """The patch size used when ``patch_size`` is None: 2 pixels for images of at most 8
    pixels (the 8 x 8 digits: 4 x 4 tokens), else 4 (CIFAR-10's 32 x 32 images: 8 x 8
    tokens; the paper does not state its own)."""
    return 2 if image_size <= 8 else 4


@dataclass(frozen=True)
class ViTConfig:
    r"""The architecture of one :class:`AttentionOnlyViT` (checked by :meth:`validate`).

    Frozen: change a field with :func:`dataclasses.replace`.

    Parameters
    ----------
    depth : int
        Number :math:`L` of attention blocks; the residual is scaled by :math:`L^{-1/2}`.
    width : int
        Token dimension :math:`d`.
    value_init : {"identity", "gaussian"}
        One identity value matrix shared by all blocks, or one i.i.d. Gaussian
        matrix per block.
    sigma : float
        Standard deviation of the Gaussian value entries (ignored for "identity").
    image_size, patch_size, channels : int
        Square images of ``image_size`` pixels and ``channels`` channels, cut
        into non-overlapping ``patch_size`` squares (``patch_size`` must divide
        ``image_size``; None: :func:`default_patch_size`).
    num_classes : int
        Output size of the linear head.
    pool : {"cls", "mean"}
        Classify from a learned class token or from the mean token.
    horizon : float
        The time :math:`T` the blocks cover: the residual is scaled by :math:`\sqrt{T/L}`
        (1: the paper's :math:`L^{-1/2}`).
    qk_init : {"random", "identity"}
        The attention form at initialisation: random :math:`Q, K`, or
        :math:`Q^\top K/\sqrt d = (\beta/d) I` (scores :math:`\beta\langle u_i, u_j\rangle`).
    beta : float
        The inverse temperature of ``qk_init="identity"`` (ignored for "random").
    """

    depth: int = 128
    width: int = 96
    value_init: str = "gaussian"
    sigma: float = 1.0
    image_size: int = 32
    patch_size: int | None = None
    channels: int = 3
    num_classes: int = 10
    pool: str = "cls"
    horizon: float = 1.0
    qk_init: str = "random"
    beta: float = 1.0

    def validate(self) -> ViTConfig:
        """Check every field (a ValueError names the field and its allowed range); return a
        copy with ``patch_size`` resolved.  The other values are returned as given."""
        check_int("depth", self.depth, 1, MAX_DEPTH)
        check_int("width", self.width, 1, MAX_WIDTH)
        check_choice("value_init", self.value_init, VALUE_INITS)
        check_real("sigma", self.sigma, 0.0, strict_min=True)
        size = check_int("image_size", self.image_size, 1)
        patch = default_patch_size(size) if self.patch_size is None else self.patch_size
        check_int("patch_size", patch, 1, size)
        if size % patch:
            raise ValueError(f"patch_size must divide image_size={size}, got {patch}")
        check_int("channels", self.channels, 1)
        check_int("num_classes", self.num_classes, 2)
        check_choice("pool", self.pool, POOLS)
        check_real("horizon", self.horizon, 0.0, MAX_HORIZON, strict_min=True)
        check_choice("qk_init", self.qk_init, QK_INITS)
        check_real("beta", self.beta, 0.0, MAX_BETA)
        if self.qk_init == "random" and self.beta != 1.0:
            raise ValueError(f"beta sets the attention of qk_init='identity'; with "
                             f"qk_init='random' leave it at 1.0, got {self.beta}")
        return dataclasses.replace(self, patch_size=patch)


#: The network of the paper's Figure 2 (CIFAR-10, 32 x 32 RGB images, 10 classes).
PAPER_CONFIG = ViTConfig(depth=128, width=96, image_size=32, channels=3, num_classes=10)


def rms_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    r"""Scale every token (last axis) to root-mean-square 1, i.e. to norm :math:`\sqrt d`.

    There is no learned gain: the normalisation is the projection of the
    discrete model onto the sphere, up to the constant radius :math:`\sqrt d`.
    """
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


class AttentionOnlyViT(nn.Module):
    r"""Depth-``depth`` attention-only ViT with shared :math:`Q, K` (see the module docstring).

    Parameters
    ----------
    config : ViTConfig, optional
        The architecture (default: ``ViTConfig()``, the paper's network); it is
        validated here and kept, resolved, as ``self.config``.
    generator : torch.Generator, optional
        Source of randomness for the initialisation (default: torch's global one).
    **fields
        Fields of :class:`ViTConfig` that replace those of ``config``
        (``AttentionOnlyViT(depth=2, width=6, ...)``).
    """

    def __init__(self, config: ViTConfig | None = None, *,
                 generator: torch.Generator | None = None, **fields):
        super().__init__()
        config = ViTConfig() if config is None else config
        if not isinstance(config, ViTConfig):
            raise ValueError(f"config must be a ViTConfig, got {config!r}")
        names = {f.name for f in dataclasses.fields(ViTConfig)}
        unknown = sorted(set(fields) - names)
        if unknown:
            raise ValueError(f"fields must be among {', '.join(sorted(names))}; "
                             f"got {', '.join(unknown)}")
        self.config = dataclasses.replace(config, **fields).validate()
        cfg = self.config
        self.depth, self.width = cfg.depth, cfg.width
        self.value_init, self.sigma, self.pool = cfg.value_init, cfg.sigma, cfg.pool
        self.image_size, self.patch_size = cfg.image_size, cfg.patch_size
        self.horizon = cfg.horizon
        self.channels, self.num_classes = cfg.channels, cfg.num_classes

        d = self.width
        self.num_patches = (self.image_size // self.patch_size) ** 2
        self.num_tokens = self.num_patches + (self.pool == "cls")
        patch_dim = self.channels * self.patch_size ** 2

        def normal(*shape, std):
            return torch.randn(*shape, generator=generator) * std

        # Patch embedding (a linear map of the flattened patch), positions, class token.
        self.patch_embed = nn.Linear(patch_dim, d)
        with torch.no_grad():
            self.patch_embed.weight.copy_(normal(d, patch_dim, std=patch_dim ** -0.5))
            self.patch_embed.bias.zero_()
        self.pos_embed = nn.Parameter(normal(1, self.num_tokens, d, std=0.02))
        self.cls_token = nn.Parameter(normal(1, 1, d, std=0.02)) if self.pool == "cls" else None

        # One query and one key matrix for all blocks.
        self.query = nn.Parameter(normal(d, d, std=d ** -0.5))
        self.key = nn.Parameter(normal(d, d, std=d ** -0.5))
        if cfg.qk_init == "identity":
            # Drawn above all the same, so that every other parameter keeps its draw.
            with torch.no_grad():
                self.query.copy_(cfg.beta / math.sqrt(d) * torch.eye(d))
                self.key.copy_(torch.eye(d))
        self.head = nn.Linear(d, self.num_classes)
        with torch.no_grad():
            self.head.weight.copy_(normal(self.num_classes, d, std=d ** -0.5))
            self.head.bias.zero_()
        # Value matrices, drawn last: with the same generator seed, the two value_init
        # choices get identical embeddings, Q, K and head, and differ only in V.
        if self.value_init == "identity":
            self.values = nn.Parameter(torch.eye(d).unsqueeze(0))
        else:
            self.values = nn.Parameter(normal(self.depth, d, d, std=self.sigma))

    # -- the pieces -----------------------------------------------------------------------
    def value(self, n: int) -> torch.Tensor:
        """The value matrix of block ``n`` (0-based), a ``(width, width)`` tensor."""
        return self.values[0] if self.values.shape[0] == 1 else self.values[n]

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> normalised initial tokens ``X_0`` of shape ``(B, N, d)``."""
        if images.ndim != 4 or tuple(images.shape[1:]) != (
                self.channels, self.image_size, self.image_size):
            raise ValueError(f"images must have shape (batch, {self.channels}, "
                             f"{self.image_size}, {self.image_size}), got {tuple(images.shape)}")
        b, c, _, _ = images.shape
        p, g = self.patch_size, self.image_size // self.patch_size
        # (B, C, g, p, g, p) -> (B, g, g, C, p, p) -> (B, g*g, C*p*p)
        patches = images.reshape(b, c, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(b, g * g, -1)
        x = self.patch_embed(patches)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)
        return rms_normalize(x + self.pos_embed)

    def bilinear(self) -> torch.Tensor:
        r"""The attention form :math:`B = Q^\top K / \sqrt d`; scores are :math:`x_i^\top B x_j`.

        Only this product of the shared query and key matrices enters the
        network, so it is formed once per forward pass, not once per block.
        """
        return self.query.T @ self.key / math.sqrt(self.width)

    def attention(self, x: torch.Tensor, bilinear: torch.Tensor | None = None) -> torch.Tensor:
        r"""The attention average :math:`A(X^i, X) = \sum_j w^{ij} X^j` for every token."""
        b = self.bilinear() if bilinear is None else bilinear
        weights = torch.softmax((x @ b) @ x.transpose(-2, -1), dim=-1)
        return weights @ x

    def block(self, x: torch.Tensor, n: int, bilinear: torch.Tensor | None = None,
              value: torch.Tensor | None = None) -> torch.Tensor:
        r"""Block ``n`` (0-based): :math:`X \mapsto \operatorname{rms}(X + \sqrt{T/L}\, V_{n+1} A(X))`.

        ``bilinear`` and ``value`` may be passed in precomputed (see :meth:`features`).
        """
        value = self.value(n) if value is None else value
        update = self.attention(x, bilinear) @ value.T
        # depth / 1.0 is depth exactly: the default horizon keeps the paper's bits.
        return rms_normalize(x + update / math.sqrt(self.depth / self.horizon))

    def states(self, images: torch.Tensor) -> list[torch.Tensor]:
        """The tokens after the embedding and after every block: ``L + 1`` tensors ``(B, N, d)``."""
        x = self.embed(images)
        b = self.bilinear()
        # Split the (L, d, d) stack once: indexing it in every block would make the
        # backward pass add L full-size gradients, O(L^2 d^2) work.
        values = self.values.unbind(0)
        out = [x]
        for n in range(self.depth):
            out.append(self.block(out[-1], n, b, values[0 if len(values) == 1 else n]))
        return out

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Tokens after the last block, shape ``(B, N, d)``."""
        return self.states(images)[-1]

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)`` from the last tokens ``x``."""
        return self.head(x[:, 0] if self.pool == "cls" else x.mean(dim=1))

    @torch.no_grad()
    def directions_in_depth(self, images: torch.Tensor) -> torch.Tensor:
        r"""The tokens' directions :math:`u = x/\sqrt d` after the embedding and after every
        block, shape ``(B, L + 1, N, d)``: the geometry that the theory predicts."""
        return torch.nn.functional.normalize(torch.stack(self.states(images), dim=1), dim=-1)

    def gradient_norms_in_depth(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mean over images of the norm of the loss's gradient with respect to the tokens
        after the embedding and after every block, ``(L + 1,)``: how the training signal
        reaches the early blocks."""
        xs = self.states(images)
        loss = torch.nn.functional.cross_entropy(self.classify(xs[-1]), labels)
        grads = torch.autograd.grad(loss, xs)
        return torch.stack([g.flatten(1).norm(dim=1).mean() for g in grads]).detach()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)``."""
        return self.classify(self.features(images))

    def extra_repr(self) -> str:
        return (f"depth={self.depth}, width={self.width}, value_init={self.value_init!r}, "
                f"sigma={self.sigma}, tokens={self.num_tokens}, pool={self.pool!r}, "
                f"horizon={self.horizon}, qk_init={self.config.qk_init!r}, "
                f"beta={self.config.beta}")


