-- Keys, constraints and generated values, written for PostgreSQL 15 semantics: PRIMARY KEY and
-- UNIQUE enforcement, ON CONFLICT, RETURNING, SERIAL and IDENTITY, sequences, DEFAULT, varchar(n)
-- and char(n), ALTER COLUMN, REFERENCES, CREATE/DROP INDEX. Run by server/tests/it/differential.rs
-- through run.py; every statement's outcome on Sluice is compared with PostgreSQL's.
-- Each section has its own tables. Statements must be distinct (the known-differences list names
-- them by text) and deterministic (no printed times or random values).
-- minimum: 170

-- PRIMARY KEY as a column constraint
CREATE TABLE pk_col (k int PRIMARY KEY, v text);
INSERT INTO pk_col VALUES (1, 'a'), (2, 'b');
INSERT INTO pk_col VALUES (1, 'duplicate');
INSERT INTO pk_col VALUES (3, 'c'), (3, 'c again');
SELECT count(*) FROM pk_col WHERE k = 3;
INSERT INTO pk_col VALUES (4, 'd'), (1, 'clashes with an old row');
SELECT count(*) FROM pk_col WHERE k = 4;
INSERT INTO pk_col VALUES (NULL, 'null key');
INSERT INTO pk_col (v) VALUES ('missing key');
UPDATE pk_col SET k = 2 WHERE k = 1;
UPDATE pk_col SET k = NULL WHERE k = 1;
UPDATE pk_col SET k = 10 WHERE k = 1;
SELECT k, v FROM pk_col ORDER BY k;
DELETE FROM pk_col WHERE k = 2;
INSERT INTO pk_col VALUES (2, 'reinserted');
SELECT * FROM pk_col ORDER BY k;
INSERT INTO pk_col SELECT k + 100, v FROM pk_col;
INSERT INTO pk_col SELECT k, v FROM pk_col WHERE k > 100;
SELECT count(*) AS pk_col_rows FROM pk_col;
TRUNCATE pk_col;
INSERT INTO pk_col VALUES (1, 'after truncate');
SELECT k, v FROM pk_col WHERE k = 1;

-- PRIMARY KEY as a table constraint, composite keys, a second PRIMARY KEY
CREATE TABLE pk_table (a int, b text, PRIMARY KEY (a));
INSERT INTO pk_table VALUES (1, 'x'), (2, 'y');
INSERT INTO pk_table VALUES (2, 'z');
INSERT INTO pk_table (b) VALUES ('no key');
CREATE TABLE pk_pair (a int, b int, v text, PRIMARY KEY (a, b));
INSERT INTO pk_pair VALUES (1, 1, 'one one'), (1, 2, 'one two'), (2, 1, 'two one');
INSERT INTO pk_pair VALUES (1, 2, 'duplicate pair');
INSERT INTO pk_pair VALUES (1, NULL, 'half a key');
INSERT INTO pk_pair VALUES (2, 2, 'two two');
UPDATE pk_pair SET b = 1 WHERE a = 2 AND b = 2;
UPDATE pk_pair SET a = 3 WHERE a = 2 AND b = 2;
SELECT a, b, v FROM pk_pair ORDER BY a, b;
CREATE TABLE pk_twice (a int PRIMARY KEY, b int PRIMARY KEY);
CREATE TABLE pk_missing_column (a int, PRIMARY KEY (nope));

-- Named constraints
CREATE TABLE kv (k text, v int, CONSTRAINT kv_pkey PRIMARY KEY (k));
CREATE TABLE kv_named_column (k int CONSTRAINT kv_named_column_key_is_k PRIMARY KEY, code text CONSTRAINT code_once UNIQUE);
INSERT INTO kv VALUES ('a', 1), ('b', 2);
INSERT INTO kv VALUES ('a', 3);
INSERT INTO kv_named_column VALUES (1, 'x'), (2, 'y');
INSERT INTO kv_named_column VALUES (3, 'x');
SELECT constraint_name, constraint_type FROM information_schema.table_constraints WHERE table_name = 'kv' AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') ORDER BY constraint_name;
SELECT constraint_name FROM information_schema.table_constraints WHERE table_name = 'kv_named_column' AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') ORDER BY constraint_name;

