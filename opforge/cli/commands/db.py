"""`opforge db upgrade`: bring a store's schema up to this version of opforge."""

from __future__ import annotations

import argparse

from opforge.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="manage the SQL store's schema", description="Manage the SQL store's schema.")
    dsub = p.add_subparsers(dest="db_command", metavar="ACTION")
    up = dsub.add_parser("upgrade", help="apply the schema migrations this opforge ships",
                         description="Apply the Alembic migrations shipped with opforge to the store (SQLite file or "
                                     "PostgreSQL URL). Safe to run twice; a brand-new store is created.")
    up.add_argument("--db", default=None, metavar="URL",
                    help="store URL or SQLite file (default: $OPFORGE_DB, else ./opforge.db)")
    up.set_defaults(run=run_upgrade)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def run_upgrade(args: argparse.Namespace) -> int:
    from store import StoreError, head_revision, resolve_url, upgrade
    try:
        reached = upgrade(args.db)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    print(f"{resolve_url(args.db)}: schema at revision {reached} (this opforge's head: {head_revision()})")
    return 0
