-- Point updates (UPDATE ... WHERE key = constant, new values that are constants, columns, or a
-- column plus or minus a constant), which Sluice computes without planning a query
-- (engine/src/sql/point.rs): overflow in each integer type (22003), a constant in a wider type,
-- negative and qualified forms, a missing key, NULL values, the key itself changed (23505), a
-- table without a key, prepared statements (the parameters' bound form), and blocks rolled back
-- and committed. Run by server/tests/it/differential.rs through run.py.
-- Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 40

CREATE TABLE acct (id int PRIMARY KEY, small smallint, bal int, big bigint, note text);
INSERT INTO acct VALUES (1, 10, 100, 1000, 'a'), (2, 20, 200, 2000, 'b'), (3, NULL, NULL, NULL, NULL);
UPDATE acct SET bal = bal + 5 WHERE id = 1;
UPDATE acct SET bal = bal - 7, small = small + 1 WHERE id = 2;
UPDATE acct SET bal = 5 + bal WHERE id = 1 /* 2 */;
UPDATE acct SET bal = bal + -3 WHERE (id = 1);
UPDATE acct a SET bal = a.bal + 1 WHERE a.id = 2;
UPDATE acct SET bal = bal + 1 WHERE 2 = id;
UPDATE acct SET bal = bal + 1 WHERE id = 99;
UPDATE acct SET bal = bal + 1, big = big - 1 WHERE id = 3;
UPDATE acct SET note = 'x', bal = 7 WHERE id = 3;
SELECT id, small, bal, big, note FROM acct ORDER BY id;
UPDATE acct SET bal = bal + 2147483647 WHERE id = 1;
UPDATE acct SET bal = bal - 2147483647 WHERE id = 2;
UPDATE acct SET small = small + 32760 WHERE id = 2;
UPDATE acct SET small = small + CAST(32760 AS smallint) WHERE id = 1;
UPDATE acct SET big = big + 9223372036854775807 WHERE id = 1;
UPDATE acct SET bal = bal + 3000000000 WHERE id = 1;
UPDATE acct SET big = bal + 3000000000 WHERE id = 1;
UPDATE acct SET bal = bal + CAST(4 AS bigint) WHERE id = 1;
UPDATE acct SET bal = bal + 1 WHERE id = 3000000000;
UPDATE acct SET bal = bal + 1 WHERE id = CAST(2 AS bigint);
UPDATE acct SET bal = bal + 1 WHERE id = -1;
SELECT id, small, bal, big, note FROM acct ORDER BY id /* 2 */;
UPDATE acct SET id = id + 1 WHERE id = 1;
UPDATE acct SET id = id + 10 WHERE id = 1;
SELECT id, bal FROM acct ORDER BY id;
UPDATE acct SET id = 1 WHERE id = 11;
CREATE TABLE nokey (id int, v int);
INSERT INTO nokey VALUES (1, 1), (1, 2), (2, 3);
UPDATE nokey SET v = v + 10 WHERE id = 1;
SELECT id, v FROM nokey ORDER BY id, v;
PREPARE bump(int, int) AS UPDATE acct SET bal = bal + $1 WHERE id = $2;
EXECUTE bump(10, 1);
EXECUTE bump(-2147483648, 2);
EXECUTE bump(5, 42);
PREPARE bump8(bigint, int) AS UPDATE acct SET big = big + $1 WHERE id = $2;
EXECUTE bump8(9223372036854775000, 2);
EXECUTE bump8(1, 2);
SELECT id, small, bal, big FROM acct ORDER BY id;
BEGIN;
UPDATE acct SET bal = bal + 100 WHERE id = 1 /* 3 */;
SELECT bal FROM acct WHERE id = 1;
ROLLBACK;
SELECT bal FROM acct WHERE id = 1 /* 2 */;
BEGIN /* 2 */;
UPDATE acct SET bal = bal + 100 WHERE id = 2 /* 2 */;
UPDATE acct SET bal = bal + 100 WHERE id = 2 /* 3 */;
UPDATE acct SET bal = bal + 2147483647 WHERE id = 2 /* 2 */;
SELECT bal FROM acct WHERE id = 2;
ROLLBACK /* 2 */;
BEGIN /* 3 */;
UPDATE acct SET bal = bal - 1 WHERE id = 1 /* 2 */;
UPDATE acct SET bal = bal - 1 WHERE id = 2 /* 2 */;
COMMIT;
SELECT id, small, bal, big, note FROM acct ORDER BY id /* 3 */;
CREATE TABLE dflt (id int PRIMARY KEY, "default" int DEFAULT 5, v int DEFAULT 9);
INSERT INTO dflt VALUES (1, 1, 1);
UPDATE dflt SET v = DEFAULT WHERE id = 1;
UPDATE dflt SET "default" = "default" + 1 WHERE id = 1;
SELECT id, "default", v FROM dflt;
CREATE TABLE dflt2 (id int PRIMARY KEY, d int DEFAULT 40 + 2, n int, g int GENERATED ALWAYS AS (id * 2) STORED);
INSERT INTO dflt2 (id, d, n) VALUES (1, 1, 1);
UPDATE dflt2 SET d = DEFAULT, n = DEFAULT WHERE id = 1;
UPDATE dflt2 SET g = DEFAULT, d = d + 1 WHERE id = 1;
SELECT id, d, n, g FROM dflt2;
