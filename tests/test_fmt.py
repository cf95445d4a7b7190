"""Human number formats and markdown escaping (ampbench.report.fmt)."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from ampbench.report import fmt

GIB, MIB = 1024**3, 1024**2
HOSTILE = "bad | cell <script>alert(1)</script>\nsecond line `tick` **bold** [x](http://e.vil) & &lt; $x$"


def render(md: str) -> str:
    # The commonmark preset passes raw HTML through (as GitHub does, before sanitising): escaping must stop it.
    return MarkdownIt("commonmark").enable("table").render(md)


@pytest.mark.parametrize("n, text", [
    (15 * GIB, "15.0 GiB"), (int(8.3 * GIB), "8.30 GiB"), (812 * MIB, "812 MiB"), (1536, "1.50 KiB"),
    (100, "100 B"), (0, fmt.DASH), (None, fmt.DASH), (3 * 1024**4, "3.00 TiB"),
])
def test_bytes(n, text):
    assert fmt.bytes_h(n) == text


def test_bytes_unit_picks_one_unit_for_an_axis():
    assert fmt.bytes_unit([15 * GIB, 800 * MIB]) == ("GiB", GIB)
    assert fmt.bytes_unit([800 * MIB, 0]) == ("MiB", MIB)


@pytest.mark.parametrize("x, text", [
    (1234.5, "1,234"), (403.2, "403"), (12.345, "12.3"), (0.012345, "0.0123"), (0, "0"), (None, fmt.DASH),
    (float("nan"), fmt.DASH), (float("inf"), "inf"), (2.5e-7, "2.50e-07"),
])
def test_num_significant_digits(x, text):
    assert fmt.num(x) == text


def test_ratio_pct_pt():
    assert fmt.ratio(1.8234) == "1.82x"
    assert fmt.ratio_ci(1.7712, 1.8123) == "[1.77, 1.81]"
    assert fmt.pct(-0.447) == "-44.7%"
    assert fmt.pct(0.25, signed=False) == "25.0%"
    assert fmt.pct(-0.00001) == "0.0%"  # never "-0.0%"
    assert fmt.pt(0.003) == "+0.3 pt"
    assert fmt.pt(-0.0723, 2) == "-7.23 pt"
    assert fmt.num_g(0.01) == "0.01" and fmt.num_g(-0.07230) == "-0.0723"


def test_metric_formats_fraction_and_plain():
    assert fmt.is_fraction_metric([0.8, 0.79])
    assert not fmt.is_fraction_metric([0.8, 1.7])
    assert fmt.metric(0.80133, True) == "80.13%"
    assert fmt.metric_pm(0.80133, 0.0045, True) == "80.13% ± 0.45"
    assert fmt.metric_pm(0.8, None, True) == "80.00%"
    assert fmt.metric_delta(0.00067, True) == "+0.07 pt"
    assert fmt.metric_delta(-0.25, False) == "-0.250"
    assert fmt.metric(12.5, False) == "12.50"


def test_seconds():
    assert fmt.seconds(12.34) == "12.3 s"
    assert fmt.seconds(245) == "4 min 05 s"
    assert fmt.seconds(7380) == "2 h 03 min"


def test_md_text_cannot_break_a_table_or_inject_html():
    cell = fmt.md_text(HOSTILE)
    assert "\n" not in cell
    md = fmt.md_table(["a", "b"], [[cell, "2"]])
    for line in md.splitlines():
        assert len(re.findall(r"(?<!\\)\|", line)) == 3
    html = render(md)
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<strong>" not in html and "<a href" not in html
    body = html.split("<tbody>")[1]
    assert body.count("<td>") == 2 and ">2</td>" in body


def test_md_text_in_a_paragraph_keeps_the_text():
    html = render("Error: " + fmt.md_text("a_b *c* # d <e> | f"))
    assert "a_b *c* # d &lt;e&gt; | f" in html


def test_md_code_with_backticks_and_pipes_in_a_table():
    code = fmt.md_code("op`with|pipe")
    html = render(fmt.md_table(["op"], [[code]]))
    assert "<code>op`with|pipe</code>" in html


def test_md_block_cannot_be_closed_early():
    text = "line1\n```\n<script>x</script>\n````\nend"
    html = render("before\n\n" + fmt.md_block(text) + "\n\nafter")
    assert html.count("<pre>") == 1
    assert "&lt;script&gt;" in html and "<script" not in html
    assert "end" in html.split("</pre>")[0] and "<p>after</p>" in html


def test_md_link_encodes_target():
    assert fmt.md_link("a|b", "trials/x y.json") == "[a\\|b](trials/x%20y.json)"
    assert 'href="trials/m__seed0.json"' in render(fmt.md_code_link("m__seed0", "trials/m__seed0.json"))


def test_md_table_pads_short_rows_and_rejects_long_ones():
    md = fmt.md_table(["a", "b", "c"], [["1"]], ["l", "r", "c"])
    assert md.splitlines()[1] == "|---|--:|:-:|"
    assert md.splitlines()[2].count("|") == 4
    with pytest.raises(ValueError):
        fmt.md_table(["a"], [["1", "2"]])


def test_error_tail_keeps_last_lines():
    err = "\n".join(f"line {i}" for i in range(30)) + "\n\n"
    tail = fmt.error_tail(err, lines=3)
    assert tail.splitlines() == ["line 27", "line 28", "line 29"]
    assert fmt.error_tail(None) == ""
    assert fmt.error_tail("x" * 500, width=50).endswith("…")


def _inline_text(md: str, index: int = 0) -> tuple[str, set[str]]:
    """Concatenated literal text of the index-th inline run (paragraph or cell), and its token types."""
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    inline = [t for t in tokens if t.type == "inline"][index]
    types = {c.type for c in inline.children}
    return "".join(c.content for c in inline.children), types


def test_md_text_round_trips_random_punctuation():
    """Any text, escaped, renders as exactly that text: no emphasis, link, code, HTML or entity."""
    import random
    import string

    rng = random.Random(0)
    alphabet = string.punctuation + "ab_1 " * 3
    for _ in range(400):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))).strip() or "x"
        want = " ".join(raw.split())
        text, types = _inline_text("p " + fmt.md_text(raw))
        assert text == "p " + want, raw
        assert types <= {"text"}, (raw, types)
        md = fmt.md_table(["h", "n"], [[fmt.md_text(raw), "2"]])
        cell, types = _inline_text(md, index=2)
        assert cell == want and types <= {"text"}, raw
        assert _inline_text(md, index=3)[0] == "2", raw  # the text did not spill into the next cell
