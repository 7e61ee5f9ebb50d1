"""Real Postgres clients against a running `sluice serve`: psycopg 3, psycopg2, SQLAlchemy 2,
pandas and asyncpg. Usage: clients.py PORT. Prints one line per check; exits non-zero on the
first failure."""

import asyncio
import datetime
import decimal
import sys

PORT = int(sys.argv[1])
DSN = f"host=127.0.0.1 port={PORT} user=py dbname=sluice"


def check(name, got, want):
    if got != want:
        raise SystemExit(f"FAIL {name}: got {got!r}, want {want!r}")
    print(f"ok {name}")


def psycopg3():
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS p3")
        conn.execute("CREATE TABLE p3 (id int, name text, amount numeric(10,2), at timestamptz, ok boolean)")
        # psycopg 3 sends parameters with the extended protocol; ints go in binary.
        at = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
        conn.execute("INSERT INTO p3 VALUES (%s, %s, %s, %s, %s)", (1, "ann", decimal.Decimal("1.50"), at, True))
        with conn.cursor(binary=True) as cur:
            cur.execute("INSERT INTO p3 VALUES (%s, %s, %s, %s, %s)", (2, "bob", decimal.Decimal("2"), at, False))
            cur.execute("SELECT id, name, amount, at, ok FROM p3 ORDER BY id")
            check("psycopg3 binary rows", cur.fetchall(),
                  [(1, "ann", decimal.Decimal("1.50"), at, True), (2, "bob", decimal.Decimal("2.00"), at, False)])
        # After 5 runs psycopg 3 prepares the statement server-side (a named statement).
        for i in range(8):
            row = conn.execute("SELECT count(*) FROM p3 WHERE id >= %s", (i % 3,)).fetchone()
            check(f"psycopg3 prepared run {i}", row[0], [2, 2, 1][i % 3])
        # COPY in and out.
        with conn.cursor() as cur:
            with cur.copy("COPY p3 (id, name) FROM STDIN") as copy:
                for i in range(10, 15):
                    copy.write_row((i, f"copied {i}"))
            check("psycopg3 copy rows", cur.rowcount, 5)
            with cur.copy("COPY (SELECT id FROM p3 WHERE id >= 10 ORDER BY id) TO STDOUT") as copy:
                ids = [int(row[0]) for row in copy.rows()]
            check("psycopg3 copy out", ids, [10, 11, 12, 13, 14])
        # An error, then the connection goes on.
        try:
            conn.execute("SELECT * FROM nowhere")
            raise SystemExit("FAIL psycopg3: no error")
        except psycopg.errors.UndefinedTable:
            print("ok psycopg3 undefined table")
        check("psycopg3 after error", conn.execute("SELECT 1").fetchone(), (1,))
        check("psycopg3 server version", conn.info.server_version // 10000, 16)
        # Pipeline mode: the statements up to a Sync are one implicit transaction, so a failing
        # one drops those before it (PostgreSQL leaves 0 rows here, then 2).
        conn.execute("CREATE TABLE piped (id int PRIMARY KEY)")
        try:
            with conn.pipeline():
                for i in (1, 2, 1, 3):
                    conn.execute("INSERT INTO piped VALUES (%s)", (i,))
            raise SystemExit("FAIL psycopg3 pipeline: no error")
        except psycopg.errors.UniqueViolation:
            pass
        check("psycopg3 failed pipeline", conn.execute("SELECT count(*) FROM piped").fetchone()[0], 0)
        with conn.pipeline() as pipeline:
            conn.execute("INSERT INTO piped VALUES (%s)", (1,))
            pipeline.sync()
            conn.execute("INSERT INTO piped VALUES (%s)", (2,))
        check("psycopg3 pipeline with a sync", conn.execute("SELECT count(*) FROM piped").fetchone()[0], 2)

    # Autocommit off: psycopg opens a transaction with BEGIN; COMMIT keeps its writes, ROLLBACK
    # drops them, and conn.transaction() blocks (savepoints when nested) do what they say.
    with psycopg.connect(DSN) as conn:
        conn.execute("INSERT INTO p3 (id, name) VALUES (20, 'in a transaction')")
        conn.commit()
        conn.execute("INSERT INTO p3 (id, name) VALUES (22, 'rolled back')")
        check("psycopg3 reads its own write", conn.execute("SELECT count(*) FROM p3 WHERE id = 22").fetchone()[0], 1)
        conn.rollback()
        with conn.transaction():
            conn.execute("INSERT INTO p3 (id, name) VALUES (21, 'in a block')")
            try:
                with conn.transaction():
                    conn.execute("INSERT INTO p3 (id, name) VALUES (23, 'in a savepoint')")
                    raise RuntimeError("undo the savepoint")
            except RuntimeError:
                pass
        check("psycopg3 transactions", conn.execute("SELECT id FROM p3 WHERE id >= 20 ORDER BY id").fetchall(),
              [(20,), (21,)])
        conn.commit()


def psycopg2_client():
    import psycopg2

    conn = psycopg2.connect(DSN)
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS p2")
    cur.execute("CREATE TABLE p2 (id int, name text, data bytea, day date)")
    # psycopg2 interpolates parameters on the client and sends simple queries, in a transaction.
    cur.execute("INSERT INTO p2 VALUES (%s, %s, %s, %s)", (1, "it's", psycopg2.Binary(b"\x00\x01\xff"),
                                                           datetime.date(2024, 2, 29)))
    conn.commit()
    cur.execute("SELECT id, name, data, day FROM p2 WHERE id = %(id)s", {"id": 1})
    row = cur.fetchone()
    check("psycopg2 row", (row[0], row[1], bytes(row[2]), row[3]), (1, "it's", b"\x00\x01\xff", datetime.date(2024, 2, 29)))
    import io
    cur.copy_expert("COPY p2 (id, name) FROM STDIN WITH (FORMAT csv, HEADER true)", io.StringIO("id,name\n2,x\n3,y\n"))
    conn.commit()
    out = io.StringIO()
    cur.copy_expert("COPY (SELECT id, name FROM p2 ORDER BY id) TO STDOUT WITH (FORMAT csv)", out)
    check("psycopg2 copy", out.getvalue(), "1,it's\n2,x\n3,y\n")
    try:
        cur.execute("SELECT 1/0")
        raise SystemExit("FAIL psycopg2: no error")
    except psycopg2.errors.DivisionByZero:
        conn.rollback()
        print("ok psycopg2 division by zero")
    conn.autocommit = True
    cur.execute("SELECT count(*) FROM p2")
    check("psycopg2 autocommit", cur.fetchone(), (3,))
    conn.close()


def sqlalchemy_and_pandas():
    import pandas
    import sqlalchemy

    for driver in ["psycopg", "psycopg2"]:
        engine = sqlalchemy.create_engine(f"postgresql+{driver}://py@127.0.0.1:{PORT}/sluice")
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("DROP TABLE IF EXISTS sa"))
            conn.execute(sqlalchemy.text("CREATE TABLE sa (id bigint NOT NULL, name text, score double precision)"))
            conn.execute(sqlalchemy.text("INSERT INTO sa VALUES (1, 'a', 0.5), (2, 'b', 1.5)"))
        inspector = sqlalchemy.inspect(engine)
        check(f"sqlalchemy[{driver}] tables", "sa" in inspector.get_table_names(), True)
        columns = [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns("sa")]
        check(f"sqlalchemy[{driver}] columns", columns,
              [("id", "BIGINT", False), ("name", "TEXT", True), ("score", "DOUBLE PRECISION", True)])
        check(f"sqlalchemy[{driver}] pk", inspector.get_pk_constraint("sa")["constrained_columns"], [])
        frame = pandas.read_sql("SELECT id, name FROM sa ORDER BY id", engine)
        check(f"pandas[{driver}] read_sql query", frame.to_dict("list"), {"id": [1, 2], "name": ["a", "b"]})
        frame = pandas.read_sql("sa", engine)
        check(f"pandas[{driver}] read_sql table", sorted(frame["id"].tolist()), [1, 2])
        engine.dispose()


