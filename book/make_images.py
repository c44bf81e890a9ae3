"""Draw the two images of the narrative pages (run by hand; the SVGs are committed).

    .venv/bin/python book/make_images.py

* ``images/figure5_layer.svg``: Figure 5, one layer of the deep stochastic
  Transformer, written as plain SVG (no plotting library), so every element is
  placed on purpose and the text stays text.
* ``images/phase_diagram.svg``: the landing page's figure, the two exact phase
  boundaries of the paper (Theorem 2 and Proposition 1, both for two tokens and
  :math:`Q^\top K = \mathrm{Id}`; Proposition 1 for unnormalised attention only) drawn
  with the book's matplotlib style.  It needs no simulation: both curves are closed
  formulas.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMAGES = HERE / "images"

# seaborn's colour-blind palette (the book's palette), and light tints of it.
BLUE, ORANGE, GREEN, RED, PURPLE, GREY = ("#0173b2", "#de8f05", "#029e73", "#d55e00",
                                          "#cc78bc", "#949494")
TINT = {BLUE: "#dcebf5", ORANGE: "#fbecd3", GREEN: "#d5efe7", PURPLE: "#f5e4f2"}
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


# --------------------------------------------------------------------------
# Figure 5
# --------------------------------------------------------------------------

def sym(base: str, sup: str = "", sub: str = "", size: int = 17, x=None, y=None,
        anchor: str = "middle", weight: str = "normal", italic: bool = True) -> str:
    """A math symbol with a superscript and a subscript, as SVG text (no font tricks)."""
    small = round(size * 0.68)
    pos = "" if x is None else f' x="{x:.1f}" y="{y:.1f}"'
    style = ' font-style="italic"' if italic else ""
    parts = [f'<text{pos} text-anchor="{anchor}" font-size="{size}" font-weight="{weight}"{style}>',
             base]
    if sup:
        parts.append(f'<tspan font-size="{small}" dy="{-size * 0.42:.1f}">{sup}</tspan>')
    if sub:
        shift = size * 0.42 + size * 0.30 if sup else size * 0.30
        back = f' dx="{-small * 0.55 * len(sup):.1f}"' if sup else ""
        parts.append(f'<tspan font-size="{small}"{back} dy="{shift:.1f}">{sub}</tspan>')
    parts.append("</text>")
    return "".join(parts)


def text(x, y, s, size=13, anchor="middle", fill="#222", weight="normal", italic=False) -> str:
    style = ' font-style="italic"' if italic else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'fill="{fill}" font-weight="{weight}"{style}>{s}</text>')


def arrow(x1, y1, x2, y2, color="#333", width=1.6, dash=None) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
            f'stroke-width="{width}"{d} marker-end="url(#arrow)"/>')


def figure5() -> str:
    width, height = 1000, 630
    rows = [(1, 170.0), (2, 292.0), ("N", 452.0)]       # token index, y of its row
    x_in, x_att0, x_att1, x_lab0 = 55.0, 118.0, 338.0, 180.0
    x_v0, x_v1 = 372.0, 492.0
    x_scale, x_plus = 546.0, 644.0
    x_n0, x_n1, x_out = 688.0, 852.0, 938.0
    top, bottom = 112.0, 515.0
    r_tok = 30.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" font-family="{FONT}" role="img" '
           f'aria-labelledby="f5title f5desc">',
           '<title id="f5title">Figure 5: one layer of the deep stochastic Transformer</title>',
           '<desc id="f5desc">N tokens on the sphere enter a self-attention block that mixes all '
           'of them. Each attention output is multiplied by the same random value matrix '
           'V_{n+1}, scaled by one over the square root of L, added to its token through a '
           'dashed residual connection, and normalised back onto the unit sphere, giving the '
           'tokens of layer n+1.</desc>',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#333"/></marker></defs>',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>']

    # Column headings.
    heads = [(x_in, "layer n"), ((x_att0 + x_att1) / 2, "self-attention"),
             ((x_v0 + x_v1) / 2, "value matrix"), (x_scale, "diffusion"), (x_plus + 4, "residual"),
             ((x_n0 + x_n1) / 2, "normalisation"), (x_out, "layer n+1")]
    for x, h in heads:
        out.append(text(x, 38, h, size=17, weight="bold"))
    out.append(text(x_scale, 60, "scaling", size=17, weight="bold"))
    out.append(text((x_att0 + x_att1) / 2, 62, "(global: all tokens)", size=14, fill="#555"))
    out.append(text((x_v0 + x_v1) / 2, 62, "(shared, random)", size=14, fill="#555"))
    out.append(text((x_n0 + x_n1) / 2, 62, "(each token)", size=14, fill="#555"))

    # Residual connections first, so that the boxes hide them where they cross.
    for _, y in rows:
        yr = y - 56
        out.append(f'<path d="M{x_in:.1f},{y - r_tok:.1f} L{x_in:.1f},{yr:.1f} L{x_plus:.1f},{yr:.1f} '
                   f'L{x_plus:.1f},{y - 20:.1f}" fill="none" stroke="{GREY}" stroke-width="2" '
                   f'stroke-dasharray="7 6" marker-end="url(#arrow)"/>')

    # Attention box, and every token feeding every attention output.
    out.append(f'<rect x="{x_att0}" y="{top}" width="{x_att1 - x_att0}" height="{bottom - top}" '
               f'rx="14" fill="{TINT[BLUE]}" stroke="{BLUE}" stroke-width="2"/>')
    for _, y_src in rows:
        for _, y_dst in rows:
            out.append(f'<line x1="{x_in + r_tok:.1f}" y1="{y_src:.1f}" x2="{x_lab0:.1f}" '
                       f'y2="{y_dst:.1f}" stroke="{BLUE}" stroke-opacity="0.6" stroke-width="1.5"/>')
    for i, y in rows:
        out.append(f'<rect x="{x_lab0}" y="{y - 22}" width="{x_att1 - 10 - x_lab0}" height="44" '
                   f'rx="8" fill="white" stroke="{BLUE}" stroke-width="1.5"/>')
        out.append(text((x_lab0 + x_att1 - 10) / 2, y + 6,
                        "A<tspan font-size='13' dy='5'>β</tspan>"
                        f"<tspan dy='-5'>(X</tspan><tspan font-size='13' dy='-8'>{i}</tspan>"
                        "<tspan dy='8'>, X)</tspan>", size=19, italic=True))
    out.append(text((x_att0 + x_att1) / 2, bottom - 14, "softmax over all N tokens",
                    size=14, fill="#333"))

    # The value matrix: one box across all rows, since all tokens share it.
    out.append(f'<rect x="{x_v0}" y="{top}" width="{x_v1 - x_v0}" height="{bottom - top}" rx="14" '
               f'fill="{TINT[ORANGE]}" stroke="{ORANGE}" stroke-width="2.6"/>')
    out.append(sym("V", "", "n+1", size=30, x=(x_v0 + x_v1) / 2 - 6, y=top + 46))
    for k, line in enumerate(["one random", "d × d matrix,", "new at every", "layer, the", "same for",
                              "all tokens"]):
        out.append(text((x_v0 + x_v1) / 2, 352 + 19 * k, line, size=15, fill="#333"))

    # Per-token path: attention -> V -> 1/sqrt(L) -> + -> normalise -> next layer.
    for i, y in rows:
        out.append(f'<circle cx="{x_in}" cy="{y}" r="{r_tok}" fill="{TINT[PURPLE]}" '
                   f'stroke="{PURPLE}" stroke-width="2"/>')
        out.append(sym("X", str(i), "n", size=21, x=x_in - 3, y=y + 6))
        out.append(arrow(x_att1 - 10, y, x_v0 - 3, y))
        out.append(arrow(x_v1, y, x_scale - 33, y))
        out.append(f'<circle cx="{x_scale}" cy="{y}" r="32" fill="white" stroke="#333" '
                   f'stroke-width="1.6"/>')
        out.append(text(x_scale, y + 6, "× 1/√L", size=15))
        out.append(arrow(x_scale + 32, y, x_plus - 20, y))
        out.append(f'<circle cx="{x_plus}" cy="{y}" r="19" fill="white" stroke="#333" '
                   f'stroke-width="1.6"/>')
        out.append(text(x_plus, y + 8, "+", size=26))
        out.append(arrow(x_plus + 19, y, x_n0 - 3, y))
        out.append(f'<rect x="{x_n0}" y="{y - 30}" width="{x_n1 - x_n0}" height="60" rx="10" '
                   f'fill="{TINT[GREEN]}" stroke="{GREEN}" stroke-width="2"/>')
        out.append(text((x_n0 + x_n1) / 2, y - 2, "x ↦ x / ‖x‖", size=19, italic=True))
        out.append(text((x_n0 + x_n1) / 2, y + 20, "onto the sphere", size=14, fill="#333"))
        out.append(arrow(x_n1, y, x_out - r_tok - 6, y))
        out.append(f'<circle cx="{x_out}" cy="{y}" r="{r_tok + 4}" fill="{TINT[PURPLE]}" '
                   f'stroke="{PURPLE}" stroke-width="2"/>')
        out.append(sym("X", str(i), "n+1", size=19, x=x_out - 7, y=y + 6))

    # Vertical ellipses between row 2 and row N.
    for x in (x_in, (x_lab0 + x_att1 - 10) / 2, x_scale, x_plus, (x_n0 + x_n1) / 2, x_out):
        for k in range(3):
            out.append(f'<circle cx="{x}" cy="{358 + 13 * k}" r="2.6" fill="#555"/>')

    # Legend, one item a line.
    for k, (style, label) in enumerate([
            (f'stroke="{GREY}" stroke-width="2" stroke-dasharray="7 6"',
             "residual connection: the token itself (a way of wiring, not an operation)"),
            (f'stroke="{BLUE}" stroke-opacity="0.6" stroke-width="1.5"',
             "every token enters every attention output")]):
        ly = height - 62 + 28 * k
        out.append(f'<line x1="60" y1="{ly}" x2="120" y2="{ly}" {style}/>')
        out.append(text(132, ly + 5, label, size=16, anchor="start"))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------
# The landing page's phase diagram
# --------------------------------------------------------------------------

def _use_style():
    try:
        from stochastic_transformers.style import use_style
    except ImportError:  # the package may not import while it is being written
        path = HERE.parent / "src" / "stochastic_transformers" / "style.py"
        spec = importlib.util.spec_from_file_location("_book_style", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        use_style = module.use_style
    use_style()


def phase_diagram(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    _use_style()
    import seaborn as sns

    # Formulas as outlines: browsers do not have matplotlib's math fonts.
    matplotlib.rcParams["svg.fonttype"] = "path"

    single, antipodal = sns.color_palette("colorblind")[0], sns.color_palette("colorblind")[4]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.5, 4.0), constrained_layout=True)

    d = np.linspace(3.0, 12.0, 400)
    beta_c = 0.5 * np.arccosh(d - 2.0)
    top = 2.0
    ax1.fill_between(d, 0, beta_c, color=single, alpha=0.18, lw=0)
    ax1.fill_between(d, beta_c, top, color=antipodal, alpha=0.18, lw=0)
    ax1.plot(d, beta_c, "k--", lw=1.8, label=r"$\beta_c(d)=\frac{1}{2}\,\mathrm{arccosh}(d-2)$")
    dots = np.arange(4, 11)
    ax1.plot(dots, 0.5 * np.arccosh(dots - 2.0), "ko", ms=4)
    ax1.text(9.3, 0.45, "one cluster, almost surely", ha="center", fontsize=11)
    ax1.text(9.3, 1.78, "antipodal pair with\npositive probability", ha="center", va="center",
             fontsize=11)
    ax1.set(xlim=(3, 12), ylim=(0, top), xlabel="token dimension $d$",
            ylabel=r"inverse temperature $\beta$",
            title="Theorem 2: value noise, two tokens,\n" r"$Q^\top K=\mathrm{Id}$")
    ax1.legend(loc="upper left")

    beta = np.linspace(0.0, 6.0, 400)
    eps_c = np.sqrt(2.0 * np.exp(-beta))
    ax2.fill_between(beta, 0, eps_c, color=single, alpha=0.18, lw=0)
    ax2.fill_between(beta, eps_c, 1.6, color=antipodal, alpha=0.18, lw=0)
    ax2.plot(beta, eps_c, "k--", lw=1.8, label=r"$\varepsilon_c(\beta)=\sqrt{2e^{-\beta}}$")
    ax2.text(1.0, 0.3, "one cluster,\nalmost surely", ha="center", fontsize=11)
    ax2.text(4.2, 1.2, "antipodal pair,\nalmost surely", ha="center", fontsize=11)
    ax2.set(xlim=(0, 6), ylim=(0, 1.6), xlabel=r"inverse temperature $\beta$",
            ylabel=r"noise amplitude $\varepsilon$",
            title="Proposition 1: hybrid model, two tokens,\n"
                  r"unnormalised attention, $Q^\top K=\mathrm{Id}$")
    ax2.legend(loc="upper right")
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    (IMAGES / "figure5_layer.svg").write_text(figure5(), encoding="utf-8")
    phase_diagram(IMAGES / "phase_diagram.svg")
    print(f"wrote {IMAGES / 'figure5_layer.svg'} and {IMAGES / 'phase_diagram.svg'}")


if __name__ == "__main__":
    main()