-- UNIQUE: column, table, multi-column; NULLs are distinct unless NULLS NOT DISTINCT
CREATE TABLE uq_col (id int, email text UNIQUE);
INSERT INTO uq_col VALUES (1, 'a@example.com'), (2, 'b@example.com');
INSERT INTO uq_col VALUES (3, 'a@example.com');
INSERT INTO uq_col VALUES (4, NULL);
INSERT INTO uq_col VALUES (5, NULL);
SELECT count(*) FROM uq_col WHERE email IS NULL;
UPDATE uq_col SET email = 'b@example.com' WHERE id = 1;
UPDATE uq_col SET email = 'c@example.com' WHERE id = 1;
UPDATE uq_col SET email = 'same@example.com' WHERE id IN (4, 5);
SELECT id, email FROM uq_col ORDER BY id;
CREATE TABLE uq_table (a int, b int, UNIQUE (a));
INSERT INTO uq_table VALUES (1, 1), (2, 1);
INSERT INTO uq_table VALUES (1, 2);
CREATE TABLE uq_multi (a int, b int, c text, UNIQUE (a, b));
INSERT INTO uq_multi VALUES (1, 1, 'x'), (1, 2, 'y'), (2, 1, 'z');
INSERT INTO uq_multi VALUES (1, 1, 'duplicate');
INSERT INTO uq_multi VALUES (1, NULL, 'first null'), (1, NULL, 'second null');
SELECT a, b, c FROM uq_multi ORDER BY a, b, c;
CREATE TABLE uq_and_pk (id int PRIMARY KEY, code text NOT NULL UNIQUE);
INSERT INTO uq_and_pk VALUES (1, 'one'), (2, 'two');
INSERT INTO uq_and_pk VALUES (3, 'one');
INSERT INTO uq_and_pk VALUES (3, NULL);
INSERT INTO uq_and_pk VALUES (3, 'three');
CREATE TABLE uq_nulls_not_distinct (a int UNIQUE NULLS NOT DISTINCT);
INSERT INTO uq_nulls_not_distinct VALUES (NULL);
INSERT INTO uq_nulls_not_distinct VALUES (NULL), (1);
CREATE TABLE uq_nnd_table (a int, b int, UNIQUE NULLS NOT DISTINCT (a));
INSERT INTO uq_nnd_table VALUES (NULL, 1);
INSERT INTO uq_nnd_table VALUES (NULL, 2);
INSERT INTO uq_nnd_table VALUES (NULL, 3) ON CONFLICT (a) DO UPDATE SET b = excluded.b;
SELECT a, b FROM uq_nnd_table;
CREATE TABLE uq_deferred (a int, UNIQUE (a) DEFERRABLE INITIALLY DEFERRED);

-- Constraints added to and dropped from existing tables
CREATE TABLE later (id int, code text);
INSERT INTO later VALUES (1, 'a'), (2, 'a'), (2, 'b');
ALTER TABLE later ADD PRIMARY KEY (id);
ALTER TABLE later ADD CONSTRAINT later_code_key UNIQUE (code);
DELETE FROM later WHERE code = 'b';
ALTER TABLE later ADD CONSTRAINT later_pkey PRIMARY KEY (id);
INSERT INTO later VALUES (1, 'c');
ALTER TABLE later DROP CONSTRAINT later_pkey;
INSERT INTO later VALUES (1, 'd');
SELECT id, code FROM later ORDER BY id, code;

-- INSERT ... ON CONFLICT DO NOTHING
CREATE TABLE oc (k int PRIMARY KEY, v text, n int DEFAULT 0);
INSERT INTO oc VALUES (1, 'one', 1), (2, 'two', 2);
INSERT INTO oc VALUES (1, 'uno', 10) ON CONFLICT DO NOTHING;
INSERT INTO oc VALUES (1, 'uno', 10), (3, 'three', 3) ON CONFLICT DO NOTHING;
INSERT INTO oc VALUES (2, 'dos', 20) ON CONFLICT (k) DO NOTHING;
INSERT INTO oc VALUES (5, 'five', 5), (5, 'cinco', 50) ON CONFLICT DO NOTHING;
SELECT k, v, n FROM oc ORDER BY k;

