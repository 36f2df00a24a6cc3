"""The memory browser: its page and its scripts, under a strict Content-Security-Policy."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

# The page runs only its own script files (no inline script), sends forms nowhere else, cannot be
# framed, and a <base> tag cannot move its relative URLs. Inline styles stay (style attributes).
BROWSER_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; "
                                              "style-src 'self' 'unsafe-inline'; base-uri 'none'; "
                                              "form-action 'self'; frame-ancestors 'none'; object-src 'none'",
                   "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _static(name: str) -> str:
    return resources.files(__package__).joinpath(f"static/{name}").read_text(encoding="utf-8")


async def browser(request: Request) -> Response:
    return HTMLResponse(_static("index.html"), headers=BROWSER_HEADERS)


# the memories view, then the entities view and the agents view (which use its helpers)
SCRIPTS = ("browser.js", "entities.js", "agents.js")


def _script(name: str):
    async def script(request: Request) -> Response:
        return Response(_static(name), media_type="text/javascript; charset=utf-8", headers=BROWSER_HEADERS)
    return script


def browser_routes() -> list[Route]:
    """``/`` (the page) and its scripts under ``/static/``; none needs a key (the page asks for one)."""
    return [Route("/", browser, include_in_schema=False),
            *(Route(f"/static/{name}", _script(name), include_in_schema=False) for name in SCRIPTS)]
