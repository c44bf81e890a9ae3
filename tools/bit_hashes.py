"""Hash the outputs of the simulator on a fixed set of requests, one per method and model.

A change that only moves or restructures code must leave every hash unchanged:

    python tools/bit_hashes.py --write /tmp/before.json   # on the old code
    python tools/bit_hashes.py --check /tmp/before.json   # on the new code

Each request is small (seconds in all once compiled).  The hashes cover every data
variable and coordinate of the returned dataset, not its timing attributes.  They are
specific to a machine and a numba build (libm and the CPU's instruction set enter the
rounding), which is why they are compared between two versions of the code on one
machine rather than pinned in the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np

def _start_tokens():
    x = np.random.default_rng(0).standard_normal((4, 3, 4))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


_X0 = _start_tokens()

#: (name, keyword arguments of the flat request).  The flat form names every field of
#: the model and the run; both the old keyword API and the config API accept it.
REQUESTS = [
    ("pair", dict(n_tokens=2, d=4, beta=2.0, n_traj=64, L=20, T=2.0, seed=3)),
    ("pair_times", dict(n_tokens=2, d=3, beta=5.0, n_traj=32, L=10, T=3.0, seed=1,
                        times=[0.0, 0.5, 3.0])),
    ("pair_z0_unnorm", dict(n_tokens=2, d=5, beta=1.0, n_traj=32, L=10, T=1.0, seed=2,
                            z0=-0.3, attention="unnormalized")),
    ("pair_hybrid", dict(n_tokens=2, d=3, beta=1.5, n_traj=32, L=10, T=1.0, seed=4,
                         model="hybrid", epsilon=0.7)),
    ("pair_stop", dict(n_tokens=2, d=3, beta=4.0, n_traj=32, L=10, T=5.0, seed=5,
                       stop_level=1e-3)),
    ("split", dict(n_tokens=5, d=4, beta=3.0, n_traj=32, L=10, T=2.0, seed=6, split=(2, 3),
                   times=[1.0, 2.0])),
    ("split_z0", dict(n_tokens=4, d=4, beta=3.0, n_traj=32, L=10, T=2.0, seed=6, split=(2, 2),
                      z0=0.2)),
    ("reduced_literal", dict(n_tokens=5, d=4, beta=4.0, n_traj=16, L=20, T=20.0, seed=7,
                             times=[1.0, 20.0])),
    ("reduced_dn", dict(n_tokens=3, d=6, beta=4.0, n_traj=16, L=20, T=20.0, seed=8)),
    ("snap", dict(n_tokens=4, d=4, beta=4.0, n_traj=8, L=20, T=10.0, seed=9, method="snap")),
    ("literal_gauss", dict(n_tokens=4, d=3, beta=1.0, n_traj=16, L=10, T=1.0, seed=10,
                           method="literal", times=[0.5])),
    ("literal_uniform", dict(n_tokens=3, d=4, beta=1.0, n_traj=16, L=10, T=1.0, seed=11,
                             values="uniform")),
    ("literal_rademacher", dict(n_tokens=3, d=4, beta=1.0, n_traj=16, L=10, T=1.0, seed=12,
                                values="rademacher", sigma=0.5)),
    ("gaussian_dn", dict(n_tokens=3, d=6, beta=2.0, n_traj=16, L=10, T=1.0, seed=13,
                         method="gaussian_dn")),
    ("tokens_B", dict(n_tokens=3, d=3, beta=1.0, n_traj=16, L=10, T=1.0, seed=14,
                      B=[[1.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.1, 0.0, 0.5]])),
    ("tokens_hybrid", dict(n_tokens=4, d=3, beta=1.0, n_traj=16, L=10, T=1.0, seed=15,
                           model="hybrid", epsilon=0.5)),
    ("random_attention", dict(n_tokens=5, d=6, beta=1.0, n_traj=16, L=10, T=1.0, seed=16,
                              model="random_attention", n_heads=3, sigma_qk=0.8,
                              times=[0.5, 1.0])),
    ("random_attention_literal", dict(n_tokens=3, d=4, beta=2.0, n_traj=8, L=10, T=1.0,
                                      seed=17, model="random_attention", method="literal",
                                      eta=0.2)),
    ("tokens_x0", dict(n_tokens=3, d=4, beta=1.0, n_traj=4, L=10, T=1.0, seed=18,
                       method="literal", x0=_X0)),
    ("pair_x0", dict(n_tokens=2, d=4, beta=1.0, n_traj=4, L=10, T=1.0, seed=19,
                     x0=_X0[:, :2])),
    ("pieces", dict(n_tokens=2, d=4, beta=2.0, n_traj=16, L=20, T=2.0, seed=3,
                    first_trajectory=48)),
    # The other normalisations and the causal mask (a reference written before them lacks
    # these names; --check compares the names the reference has).
    ("pre_causal", dict(n_tokens=3, d=4, beta=1.5, n_traj=8, L=10, T=1.0, seed=20,
                        norm="pre", causal=True)),
    ("peri_dn", dict(n_tokens=2, d=5, beta=1.0, n_traj=8, L=10, T=1.0, seed=21, norm="peri",
                     method="gaussian_dn")),
    ("ngpt_hybrid", dict(n_tokens=3, d=3, beta=2.0, n_traj=4, L=10, T=1.0, seed=22,
                         model="hybrid", norm="ngpt", causal=True)),
    # Their two-token chain.
    ("peri_chain", dict(n_tokens=2, d=5, beta=1.0, n_traj=8, L=10, T=1.0, seed=23, norm="peri",
                        times=[0.5, 1.0])),
    ("ngpt_causal_chain", dict(n_tokens=2, d=4, beta=3.0, n_traj=8, L=10, T=1.0, seed=24,
                               norm="ngpt", causal=True)),
]


def run_request(kwargs):
    """Run one flat request through whichever API this version of the package has."""
    import stochastic_transformers as st

    if hasattr(st, "ModelConfig"):
        return st.simulate(*st.configs_from_flat(**kwargs))
    kw = dict(kwargs)
    return st.simulate(kw.pop("n_tokens"), kw.pop("d"), kw.pop("beta"), **kw)


def digest(ds) -> str:
    h = hashlib.sha256()
    for name in sorted(ds.variables):
        arr = np.ascontiguousarray(ds[name].values)
        h.update(name.encode())
        h.update(str(arr.dtype).encode())
        h.update(arr.tobytes())
    return h.hexdigest()[:20]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="JSON")
    group.add_argument("--check", metavar="JSON")
    args = parser.parse_args(argv)
    hashes = {name: digest(run_request(kw)) for name, kw in REQUESTS}
    if args.write:
        with open(args.write, "w") as fh:
            json.dump(hashes, fh, indent=1)
        print(f"wrote {len(hashes)} hashes to {args.write}")
        return 0
    with open(args.check) as fh:
        reference = json.load(fh)
    bad = [name for name in reference if hashes.get(name) != reference[name]]
    for name in reference:
        print(f"{'ok  ' if name not in bad else 'DIFF'} {name} {hashes.get(name)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
