-- Transaction blocks as PostgreSQL 15 defines them: BEGIN / START TRANSACTION, COMMIT, ROLLBACK,
-- savepoints, an error aborting the block (25P02 until ROLLBACK), READ ONLY (25006), control
-- statements outside a block (25P01), unknown savepoints (3B001). Run by
-- server/tests/it/differential.rs through run.py, one connection per server in autocommit mode
-- (so BEGIN opens the block). Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 150

-- A block that only reads, committed and rolled back.
CREATE TABLE tx (id int, v text);
INSERT INTO tx VALUES (1, 'a'), (2, 'b');
BEGIN;
SELECT count(*) AS in_block FROM tx;
COMMIT;
START TRANSACTION;
SELECT id FROM tx ORDER BY id;
ROLLBACK;

-- Writes committed by COMMIT.
BEGIN TRANSACTION;
INSERT INTO tx VALUES (3, 'c');
UPDATE tx SET v = 'bb' WHERE id = 2;
COMMIT WORK;
SELECT id, v FROM tx ORDER BY id;

-- An error aborts the block: every statement is refused until ROLLBACK (or COMMIT, which rolls back).
BEGIN WORK;
SELECT 1 / 0;
SELECT 1 AS refused;
INSERT INTO tx VALUES (9, 'refused');
SHOW search_path;
SET search_path = public;
SAVEPOINT after_error;
/* 2 */ ROLLBACK;
SELECT count(*) AS after_rollback FROM tx;
/* 2 */ BEGIN;
SELECT * FROM no_such_table;
/* 2 */ SELECT 1 AS refused;
/* 2 */ COMMIT;
SELECT count(*) AS after_commit_of_failed FROM tx;

-- A statement that does not parse aborts the block too.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELEC 1;
SELECT 5 AS refused_after_syntax_error;
ROLLBACK AND NO CHAIN;

-- READ ONLY refuses writes with 25006, and the refusal aborts the block.
START TRANSACTION READ ONLY;
SELECT count(*) AS read_only_reads FROM tx;
INSERT INTO tx VALUES (10, 'ro');
/* 3 */ SELECT 1 AS refused;
/* 3 */ ROLLBACK;
START TRANSACTION READ ONLY, ISOLATION LEVEL SERIALIZABLE;
UPDATE tx SET v = 'ro' WHERE id = 1;
/* 4 */ ROLLBACK;
BEGIN READ ONLY;
DELETE FROM tx;
/* 5 */ ROLLBACK;
/* 3 */ BEGIN;
SET TRANSACTION READ ONLY;
CREATE TABLE ro_made (a int);
/* 6 */ ROLLBACK;
START TRANSACTION READ WRITE;
INSERT INTO tx VALUES (4, 'rw');
/* 3 */ COMMIT;
SELECT count(*) AS after_read_write FROM tx;

-- Control statements outside a block.
/* 4 */ COMMIT;
/* 7 */ ROLLBACK;
SAVEPOINT outside;
RELEASE SAVEPOINT outside;
ROLLBACK TO SAVEPOINT outside;
/* 2 */ SET TRANSACTION READ ONLY;
INSERT INTO tx VALUES (5, 'after set transaction outside');

-- Savepoints: nested three deep, released, rolled back to (nothing written after them).
/* 4 */ BEGIN;
SAVEPOINT a;
SELECT count(*) AS at_a FROM tx;
SAVEPOINT b;
SAVEPOINT c;
RELEASE SAVEPOINT c;
ROLLBACK TO SAVEPOINT b;
ROLLBACK TO SAVEPOINT c;
/* 8 */ ROLLBACK;
/* 5 */ BEGIN;
/* 2 */ SAVEPOINT a;
/* 2 */ SAVEPOINT b;
/* 2 */ SAVEPOINT c;
ROLLBACK TO SAVEPOINT a;
/* 2 */ ROLLBACK TO SAVEPOINT b;
/* 9 */ ROLLBACK;
/* 6 */ BEGIN;
/* 3 */ SAVEPOINT a;
SELECT 1 / 0 AS fails_after_a;
/* 4 */ SELECT 1 AS refused;
/* 2 */ ROLLBACK TO SAVEPOINT a;
SELECT 2 AS works_again;
RELEASE a;
/* 5 */ COMMIT;
/* 7 */ BEGIN;
RELEASE SAVEPOINT nope;
/* 5 */ SELECT 1 AS refused;
/* 10 */ ROLLBACK;
/* 8 */ BEGIN;
ROLLBACK TO SAVEPOINT nope;
/* 11 */ ROLLBACK;
/* 9 */ BEGIN;
SAVEPOINT "Quoted";
ROLLBACK TO SAVEPOINT quoted;
/* 12 */ ROLLBACK;
/* 10 */ BEGIN;
SAVEPOINT Folded;
ROLLBACK TO SAVEPOINT folded;
/* 13 */ ROLLBACK;

