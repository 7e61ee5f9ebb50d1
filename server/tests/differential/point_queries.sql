-- Point queries (SELECT columns FROM t WHERE key = constant), which Sluice runs without planning
-- (engine/src/sql/point.rs): every common column type, NULLs, `*`, aliases and qualified names,
-- constants of other integer types and out of the key's range, a missing key, prepared
-- statements (the parameters' bound form), a transaction block's own writes and their rollback,
-- a UNIQUE column, a temporary table that hides a permanent one, quoted names, and the shapes
-- that take the planned query (no key, a composite key, a text key, a view, other filters).
-- Run by server/tests/it/differential.rs through run.py.
-- Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 60

CREATE TABLE pq (id int PRIMARY KEY, s smallint, b bigint, n numeric(10,2), f double precision, t text, v varchar(10), c char(5), ok boolean, d date, ts timestamp);
INSERT INTO pq VALUES (1, 1, 10000000000, 12.50, 0.5, 'one', 'uno', 'ab', true, '2026-01-02', '2026-01-02 03:04:05'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), (-3, -3, -3, -3.25, -1e10, '', 'x', 'abcde', false, '1999-12-31', '1999-12-31 23:59:59.5');
SELECT * FROM pq WHERE id = 1;
SELECT * FROM pq WHERE id = 2;
SELECT * FROM pq WHERE id = -3;
SELECT t, id FROM pq WHERE id = 1;
SELECT t AS name, n AS amount FROM pq WHERE id = 1;
SELECT T, ID FROM pq WHERE ID = 1;
SELECT pq.t FROM pq WHERE pq.id = 1;
SELECT p.t, p.v FROM pq p WHERE p.id = 1;
SELECT p.t FROM pq AS p WHERE 1 = p.id;
SELECT t FROM pq WHERE (id = 1);
SELECT t FROM pq WHERE id = 99;
SELECT t FROM pq WHERE id = 3000000000;
SELECT t FROM pq WHERE id = CAST(1 AS bigint);
SELECT t FROM pq WHERE id = CAST(1 AS smallint);
SELECT t FROM pq WHERE id = -2147483648;
SELECT id, id FROM pq WHERE id = 1;
SELECT t, t AS t2 FROM pq WHERE id = 1;
SELECT c, v, ok FROM pq WHERE id = -3;
SELECT d, ts FROM pq WHERE id = -3;
SELECT pq.* FROM pq WHERE id = 1;
SELECT t FROM public.pq WHERE id = 1;
SELECT t FROM pq WHERE id = 1 AND ok;
SELECT x FROM pq WHERE id = 1;
SELECT t FROM pq p WHERE pq.id = 1;
SELECT t FROM nosuch WHERE id = 1;
SELECT DISTINCT t FROM pq WHERE id = 1;
SELECT t FROM pq WHERE id = 1 ORDER BY t;
SELECT t FROM pq WHERE id = 1 LIMIT 0;
SELECT t FROM pq WHERE id = 1 FOR UPDATE;
PREPARE q(int) AS SELECT t, n FROM pq WHERE id = $1;
EXECUTE q(1);
EXECUTE q(-3);
EXECUTE q(42);
PREPARE q8(bigint) AS SELECT t FROM pq WHERE id = $1;
EXECUTE q8(1);
EXECUTE q8(3000000000);
BEGIN;
UPDATE pq SET s = s + 1 WHERE id = 1;
SELECT s FROM pq WHERE id = 1;
INSERT INTO pq (id, t) VALUES (4, 'four');
SELECT id, t FROM pq WHERE id = 4;
DELETE FROM pq WHERE id = -3;
SELECT t FROM pq WHERE id = -3;
ROLLBACK;
SELECT s FROM pq WHERE id = 1 /* 2 */;
SELECT id, t FROM pq WHERE id = 4 /* 2 */;
SELECT t FROM pq WHERE id = -3 /* 2 */;
BEGIN /* 2 */;
UPDATE pq SET id = 10 WHERE id = 1;
SELECT t FROM pq WHERE id = 10;
SELECT t FROM pq WHERE id = 1 /* 2 */;
COMMIT;
SELECT t FROM pq WHERE id = 10 /* 2 */;
SELECT t FROM pq WHERE id = 1 /* 3 */;
DELETE FROM pq WHERE id = 2;
SELECT * FROM pq WHERE id = 2 /* 2 */;
UPDATE pq SET t = 'moved' WHERE id = 10;
SELECT t FROM pq WHERE id = 10 /* 3 */;
CREATE TABLE kb (id bigint PRIMARY KEY, v text);
INSERT INTO kb VALUES (3000000000, 'big'), (1, 'small');
SELECT v FROM kb WHERE id = 3000000000;
SELECT v FROM kb WHERE id = 1;
CREATE TABLE ks (id smallint PRIMARY KEY, v text);
INSERT INTO ks VALUES (7, 'seven');
SELECT v FROM ks WHERE id = 7;
SELECT v FROM ks WHERE id = 70000;
CREATE TABLE uq (id int, code int UNIQUE, v text);
INSERT INTO uq VALUES (1, 5, 'five'), (2, NULL, 'none'), (3, NULL, 'none again');
SELECT v FROM uq WHERE code = 5;
SELECT v FROM uq WHERE code = 6;
CREATE TABLE nokey (id int, v int);
INSERT INTO nokey VALUES (1, 1), (1, 2), (2, 3);
SELECT v FROM nokey WHERE id = 1 ORDER BY v;
CREATE TABLE ck (a int, b int, v int, PRIMARY KEY (a, b));
INSERT INTO ck VALUES (1, 1, 11), (1, 2, 12);
SELECT v FROM ck WHERE a = 1 ORDER BY v;
SELECT v FROM ck WHERE a = 1 AND b = 2;
CREATE TABLE tk (k text PRIMARY KEY, v int);
INSERT INTO tk VALUES ('a', 1);
SELECT v FROM tk WHERE k = 'a';
CREATE VIEW pv AS SELECT id, t FROM pq;
SELECT t FROM pv WHERE id = 10;
CREATE TABLE "Mixed" ("Id" int PRIMARY KEY, "Val" text);
INSERT INTO "Mixed" VALUES (1, 'm');
SELECT "Val" FROM "Mixed" WHERE "Id" = 1;
SELECT "Val" AS "Out" FROM "Mixed" WHERE "Id" = 1;
SELECT m."Val" FROM "Mixed" m WHERE m."Id" = 1;
CREATE TEMP TABLE pq (id int PRIMARY KEY, t text);
INSERT INTO pq VALUES (10, 'temporary');
SELECT t FROM pq WHERE id = 10 /* 4 */;
SELECT t FROM public.pq WHERE id = 10;
SELECT t FROM pg_temp.pq WHERE id = 10;
DROP TABLE pq;
SELECT t FROM pq WHERE id = 10 /* 5 */;
