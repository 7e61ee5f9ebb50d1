-- Temporary tables as PostgreSQL 15 defines them: CREATE TEMP TABLE (also AS SELECT), found before
-- permanent tables of the same name, in pg_temp, ON COMMIT PRESERVE ROWS | DELETE ROWS | DROP, their
-- creation undone by ROLLBACK and ROLLBACK TO SAVEPOINT, temporary views. Run by
-- server/tests/it/differential.rs through run.py, one connection per server in autocommit mode.
-- Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 60

-- A temporary table, written and read like any table.
CREATE TEMP TABLE scratch (id int, v text);
INSERT INTO scratch VALUES (1, 'a'), (2, 'b');
SELECT id, v FROM scratch ORDER BY id;
UPDATE scratch SET v = 'bb' WHERE id = 2;
DELETE FROM scratch WHERE id = 1;
/* 2 */ SELECT id, v FROM scratch ORDER BY id;
SELECT count(*) AS in_pg_temp FROM pg_temp.scratch;
CREATE TEMPORARY TABLE scratch (x int);
CREATE TEMP TABLE IF NOT EXISTS scratch (x int);
CREATE LOCAL TEMPORARY TABLE scratch_local (x int);
CREATE GLOBAL TEMP TABLE scratch_global (x int);
INSERT INTO scratch_local SELECT id FROM scratch;
SELECT x FROM scratch_local;
DROP TABLE scratch_local, scratch_global;
SELECT * FROM scratch_local;

-- AS SELECT, and the dbt pattern: a temporary table of new rows merged into a permanent one.
CREATE TABLE target (id int, amount int);
INSERT INTO target VALUES (1, 10), (2, 20);
CREATE TEMPORARY TABLE target__tmp AS (SELECT 3 AS id, 30 AS amount UNION ALL SELECT 2, 25);
SELECT id, amount FROM target__tmp ORDER BY id;
DELETE FROM target WHERE id IN (SELECT id FROM target__tmp);
INSERT INTO target (id, amount) (SELECT id, amount FROM target__tmp);
SELECT id, amount FROM target ORDER BY id;
CREATE TEMP TABLE copied AS SELECT * FROM target WHERE amount > 20;
SELECT count(*) AS copied_rows FROM copied;

-- A temporary table hides a permanent table of the same name; the schema names either.
CREATE TABLE shadowed (v text);
INSERT INTO shadowed VALUES ('permanent');
CREATE TEMP TABLE shadowed (v text);
INSERT INTO shadowed VALUES ('temporary');
SELECT v FROM shadowed;
SELECT v FROM public.shadowed;
SELECT v FROM pg_temp.shadowed;
/* 2 */ DROP TABLE shadowed;
/* 2 */ SELECT v FROM shadowed;
/* 3 */ DROP TABLE shadowed;
/* 3 */ SELECT v FROM shadowed;

-- Where a temporary table may be made.
CREATE TEMP TABLE public.not_here (a int);
CREATE TABLE pg_temp.made_in_pg_temp (a int);
INSERT INTO made_in_pg_temp VALUES (7);
SELECT a FROM pg_temp.made_in_pg_temp;
CREATE TABLE not_temporary (a int) ON COMMIT DROP;
CREATE SCHEMA pg_mine;

-- ON COMMIT DELETE ROWS empties the table at every commit (an INSERT outside a block is one).
CREATE TEMP TABLE per_transaction (a int) ON COMMIT DELETE ROWS;
INSERT INTO per_transaction VALUES (1);
SELECT count(*) AS after_autocommit FROM per_transaction;
BEGIN;
/* 2 */ INSERT INTO per_transaction VALUES (1);
INSERT INTO per_transaction VALUES (2);
SELECT count(*) AS in_block FROM per_transaction;
COMMIT;
SELECT count(*) AS after_commit FROM per_transaction;
CREATE TEMP TABLE kept_rows (a int) ON COMMIT PRESERVE ROWS;
INSERT INTO kept_rows VALUES (1);
SELECT count(*) AS preserved FROM kept_rows;

-- ON COMMIT DROP: gone at the end of the transaction that made it.
/* 2 */ BEGIN;
CREATE TEMP TABLE per_block (a int) ON COMMIT DROP;
INSERT INTO per_block VALUES (1), (2);
SELECT count(*) AS per_block_rows FROM per_block;
/* 2 */ COMMIT;
SELECT count(*) FROM per_block;
CREATE TEMP TABLE dropped_at_once (a int) ON COMMIT DROP;
SELECT count(*) FROM dropped_at_once;

-- ROLLBACK undoes the creation of a temporary table, ROLLBACK TO a savepoint those made after it.
/* 3 */ BEGIN;
CREATE TEMP TABLE undone (a int);
INSERT INTO undone VALUES (1);
SELECT count(*) AS undone_rows FROM undone;
ROLLBACK;
SELECT count(*) FROM undone;
/* 4 */ BEGIN;
CREATE TEMP TABLE before_savepoint (a int);
SAVEPOINT s1;
CREATE TEMP TABLE after_savepoint (a int);
INSERT INTO before_savepoint VALUES (1);
ROLLBACK TO SAVEPOINT s1;
SELECT count(*) AS before_rows FROM before_savepoint;
SELECT count(*) FROM after_savepoint;
/* 2 */ ROLLBACK TO SAVEPOINT s1;
INSERT INTO before_savepoint VALUES (2);
/* 3 */ COMMIT;
SELECT count(*) AS kept_before_rows FROM before_savepoint;
/* 2 */ SELECT count(*) FROM after_savepoint;

-- Temporary views, and a view over a temporary table (temporary too).
CREATE TEMP VIEW tv AS SELECT id * 10 AS ten FROM scratch;
SELECT ten FROM tv;
CREATE VIEW over_temp AS SELECT ten + 1 AS eleven FROM tv;
SELECT eleven FROM over_temp;
SELECT eleven FROM pg_temp.over_temp;
CREATE VIEW public.over_temp_public AS SELECT * FROM scratch;
DROP TABLE scratch;
DROP VIEW over_temp;
/* 2 */ DROP TABLE scratch CASCADE;
/* 2 */ SELECT ten FROM tv;

-- Keys on a temporary table are enforced.
CREATE TEMP TABLE keyed (id int PRIMARY KEY, v text);
INSERT INTO keyed VALUES (1, 'a');
INSERT INTO keyed VALUES (1, 'again');
INSERT INTO keyed VALUES (2, 'b') ON CONFLICT (id) DO NOTHING;
SELECT id, v FROM keyed ORDER BY id;
TRUNCATE keyed;
SELECT count(*) AS truncated FROM keyed;
DISCARD TEMP;
SELECT count(*) FROM keyed;
SELECT count(*) AS permanent_kept FROM target;

-- A temporary table made by CREATE TEMP TABLE AS in a block holds its rows for the block.
/* 5 */ BEGIN;
CREATE TEMP TABLE made_in_block AS SELECT 1 AS a UNION ALL SELECT 2;
SELECT a FROM made_in_block ORDER BY a;
/* 5 */ COMMIT;
SELECT count(*) AS made_kept FROM made_in_block;