-- BEGIN inside a block (PostgreSQL warns and stays in it).
/* 11 */ BEGIN;
/* 12 */ BEGIN;
SELECT 3 AS nested_begin;
/* 6 */ COMMIT;

-- Rolling back writes undoes them; a savepoint undoes what was written after it.
/* 13 */ BEGIN;
INSERT INTO tx VALUES (6, 'rolled back');
/* 14 */ ROLLBACK;
SELECT count(*) AS after_rollback_of_write FROM tx;
/* 15 */ ROLLBACK;
/* 14 */ BEGIN;
/* 4 */ SAVEPOINT a;
INSERT INTO tx VALUES (7, 'after savepoint');
/* 3 */ ROLLBACK TO SAVEPOINT a;
/* 16 */ ROLLBACK;
SELECT id FROM tx WHERE id >= 6 ORDER BY id;

-- Session defaults: default_transaction_read_only makes blocks and single statements read-only.
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED;
SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY;
INSERT INTO tx VALUES (20, 'read-only session');
SELECT count(*) AS read_only_session_reads FROM tx WHERE id < 6;
BEGIN ISOLATION LEVEL READ COMMITTED;
INSERT INTO tx VALUES (21, 'read-only session block');
ROLLBACK WORK;
START TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE;
INSERT INTO tx VALUES (22, 'read write block');
COMMIT TRANSACTION;
SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;
INSERT INTO tx VALUES (23, 'read write session');
SET default_transaction_read_only = on;
DELETE FROM tx WHERE id = 23;
RESET default_transaction_read_only;
DELETE FROM tx WHERE id = 22;
SELECT id FROM tx WHERE id >= 20 ORDER BY id;

-- Two and three tables in one block: both or neither.
CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL);
CREATE TABLE ledger (id int PRIMARY KEY, amount int);
CREATE TABLE audit (note text);
INSERT INTO acct VALUES (1, 100), (2, 100);
/* 15 */ BEGIN;
UPDATE acct SET balance = balance - 30 WHERE id = 1;
UPDATE acct SET balance = balance + 30 WHERE id = 2;
INSERT INTO ledger VALUES (1, 30);
SELECT id, balance FROM acct ORDER BY id;
/* 7 */ COMMIT;
SELECT sum(balance) AS total_after_commit FROM acct;
SELECT count(*) AS ledger_after_commit FROM ledger;
/* 16 */ BEGIN;
UPDATE acct SET balance = balance - 50 WHERE id = 2;
INSERT INTO ledger VALUES (2, 50);
INSERT INTO audit VALUES ('moved 50');
SELECT count(*) AS audit_in_block FROM audit;
/* 17 */ ROLLBACK;
SELECT id, balance AS after_rollback FROM acct ORDER BY id;
SELECT count(*) AS ledger_after_rollback FROM ledger;
SELECT count(*) AS audit_after_rollback FROM audit;