-- INSERT ... ON CONFLICT DO UPDATE with EXCLUDED, aliases, WHERE
INSERT INTO oc VALUES (2, 'dos', 20) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO oc AS o VALUES (2, 'ignored', 7) ON CONFLICT (k) DO UPDATE SET n = o.n + EXCLUDED.n;
INSERT INTO oc VALUES (3, 'tres', 0) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE oc.n > 100;
INSERT INTO oc VALUES (3, 'tres', 0) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v WHERE oc.n = 3;
INSERT INTO oc VALUES (1, 'one again', 99), (6, 'six', 6) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
INSERT INTO oc (k, v) VALUES (6, 'six defaulted') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
INSERT INTO oc SELECT k + 10, v, n FROM oc WHERE k <= 2 ON CONFLICT (k) DO UPDATE SET n = -1;
INSERT INTO oc VALUES (11, 'eleven', 0) ON CONFLICT (k) DO UPDATE SET k = EXCLUDED.k + 100;
SELECT k, v, n FROM oc ORDER BY k DESC;
INSERT INTO oc VALUES (4, 'a', 1), (4, 'b', 2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
SELECT count(*) FROM oc WHERE k = 4;
INSERT INTO oc VALUES (7, 'x', 1) ON CONFLICT (v) DO NOTHING;
INSERT INTO oc VALUES (7, 'x', 1) ON CONFLICT (n) DO UPDATE SET v = 'y';
INSERT INTO oc VALUES (7, 'x', 1) ON CONFLICT DO UPDATE SET v = 'y';
INSERT INTO oc VALUES (2, 'x', 1) ON CONFLICT (k) DO UPDATE SET nope = 1;

-- ON CONFLICT on a UNIQUE column, a composite key and a named constraint
INSERT INTO uq_col VALUES (6, 'b@example.com') ON CONFLICT (email) DO NOTHING;
INSERT INTO uq_col VALUES (7, 'b@example.com') ON CONFLICT (email) DO UPDATE SET id = EXCLUDED.id;
INSERT INTO uq_col VALUES (8, NULL) ON CONFLICT (email) DO NOTHING;
SELECT id, email FROM uq_col ORDER BY id DESC;
INSERT INTO pk_pair VALUES (1, 1, 'replaced') ON CONFLICT (a, b) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO pk_pair VALUES (1, 1, 'ignored') ON CONFLICT (b, a) DO NOTHING;
INSERT INTO pk_pair VALUES (1, 1, 'wrong target') ON CONFLICT (a) DO NOTHING;
SELECT v FROM pk_pair WHERE a = 1 AND b = 1;
INSERT INTO kv VALUES ('a', 10) ON CONFLICT ON CONSTRAINT kv_pkey DO UPDATE SET v = kv.v + EXCLUDED.v;
INSERT INTO kv VALUES ('c', 3) ON CONFLICT ON CONSTRAINT kv_pkey DO NOTHING;
INSERT INTO kv VALUES ('c', 30) ON CONFLICT ON CONSTRAINT no_such_constraint DO NOTHING;
INSERT INTO kv_named_column VALUES (9, 'x') ON CONFLICT ON CONSTRAINT code_once DO UPDATE SET k = EXCLUDED.k;
SELECT k, v FROM kv ORDER BY k;
SELECT k, code FROM kv_named_column ORDER BY k;

-- RETURNING on INSERT, UPDATE, DELETE and with ON CONFLICT
CREATE TABLE ret (id int PRIMARY KEY, name text, qty int);
INSERT INTO ret VALUES (1, 'a', 5) RETURNING *;
INSERT INTO ret VALUES (2, 'b', 6), (3, 'c', 7) RETURNING id, qty * 2 AS double_qty;
INSERT INTO ret VALUES (4, 'd', 8) RETURNING upper(name), id + 1, 'const';
INSERT INTO ret VALUES (4, 'again', 0) RETURNING id;
UPDATE ret SET qty = qty + 1 WHERE id <= 2 RETURNING id, qty;
UPDATE ret SET name = 'zz' WHERE id = 99 RETURNING *;
UPDATE ret SET name = name || '!' WHERE id = 4 RETURNING name, length(name) AS l;
DELETE FROM ret WHERE id = 3 RETURNING *;
DELETE FROM ret WHERE qty > 100 RETURNING id;
INSERT INTO ret VALUES (1, 'conflict', 0) ON CONFLICT (id) DO UPDATE SET qty = ret.qty * 10 RETURNING *;
INSERT INTO ret VALUES (1, 'skipped', 0) ON CONFLICT DO NOTHING RETURNING id;
INSERT INTO ret VALUES (1, 'x', 0), (5, 'e', 9) ON CONFLICT (id) DO NOTHING RETURNING id, name;
INSERT INTO ret VALUES (6, 'f', 1) RETURNING no_such_column;
SELECT id, name, qty FROM ret ORDER BY id;

-- SERIAL and BIGSERIAL, nextval and currval on the owned sequence
CREATE TABLE t (id serial PRIMARY KEY, name text);
INSERT INTO t (name) VALUES ('a');
INSERT INTO t (name) VALUES ('b'), ('c') RETURNING id;
SELECT id, name FROM t ORDER BY id;
SELECT nextval('t_id_seq');
SELECT currval('t_id_seq');
INSERT INTO t (name) VALUES ('d') RETURNING id, name;
INSERT INTO t (id, name) VALUES (100, 'explicit');
INSERT INTO t (id, name) VALUES (5, 'clash');
INSERT INTO t (name) VALUES ('e') RETURNING id AS after_clash;
INSERT INTO t (id, name) VALUES (NULL, 'null id');
INSERT INTO t DEFAULT VALUES RETURNING id;
INSERT INTO t (id, name) VALUES (DEFAULT, 'default keyword') RETURNING id;
SELECT setval('t_id_seq', 200);
INSERT INTO t (name) VALUES ('after setval') RETURNING id;
SELECT currval('t_id_seq') AS current_after_setval;
SELECT id, name FROM t WHERE id > 5 ORDER BY id;
CREATE TABLE big (id bigserial PRIMARY KEY, note text);
INSERT INTO big (note) VALUES ('x'), ('y') RETURNING id;
SELECT currval('big_id_seq');
SELECT pg_typeof(id)::text FROM big WHERE id = 1;
CREATE TABLE fresh_seq (id serial, note text);
SELECT currval('fresh_seq_id_seq');
SELECT nextval('no_such_seq');
CREATE TABLE gap (id serial PRIMARY KEY, code varchar(2));
INSERT INTO gap (code) VALUES ('ok');
INSERT INTO gap (code) VALUES ('too long');
INSERT INTO gap (code) VALUES ('no') RETURNING id;
CREATE SEQUENCE counter START 10;
SELECT nextval('counter');
SELECT nextval('counter') + 0 AS second_value;

-- GENERATED ALWAYS AS IDENTITY and OVERRIDING SYSTEM VALUE
CREATE TABLE ida (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text);
INSERT INTO ida (name) VALUES ('a'), ('b') RETURNING id;
INSERT INTO ida (id, name) VALUES (10, 'explicit');
INSERT INTO ida (id, name) OVERRIDING SYSTEM VALUE VALUES (10, 'overriding');
INSERT INTO ida (name) VALUES ('c') RETURNING id;
INSERT INTO ida (id, name) VALUES (DEFAULT, 'default keyword') RETURNING id;
UPDATE ida SET id = 50 WHERE id = 1;
INSERT INTO ida (id, name) OVERRIDING SYSTEM VALUE VALUES (10, 'duplicate');
SELECT id, name FROM ida ORDER BY id;
SELECT currval('ida_id_seq');

-- GENERATED BY DEFAULT AS IDENTITY with START WITH and INCREMENT BY
CREATE TABLE idd (id bigint GENERATED BY DEFAULT AS IDENTITY (START WITH 100 INCREMENT BY 10), name text);
INSERT INTO idd (name) VALUES ('a'), ('b') RETURNING id;
INSERT INTO idd (id, name) VALUES (5, 'explicit');
INSERT INTO idd (name) VALUES ('c') RETURNING id;
INSERT INTO idd (id, name) OVERRIDING USER VALUE VALUES (7, 'user value ignored') RETURNING id;
INSERT INTO idd (id, name) VALUES (NULL, 'null id');
SELECT id, name FROM idd ORDER BY id;
SELECT nextval('idd_id_seq');
CREATE TABLE id_text (id text GENERATED ALWAYS AS IDENTITY);

-- DEFAULT expressions, the DEFAULT keyword, DEFAULT VALUES
CREATE TABLE dflt (id int PRIMARY KEY, status text DEFAULT 'new', qty int DEFAULT 2 * 21, created timestamptz DEFAULT now(), created2 timestamp DEFAULT current_timestamp, token uuid DEFAULT gen_random_uuid(), note text);
INSERT INTO dflt (id) VALUES (1);
INSERT INTO dflt (id, status) VALUES (2, DEFAULT);
INSERT INTO dflt VALUES (3, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, 'all default');
INSERT INTO dflt (id, status, qty) VALUES (4, NULL, 1);
INSERT INTO dflt (id, qty) VALUES (5, DEFAULT), (6, 6);
SELECT id, status, qty, created IS NOT NULL, created2 IS NOT NULL, token IS NOT NULL, note FROM dflt ORDER BY id;
SELECT count(DISTINCT token) FROM dflt;
SELECT length(token::text) FROM dflt WHERE id = 1;
SELECT count(*) FROM dflt WHERE created <= now();
INSERT INTO dflt (id) VALUES (10), (11), (12), (13), (14);
SELECT count(DISTINCT token) AS tokens, count(*) AS all_rows FROM dflt;
INSERT INTO dflt (id) VALUES (20) RETURNING status, qty, token IS NOT NULL;
CREATE TABLE dv (a int DEFAULT 1, b text DEFAULT 'b', c int);
INSERT INTO dv DEFAULT VALUES;
INSERT INTO dv DEFAULT VALUES RETURNING a, b, c;
SELECT a, b, c FROM dv;
INSERT INTO dv VALUES (5);
SELECT a, b, c FROM dv WHERE a = 5;
CREATE TABLE default_uses_column (a int, b int DEFAULT a + 1);
CREATE TABLE default_wrong_type (a int DEFAULT 'not a number');

-- ALTER TABLE ADD COLUMN with a DEFAULT fills existing rows
CREATE TABLE grow (id int PRIMARY KEY);
INSERT INTO grow VALUES (1), (2), (3);
ALTER TABLE grow ADD COLUMN x int DEFAULT 7;
SELECT id, x FROM grow ORDER BY id;
ALTER TABLE grow ADD COLUMN y text;
ALTER TABLE grow ADD COLUMN z int NOT NULL DEFAULT 0;
ALTER TABLE grow ADD COLUMN w int NOT NULL;
ALTER TABLE grow ADD COLUMN u uuid DEFAULT gen_random_uuid();
SELECT count(DISTINCT u) FROM grow;
ALTER TABLE grow ADD COLUMN id int;
INSERT INTO grow (id) VALUES (4);
SELECT id, x, y, z, u IS NOT NULL FROM grow ORDER BY id;

-- varchar(n) and char(n): 22001 on overflow, trailing spaces are cut silently, casts truncate
CREATE TABLE vc (id int PRIMARY KEY, code varchar(3), fixed char(3), free varchar);
INSERT INTO vc VALUES (1, 'abc', 'xyz', 'long long long');
INSERT INTO vc VALUES (2, 'abcd', 'x', NULL);
INSERT INTO vc VALUES (3, 'ab', 'wxyz', NULL);
INSERT INTO vc VALUES (4, 'abc   ', 'ab    ', NULL);
INSERT INTO vc VALUES (5, 'ab'::varchar(1), 'x', NULL);
INSERT INTO vc (id, code) VALUES (6, 12345);
INSERT INTO vc (id, code) VALUES (7, 'äöü');
INSERT INTO vc (id, code) VALUES (8, 'äöüß');
UPDATE vc SET code = 'toolong' WHERE id = 1;
UPDATE vc SET fixed = 'q' WHERE id = 1;
SELECT id, code, length(code), fixed, length(fixed), octet_length(fixed) FROM vc ORDER BY id;
SELECT 'abcdef'::varchar(2);
SELECT 'ab'::char(4) = 'ab';
SELECT 'ab'::char(4) || '|';
CREATE TABLE vc_zero (a varchar(0));

-- ALTER COLUMN SET/DROP NOT NULL, SET/DROP DEFAULT, TYPE
CREATE TABLE alt (id int, v int, s text);
INSERT INTO alt VALUES (1, 10, 'a'), (2, NULL, 'b');
ALTER TABLE alt ALTER COLUMN v SET NOT NULL;
UPDATE alt SET v = 20 WHERE id = 2;
ALTER TABLE alt ALTER v SET NOT NULL;
INSERT INTO alt VALUES (3, NULL, 'c');
UPDATE alt SET v = NULL WHERE id = 1;
ALTER TABLE alt ALTER COLUMN v DROP NOT NULL;
INSERT INTO alt VALUES (4, NULL, 'd');
ALTER TABLE alt ALTER COLUMN s SET DEFAULT 'dflt';
INSERT INTO alt (id) VALUES (5);
ALTER TABLE alt ALTER COLUMN s DROP DEFAULT;
INSERT INTO alt (id, v) VALUES (6, 60);
SELECT id, v, s FROM alt ORDER BY id;
ALTER TABLE alt ALTER COLUMN v TYPE bigint;
INSERT INTO alt VALUES (7, 9000000000, 'big');
ALTER TABLE alt ALTER COLUMN id TYPE text;
SELECT id || '!' FROM alt WHERE v = 9000000000;
SELECT id, v, s FROM alt ORDER BY v NULLS FIRST, id;
ALTER TABLE alt ALTER COLUMN s TYPE int;
ALTER TABLE alt ALTER COLUMN s TYPE int USING length(s);
SELECT id, s FROM alt ORDER BY id;
ALTER TABLE alt ALTER COLUMN nope SET NOT NULL;
ALTER TABLE alt ALTER COLUMN v SET DEFAULT 'not a number';
ALTER TABLE t ALTER COLUMN id DROP DEFAULT;
INSERT INTO t (name) VALUES ('no default any more');

-- REFERENCES: 23503 on a missing parent and on deleting a referenced parent
CREATE TABLE parent (id int PRIMARY KEY, name text);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent (id), note text);
INSERT INTO parent VALUES (1, 'p1'), (2, 'p2'), (3, 'p3');
INSERT INTO child VALUES (10, 1, 'ok');
INSERT INTO child VALUES (11, 4, 'missing parent');
INSERT INTO child VALUES (12, NULL, 'no parent');
DELETE FROM parent WHERE id = 1;
DELETE FROM parent WHERE id = 2;
UPDATE child SET parent_id = 5 WHERE id = 10;
UPDATE parent SET id = 100 WHERE id = 1;
UPDATE parent SET name = 'p1 renamed' WHERE id = 1;
UPDATE child SET parent_id = 3 WHERE id = 10;
DELETE FROM parent WHERE id = 1 RETURNING id, name;
SELECT c.id, c.parent_id, p.name FROM child c LEFT JOIN parent p ON p.id = c.parent_id ORDER BY c.id;
CREATE TABLE child_table_fk (pid int, FOREIGN KEY (pid) REFERENCES parent);
INSERT INTO child_table_fk VALUES (3);
INSERT INTO child_table_fk VALUES (2);
CREATE TABLE parent_c (id int PRIMARY KEY);
INSERT INTO parent_c VALUES (1), (2);
CREATE TABLE child_cascade (id int PRIMARY KEY, pid int REFERENCES parent_c ON DELETE CASCADE);
INSERT INTO child_cascade VALUES (1, 1), (2, 1), (3, 2);
DELETE FROM parent_c WHERE id = 1;
SELECT id, pid FROM child_cascade ORDER BY id;
CREATE TABLE child_of_non_unique (name text REFERENCES parent (name));
CREATE TABLE child_of_nothing (pid int REFERENCES no_such_parent (id));
DROP TABLE parent;

