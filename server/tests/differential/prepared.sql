-- SQL's PREPARE, EXECUTE and DEALLOCATE as PostgreSQL 15 defines them: typed and inferred
-- parameters, each kind of statement (a query, INSERT with its keys checked, UPDATE ... RETURNING,
-- DELETE), arguments read in the session's DateStyle, a taken name (42P05), an unknown one (26000),
-- the wrong number of arguments (42601), a PREPARE that ROLLBACK does not undo. Run by
-- server/tests/it/differential.rs through run.py, one connection per server in autocommit mode.
-- Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 30

CREATE TABLE pk (id int PRIMARY KEY, v text, d date);
PREPARE ins(int, text, date) AS INSERT INTO pk VALUES ($1, $2, $3);
EXECUTE ins(1, 'a', '2024-01-02');
EXECUTE ins(1, 'b', '2024-01-03');
EXECUTE ins(2, 'b');
SET datestyle = 'ISO, DMY';
EXECUTE ins(3, 'c', '05/01/2024');
SET datestyle = 'ISO, MDY';
EXECUTE ins(4, 'd', '05/01/2024');
SELECT id, v, d FROM pk ORDER BY id;
PREPARE up(int) AS UPDATE pk SET v = 'z' WHERE id = $1 RETURNING id, v;
EXECUTE up(1);
PREPARE sel AS SELECT id, v || '!' FROM pk WHERE id > $1 ORDER BY id;
EXECUTE sel(1);
EXECUTE sel('2');
PREPARE sel AS SELECT 1;
PREPARE plus(int) AS SELECT $1 + 1;
EXECUTE plus(3);
EXECUTE plus(1, 2);
PREPARE gone AS SELECT * FROM no_such_table;
DEALLOCATE plus;
EXECUTE plus(4);
DEALLOCATE plus /* 2 */;
DEALLOCATE PREPARE ALL;
EXECUTE sel(0);
BEGIN;
PREPARE kept AS SELECT count(*) FROM pk;
ROLLBACK;
EXECUTE kept;
PREPARE del(int) AS DELETE FROM pk WHERE id = $1;
EXECUTE del(1);
EXECUTE del(9);
SELECT id, v FROM pk ORDER BY id;
PREPARE unused(int, text) AS SELECT 42 AS answer;
EXECUTE unused(1, 'x');
DEALLOCATE ALL;
