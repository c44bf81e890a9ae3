"""Figures of the paper (Fedorov, Sander, Elie, Marion, Laurière, ICML 2026): its Figures 1-4
and 6-9, Theorem 1's weak convergence and its universality in the value law."""
