"""scripts/groups-from-app-db.py against a temporary SQLite database of an app server's records.

Runs with the standard library and pytest only:

    python3 -m pytest Tests/clients/test_groups_from_app_db.py
"""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "groups-from-app-db.py"
TOKENS = "SELECT user_id, token FROM device_tokens ORDER BY id"
GROUPS = "SELECT user_id, notification_key_name, notification_key FROM fcm_groups ORDER BY id"

CHRIS_KEY = "APA91bGHXQBB9QgnYOEURwm0I3lmyqzk2TXQ"
DANA_KEY = "APA91bNq3rD4n4xYz0Qk7Lm"
CHRIS_1 = "bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1"
CHRIS_2 = "cR1rjyj4_Kc:APA91bGusqbypSuMdsh7jSNrW4nzsM"
DANA_1 = "fYt0Ud1m0Uo:APA91bE7pQ"


def make_db(path, tokens, groups):
    """An app server's two tables: (user id, token) and (user id, group name, Google's key)."""
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE device_tokens (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, token TEXT);
            CREATE TABLE fcm_groups (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL,
                                     notification_key_name TEXT, notification_key TEXT);
            """
        )
        db.executemany("INSERT INTO device_tokens (user_id, token) VALUES (?, ?)", tokens)
        db.executemany(
            "INSERT INTO fcm_groups (user_id, notification_key_name, notification_key) VALUES (?, ?, ?)", groups
        )
    db.close()
    return path


def run_text(*args, env=None):
    """The script's exit status, stdout (CRLF kept) and stderr."""
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, env=env, timeout=60)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def url(path):
    return "sqlite:///" + str(path)  # an absolute path gives sqlite:////tmp/…


@pytest.fixture
def app_db(tmp_path):
    return make_db(
        tmp_path / "app.db",
        tokens=[
            (1, CHRIS_1),
            (1, CHRIS_2),
            (2, DANA_1),
            (3, "eNoGroupUser:APA91bX"),  # a user with tokens and no group
            (1, CHRIS_1),  # the same token twice: one row
        ],
        groups=[
            (1, "appUser-Chris", CHRIS_KEY),
            (2, 'Dana, "D"', DANA_KEY),  # a comma and quotes: quoted as RFC 4180 says
            (4, "appUser-Eve", "APA91bEveKey"),  # a user with a group and no token
        ],
    )