def commit_sqlstate(session):
    """Commits an ORM session: None, or the SQLSTATE of the integrity error that rolled it back."""
    from sqlalchemy.exc import IntegrityError
    try:
        session.commit()
        return None
    except IntegrityError as e:
        session.rollback()
        return e.orig.sqlstate


def sqlalchemy_orm():
    """Declarative models with an autoincrement key and a unique column: add, flush (INSERT ...
    RETURNING id), update, delete, and a unique violation rolled back, as applications do."""
    import sqlalchemy
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    class Base(DeclarativeBase):
        pass

    class User(Base):
        __tablename__ = "orm_users"
        id: Mapped[int] = mapped_column(primary_key=True)
        email: Mapped[str] = mapped_column(sqlalchemy.String(50), unique=True)
        # index=True and Index(...): create_all sends CREATE INDEX for each.
        name: Mapped[str | None] = mapped_column(index=True)
        __table_args__ = (sqlalchemy.Index("ix_orm_users_email_name", "email", "name"),)

    class Address(Base):
        __tablename__ = "orm_addresses"
        id: Mapped[int] = mapped_column(primary_key=True)
        # create_all sends it as a table constraint, FOREIGN KEY(user_id) REFERENCES orm_users (id).
        user_id: Mapped[int] = mapped_column(sqlalchemy.ForeignKey("orm_users.id", ondelete="CASCADE"))
        city: Mapped[str]

    engine = sqlalchemy.create_engine(f"postgresql+psycopg://py@127.0.0.1:{PORT}/sluice")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        a, b = User(email="a@x", name="A"), User(email="b@x", name="B")
        session.add_all([a, b])
        session.flush()
        check("sqlalchemy orm ids from RETURNING", [a.id, b.id], [1, 2])
        session.commit()
    with Session(engine) as session:
        session.get(User, 1).name = "A2"
        session.commit()
        session.delete(session.get(User, 2))
        session.commit()
    with Session(engine) as session:
        session.add(User(email="r@x", name="rolled back"))
        session.flush()
        session.rollback()
        check("sqlalchemy orm rollback drops the row", session.scalar(sqlalchemy.select(sqlalchemy.func.count()).select_from(User).where(User.email == "r@x")), 0)
    with Session(engine) as session:
        session.add(User(email="a@x", name="dup"))
        check("sqlalchemy orm unique violation", commit_sqlstate(session), "23505")
        c = User(email="c@x", name="C")
        session.add(c)
        session.commit()
        check("sqlalchemy orm id after the violation", c.id > 2, True)
        rows = [(u.email, u.name) for u in session.scalars(sqlalchemy.select(User).order_by(User.id))]
        check("sqlalchemy orm rows", rows, [("a@x", "A2"), ("c@x", "C")])
        by_name = [u.email for u in session.scalars(sqlalchemy.select(User).where(User.name == "C"))]
        check("sqlalchemy orm lookup through the name index", by_name, ["c@x"])
        plan = session.execute(sqlalchemy.text("EXPLAIN SELECT * FROM orm_users WHERE name = 'C'")).all()
        check("sqlalchemy orm lookup plan uses the index", "rows_by_key" in str(plan), True)
    # Reflection (Alembic's autogenerate compares models with it): keys, indexes and defaults
    # from pg_constraint, pg_index and pg_attrdef, as PostgreSQL 15 answers.
    inspector = sqlalchemy.inspect(engine)
    pk = inspector.get_pk_constraint("orm_users")
    check("sqlalchemy reflects the primary key", (pk["name"], pk["constrained_columns"]), ("orm_users_pkey", ["id"]))
    unique = [(u["name"], u["column_names"]) for u in inspector.get_unique_constraints("orm_users")]
    check("sqlalchemy reflects the unique constraint", unique, [("orm_users_email_key", ["email"])])
    indexes = sorted((i["name"], i["column_names"], i["unique"]) for i in inspector.get_indexes("orm_users"))
    check(
        "sqlalchemy reflects the indexes",
        indexes,
        [
            ("ix_orm_users_email_name", ["email", "name"], False),
            ("ix_orm_users_name", ["name"], False),
            ("orm_users_email_key", ["email"], True),
        ],
    )
    columns = {c["name"]: (c["default"], c["autoincrement"]) for c in inspector.get_columns("orm_users")}
    check("sqlalchemy reflects the serial key", columns["id"], ("nextval('orm_users_id_seq'::regclass)", True))
    # A foreign key: a row without its user is refused, one with it kept, and reflection reads the
    # key back (SQLAlchemy parses pg_get_constraintdef's text).
    with Session(engine) as session:
        session.add(Address(user_id=999, city="nowhere"))
        check("sqlalchemy orm foreign key violation", commit_sqlstate(session), "23503")
        session.add(Address(user_id=1, city="Oslo"))
        session.commit()
    keys = [(k["name"], k["constrained_columns"], k["referred_table"], k["referred_columns"], k["options"])
            for k in inspector.get_foreign_keys("orm_addresses")]
    check("sqlalchemy reflects the foreign key", keys,
          [("orm_addresses_user_id_fkey", ["user_id"], "orm_users", ["id"], {"ondelete": "CASCADE"})])
    engine.dispose()
    # Django's form: INSERT ... RETURNING "table"."id".
    import psycopg

    conn = psycopg.connect(DSN, autocommit=True)
    cur = conn.execute(
        'INSERT INTO "orm_users" ("email", "name") VALUES (%s, %s) RETURNING "orm_users"."id"', ("d@x", "D")
    )
    check("django-style RETURNING id", cur.fetchone()[0] > 2, True)
    conn.close()


