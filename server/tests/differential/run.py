"""Differential runner: the same SQL statements on a real PostgreSQL and on Sluice, outcomes compared.

Usage: run.py --postgres DSN --sluice DSN CASE.sql

The case file holds one statement per entry, each ending with `;` at the end of a line; lines
starting with `--` are comments (a header `-- minimum: N` makes the run fail when the file holds
fewer than N statements). Statements must be distinct, since the list of known differences names
them by their text.

Each statement runs on both servers over psycopg 3 in autocommit mode, one connection per server.
On PostgreSQL the runner (re)creates a database of its own first, so every run starts empty. An
outcome is either the error's SQLSTATE or the command status plus the rows rendered as text; rows
are compared in order when the statement says ORDER BY, as sorted lists otherwise. A header
`-- compare: strict` makes the outcome exact: column names and types are compared too, and every
value as the text the server sent (PostgreSQL's text forms), not as psycopg reads it.

Known differences live beside the case file in `CASE.expected-differences`: each entry is a `-- `
reason line followed by the statement's text (whitespace collapsed). The run fails (exit 1) when a
statement differs that is not listed, when a listed statement now matches (so the list stays
honest), when a listed statement is no longer in the case file, or when the file is below its
minimum. With DIFFERENTIAL_REPORT=1 every mismatch is printed and a fresh suggested list goes to
stdout (reasons kept for entries that still differ, `TODO` for new ones); the exit code is the
same as without it. Diagnostics go to stderr, so stdout holds only that list.
"""

import argparse
import datetime
import decimal
import json
import os
import re
import sys
import uuid
from pathlib import Path

import psycopg
from psycopg import conninfo

CONNECT_TIMEOUT_S = 10
# PostgreSQL ends a statement that runs away; Sluice's runaway is bounded by the Rust harness.
POSTGRES_STATEMENT_TIMEOUT_MS = 10_000
MINIMUM_HEADER = re.compile(r"--\s*minimum:\s*(\d+)\s*$")
STRICT_HEADER = re.compile(r"--\s*compare:\s*strict\s*$")


class Statement:
    def __init__(self, number, line, text):
        self.number = number  # 1-based, in file order
        self.line = line  # where the statement starts in the case file
        self.text = text

    @property
    def key(self):
        """The statement as the list of known differences names it."""
        return normalize(self.text)


def normalize(text):
    return " ".join(text.split())


def parse_statements(path):
    """Returns (statements, minimum, strict) of a case file; raises ValueError on a malformed file."""
    statements, minimum, strict, lines, start = [], None, False, [], None
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("--"):
            header = MINIMUM_HEADER.match(stripped)
            if header:
                minimum = int(header.group(1))
            if STRICT_HEADER.match(stripped):
                strict = True
            continue
        if not stripped and not lines:
            continue
        if not lines:
            start = number
        lines.append(raw)
        if stripped.endswith(";"):
            statements.append(Statement(len(statements) + 1, start, "\n".join(lines).strip()))
            lines = []
    if lines:
        raise ValueError(f"{path}:{start}: statement does not end with ';' at the end of a line")
    seen = {}
    for statement in statements:
        if statement.key in seen:
            raise ValueError(
                f"{path}:{statement.line}: statement repeats the one at line {seen[statement.key]}; "
                "make it distinct (another column list or alias) so the list of known differences can name it"
            )
        seen[statement.key] = statement.line
    return statements, minimum, strict


def parse_expected(path):
    """Returns {statement key: reason} of a known-differences file (empty if there is none)."""
    if not path.exists():
        return {}
    expected, reason, lines = {}, None, []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if not lines and (not stripped or stripped.startswith("#")):
            continue
        if not lines and stripped.startswith("--"):
            reason = stripped[2:].strip()
            continue
        lines.append(stripped)
        if stripped.endswith(";"):
            if not reason:
                raise ValueError(f"{path}:{number}: entry has no '-- reason' line before it")
            expected[normalize(" ".join(lines))] = reason
            reason, lines = None, []
    if lines:
        raise ValueError(f"{path}: last entry does not end with ';'")
    return expected


def render(value):
    """A value as text that stays the same across small type differences (int4 or int8, numeric
    scale, float or numeric holding an integer)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "0") else text
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "{" + ",".join(render(v) for v in value) + "}"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


class RawText(psycopg.adapt.Loader):
    """Loads a value as the text the server sent (strict mode compares PostgreSQL's text forms)."""

    def load(self, data):
        return bytes(data).decode("utf-8")


def type_name(oid):
    info = psycopg.postgres.types.get(oid)
    return info.name if info is not None else str(oid)


class Side:
    """One server: a connection in autocommit mode, reopened if it breaks. In strict mode an
    outcome also holds the column names and types, and values stay the text the server sent."""

    def __init__(self, name, dsn, strict=False):
        self.name = name
        self.dsn = dsn
        self.strict = strict
        self.connection = None

    def connect(self):
        if self.connection is None or self.connection.closed or self.connection.broken:
            self.connection = psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            if self.strict:
                for info in psycopg.postgres.types:
                    self.connection.adapters.register_loader(info.oid, RawText)
        return self.connection

    def run(self, statement):
        """The outcome of one statement: ("error", sqlstate) or ("ok", status, rows)."""
        try:
            connection = self.connect()
        except psycopg.Error as error:
            return ("error", f"cannot connect: {error}".strip())
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement.text)
                rows = []
                if cursor.description is not None:
                    rows = [tuple(render(v) for v in row) for row in cursor.fetchall()]
                if not re.search(r"\border\s+by\b", statement.text, re.IGNORECASE):
                    rows.sort()
                if self.strict and cursor.description is not None:
                    columns = tuple(f"{d.name}::{type_name(d.type_code)}" for d in cursor.description)
                    rows.insert(0, columns)
                return ("ok", cursor.statusmessage, rows)
        except psycopg.Error as error:
            if error.sqlstate:
                return ("error", error.sqlstate)
            return ("error", f"no SQLSTATE: {type(error).__name__}: {error}".strip())

    def close(self):
        if self.connection is not None:
            self.connection.close()


