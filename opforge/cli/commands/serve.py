"""`opforge serve`: the dashboard and HTTP API over the store (docs/SERVE.md)."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys

from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MIN_TOKEN_CHARS = 16


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the dashboard and HTTP API (queue, runs, leaderboard, submissions)",
                       description="Serve web pages (the queue, each run's progress, best kernels, search over time "
                                   "and Pareto front, the leaderboard, exported packages) and a JSON API described "
                                   "at /openapi.json. Reads are open; submitting and cancelling need the token in "
                                   "$OPFORGE_TOKEN (without it every write is refused). Binds to 127.0.0.1 unless "
                                   "--host says otherwise. Jobs submitted here run on `opforge worker`s.")
    add_db_argument(p)
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"the address to listen on (default {DEFAULT_HOST}: this machine only; 0.0.0.0 for every "
                        "interface — put TLS in front, the token travels in every write)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N", help=f"the port (default {DEFAULT_PORT})")
    p.add_argument("--max-upload-kib", type=int, default=256, metavar="KIB",
                   help="the largest task or kernel file a submission may upload (default 256)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, not {args.port}.")
    if not 1 <= args.max_upload_kib <= 64 * 1024:
        raise UsageError(f"--max-upload-kib must be between 1 and 65536, not {args.max_upload_kib}.")
    try:
        import uvicorn

        from opforge.web import create_app
    except ModuleNotFoundError as exc:
        raise UsageError(f"opforge serve needs {exc.name}: pip install fastapi uvicorn python-multipart.") from None
    check_bind(args.host, args.port)
    token = os.environ.get("OPFORGE_TOKEN") or None
    store = open_store(args.db)
    try:
        app = create_app(store, token=token, max_file_bytes=args.max_upload_kib * 1024)
        writes = "submissions enabled (token from OPFORGE_TOKEN)" if token else \
            "read-only: set OPFORGE_TOKEN to enable submissions"
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"opforge serve: http://{host}:{args.port}/ over {store.url}; {writes}", file=sys.stderr)
        if token and len(token) < MIN_TOKEN_CHARS:
            print(f"opforge serve: note: OPFORGE_TOKEN has {len(token)} characters; a guessable token lets anyone run "
                  "code on the workers: use e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'.",
                  file=sys.stderr)
        if not _loopback(args.host):
            print(f"opforge serve: note: listening on {args.host}, reachable from other machines; reads are open and "
                  "the token travels in clear text without TLS in front.", file=sys.stderr)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    finally:
        store.close()
    return 0


def check_bind(host: str, port: int) -> None:
    """Bind host:port once and let go at once, so a taken port or an unknown host is one sentence before the banner,
    not uvicorn's error after it (the server binds again a moment later, as uvicorn does: with SO_REUSEADDR)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"--host {host} is not an address this machine can listen on ({reason}).") from None
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"Port {port} on {host} is already in use; stop what listens there or give another "
                             "--port.") from None
        raise UsageError(f"Cannot listen on {host} port {port}: {exc.strerror or exc}.") from None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