def test_csv_rows_and_skip_counts(app_db):
    status, out, err = run_text("--db-url", url(app_db), "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert status == 0, err
    assert out == (
        "notification_key_name,notification_key,registration_token\r\n"
        f"appUser-Chris,{CHRIS_KEY},{CHRIS_1}\r\n"
        f"appUser-Chris,{CHRIS_KEY},{CHRIS_2}\r\n"
        f'"Dana, ""D""",{DANA_KEY},{DANA_1}\r\n'
    )
    assert err == (
        "groups-from-app-db: wrote 3 rows for 2 groups; "
        "skipped 1 user with tokens and no group, 1 user with a group and no token\n"
    )


def test_several_keys_shared_names_and_empty_fields(tmp_path):
    db = make_db(
        tmp_path / "app.db",
        tokens=[(1, CHRIS_1), (2, CHRIS_2), (2, None), (3, "  ")],
        groups=[
            (1, "family", CHRIS_KEY),
            (1, "family", "APA91bSecondKeyFromAGet"),  # a second key Google handed out: rows with each
            (2, "family", CHRIS_KEY),  # two users in one group: merged by name
            (2, " spaced ", DANA_KEY),  # edge spaces survive, quoted
            (3, None, "APA91bNoName"),
        ],
    )
    status, out, err = run_text("--db-url", url(db), "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert status == 0, err
    assert out == (
        "notification_key_name,notification_key,registration_token\r\n"
        f"family,{CHRIS_KEY},{CHRIS_1}\r\n"
        f"family,APA91bSecondKeyFromAGet,{CHRIS_1}\r\n"
        f"family,{CHRIS_KEY},{CHRIS_2}\r\n"
        f'" spaced ","{DANA_KEY}","{CHRIS_2}"\r\n'
    )
    assert err == (
        "groups-from-app-db: wrote 4 rows for 2 groups; skipped 0 users with tokens and no group, "
        "0 users with a group and no token, 3 rows with an empty field\n"
    )


def test_warns_of_a_group_over_20_members(tmp_path):
    tokens = [(1, f"tok{i:02d}:APA91bMember") for i in range(21)] + [(2, DANA_1)]
    db = make_db(tmp_path / "app.db", tokens=tokens, groups=[(1, "appUser-Big", CHRIS_KEY), (2, "appUser-Dana", DANA_KEY)])
    status, out, err = run_text("--db-url", url(db), "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert status == 0, err
    lines = out.split("\r\n")
    assert lines[0] == "notification_key_name,notification_key,registration_token"
    assert len([line for line in lines if line.startswith("appUser-Big,")]) == 21
    assert (
        "groups-from-app-db: warning: group 'appUser-Big' has 21 tokens, over the limit of 20: "
        "import-groups refuses it; drop the tokens the app no longer uses from its rows\n"
    ) in err
    assert "'appUser-Dana'" not in err
    assert err.endswith("groups-from-app-db: wrote 22 rows for 2 groups; skipped 0 users with tokens and no group, "
                        "0 users with a group and no token\n")

    # Exactly 20 is within the limit.
    status, _, err = run_text(
        "--db-url", url(db), "--tokens-query", TOKENS + " LIMIT 20", "--groups-query", GROUPS
    )
    assert status == 0 and "warning" not in err


def test_warns_of_a_key_given_to_two_names(tmp_path):
    db = make_db(
        tmp_path / "app.db", tokens=[(1, CHRIS_1), (2, CHRIS_2)], groups=[(1, "a", CHRIS_KEY), (2, "b", CHRIS_KEY)]
    )
    status, _, err = run_text("--db-url", url(db), "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert status == 0
    assert f"notification key {CHRIS_KEY[:16]}… is given to group 'a' and to 'b'" in err


def test_a_failing_query_exits_2_in_one_line(app_db):
    status, out, err = run_text(
        "--db-url", url(app_db), "--tokens-query", "SELECT user_id, token FROM no_such_table", "--groups-query", GROUPS
    )
    assert status == 2
    assert out == ""
    assert err == "groups-from-app-db: the tokens query failed: no such table: no_such_table\n"

    status, out, err = run_text("--db-url", url(app_db), "--tokens-query", TOKENS, "--groups-query", "SELEC 1")
    assert (status, out) == (2, "")
    assert err.startswith("groups-from-app-db: the groups query failed: ") and err.count("\n") == 1


def test_a_query_with_the_wrong_columns_exits_2(app_db):
    status, out, err = run_text(
        "--db-url", url(app_db), "--tokens-query", "SELECT token FROM device_tokens", "--groups-query", GROUPS
    )
    assert (status, out) == (2, "")
    assert err == "groups-from-app-db: the tokens query must return 2 columns (user id, token); it returns 1\n"


@pytest.mark.parametrize(
    "db_url, message",
    [
        ("mysql://u@h/db", "bad --db-url 'mysql://u@h/db': expected sqlite:///path or postgresql://user:password@host/db"),
        ("sqlite://app.db", "bad --db-url 'sqlite://app.db': write sqlite:///relative/path.db or sqlite:////absolute/path.db"),
        ("app.db", "bad --db-url 'app.db': expected sqlite:///path or postgresql://user:password@host/db"),
    ],
)
def test_a_bad_url_exits_2_in_one_line(db_url, message):
    status, out, err = run_text("--db-url", db_url, "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert (status, out, err) == (2, "", f"groups-from-app-db: {message}\n")


def test_a_missing_sqlite_file_is_not_created(tmp_path):
    missing = tmp_path / "missing.db"
    status, out, err = run_text("--db-url", url(missing), "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert (status, out) == (2, "")
    assert err.startswith(f"groups-from-app-db: cannot open {missing}: ") and err.count("\n") == 1
    assert not missing.exists()


def test_postgresql_without_a_driver_says_what_to_install(tmp_path):
    # Modules that fail to import stand in for psycopg and psycopg2, whether or not they are installed.
    for name in ("psycopg", "psycopg2"):
        (tmp_path / f"{name}.py").write_text("raise ImportError('not installed')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    status, out, err = run_text(
        "--db-url", "postgresql://app@localhost/app", "--tokens-query", TOKENS, "--groups-query", GROUPS, env=env
    )
    assert (status, out) == (2, "")
    assert err == (
        "groups-from-app-db: a postgresql:// URL needs psycopg 3 or psycopg2: "
        "pip install 'psycopg[binary]' (or psycopg2-binary)\n"
    )


def test_no_group_with_a_token_exits_1(tmp_path):
    db = make_db(tmp_path / "app.db", tokens=[(1, CHRIS_1)], groups=[(2, "appUser-Dana", DANA_KEY)])
    status, out, err = run_text("--db-url", url(db), "--tokens-query", TOKENS, "--groups-query", GROUPS)
    assert status == 1
    assert out == "notification_key_name,notification_key,registration_token\r\n"
    assert err.endswith(
        "groups-from-app-db: no group has a token: the CSV holds no data row, and import-groups would refuse it\n"
    )


def test_a_relative_sqlite_url(app_db):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--db-url", "sqlite:///app.db", "--tokens-query", TOKENS, "--groups-query", GROUPS],
        capture_output=True,
        cwd=app_db.parent,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().count("\r\n") == 4