-- Keys inside a block: the block's own rows count, and a duplicate aborts it.
/* 17 */ BEGIN;
INSERT INTO ledger VALUES (3, 1);
INSERT INTO ledger VALUES (3, 2);
SELECT count(*) AS refused_after_duplicate FROM ledger;
/* 8 */ COMMIT;
SELECT count(*) AS ledger_after_failed_commit FROM ledger;
/* 18 */ BEGIN;
DELETE FROM ledger WHERE id = 2;
INSERT INTO ledger VALUES (2, 99);
INSERT INTO ledger VALUES (4, 4) ON CONFLICT (id) DO NOTHING;
INSERT INTO ledger VALUES (4, 5) ON CONFLICT (id) DO UPDATE SET amount = excluded.amount;
SELECT id, amount FROM ledger ORDER BY id;
/* 9 */ COMMIT;
SELECT id, amount AS committed_amount FROM ledger ORDER BY id;

-- Savepoints three deep with writes at each level.
/* 19 */ BEGIN;
INSERT INTO audit VALUES ('level 0');
SAVEPOINT s1;
INSERT INTO audit VALUES ('level 1');
SAVEPOINT s2;
UPDATE audit SET note = note || ' changed';
SAVEPOINT s3;
DELETE FROM audit;
SELECT count(*) AS at_s3 FROM audit;
ROLLBACK TO SAVEPOINT s3;
SELECT note FROM audit ORDER BY note;
ROLLBACK TO SAVEPOINT s2;
SELECT note AS at_s2 FROM audit ORDER BY note;
RELEASE SAVEPOINT s2;
ROLLBACK TO SAVEPOINT s1;
SELECT note AS at_s1 FROM audit ORDER BY note;
INSERT INTO audit VALUES ('level 1 again');
/* 10 */ COMMIT;
SELECT note AS committed_notes FROM audit ORDER BY note;

-- An error after writes: the block's writes go with it.
/* 20 */ BEGIN;
INSERT INTO audit VALUES ('lost with the error');
UPDATE acct SET balance = balance / 0 WHERE id = 1;
/* 6 */ SELECT 1 AS refused;
/* 11 */ COMMIT;
SELECT count(*) AS audit_after_error FROM audit;
SELECT balance AS balance_after_error FROM acct WHERE id = 1;
/* 21 */ BEGIN;
/* 5 */ SAVEPOINT a;
INSERT INTO audit VALUES ('kept after recovered error');
/* 4 */ SAVEPOINT b;
SELECT * FROM no_such_table_in_savepoint;
/* 3 */ ROLLBACK TO SAVEPOINT b;
SELECT count(*) AS recovered_reads FROM audit;
/* 12 */ COMMIT;
SELECT note FROM audit WHERE note LIKE 'kept%';

-- TRUNCATE, DELETE and UPDATE rolled back.
/* 22 */ BEGIN;
TRUNCATE audit;
SELECT count(*) AS truncated_in_block FROM audit;
/* 18 */ ROLLBACK;
SELECT count(*) AS audit_after_truncate_rollback FROM audit;
/* 23 */ BEGIN;
DELETE FROM acct;
UPDATE ledger SET amount = 0;
SELECT count(*) AS acct_in_block FROM acct;
/* 19 */ ROLLBACK;
SELECT count(*) AS acct_after_rollback FROM acct;
SELECT sum(amount) AS ledger_sum_after_rollback FROM ledger;

-- DDL in a block: a table created in it and written, then committed.
/* 24 */ BEGIN;
CREATE TABLE made_in_block (a int);
INSERT INTO made_in_block VALUES (1), (2);
SELECT count(*) AS made_rows_in_block FROM made_in_block;
/* 13 */ COMMIT;
SELECT count(*) AS made_rows FROM made_in_block;

-- DDL rolled back: the table goes with the block.
/* 25 */ BEGIN;
CREATE TABLE undone_in_block (a int);
/* 20 */ ROLLBACK;
/* 21 */ ROLLBACK;
SELECT count(*) AS undone_table_exists FROM information_schema.tables WHERE table_name = 'undone_in_block';

-- A READ ONLY block reads what others committed and writes nothing.
START TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ;
SELECT sum(balance) AS read_only_total FROM acct;
INSERT INTO audit VALUES ('read only');
/* 22 */ ROLLBACK;
SELECT count(*) AS audit_after_read_only FROM audit;

