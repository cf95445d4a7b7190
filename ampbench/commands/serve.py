"""`ampbench publish --serve`: the dashboard just written, on this machine's loopback, until Ctrl-C.

asv has `preview`; a static site opened from disk works too, but a browser keeps some features (and some
users' habits) for pages served over HTTP.  Python's own server, bound to 127.0.0.1 only (nothing leaves the
machine), serving the site folder publish wrote: its files and nothing else (a path through a symbolic link,
or out of the folder, is answered 404), without a log line per request.
"""

from __future__ import annotations

import os
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ampbench.core.errors import UserError

HOST = "127.0.0.1"


class _SiteHandler(SimpleHTTPRequestHandler):
    """The site's regular files; a link or anything outside the folder is not found."""

    def send_head(self) -> Any:
        root = Path(self.directory)
        try:   # translate_path has dropped `..` and the query: a path inside the folder, or not ours at all
            rel = Path(self.translate_path(self.path)).relative_to(root)
        except ValueError:
            rel = None
        if rel is None or any((root / Path(*rel.parts[:k])).is_symlink() for k in range(1, len(rel.parts) + 1)):
            self.send_error(404, "not found")
            return None
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a page load is a dozen requests."""


def site_server(site: Path, port: int) -> ThreadingHTTPServer:
    """The server of `site` on 127.0.0.1:`port` (0: any free port), bound, not yet serving."""
    try:
        return ThreadingHTTPServer((HOST, port), partial(_SiteHandler, directory=os.fspath(site)))
    except OSError as e:
        raise UserError(f"--port {port}: cannot serve on {HOST}: {e.strerror or e}") from None


def serve(site: Path, port: int, console: Console) -> None:
    """Serve `site` at http://127.0.0.1:PORT/ (0: any free port, the one taken is printed) until interrupted."""
    server = site_server(site, port)
    with server:
        console.print(f"serving {escape(str(site))} at http://{HOST}:{server.server_address[1]}/ (Ctrl-C stops)",
                      soft_wrap=True, highlight=False)
        server.serve_forever(poll_interval=0.2)
