"""pgcli's completion against a server, as pgcli itself fills it in.

pgcli (pinned in scripts/requirements.txt) runs its completion queries through its own PGExecute
(search_path, schemata, tables, views, table and view columns with types and defaults,
databases, foreign keys, functions with argument types, data types, casing), each refresher of
its CompletionRefresher fills a PGCompleter with them, and the completer is asked what a user
typing in pgcli would see (joins along a foreign key among them). Every expected value is what PostgreSQL 15 answers: the script passes
against PostgreSQL 15 unchanged (run it with `--postgres`), and against Sluice with the
differences in KNOWN_DIFFERENCES, each with its reason.

    python pgcli_completion.py <port> [--postgres]     prints "pgcli ok" when every check held
"""

import sys

from pgcli.completion_refresher import CompletionRefresher
from pgcli.pgcompleter import PGCompleter
from pgcli.pgexecute import PGExecute
from prompt_toolkit.document import Document

port = sys.argv[1]
postgres = "--postgres" in sys.argv[2:]
user, database = ("postgres", "postgres") if postgres else ("sluice", "sluice")

# Check name -> why Sluice answers otherwise. A listed check that passes on Sluice fails the run,
# so that the list stays true.
KNOWN_DIFFERENCES = {
    "view column types": "a view's column over a varchar column is text: the view's type comes "
    "from its Arrow schema, which has one string type",
}

failures = []
unexpected_passes = []
checks = 0


def check(name, got, want):
    global checks
    checks += 1
    held = got == want
    known = not postgres and name in KNOWN_DIFFERENCES
    if held and known:
        unexpected_passes.append(name)
    elif not held and not known:
        failures.append(f"{name}:\n    got:  {got!r}\n    want: {want!r}")


executor = PGExecute(database, user, "x", "127.0.0.1", port, "")
with executor.conn.cursor() as cursor:
    for statement in [
        "DROP VIEW IF EXISTS shop.active_customers",
        "DROP TABLE IF EXISTS shop.orders",
        "DROP TABLE IF EXISTS shop.customers",
        "DROP SCHEMA IF EXISTS shop",
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.customers (id bigint PRIMARY KEY, name varchar(40) NOT NULL DEFAULT 'x', "
        "tags text[], joined timestamp, active boolean)",
        "CREATE TABLE shop.orders (order_id bigint PRIMARY KEY, customer_id bigint REFERENCES shop.customers, "
        "amount numeric(10,2))",
        "CREATE VIEW shop.active_customers AS SELECT id, name FROM shop.customers WHERE active",
    ]:
        cursor.execute(statement)

# The queries, one by one.
check("search_path", executor.search_path(), ["pg_catalog", "public"])
schemata = executor.schemata()
check("schemata", [s for s in ["information_schema", "pg_catalog", "public", "shop"] if s in schemata],
      ["information_schema", "pg_catalog", "public", "shop"])
check("tables", [t for t in executor.tables() if t[0] == "shop"], [("shop", "customers"), ("shop", "orders")])
check("views", [v for v in executor.views() if v[0] == "shop"], [("shop", "active_customers")])
columns = [c for c in executor.table_columns() if c[0] == "shop"]
check("column names and types", [(c[1], c[2], c[3], c[4]) for c in columns], [
    ("customers", "id", "bigint", False),
    ("customers", "name", "character varying", True),
    ("customers", "tags", "text[]", False),
    ("customers", "joined", "timestamp without time zone", False),
    ("customers", "active", "boolean", False),
    ("orders", "order_id", "bigint", False),
    ("orders", "customer_id", "bigint", False),
    ("orders", "amount", "numeric", False),
])
check("column default text", [c[5] for c in columns if c[5] is not None], ["'x'::character varying"])
check("view column types", [(c[1], c[2], c[3]) for c in executor.view_columns() if c[0] == "shop"],
      [("active_customers", "id", "bigint"), ("active_customers", "name", "character varying")])
check("databases", database in executor.databases(), True)
check("foreign keys", [tuple(k) for k in executor.foreignkeys() if k[0] == "shop"],
      [("shop", "customers", "id", "shop", "orders", "customer_id")])
functions = {}
for function in executor.functions():
    functions.setdefault((function.schema_name, function.func_name), set()).add(
        (function.arg_types, function.return_type, function.is_aggregate, function.is_window,
         function.is_set_returning))
check("functions: lower", (("text",), "text", False, False, False) in functions.get(("pg_catalog", "lower"), set()),
      True)
check("functions: count", functions.get(("pg_catalog", "count")),
      {(("\"any\"",), "bigint", True, False, False), (None, "bigint", True, False, False)})
check("functions: row_number", functions.get(("pg_catalog", "row_number")),
      {(None, "bigint", False, True, False)})
check("functions: unnest", (("anyarray",), "anyelement", False, False, True) in functions.get(("pg_catalog", "unnest"), set()),
      True)
series = functions.get(("pg_catalog", "generate_series"), set())
check("functions: generate_series", {
    (("integer", "integer"), "integer", False, False, True),
    (("bigint", "bigint", "bigint"), "bigint", False, False, True),
    (("timestamp without time zone", "timestamp without time zone", "interval"), "timestamp without time zone",
     False, False, True),
} <= series, True)
check("functions: no user functions", [k for k in functions if k[0] in ("public", "shop")], [])
check("data types", list(executor.datatypes()), [])
check("casing", list(executor.casing()), [])
check("time zone", executor.get_timezone() in ("UTC", "Etc/UTC"), True)
check("view definition", executor.view_definition("shop.active_customers").startswith(
    'CREATE OR REPLACE VIEW "shop"."active_customers" AS'), True)

# pgcli's own refreshers fill a completer, which then completes as pgcli would.
completer = PGCompleter(smart_completion=True)
for name, refresh in CompletionRefresher.refreshers.items():
    if name == "casing":
        completer.extend_casing(executor.casing())
        continue
    refresh(completer, executor)


def completions(text, cursor=None):
    """What pgcli offers with the cursor at `cursor` (the end of `text` when None)."""
    document = Document(text=text, cursor_position=len(text) if cursor is None else cursor)
    return [c.text for c in completer.get_completions(document, None)]


check("complete a schema's tables", sorted(c for c in completions("SELECT * FROM shop.") if not c.startswith("pg_")),
      ["active_customers", "customers", "orders"])
check("complete a table's columns", sorted(completions("SELECT c. FROM shop.customers c", len("SELECT c."))),
      ["active", "id", "joined", "name", "tags"])
check("complete a set-returning function", {"generate_series()", "jsonb_each()"} <=
      set(completions("SELECT * FROM generate_se") + completions("SELECT * FROM jsonb_ea")), True)
check("complete a built-in function", completions("SELECT lowe"), ["LOWER"])
check("complete a schema", "shop" in completions("SELECT * FROM sh"), True)
# Joins along the foreign key, from either end.
check("complete a join", [c for c in completions("SELECT * FROM shop.orders o JOIN ") if " ON " in c],
      ["shop.customers ON customers.id = o.customer_id"])
check("complete a join condition", completions("SELECT * FROM shop.customers c JOIN shop.orders o ON ")[:1],
      ["o.customer_id = c.id"])

executor.conn.close()
if unexpected_passes:
    failures.append(f"known differences that no longer differ (remove them from the list): {unexpected_passes}")
if failures:
    print(f"{len(failures)} of {checks} checks failed:\n" + "\n".join(failures))
    sys.exit(1)
known = 0 if postgres else len(KNOWN_DIFFERENCES)
print(f"{checks} checks, {known} known differences\npgcli ok")