def sqlalchemy_comments():
    """Comments as create_all sends them (COMMENT ON TABLE, COLUMN and CONSTRAINT after each CREATE
    TABLE, in its transaction) and as the inspector reflects them (pg_description, col_description)."""
    import sqlalchemy

    metadata = sqlalchemy.MetaData()
    parent = sqlalchemy.Table(
        "noted_parents", metadata,
        sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True),
        sqlalchemy.Column("code", sqlalchemy.Text, comment="the code"),
        sqlalchemy.PrimaryKeyConstraint("id", name="noted_parents_pk", comment="one per id"),
        sqlalchemy.UniqueConstraint("code", name="noted_parents_code", comment="codes differ"),
        sqlalchemy.CheckConstraint("id > 0", name="noted_parents_positive", comment="ids are positive"),
        comment="parents with comments",
    )
    sqlalchemy.Table(
        "noted_children", metadata,
        sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True),
        sqlalchemy.Column("parent_id", sqlalchemy.Integer),
        sqlalchemy.ForeignKeyConstraint(["parent_id"], [parent.c.id], name="noted_children_parent", comment="a parent"),
    )
    engine = sqlalchemy.create_engine(f"postgresql+psycopg://py@127.0.0.1:{PORT}/sluice")
    metadata.drop_all(engine)
    metadata.create_all(engine)
    inspector = sqlalchemy.inspect(engine)
    check("sqlalchemy reflects the table comment", inspector.get_table_comment("noted_parents"),
          {"text": "parents with comments"})
    columns = [(c["name"], c.get("comment")) for c in inspector.get_columns("noted_parents")]
    check("sqlalchemy reflects the column comments", columns, [("id", None), ("code", "the code")])
    check("sqlalchemy reflects the primary key comment", inspector.get_pk_constraint("noted_parents")["comment"],
          "one per id")
    check("sqlalchemy reflects the unique constraint comment",
          [u["comment"] for u in inspector.get_unique_constraints("noted_parents")], ["codes differ"])
    check("sqlalchemy reflects the check constraint comment",
          [c["comment"] for c in inspector.get_check_constraints("noted_parents")], ["ids are positive"])
    check("sqlalchemy reflects the foreign key comment",
          [k["comment"] for k in inspector.get_foreign_keys("noted_children")], ["a parent"])
    engine.dispose()