-- Views: read as their query, also inside a block; what they read cannot be dropped under them.
CREATE TABLE vbase (a int);
INSERT INTO vbase VALUES (1), (2);
CREATE VIEW vdoubled AS SELECT a * 2 AS d FROM vbase;
SELECT sum(d) AS view_sum FROM vdoubled;
/* 26 */ BEGIN;
INSERT INTO vbase VALUES (10);
SELECT sum(d) AS view_sum_in_block FROM vdoubled;
/* 23 */ ROLLBACK;
SELECT sum(d) AS view_sum_after_rollback FROM vdoubled;
DROP TABLE vbase;
CREATE OR REPLACE VIEW vdoubled AS SELECT a * 3 AS d FROM vbase;
SELECT sum(d) AS view_sum_replaced FROM vdoubled;
CREATE VIEW vdoubled AS SELECT 1 AS d;
CREATE OR REPLACE VIEW vdoubled AS SELECT 1 AS e;
DROP TABLE vdoubled;
DROP VIEW vdoubled;
/* 2 */ DROP VIEW vdoubled;
DROP VIEW IF EXISTS vdoubled;
/* 2 */ DROP TABLE vbase;

-- Transactional DDL: tables, views and schemas made, dropped and renamed in a block are the
-- block's until COMMIT; ROLLBACK and ROLLBACK TO SAVEPOINT undo them.
CREATE TABLE ddl_keep (k int PRIMARY KEY, note text);
INSERT INTO ddl_keep VALUES (1, 'one'), (2, 'two');
/* 101 */ BEGIN;
DROP TABLE ddl_keep;
SELECT count(*) AS dropped_in_block FROM ddl_keep;
/* 101 */ ROLLBACK;
SELECT count(*) AS kept_after_rollback FROM ddl_keep;
/* 102 */ BEGIN;
ALTER TABLE ddl_keep RENAME TO ddl_renamed;
SELECT count(*) AS renamed_in_block FROM ddl_renamed;
SELECT count(*) AS old_name_in_block FROM ddl_keep;
/* 102 */ ROLLBACK;
SELECT count(*) AS old_name_after_rollback FROM ddl_keep;
SELECT count(*) AS new_name_after_rollback FROM ddl_renamed;
/* 103 */ BEGIN;
CREATE SCHEMA ddl_schema;
CREATE TABLE ddl_schema.inner_table (x int);
INSERT INTO ddl_schema.inner_table VALUES (1);
CREATE VIEW ddl_view AS SELECT k, note FROM ddl_keep WHERE k > 1;
SELECT k, note FROM ddl_view;
/* 103 */ ROLLBACK;
SELECT count(*) AS schema_after_rollback FROM information_schema.schemata WHERE schema_name = 'ddl_schema';
SELECT count(*) AS view_after_rollback FROM ddl_view;
/* 104 */ BEGIN;
CREATE TABLE ddl_saved (x int);
INSERT INTO ddl_saved VALUES (1);
SAVEPOINT before_second;
CREATE TABLE ddl_unsaved (y int);
INSERT INTO ddl_saved VALUES (2);
ROLLBACK TO SAVEPOINT before_second;
SELECT count(*) AS unsaved_in_block FROM ddl_unsaved;
/* 104 */ ROLLBACK TO SAVEPOINT before_second;
SELECT count(*) AS saved_in_block FROM ddl_saved;
/* 104 */ COMMIT;
SELECT count(*) AS saved_after_commit FROM ddl_saved;
SELECT count(*) AS unsaved_after_commit FROM ddl_unsaved;
/* 105 */ BEGIN;
CREATE TABLE ddl_as AS SELECT k * 10 AS k10 FROM ddl_keep;
DROP TABLE ddl_saved;
CREATE VIEW ddl_as_view AS SELECT sum(k10) AS total FROM ddl_as;
/* 105 */ COMMIT;
SELECT total FROM ddl_as_view;
SELECT count(*) AS saved_dropped FROM ddl_saved;
/* 106 */ BEGIN;
CREATE TABLE ddl_twice (x int);
/* 2 */ CREATE TABLE ddl_twice (x int);
/* 106 */ ROLLBACK;
SELECT count(*) AS twice_after_rollback FROM ddl_twice;
/* 107 */ BEGIN;
DROP VIEW ddl_as_view;
DROP TABLE ddl_as;
/* 107 */ COMMIT;
SELECT count(*) AS view_gone FROM ddl_as_view;
/* 2 */ DROP TABLE ddl_keep;

