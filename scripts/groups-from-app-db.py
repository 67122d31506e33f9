#!/usr/bin/env python3
"""Build the CSV that `fcm-registry import-groups` reads from an app server's own records.

Google's device-group API never lists a group's members, so the members come from what the app
server stored itself: a table of user id -> registration tokens, and the group (name and
Google's notification key) it created for each user.

    groups-from-app-db.py --db-url sqlite:///app.db \\
        --tokens-query "SELECT user_id, token FROM device_tokens" \\
        --groups-query "SELECT user_id, notification_key_name, notification_key FROM fcm_groups" \\
        > groups.csv

The tokens query returns (user id, token) rows; the groups query (user id, group name, Google's
notification key) rows. Each group gets every token of its user (of its users, when several
users share a name), one CSV row per token: notification_key_name,notification_key,
registration_token, after a header row. A user with several keys for a group gets rows with
each key, and the import keeps them all.

Databases: sqlite:///relative/path.db, sqlite:////absolute/path.db (opened read-only, with the
standard library), and postgresql://user:password@host/db (or postgres://) when psycopg 3 or
psycopg2 is installed.

stderr says what was written and what was skipped: users with tokens and no group, users with a
group and no token, rows with an empty field. It warns of a group over --max-members tokens (20,
FCM's limit: import-groups refuses such a group) and of a key given to two group names (the
import keeps a key for one group only).

Exit status: 0 with rows written; 1 when no group has a token (the CSV would be empty); 2 for a
bad URL, a database that cannot be opened, or a query that fails or returns the wrong columns.
"""

import argparse
import csv
import os
import sqlite3
import sys
import urllib.parse

PROG = "groups-from-app-db"
COLUMNS = ["notification_key_name", "notification_key", "registration_token"]


class Failure(Exception):
    """A problem that ends the run with one line on stderr and this exit status."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


def one_line(error):
    """A database error's first line (PostgreSQL's add the statement and a caret below)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def connect(url):
    """A DB-API connection for `url`."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "sqlite":
        # sqlite:///app.db is app.db, sqlite:////var/app.db is /var/app.db (SQLAlchemy's form).
        if not rest.startswith("/") or rest == "/":
            raise Failure(f"bad --db-url {url!r}: write sqlite:///relative/path.db or sqlite:////absolute/path.db")
        path = urllib.parse.unquote(rest[1:].split("?", 1)[0])
        if not path:
            raise Failure(f"bad --db-url {url!r}: it names no file")
        try:
            # Read-only: a wrong path fails instead of creating an empty database.
            return sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True)
        except sqlite3.Error as error:
            raise Failure(f"cannot open {path}: {one_line(error)}")
    if scheme in ("postgresql", "postgres"):
        try:
            import psycopg as driver
        except ImportError:
            try:
                import psycopg2 as driver
            except ImportError:
                raise Failure(
                    "a postgresql:// URL needs psycopg 3 or psycopg2: pip install 'psycopg[binary]' (or psycopg2-binary)"
                )
        try:
            return driver.connect(url)
        except Exception as error:
            raise Failure(f"cannot connect to PostgreSQL: {one_line(error)}")
    raise Failure(f"bad --db-url {url!r}: expected sqlite:///path or postgresql://user:password@host/db")


def rows_of(connection, query, what, columns):
    """Runs `query` and yields its rows, each of `columns` values."""
    cursor = connection.cursor()
    try:
        cursor.execute(query)
    except Exception as error:
        raise Failure(f"the {what} query failed: {one_line(error)}")
    if cursor.description is None or len(cursor.description) != len(columns):
        found = 0 if cursor.description is None else len(cursor.description)
        raise Failure(f"the {what} query must return {len(columns)} columns ({', '.join(columns)}); it returns {found}")
    try:
        while True:
            batch = cursor.fetchmany(10_000)
            if not batch:
                return
            yield from batch
    except Exception as error:
        raise Failure(f"the {what} query failed: {one_line(error)}")


def text(value):
    """A column's value as text; None and blank values as None."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", "replace")
    value = str(value)
    return value if value.strip() else None


