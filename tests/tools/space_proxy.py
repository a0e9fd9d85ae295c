"""A reverse proxy in front of the app, standing in for a Space's: the app served under a path prefix.

    python tests/tools/space_proxy.py --upstream http://127.0.0.1:7860 --prefix /space --port 8080

Requests to http://127.0.0.1:8080/space/... go to the upstream with the prefix removed, with the
headers a hosting proxy adds (X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Prefix); responses,
Gradio's event streams included, are passed back as they arrive. Start the app with
GRADIO_ROOT_PATH=/space (Gradio reads it) so the page builds its URLs under the prefix. Used by
`tests/e2e/test_space_e2e.py` (the page behind the proxy) and `tests/tools/cold_start.py --proxy`.
"""

from __future__ import annotations

import argparse
import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

# Hop-by-hop headers belong to one connection, not to the message: never forwarded.
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
       "transfer-encoding", "upgrade", "host", "content-length"}


def proxy_app(upstream: str, prefix: str) -> Starlette:
    prefix = "/" + prefix.strip("/")
    client = httpx.AsyncClient(base_url=upstream.rstrip("/"), timeout=None)

    async def forward(request: Request):
        path = request.url.path
        if not (path == prefix or path.startswith(prefix + "/")):
            return PlainTextResponse(f"not under {prefix}", status_code=404)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        headers.update({"x-forwarded-host": request.headers.get("host", ""), "x-forwarded-proto": "http",
                        "x-forwarded-prefix": prefix})
        upstream_req = client.build_request(request.method, path[len(prefix):] or "/", params=request.query_params,
                                            headers=headers, content=await request.body())
        try:
            reply = await client.send(upstream_req, stream=True)
        except httpx.ConnectError:  # the app is still starting (or gone): what a hosting proxy answers then
            return PlainTextResponse("the app is not answering yet", status_code=502)
        kept = {k: v for k, v in reply.headers.items() if k.lower() not in HOP}  # raw bytes: encoding kept
        return StreamingResponse(reply.aiter_raw(), status_code=reply.status_code, headers=kept,
                                 background=BackgroundTask(reply.aclose))

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:7860")
    parser.add_argument("--prefix", default="/space")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    uvicorn.run(proxy_app(args.upstream, args.prefix), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