-- ALTER COLUMN TYPE: rewrites, USING, lengths, keys
CREATE TABLE alt2 (id int PRIMARY KEY, n int, s text, d date, f double precision);
INSERT INTO alt2 VALUES (1, 10, '7', '2024-01-02', 1.5), (2, 20, 'x', '2024-03-04', 2.5), (3, 30, '9', NULL, -0.5);
ALTER TABLE alt2 ALTER COLUMN n TYPE bigint;
INSERT INTO alt2 VALUES (4, 3000000000, '9', '2024-05-06', 3.5);
SELECT id, n AS widened FROM alt2 ORDER BY id;
ALTER TABLE alt2 ALTER COLUMN s TYPE int USING s::int;
UPDATE alt2 SET s = '8' WHERE id = 2;
ALTER TABLE alt2 ALTER COLUMN s TYPE int USING CAST(s AS int);
SELECT id, s + 1 AS next FROM alt2 ORDER BY id;
ALTER TABLE alt2 ALTER COLUMN d TYPE timestamp;
SELECT id, d FROM alt2 ORDER BY id;
ALTER TABLE alt2 ALTER COLUMN f TYPE int;
SELECT id, f FROM alt2 ORDER BY id;
ALTER TABLE alt2 ALTER COLUMN f TYPE boolean;
ALTER TABLE alt2 ALTER COLUMN n TYPE int;
ALTER TABLE alt2 ALTER COLUMN n TYPE varchar(5);
ALTER TABLE alt2 ALTER COLUMN n TYPE varchar(12);
SELECT id, n FROM alt2 ORDER BY id;
ALTER TABLE alt2 ALTER COLUMN id TYPE bigint;
INSERT INTO alt2 (id) VALUES (1);
INSERT INTO alt2 (id) VALUES (5);
ALTER TABLE alt2 ALTER COLUMN id TYPE int USING id % 2;
SELECT count(*) AS alt2_rows FROM alt2;
ALTER TABLE alt2 ALTER COLUMN missing TYPE int;

