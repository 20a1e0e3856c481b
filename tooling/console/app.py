"""``odradek console``: a read-only web console of the cluster, its topics and its groups.

A small Starlette app served by uvicorn. Each page is one HTML shell (no build step): the
script ``console.js`` asks the JSON API below every second (the group page four times a
second) and redraws, so a group page follows a rebalance without reloading. When the brokers
do not answer, the API says 503 and the page shows "disconnected" until they do again.

    /                    the cluster: brokers, controller, partition health
    /topics              topics with partition counts and under-replicated partitions
    /topics/NAME         partitions: leader, replicas, ISR, earliest and latest offsets
    /groups              groups: state, generation, members, coordinator, total lag
    /groups/ID           one group, live: state, members, lag per partition (a chart),
                         and the timeline of its state changes
    /api/...             the same as JSON

There is no login: ``odradek console`` (tooling/cli/console.py) listens on 127.0.0.1 unless
told otherwise.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from protocol.errors import BrokerError
from tooling.console.data import ConsoleData, ConsoleUnavailable, NotFound

STATIC = Path(__file__).with_name("static")

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - odradek console</title>
<link rel="stylesheet" href="/static/console.css">
<link rel="icon" href="data:,">
</head>
<body data-page="{page}" data-name="{name}">
<header>
  <a class="brand" href="/">odradek</a>
  <nav><a href="/">cluster</a> <a href="/topics">topics</a> <a href="/groups">groups</a></nav>
  <span id="status" class="status">connecting</span>
</header>
<main>
  <h1>{title}</h1>
  <p id="notice" class="error" hidden></p>
  <div id="content"></div>
</main>
<script src="/static/console.js"></script>
</body>
</html>
"""


def _page(page: str, title: str, name: str = "") -> HTMLResponse:
    return HTMLResponse(_PAGE.format(page=page, title=html.escape(title),
                                     name=html.escape(name, quote=True)))


def make_app(data: ConsoleData) -> Starlette:
    # ``data`` answers one call at a time, in a worker thread: the event loop keeps serving
    # pages and static files meanwhile
    one_at_a_time = asyncio.Lock()

    async def answer(ask: Callable[[], Any]) -> Response:
        try:
            async with one_at_a_time:
                return JSONResponse(await run_in_threadpool(ask))
        except ConsoleUnavailable as exc:
            return JSONResponse({"error": f"disconnected: {exc}"}, status_code=503)
        except NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except BrokerError as exc:
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=502)

    async def cluster_page(request: Request) -> Response:
        return _page("cluster", "cluster")

    async def topics_page(request: Request) -> Response:
        return _page("topics", "topics")

    async def topic_page(request: Request) -> Response:
        name = request.path_params["name"]
        return _page("topic", f"topic {name}", name)

    async def groups_page(request: Request) -> Response:
        return _page("groups", "groups")

    async def group_page(request: Request) -> Response:
        group_id = request.path_params["group"]
        return _page("group", f"group {group_id}", group_id)

    async def cluster_api(request: Request) -> Response:
        return await answer(data.cluster)

    async def topics_api(request: Request) -> Response:
        return await answer(data.topics)

    async def topic_api(request: Request) -> Response:
        return await answer(lambda: data.topic(request.path_params["name"]))

    async def groups_api(request: Request) -> Response:
        return await answer(data.groups)

    async def group_api(request: Request) -> Response:
        return await answer(lambda: data.group(request.path_params["group"]))

    return Starlette(routes=[
        Route("/", cluster_page),
        Route("/topics", topics_page),
        Route("/topics/{name}", topic_page),
        Route("/groups", groups_page),
        Route("/groups/{group}", group_page),
        Route("/api/cluster", cluster_api),
        Route("/api/topics", topics_api),
        Route("/api/topics/{name}", topic_api),
        Route("/api/groups", groups_api),
        Route("/api/groups/{group}", group_api),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])
