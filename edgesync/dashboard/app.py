"""The dashboard's web app (Starlette, served by uvicorn): the page, plotly.js from the installed plotly package
(no CDN: a lab may have no internet), the run's state as JSON, and its changes as server-sent events.

Read-only: GET routes only. With a token (required for a bind beyond loopback, serve.py), every route asks
for it as `?token=`, or an `Authorization: Bearer` header; the page passes on the one in its own address.
Updates are batched: one poll of the run folder every `POLL_S` however many viewers, each viewer sent only
what it has not seen, at most once per poll; a comment every `KEEPALIVE_S` keeps idle proxies from closing it.
"""
from __future__ import annotations

import asyncio
import json
import secrets
import time
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from edgesync.dashboard.feed import FIRST_CURSOR, RunFeed

POLL_S = 0.5
KEEPALIVE_S = 15.0


def plotly_js() -> Path:
    """plotly.min.js as the plotly Python package ships it."""
    import plotly
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall plotly (pip install plotly)")
    return path


class SharedPoll:
    """One poll of the run folder per `POLL_S`, shared by every viewer (the folder is read once, not once each)."""

    def __init__(self, feed: RunFeed):
        self.feed, self.last, self.lock = feed, 0.0, asyncio.Lock()

    async def fresh(self) -> RunFeed:
        async with self.lock:
            if time.monotonic() - self.last >= POLL_S:
                await asyncio.to_thread(self.feed.poll)
                self.last = time.monotonic()
        return self.feed


def create_app(run_dir: Path, token: str | None = None, live: bool = False) -> Starlette:
    shared = SharedPoll(RunFeed(run_dir))
    page = resources.files("edgesync.dashboard").joinpath("page.html").read_text(encoding="utf-8")
    in_script = json.dumps(str(run_dir)).replace("</", "<\\/")  # a folder named …</script> stays a string
    page = page.replace("__RUN_DIR__", in_script).replace("__LIVE__", json.dumps(live))
    page = page.replace("__TOKEN_QUERY__", f"?token={quote(token)}" if token else "")  # plotly.js asks for it too

    def allowed(request: Request) -> bool:
        if token is None:
            return True
        given = request.query_params.get("token") or request.headers.get("authorization", "").removeprefix("Bearer ")
        return secrets.compare_digest(given.encode(), token.encode())

    def guarded(handler):
        async def route(request: Request) -> Response:
            if not allowed(request):
                return PlainTextResponse("this dashboard needs its token: open the address it printed at start "
                                         "(…/?token=…)", status_code=401)
            return await handler(request)
        return route

    async def index(request: Request) -> Response:
        return HTMLResponse(page)

    async def plotly(request: Request) -> Response:
        return FileResponse(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    async def state(request: Request) -> Response:
        return JSONResponse((await shared.fresh()).state())

    async def stream(request: Request) -> Response:
        async def events():
            cursor = FIRST_CURSOR
            quiet_since = time.monotonic()
            while not await request.is_disconnected():
                feed = await shared.fresh()
                delta, cursor = feed.since(cursor)
                if delta is not None:
                    yield f"event: delta\ndata: {json.dumps(delta, allow_nan=False, default=str)}\n\n"
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since >= KEEPALIVE_S:
                    yield ": still here\n\n"
                    quiet_since = time.monotonic()
                if cursor.get("finished") and delta is None:
                    yield "event: done\ndata: {}\n\n"
                    return
                await asyncio.sleep(POLL_S)
        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    routes = [Route("/", guarded(index)), Route("/favicon.ico", no_icon), Route("/plotly.min.js", guarded(plotly)),
              Route("/api/state", guarded(state)), Route("/api/stream", guarded(stream))]
    return Starlette(routes=routes)