def describe(outcome):
    if outcome[0] == "error":
        return f"ERROR {outcome[1]}"
    _, status, rows = outcome
    shown = "; ".join("|".join(row) for row in rows[:20])
    more = f" ... ({len(rows)} rows)" if len(rows) > 20 else ""
    return f"{status} [{shown}{more}]" if rows else f"{status}"


def fresh_postgres_database(dsn, name):
    """Makes an empty database `name` on the reference server; returns the DSN that names it."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return conninfo.make_conninfo(
        dsn, dbname=name, options=f"-c statement_timeout={POSTGRES_STATEMENT_TIMEOUT_MS}"
    )


def suggested_list(case, statements, mismatched, expected):
    out = [
        f"# Statements of {case.name} whose outcome on Sluice differs from PostgreSQL 15 today.",
        "# Each entry: a '-- reason' line, then the statement (whitespace collapsed). Remove an",
        "# entry when the statement matches; the differential test fails until you do. To regenerate:",
        "# DIFFERENTIAL_REPORT=1 cargo test --workspace --test it differential, then copy",
        f"# target/tmp/differential/{case.stem}.expected-differences here and fill in the TODO reasons.",
        "",
    ]
    for statement in statements:
        if statement.number in mismatched:
            postgres, sluice = mismatched[statement.number]
            reason = expected.get(statement.key) or f"TODO (postgres: {postgres}; sluice: {sluice})"
            out += [f"-- {reason}", statement.key, ""]
    return "\n".join(out).rstrip("\n")


def compare(statements, postgres, sluice, expected, report):
    """Runs every statement on both sides; returns ({number: (postgres, sluice)} of mismatches,
    the list of failure messages)."""
    mismatched, failures = {}, []
    for statement in statements:
        want, got = postgres.run(statement), sluice.run(statement)
        where = f"#{statement.number} (line {statement.line}): {statement.key}"
        if want == got:
            if statement.key in expected:
                failures.append(f"{where}\n  now matches, remove it from the list ({expected[statement.key]})")
            continue
        mismatched[statement.number] = (describe(want), describe(got))
        listed = statement.key in expected
        if not listed:
            failures.append(f"{where}\n  differs and is not in the list of known differences")
        if report or not listed:
            print(f"MISMATCH {where}", file=sys.stderr)
            print(f"  postgres: {describe(want)}", file=sys.stderr)
            print(f"  sluice:   {describe(got)}", file=sys.stderr)
            if listed:
                print(f"  known: {expected[statement.key]}", file=sys.stderr)
    return mismatched, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", required=True, help="DSN of PostgreSQL (any database; the runner makes its own)")
    parser.add_argument("--sluice", required=True, help="DSN of Sluice")
    parser.add_argument("case", type=Path)
    args = parser.parse_args()
    report = os.environ.get("DIFFERENTIAL_REPORT") == "1"

    list_path = args.case.with_name(args.case.stem + ".expected-differences")
    try:
        statements, minimum, strict = parse_statements(args.case)
        expected = parse_expected(list_path)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    postgres = Side("postgres", fresh_postgres_database(args.postgres, "differential_" + args.case.stem), strict)
    sluice = Side("sluice", args.sluice, strict)
    # The runner cannot empty Sluice; leftovers of an earlier run would show up as mismatches.
    try:
        tables = int(
            sluice.connect()
            .execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
            .fetchone()[0]
        )
    except psycopg.Error as error:
        print(f"error: cannot ask Sluice for its tables: {error}", file=sys.stderr)
        return 2
    if tables:
        print(f"error: Sluice must start empty, it holds {tables} tables; serve a fresh --data directory", file=sys.stderr)
        return 2
    try:
        mismatched, failures = compare(statements, postgres, sluice, expected, report)
    finally:
        postgres.close()
        sluice.close()

    keys = {statement.key for statement in statements}
    failures += [f"listed but not in {args.case.name}: {key}" for key in expected if key not in keys]
    if minimum is not None and len(statements) < minimum:
        failures.append(f"{args.case.name} holds {len(statements)} statements, fewer than its minimum {minimum}")
    if report:
        print(suggested_list(args.case, statements, mismatched, expected))

    print(f"{len(statements) - len(mismatched)} of {len(statements)} statements match", file=sys.stderr)
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} failures; rerun with DIFFERENTIAL_REPORT=1 for a suggested {list_path.name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