def typed_columns():
    """uuid, jsonb and arrays as PostgreSQL types: SQLAlchemy models with UUID, JSONB and ARRAY
    columns insert and read back their values; psycopg sends uuid and jsonb parameters (text and
    binary) and an array for = ANY; the row description carries the types' OIDs."""
    import uuid

    import psycopg
    import sqlalchemy
    from psycopg.types.json import Jsonb
    from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "typed_items"
        id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
        doc: Mapped[dict] = mapped_column(JSONB)
        tags: Mapped[list] = mapped_column(ARRAY(sqlalchemy.Text))

    engine = sqlalchemy.create_engine(f"postgresql+psycopg://py@127.0.0.1:{PORT}/sluice")
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)
    first, second = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), uuid.uuid4()
    with Session(engine) as session:
        session.add_all([
            Item(id=first, doc={"kind": "a", "n": [1, 2]}, tags=["x", "y"]),
            Item(id=second, doc={"kind": "b"}, tags=[]),
        ])
        session.commit()
        got = session.get(Item, first)
        check("sqlalchemy UUID/JSONB/ARRAY read back", (got.id, got.doc, got.tags), (first, {"kind": "a", "n": [1, 2]}, ["x", "y"]))
        kinds = session.scalars(sqlalchemy.select(Item.id).where(Item.doc["kind"].astext == "b")).all()
        check("sqlalchemy JSONB ->> filter", kinds, [second])
        contains = session.scalars(sqlalchemy.select(Item.id).where(Item.doc.contains({"kind": "a"}))).all()
        check("sqlalchemy JSONB @> filter", contains, [first])
        tagged = session.scalars(sqlalchemy.select(Item.id).where(Item.tags.any("y"))).all()
        check("sqlalchemy ARRAY any()", tagged, [first])
    engine.dispose()

    conn = psycopg.connect(DSN, autocommit=True)
    for binary in (False, True):
        cur = conn.cursor(binary=binary)
        cur.execute("SELECT id, doc FROM typed_items WHERE id = %s", (first,))
        check(f"psycopg uuid parameter (binary={binary})", cur.fetchall(), [(first, {"kind": "a", "n": [1, 2]})])
        check(f"psycopg uuid/jsonb OIDs (binary={binary})", [d.type_code for d in cur.description], [2950, 3802])
        cur.execute("SELECT count(*) FROM typed_items WHERE doc @> %s", (Jsonb({"kind": "b"}),))
        check(f"psycopg jsonb parameter (binary={binary})", cur.fetchone()[0], 1)
        cur.execute("SELECT count(*) FROM typed_items WHERE id = ANY(%s)", ([first, second],))
        check(f"psycopg uuid[] parameter for = ANY (binary={binary})", cur.fetchone()[0], 2)
    cur = conn.execute("SELECT count(*) FROM typed_items WHERE 'x' = ANY(tags) AND 'x' = ANY(%s)", (["x", "z"],))
    check("psycopg text list for = ANY", cur.fetchone()[0], 1)
    try:
        conn.execute("INSERT INTO typed_items (id) VALUES (%s)", ("not-a-uuid",))
        failed = None
    except psycopg.Error as e:
        failed = e.sqlstate
    check("a bad uuid is 22P02", failed, "22P02")
    conn.close()


