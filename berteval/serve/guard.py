"""Uploads refused at the door: the page has no upload control, so nothing may be uploaded to it.

Gradio serves `POST /gradio_api/upload` for every app, whatever its components, with no size limit
unless one is set: anyone could store 20 MB in 0.08 s, learn the absolute server path from the answer
and download the file back. Gradio 6.31 has no switch that removes the route, so this ASGI middleware
(given to the app through `launch(app_kwargs={"middleware": ...})`) answers every request to an upload
route with 403 before Gradio sees it, reading no body; `max_file_size` (app.py) bounds it too in case
a route is ever added that this does not know. Pure ASGI: no Gradio or Starlette import, and streamed
responses (the queue's event streams) pass through untouched.
"""

from __future__ import annotations

REFUSED = b"This page takes no file uploads."


def is_upload(path: str) -> bool:
    """An upload route under any root path: `/gradio_api/upload`, `/space/gradio_api/upload/`, ..."""
    parts = [p for p in path.split("/") if p]
    return len(parts) >= 2 and parts[-1] == "upload" and parts[-2] == "gradio_api"


class NoUploads:
    """ASGI middleware: 403 for every upload request, everything else passed on as it is."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "http" and is_upload(scope.get("path", "")):
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(REFUSED)).encode())]})
            await send({"type": "http.response.body", "body": REFUSED})
            return
        await self.app(scope, receive, send)