-- CREATE INDEX, CREATE UNIQUE INDEX, DROP INDEX
CREATE TABLE idx (id int, email text, n int);
INSERT INTO idx VALUES (1, 'a@x', 1), (2, 'b@x', 1), (3, 'a@x', 2);
CREATE INDEX idx_n ON idx (n);
CREATE INDEX ON idx (id, n);
CREATE UNIQUE INDEX idx_email ON idx (email);
DELETE FROM idx WHERE id = 3;
CREATE UNIQUE INDEX idx_email_unique ON idx (email);
INSERT INTO idx VALUES (4, 'a@x', 3);
INSERT INTO idx VALUES (4, 'c@x', 3) ON CONFLICT (email) DO NOTHING;
INSERT INTO idx VALUES (5, 'c@x', 5) ON CONFLICT (email) DO UPDATE SET n = EXCLUDED.n;
CREATE INDEX idx_n ON idx (id);
CREATE INDEX IF NOT EXISTS idx_n ON idx (id);
CREATE INDEX idx_bad ON idx (no_such_column);
SELECT indexname FROM pg_indexes WHERE tablename = 'idx' ORDER BY indexname;
DROP INDEX idx_n;
DROP INDEX IF EXISTS idx_n;
DROP INDEX idx_missing;
DROP INDEX idx_email_unique;
INSERT INTO idx VALUES (6, 'a@x', 6);
CREATE UNIQUE INDEX idx_id_n ON idx (id, n);
INSERT INTO idx VALUES (6, 'd@x', 6);
INSERT INTO idx VALUES (6, 'd@x', 7);
SELECT id, email, n FROM idx ORDER BY id, n;
-- INCLUDE columns; a column's drop drops the keys and indexes on it
CREATE INDEX idx_inc ON idx (n) INCLUDE (email, id);
CREATE UNIQUE INDEX idx_inc_unique ON idx (email, n) INCLUDE (id);
CREATE INDEX idx_inc_bad ON idx (n) INCLUDE (nope);
SELECT c.relname, i.indnatts, i.indnkeyatts, pg_get_indexdef(i.indexrelid, 2, true) AS second, pg_get_indexdef(i.indexrelid, 3, true) AS third FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'idx_inc%' ORDER BY 1;
SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'idx' ORDER BY indexname /* include */;
INSERT INTO idx VALUES (7, 'a@x', 6);
SELECT id FROM idx WHERE n = 6 ORDER BY id;
ALTER TABLE idx RENAME COLUMN id TO ident;
SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'idx' ORDER BY indexname /* renamed */;
ALTER TABLE idx DROP COLUMN email;
SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'idx' ORDER BY indexname /* dropped */;
INSERT INTO idx VALUES (6, 6);
SELECT ident, n FROM idx ORDER BY ident, n;

