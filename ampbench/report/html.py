"""Markdown -> one self-contained HTML page: every plot is embedded as a data: URI.

A report.html can be mailed, attached to a CI run or opened from a download folder without its
plots/ folder; raw HTML inside the markdown is escaped, never passed through.
"""

from __future__ import annotations

import base64
import contextlib
from html import escape
from pathlib import Path
from urllib.parse import unquote

from ampbench.core.errors import ResultsError

CSS = """body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:980px;margin:2em auto;
padding:0 1em;line-height:1.45;color:#1f2328}table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #d0d7de;padding:4px 8px}th{background:#f6f8fa}img{max-width:100%}
code{background:#f6f8fa;padding:1px 4px;border-radius:4px}pre{background:#f6f8fa;padding:10px;overflow:auto}
blockquote{border-left:4px solid #d0d7de;margin:0;padding:0 1em;color:#59636e}"""
MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def data_uri(path: Path, root: Path | None = None) -> str:
    """A file as a data: URI; with `root`, read without following a link below it (regular files only)."""
    from ampbench.core.files import read_bytes

    mime = MIME.get(path.suffix.lower(), "application/octet-stream")
    data = read_bytes(path, "image", root=root, limit=64 * 2**20)
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def to_html(md: str, title: str, base: Path | None = None) -> str:
    """The page; with `base`, relative image sources (resolved from it) are inlined as data: URIs."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = parser.parse(md)
    if base is not None:
        for tok in tokens:
            for child in tok.children or []:
                src = child.attrs.get("src") if child.type == "image" else None
                if isinstance(src, str) and ":" not in src.split("/", 1)[0]:
                    target = Path(base) / unquote(src)
                    if ".." not in Path(unquote(src)).parts and target.is_file():
                        with contextlib.suppress(ResultsError):  # a link or a FIFO is left as a plain link
                            child.attrs["src"] = data_uri(target, root=Path(base))
    body = parser.renderer.render(tokens, parser.options, {})
    return page(title, body)


def page(title: str, body: str, css: str = CSS) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{css}</style></head>\n<body>\n{body}</body></html>\n")
