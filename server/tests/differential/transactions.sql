-- Transaction blocks as PostgreSQL 15 defines them: BEGIN / START TRANSACTION, COMMIT, ROLLBACK,
-- savepoints, an error aborting the block (25P02 until ROLLBACK), READ ONLY (25006), control
-- statements outside a block (25P01), unknown savepoints (3B001). Run by
-- server/tests/it/differential.rs through run.py, one connection per server in autocommit mode
-- (so BEGIN opens the block). Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 60

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

-- Rolling back writes: PostgreSQL undoes them; Sluice commits each statement and says so.
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