def plural(count, word):
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def build(connection, tokens_query, groups_query, max_members, out, err):
    """Writes the CSV to `out` and the report to `err`. Returns the exit status."""
    # The groups, in the query's order: user id -> [(name, key)].
    groups = {}
    empty_fields = 0
    for user, name, key in rows_of(connection, groups_query, "groups", ["user id", "group name", "notification key"]):
        user, key = text(user), text(key)
        # The name is kept exactly (the import keeps a quoted field's spaces); ids and keys have none.
        name = None if name is None or not str(name).strip() else str(name)
        if user is None or name is None or key is None:
            empty_fields += 1
            continue
        user, key = user.strip(), key.strip()
        pairs = groups.setdefault(user, [])
        if (name, key) not in pairs:
            pairs.append((name, key))

    # The tokens of the users who have a group, each once, in the query's order.
    tokens = {}
    without_group = set()
    for user, token in rows_of(connection, tokens_query, "tokens", ["user id", "token"]):
        user, token = text(user), text(token)
        if user is None or token is None:
            empty_fields += 1
            continue
        user, token = user.strip(), token.strip()
        if user not in groups:
            without_group.add(user)
            continue
        user_tokens = tokens.setdefault(user, {})
        user_tokens[token] = None

    without_tokens = sum(1 for user in groups if user not in tokens)

    minimal = csv.writer(out)  # RFC 4180: quotes a field only when it must, "" for a quote
    quoted = csv.writer(out, quoting=csv.QUOTE_ALL)  # for a name whose edge spaces must survive
    minimal.writerow(COLUMNS)
    written = set()
    members = {}  # group name -> {token}
    key_owner = {}  # notification key -> the first group name given it
    shared_keys = []
    for user, pairs in groups.items():
        for name, key in pairs:
            owner = key_owner.setdefault(key, name)
            if owner != name and (key, owner, name) not in shared_keys:
                shared_keys.append((key, owner, name))
            for token in tokens.get(user, ()):
                if (name, key, token) in written:
                    continue
                written.add((name, key, token))
                members.setdefault(name, {})[token] = None
                writer = quoted if name != name.strip() else minimal
                writer.writerow([name, key, token])

    for name, group_tokens in members.items():
        if len(group_tokens) > max_members:
            err.write(
                f"{PROG}: warning: group {name!r} has {len(group_tokens)} tokens, over the limit of {max_members}: "
                f"import-groups refuses it; drop the tokens the app no longer uses from its rows\n"
            )
    for key, owner, name in shared_keys:
        err.write(
            f"{PROG}: warning: notification key {key[:16]}… is given to group {owner!r} and to {name!r}: "
            f"import-groups keeps a key for one group and refuses the other's rows\n"
        )

    rows = len(written)
    skipped = [
        plural(len(without_group), "user") + " with tokens and no group",
        plural(without_tokens, "user") + " with a group and no token",
    ]
    if empty_fields:
        skipped.append(plural(empty_fields, "row") + " with an empty field")
    err.write(
        f"{PROG}: wrote {plural(rows, 'row')} for {plural(len(members), 'group')}; skipped {', '.join(skipped)}\n"
    )
    if rows == 0:
        err.write(f"{PROG}: no group has a token: the CSV holds no data row, and import-groups would refuse it\n")
        return 1
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Write the CSV `fcm-registry import-groups` reads (notification_key_name,notification_key,"
        "registration_token) from the app server's table of user tokens and the groups it created.",
    )
    parser.add_argument("--db-url", required=True, help="sqlite:///app.db, sqlite:////abs/app.db or postgresql://…")
    parser.add_argument("--tokens-query", required=True, help="SQL returning (user id, registration token) rows")
    parser.add_argument(
        "--groups-query", required=True, help="SQL returning (user id, notification_key_name, notification_key) rows"
    )
    parser.add_argument(
        "--max-members",
        type=int,
        default=20,
        help="warn of a group with more tokens than this (default 20, FCM's limit and the import's)",
    )
    args = parser.parse_args(argv)
    if args.max_members < 1:
        parser.error("--max-members must be 1 or more")
    # The csv module ends rows with CRLF itself (RFC 4180): stdout must not translate them again.
    sys.stdout.reconfigure(newline="")

    try:
        connection = connect(args.db_url)
        try:
            return build(connection, args.tokens_query, args.groups_query, args.max_members, sys.stdout, sys.stderr)
        finally:
            connection.close()
    except Failure as failure:
        sys.stderr.write(f"{PROG}: {failure}\n")
        return failure.status
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from failing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