-- The catalogs inside a block show what the block created (pg_constraint, pg_views), and after
-- ROLLBACK no longer.
/* 108 */ BEGIN;
CREATE TABLE cat_in_block (id int PRIMARY KEY, n int CONSTRAINT cat_in_block_n CHECK (n > 0));
CREATE VIEW cat_in_block_view AS SELECT id FROM cat_in_block;
SELECT conname, contype FROM pg_constraint WHERE conrelid = 'cat_in_block'::regclass ORDER BY conname;
SELECT pg_get_constraintdef(oid, true) AS check_text FROM pg_constraint WHERE conname = 'cat_in_block_n';
SELECT viewname FROM pg_views WHERE viewname = 'cat_in_block_view';
SELECT column_name FROM information_schema.columns WHERE table_name = 'cat_in_block' ORDER BY ordinal_position;
/* 108 */ ROLLBACK;
SELECT count(*) AS constraints_after_rollback FROM pg_constraint WHERE conname = 'cat_in_block_n';
SELECT count(*) AS views_after_rollback FROM pg_views WHERE viewname = 'cat_in_block_view';

-- Cursors live in a transaction block: DECLARE outside one is 25P01 (a missing relation is
-- reported first), COMMIT and ROLLBACK close them (34000 after), a taken name is 42P03; WITH HOLD
-- cursors may be declared anywhere and outlive the commit of their block, not its rollback.
CREATE TABLE cur_rows AS SELECT * FROM generate_series(1, 5) AS g(x);
DECLARE cur_outside CURSOR FOR SELECT x FROM cur_rows;
DECLARE cur_missing CURSOR FOR SELECT x FROM cur_no_such_table;
/* 201 */ BEGIN;
DECLARE cur_in CURSOR FOR SELECT x FROM cur_rows ORDER BY x;
FETCH 2 FROM cur_in;
DECLARE cur_in CURSOR FOR SELECT 1;
/* 201 */ ROLLBACK;
FETCH NEXT FROM cur_in;
/* 202 */ BEGIN;
DECLARE cur_committed CURSOR FOR SELECT x FROM cur_rows ORDER BY x;
FETCH NEXT FROM cur_committed;
/* 202 */ COMMIT;
FETCH FORWARD 1 FROM cur_committed;
DECLARE cur_held CURSOR WITH HOLD FOR SELECT x FROM cur_rows ORDER BY x;
FETCH 2 FROM cur_held;
/* 203 */ BEGIN;
DECLARE cur_held_in_block CURSOR WITH HOLD FOR SELECT x * 10 AS x10 FROM cur_rows ORDER BY x;
/* 203 */ COMMIT;
FETCH 2 FROM cur_held_in_block;
FETCH ALL FROM cur_held;
/* 204 */ BEGIN;
DECLARE cur_held_rolled_back CURSOR WITH HOLD FOR SELECT x FROM cur_rows;
/* 204 */ ROLLBACK;
FETCH NEXT FROM cur_held_rolled_back;
CLOSE cur_held;
CLOSE cur_held_in_block;
FETCH NEXT FROM cur_held;
-- FETCH and MOVE without FROM/IN, and without a direction; MOVE answers how far it moved.
/* 290 */ BEGIN;
DECLARE cur_bare CURSOR FOR SELECT x FROM cur_rows ORDER BY x;
FETCH cur_bare;
FETCH NEXT cur_bare;
MOVE cur_bare;
FETCH 1 cur_bare;
MOVE NEXT IN cur_bare;
FETCH FORWARD cur_bare;
MOVE ALL FROM cur_bare;
FETCH IN cur_bare;
MOVE FORWARD 2 cur_bare;
FETCH no_such_cursor;
/* 290 */ ROLLBACK;
-- ROLLBACK TO SAVEPOINT closes the cursors declared since the savepoint (WITH HOLD too, and also
-- after an error), not those declared before it or before a savepoint released since; COMMIT AND
-- CHAIN and ROLLBACK AND CHAIN close the transaction's cursors (WITH HOLD ones survive a commit).
/* 291 */ BEGIN;
DECLARE cur_before CURSOR FOR SELECT x FROM cur_rows ORDER BY x;
DECLARE cur_before_held CURSOR WITH HOLD FOR SELECT x * 10 AS x10 FROM cur_rows ORDER BY x;
/* 291 */ SAVEPOINT cur_s;
DECLARE cur_after CURSOR FOR SELECT 3 AS three;
DECLARE cur_after_held CURSOR WITH HOLD FOR SELECT 4 AS four;
FETCH cur_before;
/* 291 */ ROLLBACK TO SAVEPOINT cur_s;
FETCH cur_after;
/* 292 */ ROLLBACK TO SAVEPOINT cur_s;
FETCH cur_after_held;
/* 293 */ ROLLBACK TO SAVEPOINT cur_s;
/* 300 */ FETCH cur_before;
FETCH cur_before_held;
/* 291 */ SAVEPOINT cur_t;
DECLARE cur_released CURSOR FOR SELECT 5 AS five;
RELEASE SAVEPOINT cur_t;
/* 291 */ SAVEPOINT cur_u;
/* 291 */ ROLLBACK TO SAVEPOINT cur_u;
FETCH cur_released;
/* 294 */ ROLLBACK TO SAVEPOINT cur_s;
/* 300 */ FETCH cur_released;
/* 295 */ ROLLBACK TO SAVEPOINT cur_s;
DECLARE cur_failed CURSOR FOR SELECT 6 AS six;
SELECT 1 / 0 AS cursor_block_fails;
/* 296 */ ROLLBACK TO SAVEPOINT cur_s;
FETCH cur_failed;
/* 297 */ ROLLBACK TO SAVEPOINT cur_s;
/* 300 */ COMMIT AND CHAIN;
/* 300 */ FETCH cur_before_held;
DECLARE cur_chained CURSOR FOR SELECT 7 AS seven;
DECLARE cur_chained_held CURSOR WITH HOLD FOR SELECT 8 AS eight;
/* 301 */ FETCH cur_before;
ROLLBACK AND CHAIN;
FETCH cur_chained;
/* 298 */ ROLLBACK;
FETCH cur_chained_held;
/* 301 */ FETCH cur_before_held;
/* 299 */ BEGIN;
DECLARE cur_failed_chain CURSOR FOR SELECT 9 AS nine;
SELECT 1 / 0 AS chain_block_fails;
/* 301 */ COMMIT AND CHAIN;
FETCH cur_failed_chain;
/* 299 */ ROLLBACK;
CLOSE cur_before_held;
DROP TABLE cur_rows;

