"""The command line's help and ``--knobs`` say what the command does."""

from __future__ import annotations

from stochastic_transformers.cli import _parser, main


def _help(command: str) -> str:
    sub = _parser()._subparsers._group_actions[0].choices[command]
    return " ".join(sub.format_help().split())


def test_knobs_shows_the_values_set(capsys):
    assert main(["reproduce", "fig3", "--scale", "smoke", "--knobs",
                 "--set", "n_traj=77", "--set", "d=4,5"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert rows["n_traj"] == "77" and rows["d"] == "4,5"


def test_knobs_refuses_a_bad_set(capsys):
    assert main(["reproduce", "fig3", "--scale", "smoke", "--knobs", "--set", "n_trj=1"]) == 2
    assert "n_trj: unknown knob" in capsys.readouterr().err


def test_scale_help_names_the_default_of_each_command():
    for command in ("reproduce", "notebook"):
        text = _help(command)
        assert "(default: quick)" in text or "quick (the default)" in text
        assert "book's default" not in text