def time_columns():
    """time and timetz: a datetime.time with microseconds and a zone-aware one go in as
    parameters (psycopg2's text, psycopg 3's text and binary, asyncpg's binary) and come back
    equal, with the types' OIDs; SQLAlchemy's Time columns round-trip them."""
    import psycopg
    import psycopg2
    import sqlalchemy

    plain = datetime.time(12, 57, 18, 396)
    zoned = datetime.time(12, 57, 18, tzinfo=datetime.timezone.utc)
    east = datetime.time(1, 2, 3, 500000, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30)))
    conn2 = psycopg2.connect(DSN)
    conn2.autocommit = True
    cur = conn2.cursor()
    cur.execute("DROP TABLE IF EXISTS times")
    cur.execute("CREATE TABLE times (id int, t time, tz time with time zone)")
    cur.execute("INSERT INTO times VALUES (%s, %s, %s), (%s, %s, %s)", (1, plain, zoned, 2, None, east))
    cur.execute("SELECT t, tz FROM times WHERE t = %(t)s", {"t": plain})
    check("psycopg2 time and timetz", cur.fetchall(), [(plain, zoned)])
    cur.execute("SELECT id FROM times WHERE tz = %s", (east,))
    check("psycopg2 timetz parameter", cur.fetchall(), [(2,)])
    cur.execute("SELECT CAST('12:57:18' AS TIME), %s", (plain,))
    check("psycopg2 time literal and parameter", cur.fetchone(), (datetime.time(12, 57, 18), plain))
    conn2.close()

    conn = psycopg.connect(DSN, autocommit=True)
    for binary in (False, True):
        cur = conn.cursor(binary=binary)
        cur.execute("INSERT INTO times VALUES (%s, %s, %s)", (3 + binary, plain, east))
        cur.execute("SELECT t, tz FROM times WHERE id = %s AND t = %s AND tz = %s", (3 + binary, plain, east))
        check(f"psycopg3 time and timetz (binary={binary})", cur.fetchall(), [(plain, east)])
        check(f"psycopg3 time/timetz OIDs (binary={binary})", [d.type_code for d in cur.description], [1083, 1266])
        cur.execute("SELECT %s::time AS a, %s::timetz AS b", (plain, zoned))
        check(f"psycopg3 time/timetz parameters selected (binary={binary})", cur.fetchone(), (plain, zoned))
    # COPY in binary both ways, and out in text as PostgreSQL prints times.
    with conn.cursor() as cur:
        with cur.copy("COPY times (id, t, tz) FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["int4", "time", "timetz"])
            copy.write_row((6, plain, east))
        with cur.copy("COPY (SELECT t, tz FROM times WHERE id = 6) TO STDOUT (FORMAT binary)") as copy:
            copy.set_types(["time", "timetz"])
            check("psycopg3 binary COPY of times", list(copy.rows()), [(plain, east)])
        with cur.copy("COPY (SELECT t, tz FROM times WHERE id = 6) TO STDOUT") as copy:
            check("psycopg3 text COPY of times", list(copy.rows()), [("12:57:18.000396", "01:02:03.5+05:30")])
    conn.close()

    async def asyncpg_times():
        import asyncpg
        c = await asyncpg.connect(host="127.0.0.1", port=PORT, user="py", database="sluice")
        # A timetz parameter is described as text (parameter types carry no declared type), so
        # asyncpg sends the time only; it reads both in binary.
        await c.execute("INSERT INTO times (id, t) VALUES ($1, $2)", 5, plain)
        row = await c.fetchrow("SELECT t, tz FROM times WHERE id = $1 OR id = 4 ORDER BY id", 5)
        check("asyncpg time and timetz", (row["t"], row["tz"]), (plain, east))
        check("asyncpg time parameter", await c.fetchval("SELECT t FROM times WHERE id = 5 AND t = $1", plain), plain)
        await c.close()
    asyncio.run(asyncpg_times())

    metadata = sqlalchemy.MetaData()
    table = sqlalchemy.Table("sa_times", metadata, sqlalchemy.Column("id", sqlalchemy.Integer),
                             sqlalchemy.Column("t", sqlalchemy.Time), sqlalchemy.Column("tz", sqlalchemy.Time(timezone=True)))
    for driver in ["psycopg", "psycopg2"]:
        engine = sqlalchemy.create_engine(f"postgresql+{driver}://py@127.0.0.1:{PORT}/sluice")
        metadata.drop_all(engine)
        metadata.create_all(engine)
        with engine.begin() as c:
            c.execute(table.insert(), [{"id": 1, "t": plain, "tz": zoned}, {"id": 2, "t": None, "tz": None}])
            rows = c.execute(sqlalchemy.select(table.c.t, table.c.tz).order_by(table.c.id)).all()
            check(f"sqlalchemy[{driver}] Time round trip", [tuple(r) for r in rows], [(plain, zoned), (None, None)])
            found = c.execute(sqlalchemy.select(table.c.id).where(table.c.tz == zoned)).scalars().all()
            check(f"sqlalchemy[{driver}] Time(timezone=True) filter", found, [1])
        columns = [(col["name"], str(col["type"])) for col in sqlalchemy.inspect(engine).get_columns("sa_times")]
        check(f"sqlalchemy[{driver}] reflects Time", columns, [("id", "INTEGER"), ("t", "TIME"), ("tz", "TIME")])
        engine.dispose()


async def asyncpg_client():
    import asyncpg

    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user="py", database="sluice")
    await conn.execute("DROP TABLE IF EXISTS ap")
    await conn.execute("CREATE TABLE ap (id int, tags text[], at timestamp)")
    at = datetime.datetime(2024, 5, 6, 7, 8, 9)
    await conn.execute("INSERT INTO ap VALUES ($1, $2, $3)", 1, ["x", "y"], at)
    row = await conn.fetchrow("SELECT id, tags, at FROM ap WHERE id = $1", 1)
    check("asyncpg fetch with parameters", (row["id"], row["tags"], row["at"]), (1, ["x", "y"], at))
    check("asyncpg array value", await conn.fetchval("SELECT [1, 2, 3]::int[]"), [1, 2, 3])
    await conn.close()
    pool = await asyncpg.create_pool(host="127.0.0.1", port=PORT, user="py", database="sluice", min_size=2, max_size=4)

    async def one(i):
        async with pool.acquire() as c:
            return await c.fetchval("SELECT $1::int * 2", i)

    results = await asyncio.gather(*(one(i) for i in range(20)))
    check("asyncpg pool", results, [i * 2 for i in range(20)])
    await pool.close()


psycopg3()
psycopg2_client()
sqlalchemy_and_pandas()
sqlalchemy_orm()
sqlalchemy_comments()
typed_columns()
time_columns()
asyncio.run(asyncpg_client())
print("all clients ok")
