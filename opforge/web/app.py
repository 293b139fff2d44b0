"""The FastAPI application of `opforge serve`: server-side pages (opforge/web/pages.py) and a JSON API under /api
(opforge/web/api.py, described by /openapi.json), both over one Store.

    app = create_app(get_store(url), token=os.environ.get("OPFORGE_TOKEN"))

Failures are answered with one sentence: JSON `{"detail": ...}` under /api, an HTML page elsewhere — 401/403 for a
write without the right token, 404 for an unknown id, 411/413 for a request body without a length or too large, 422
for input that is not a task (or kernel) file, 503 when the store cannot be reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from opforge import __version__
from opforge.display import format_speedup
from opforge.export import ExportError
from opforge.web.auth import WriteRefused
from opforge.web.submission import MAX_FILE_BYTES, SubmissionError
from opforge.web.views import Conflict, NotFound
from store import Store, StoreError

TEMPLATE_DIR = Path(__file__).parent / "templates"
FORM_OVERHEAD_BYTES = 64 * 1024  # multipart boundaries, headers and the form's small fields
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                           "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


@dataclass(frozen=True, slots=True)
class Settings:
    token: str | None                      # $OPFORGE_TOKEN; None or "": writes are refused
    max_file_bytes: int = MAX_FILE_BYTES   # each uploaded file

    @property
    def max_body_bytes(self) -> int:       # a whole request: a task, a seed kernel and the form
        return 2 * self.max_file_bytes + FORM_OVERHEAD_BYTES

    @property
    def writes_enabled(self) -> bool:
        return bool(self.token)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(speedup=format_speedup, num=lambda x: "-" if x is None else f"{x:.4g}",
                       usd=lambda x: "-" if x is None else f"${x:.4f}",
                       pct=lambda x: "-" if x is None else f"{x:.0%}")
    return env


TEMPLATES = _environment()


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page, every value from the store escaped by Jinja2's autoescape."""
    settings: Settings = request.app.state.settings
    html = TEMPLATES.get_template(template).render(request_path=request.url.path, version=__version__,
                                                   writes_enabled=settings.writes_enabled, **context)
    return HTMLResponse(html, status_code=status_code, headers=PAGE_HEADERS)


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/api"


def _error(request: Request, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    if is_api(request):
        return JSONResponse({"detail": message}, status_code=status, headers=headers)
    return render(request, "error.html", status, status=status, message=message)


class BodyLimit:
    """Refuses a request body over `max_bytes` (413) before anything reads it, and a streamed body without a
    Content-Length (411); the server then never holds more than `max_bytes` of one request."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope["headers"]}
        length, chunked = headers.get(b"content-length"), b"chunked" in headers.get(b"transfer-encoding", b"")
        status, message = 0, ""
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                status, message = 400, "The Content-Length header is not a number."
            else:
                if size > self.max_bytes:
                    status, message = 413, (f"The request body is {size // 1024} KiB, more than this server takes "
                                            f"({self.max_bytes // 1024} KiB): a task file and a seed kernel of up to "
                                            f"{(self.max_bytes - FORM_OVERHEAD_BYTES) // 2048} KiB each.")
        elif chunked:
            status, message = 411, "Send the request body with a Content-Length header."
        if status:
            response = _error(Request(scope), status, message) if "app" in scope else JSONResponse(
                {"detail": message}, status_code=status)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(store: Store, token: str | None = None, max_file_bytes: int = MAX_FILE_BYTES) -> FastAPI:
    """The app over `store`; `token` enables writes (None: every write is refused with a 403 saying so)."""
    from opforge.web import api, pages  # the routers import this module's helpers

    settings = Settings(token=token or None, max_file_bytes=max_file_bytes)
    app = FastAPI(
        title="opforge", version=__version__,
        description="Queue operators for optimisation by `opforge worker`s and read what they found: jobs, runs, the "
                    "best kernel of a run with its evaluation, the leaderboard and exported packages. Reads are "
                    "open; every write needs the server's token (`OPFORGE_TOKEN`) as a bearer token. Errors are "
                    '`{"detail": "one sentence"}`.')
    app.state.store, app.state.settings = store, settings
    app.include_router(api.router)
    app.include_router(pages.router)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> Response:
        return _error(request, 404, str(exc))

    @app.exception_handler(SubmissionError)
    async def _bad_submission(request: Request, exc: SubmissionError) -> Response:
        return _error(request, exc.status, str(exc))

    @app.exception_handler(WriteRefused)
    async def _refused(request: Request, exc: WriteRefused) -> Response:
        headers = {"WWW-Authenticate": 'Bearer realm="opforge"'} if exc.status == 401 and is_api(request) else None
        return _error(request, exc.status, str(exc), headers)

    @app.exception_handler(Conflict)
    @app.exception_handler(ExportError)
    async def _conflict(request: Request, exc: Exception) -> Response:
        return _error(request, 409, str(exc))

    @app.exception_handler(StoreError)
    async def _store_down(request: Request, exc: StoreError) -> Response:
        return _error(request, 503, f"The store cannot answer: {exc}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        message = exc.detail if isinstance(exc.detail, str) else "The request was refused."
        if exc.status_code == 404 and message == "Not Found":
            message = f"There is no page at {request.url.path}."
        return _error(request, exc.status_code, message, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = clean_errors(exc.errors())
        if not is_api(request) and any(e["loc"][:1] == ["path"] for e in errors):
            return _error(request, 404, f"There is no page at {request.url.path}.")
        if is_api(request):  # one sentence, like every other refusal, and the details beside it
            return JSONResponse({"detail": validation_sentence(errors), "errors": errors}, status_code=422)
        return _error(request, 422, validation_sentence(errors))

    return app


def validation_sentence(errors: list[dict[str, Any]]) -> str:
    """FastAPI's validation errors as one sentence: the first bad field and what is wrong with it."""
    if not errors:
        return "The request is invalid."
    first = errors[0]
    where = ".".join(str(x) for x in first["loc"][1:]) or (str(first["loc"][0]) if first["loc"] else "the request")
    more = len(errors) - 1
    return (f"{where}: {first['msg'].rstrip('.')}" + (f" (and {more} more problem{'s' if more > 1 else ''})"
                                                      if more else "") + ".")


def clean_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors as plain JSON (pydantic may put exceptions or bytes in `ctx`/`input`)."""
    out = []
    for e in errors:
        out.append({"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))})
    return out
