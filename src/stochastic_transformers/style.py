"""One figure style for the whole book: seaborn, colour-blind-safe palette."""

from __future__ import annotations


def use_style() -> None:
    """Set the book's matplotlib style (seaborn ticks, colour-blind palette)."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context="notebook", style="ticks", palette="colorblind")
    mpl.rcParams.update({
        "figure.dpi": 110,
        "savefig.dpi": 150,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
        "svg.fonttype": "none",
        "svg.hashsalt": "stochastic-transformers",
        # Every text size of the book's figures is set here, once: figure code names none.
        "font.size": 10,
        "axes.titlesize": 10,
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 8.5,
        "legend.title_fontsize": 9,
        "figure.titlesize": 11,
    })


def palette(n: int):
    """``n`` colours from the colour-blind-safe palette (a sequential one beyond 10)."""
    import seaborn as sns

    return sns.color_palette("colorblind", n) if n <= 10 else sns.color_palette("viridis", n)
