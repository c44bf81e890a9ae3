r"""Per-trajectory random streams inside numba kernels.

Random numbers are the cost of these simulations, so they are generated inside the
compiled kernels, with no temporary arrays:

* **Generator**: xoshiro256++ (Blackman and Vigna, 2018), a 256-bit state with a
  period of :math:`2^{256}-1`, passing BigCrush and PractRand.
* **Streams**: trajectory ``t`` of a run with seed ``seed`` starts from the state
  produced by SplitMix64 (Steele, Lea and Flood, 2014; Vigna's recommended seeding
  for xoshiro) from the 64-bit value ``mix(key0 ^ mix(t + key1))``, where
  ``(key0, key1)`` come from ``numpy.random.SeedSequence(seed)``.  So a trajectory's
  numbers depend only on the seed and its global index: never on the number of
  threads, nor on how trajectories are split across workers.
* **Normals**: the ziggurat method of Marsaglia and Tsang (2000) with 256 strips and
  52-bit uniforms; tables are built below from the defining recursion.
* **Chi-squares**: sums of exponentials through one logarithm of a product of
  uniforms (and one squared normal for odd degrees); gammas by Marsaglia and Tsang
  (2000) beyond 33 degrees of freedom.

Each kernel receives a ``(n, 4)`` ``uint64`` array of states and advances its own row.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ._jit import JIT as _JIT

# ------------------------------------------------------------------ ziggurat tables

def _ziggurat_tables(n=256, r=3.6541528853610088):
    """Strip edges x_0 > x_1 = r > ... > x_n = 0 for the unnormalised density exp(-x^2/2).

    Every strip has area v = r f(r) + int_r^inf f; strip 0 is the base (width v/f(r),
    including the tail) and strip i >= 1 is [0, x_i] x [f(x_i), f(x_{i+1})].
    Returns ki (acceptance thresholds on 52-bit integers), wi (scale of the 52-bit
    integer to x) and fi = f(x_i), with fi[n] = 1.
    """
    f = lambda x: math.exp(-0.5 * x * x)  # noqa: E731
    tail = math.sqrt(math.pi / 2.0) * math.erfc(r / math.sqrt(2.0))
    v = r * f(r) + tail
    x = np.zeros(n + 1)
    x[0] = v / f(r)
    x[1] = r
    for i in range(1, n - 1):
        x[i + 1] = math.sqrt(-2.0 * math.log(f(x[i]) + v / x[i]))
    x[n] = 0.0
    two52 = float(2 ** 52)
    ki = np.array([int(two52 * x[i + 1] / x[i]) for i in range(n)], dtype=np.uint64)
    wi = np.array([x[i] / two52 for i in range(n)])
    fi = np.array([f(xi) for xi in x])
    fi[n] = 1.0
    return ki, wi, fi, r


ZIG_K, ZIG_W, ZIG_F, ZIG_R = _ziggurat_tables()


# ------------------------------------------------------------------ generator

@nb.njit(inline="always", **_JIT)
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@nb.njit(inline="always", **_JIT)
def next_u64(state):
    """xoshiro256++: advance ``state`` (4 uint64) and return 64 random bits."""
    s0, s1, s2, s3 = state[0], state[1], state[2], state[3]
    result = _rotl(s0 + s3, 23) + s0
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    state[0], state[1], state[2], state[3] = s0, s1, s2, s3
    return result


@nb.njit(inline="always", **_JIT)
def uniform(state):
    """Uniform double in [0, 1) with 53 random bits."""
    return float(next_u64(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(**_JIT)
def normal(state):
    """Standard normal by the 256-strip ziggurat (about 99% of draws take one step)."""
    while True:
        bits = next_u64(state)
        idx = int(bits & np.uint64(0xFF))
        bits >>= np.uint64(8)
        negative = (bits & np.uint64(1)) != 0
        mant = (bits >> np.uint64(1)) & np.uint64(0x000FFFFFFFFFFFFF)
        x = float(mant) * ZIG_W[idx]
        if mant < ZIG_K[idx]:
            return -x if negative else x
        if idx == 0:
            # Tail beyond r (Marsaglia 1964): exponential proposals.
            while True:
                xx = -math.log1p(-uniform(state)) / ZIG_R
                yy = -math.log1p(-uniform(state))
                if yy + yy > xx * xx:
                    return -(ZIG_R + xx) if negative else ZIG_R + xx
        y = ZIG_F[idx] + uniform(state) * (ZIG_F[idx + 1] - ZIG_F[idx])
        if y < math.exp(-0.5 * x * x):
            return -x if negative else x


@nb.njit(**_JIT)
def gamma(state, shape):
    """Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang 2000)."""
    dd = shape - 1.0 / 3.0
    cc = 1.0 / math.sqrt(9.0 * dd)
    while True:
        x = normal(state)
        v = 1.0 + cc * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = uniform(state)
        if u < 1.0 - 0.0331 * (x * x) * (x * x):
            return dd * v
        if math.log(u) < 0.5 * x * x + dd * (1.0 - v + math.log(v)):
            return dd * v


@nb.njit(**_JIT)
def chi2(state, dof):
    r"""Chi-square with ``dof`` >= 0 degrees of freedom, exactly in law.

    For even ``dof = 2m`` (m <= 16) it uses :math:`\chi^2_{2m} = -2\log(U_1\cdots U_m)`,
    a sum of m exponentials with a single logarithm (the product of at most 16
    uniforms in (0, 1] stays above 2^-848, far from underflow); an odd ``dof`` adds
    the square of one normal.  Larger ``dof`` use the gamma sampler.
    """
    if dof <= 0:
        return 0.0
    m = dof // 2
    extra = 0.0
    if dof % 2 == 1:
        z = normal(state)
        extra = z * z
    if m == 0:
        return extra
    if m > 16:
        return 2.0 * gamma(state, float(m)) + extra
    prod = 1.0
    for _ in range(m):
        prod *= 1.0 - uniform(state)  # in (0, 1]
    return -2.0 * math.log(prod) + extra


@nb.njit(**_JIT)
def sqrt_chi2(state, dof):
    """sqrt of a chi-square with ``dof`` degrees of freedom."""
    return math.sqrt(chi2(state, dof))


# ------------------------------------------------------------------ seeding

@nb.njit(**_JIT)
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(**_JIT)
def seed_stream(state, key0, key1, index):
    """Fill ``state`` with the start of stream ``index`` (SplitMix64 seeding)."""
    golden = np.uint64(0x9E3779B97F4A7C15)
    z = _mix64(key0 ^ _mix64(np.uint64(index) + key1))
    for k in range(4):
        z += golden
        state[k] = _mix64(z)
    if state[0] == 0 and state[1] == 0 and state[2] == 0 and state[3] == 0:
        state[0] = golden  # the all-zero state is the one xoshiro must avoid


def stream_keys(seed):
    """The two 64-bit keys of a run with integer ``seed`` (via numpy's SeedSequence)."""
    key = np.random.SeedSequence(seed).generate_state(2, dtype=np.uint64)
    return np.uint64(key[0]), np.uint64(key[1])


@nb.njit(**_JIT)
def fill_normals(state, out):
    """Fill ``out`` (1-d) with standard normals: a helper for tests."""
    for i in range(out.size):
        out[i] = normal(state)


@nb.njit(**_JIT)
def fill_gammas(state, shape, out):
    """Fill ``out`` (1-d) with Gamma(shape) variables: a helper for tests."""
    for i in range(out.size):
        out[i] = gamma(state, shape)
