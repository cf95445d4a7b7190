"""Log-scale plots keep readable tick labels although math text is off for every text on a figure
(a hostile metric name must not be parsed as TeX, but the axis numbers must not show raw TeX either)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from ampbench.report import plots as P
from tests.factories import make_trial


def _tick_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.get_yticklabels() if t.get_text()]


def test_log_axes_have_plain_number_labels(tmp_path: Path, monkeypatch) -> None:
    drawn = []
    real_save = P._save

    def keep(fig, path, inactive=None):
        out = real_save(fig, path, inactive)
        drawn.append(_tick_texts(fig))
        return out

    monkeypatch.setattr(P, "_save", keep)
    loss = [10.0 * 0.9 ** i for i in range(40)]  # spans > 30x: the loss plot goes log
    scale = [65536.0 / 2 ** (i // 10) for i in range(40)]
    trials = [make_trial(mode="fp32", loss=loss), make_trial(mode="amp-o1-fp16", loss=loss, loss_scale=scale)]
    colors = P.mode_colors(["fp32", "amp-o1-fp16"])
    assert P.loss_curves(trials, tmp_path / "loss.png", colors) is not None
    assert P.loss_scale(trials, tmp_path / "scale.png", colors) is not None
    assert len(drawn) == 2
    for labels in drawn:
        assert labels, "a log axis without tick labels"
        assert not any("$" in t or "mathdefault" in t for t in labels), labels
        assert all(float(t) > 0 for t in labels)