-- Isolation levels: PostgreSQL's four names are accepted in any case (Sluice gives READ
-- UNCOMMITTED READ COMMITTED and reports that, so no SHOW of it here), anything else is 22023
-- (SET, set_config) or a syntax error. READ COMMITTED is the default, in and out of a block.
SELECT current_setting('transaction_isolation') AS outside_a_block;
SELECT current_setting('default_transaction_isolation') AS the_default;
/* level: default */ BEGIN;
SELECT current_setting('transaction_isolation') AS in_a_block;
/* level: default */ COMMIT;
/* level: asked */ BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT current_setting('transaction_isolation') AS as_asked;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
SELECT current_setting('transaction_isolation') AS set_again;
/* level: asked */ COMMIT;
SET default_transaction_isolation = 'nonsense';
SET default_transaction_isolation TO 'Serializable';
SET default_transaction_isolation = 'read  committed';
SET default_transaction_isolation = DEFAULT;
SET transaction_isolation = 'x';
SET transaction_isolation = 'read uncommitted';
-- Several values for a setting that takes one are 22023 (before the setting's own checks, even
-- for a setting that does not exist); DateStyle and search_path take lists.
SET transaction_isolation = 'a', 'b';
SET default_transaction_isolation = 'read committed', 'serializable';
SET default_transaction_read_only = on, off;
SET application_name = 'a', 'b';
SET TimeZone = 'UTC', 'UTC';
SET no_such_setting = a, b;
SET search_path = public, pg_catalog;
SELECT current_setting('search_path') AS two_schemas;
RESET search_path;
SET default_transaction_isolation = 5;
SET TRANSACTION ISOLATION LEVEL nonsense;
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL bogus;
SELECT set_config('default_transaction_isolation', 'nonsense', false) AS bad_level;
/* 205 */ BEGIN;
SET transaction_isolation = 'bad';
/* 205 */ ROLLBACK;