-- The catalogs psql's \d and drivers read: pg_index, pg_constraint, pg_attrdef, pg_attribute
CREATE TABLE cat (k int PRIMARY KEY, v text UNIQUE, n int NOT NULL DEFAULT 7, s serial, g bigint GENERATED ALWAYS AS IDENTITY, h int GENERATED BY DEFAULT AS IDENTITY);
CREATE INDEX cat_n ON cat (n);
CREATE UNIQUE INDEX cat_vn ON cat (v, n) NULLS NOT DISTINCT;
SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'cat' ORDER BY indexname;
SELECT c.relname, i.indisprimary, i.indisunique, i.indnullsnotdistinct, i.indnatts, pg_get_indexdef(i.indexrelid, 0, true) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = 'cat' ORDER BY c.relname;
SELECT con.conname, con.contype, con.condeferrable, pg_get_constraintdef(con.oid, true), con.conkey FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid WHERE t.relname = 'cat' ORDER BY con.conname;
SELECT a.attname, a.atthasdef, a.attidentity, a.attnotnull FROM pg_attribute a JOIN pg_class t ON t.oid = a.attrelid WHERE t.relname = 'cat' AND a.attnum > 0 ORDER BY a.attnum;
SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum JOIN pg_class t ON t.oid = d.adrelid WHERE t.relname = 'cat' ORDER BY a.attnum;
SELECT c.relname, c.relkind FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = 'cat' ORDER BY 1;
SELECT relhasindex FROM pg_class WHERE relname = 'cat';
SELECT pg_get_serial_sequence('cat', 's') AS s, pg_get_serial_sequence('cat', 'g') AS g, pg_get_serial_sequence('public.cat', 'k') AS k;
SELECT pg_get_serial_sequence('cat', 'nope');
SELECT pg_get_serial_sequence('no_such_table', 's');
ALTER TABLE cat ALTER COLUMN n DROP DEFAULT;
DROP INDEX cat_n;
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = 'cat' ORDER BY 1;
SELECT count(*) AS defaults FROM pg_attrdef d JOIN pg_class t ON t.oid = d.adrelid WHERE t.relname = 'cat';
CREATE TABLE catc (a int CHECK (a > 0), b int, CONSTRAINT b_small CHECK (b < 10));
SELECT con.conname, con.contype, pg_get_constraintdef(con.oid, true) FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid WHERE t.relname = 'catc' ORDER BY con.conname;
SELECT relchecks FROM pg_class WHERE relname = 'catc';
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'catc'::regclass ORDER BY conname;
CREATE TABLE catp (x int, y int, CONSTRAINT catp_c CHECK (((x > 0)) AND (y IS NULL OR y < 5)), CONSTRAINT catp_d CHECK ((((x > 0)))));
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'catp'::regclass ORDER BY conname;
DROP TABLE catp;
SELECT constraint_name, constraint_type, is_deferrable, initially_deferred, enforced, nulls_distinct FROM information_schema.table_constraints WHERE table_name IN ('cat', 'catc') AND constraint_name NOT LIKE '%not_null' ORDER BY constraint_name;
SELECT table_name, count(*) AS not_null_constraints FROM information_schema.table_constraints WHERE table_name IN ('cat', 'catc') AND constraint_type = 'CHECK' AND constraint_name LIKE '%_not_null' GROUP BY table_name ORDER BY table_name;
SELECT kcu.constraint_name, kcu.table_schema, kcu.column_name, kcu.ordinal_position, kcu.position_in_unique_constraint FROM information_schema.key_column_usage kcu WHERE kcu.table_name = 'cat' ORDER BY 1, 4;
-- Generated columns (GENERATED ALWAYS AS (expr) STORED).
CREATE TABLE gen (id int PRIMARY KEY, n int, plus int GENERATED ALWAYS AS (n + 42) STORED, name text, up text GENERATED ALWAYS AS (upper(name)) STORED);
INSERT INTO gen (id, n, name) VALUES (1, 1, 'a'), (2, NULL, 'b');
INSERT INTO gen VALUES (3, 5, DEFAULT, 'c', DEFAULT);
INSERT INTO gen (id, n, plus) VALUES (4, 1, 5);
UPDATE gen SET plus = 1;
UPDATE gen SET n = 10, name = 'z' WHERE id = 1;
INSERT INTO gen (id, n, name) VALUES (3, 100, 'u') ON CONFLICT (id) DO UPDATE SET n = excluded.n, name = excluded.name;
SELECT * FROM gen ORDER BY id;
SELECT column_name, column_default, is_generated, generation_expression FROM information_schema.columns WHERE table_name = 'gen' ORDER BY ordinal_position;
SELECT a.attname, a.attgenerated, a.atthasdef, pg_get_expr(d.adbin, d.adrelid) AS expr FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = 'gen'::regclass AND a.attnum > 0 ORDER BY a.attnum;
CREATE TABLE gen_bad (a int, b int GENERATED ALWAYS AS (a * 2) STORED, c int GENERATED ALWAYS AS (b * 2) STORED);
CREATE TABLE gen_bad (a int, b int DEFAULT 5 GENERATED ALWAYS AS (a * 2) STORED);
CREATE TABLE gen_bad (a int, b double precision GENERATED ALWAYS AS (random()) STORED);
CREATE TABLE gen_bad (a int, b int GENERATED ALWAYS AS (zz * 2) STORED);
CREATE TABLE gen_nn (a int, b int NOT NULL GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO gen_nn (a) VALUES (NULL);
INSERT INTO gen_nn (a) VALUES (4);
SELECT * FROM gen_nn;
ALTER TABLE gen DROP COLUMN n;
DROP TABLE gen_nn;
DROP TABLE gen;