-- SERIALIZABLE is provided as asked, and reads back; a block's level is fixed by its first query
-- and shared by its savepoints (25001); SET transaction_isolation is SET TRANSACTION. (Read with
-- current_setting: SHOW's tag differs, see functions.expected-differences.)
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT current_setting('transaction_isolation') AS begun_serializable;
SELECT current_setting('transaction_isolation') AS in_serializable;
/* isolation 1 */ COMMIT;
/* isolation 2 */ BEGIN;
SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;
SELECT current_setting('transaction_isolation') AS after_set_transaction;
SELECT count(*) AS serializable_count FROM tx;
/* after a query */ SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
/* isolation 3 */ ROLLBACK;
/* isolation 4 */ BEGIN;
SAVEPOINT iso;
/* in a subtransaction */ SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;
/* isolation 5 */ ROLLBACK;
/* isolation 6 */ BEGIN;
SET transaction_isolation = 'serializable';
SELECT current_setting('transaction_isolation') AS after_set_setting;
SELECT 1 AS queried;
SET transaction_isolation = 'repeatable read';
/* isolation 7 */ ROLLBACK;
/* isolation default */ SET default_transaction_isolation = 'serializable';
SELECT current_setting('transaction_isolation') AS default_serializable;
/* isolation 8 */ BEGIN;
SELECT current_setting('default_transaction_isolation') AS in_serializable_block;
INSERT INTO tx VALUES (90, 'serializable');
/* isolation 9 */ COMMIT;
UPDATE tx SET v = 'serializable autocommit' WHERE id = 90;
SELECT id, v FROM tx WHERE id = 90;
/* isolation default reset */ SET default_transaction_isolation = DEFAULT;
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE;
SELECT current_setting('default_transaction_isolation') AS characteristics;
RESET default_transaction_isolation;

-- A table made by CREATE TABLE AS in a block holds its rows for the block's own reads.
CREATE TABLE tx_src (id int, v int);
INSERT INTO tx_src VALUES (1, 100), (2, 200), (3, 300);
/* 300 */ BEGIN;
CREATE TABLE tx_made AS SELECT id, v FROM tx_src WHERE v > 100;
SELECT id, v FROM tx_made ORDER BY id;
INSERT INTO tx_made VALUES (9, 900);
SELECT count(*) AS made_rows FROM tx_made;
/* 300 */ ROLLBACK;
SELECT count(*) AS gone FROM tx_made;
/* 301 */ BEGIN;
CREATE TABLE tx_made AS SELECT id, v FROM tx_src WHERE v > 100 /* 2 */;
/* 301 */ COMMIT;
SELECT id, v FROM tx_made ORDER BY id /* 2 */;

-- A table the block wrote rows to may be dropped in the block: its rows go with it (and come
-- back with a rollback to a savepoint before the DROP).
CREATE TABLE tx_dropw (id int);
INSERT INTO tx_dropw VALUES (1);
/* drop written */ BEGIN;
INSERT INTO tx_dropw VALUES (2);
SAVEPOINT before_drop;
DROP TABLE tx_dropw;
ROLLBACK TO SAVEPOINT before_drop;
SELECT id FROM tx_dropw ORDER BY id;
INSERT INTO tx_dropw VALUES (3);
/* after writes */ DROP TABLE tx_dropw;
/* drop written */ COMMIT;
SELECT id AS after_drop FROM tx_dropw;
