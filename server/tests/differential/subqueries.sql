-- Subqueries: scalar ones in the select list, WHERE, UPDATE and DELETE, correlated or not;
-- their names; more than one row (21000); EXISTS and IN. Run by server/tests/it/differential.rs
-- through run.py. Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 30
CREATE TABLE sq_parent (id int PRIMARY KEY, data varchar(50), parent_id int);
CREATE TABLE sq_child (id int PRIMARY KEY, data varchar(50), parent_id int);
INSERT INTO sq_parent VALUES (1, 'd1', NULL), (2, 'd2', 1), (3, 'd3', 1), (4, 'd4', 3), (5, 'd5', 3);
INSERT INTO sq_child SELECT * FROM sq_parent;
-- uncorrelated, in the select list (named by their column)
SELECT (SELECT sq_parent.data FROM sq_parent WHERE sq_parent.id = 2);
SELECT (SELECT max(p.data) FROM sq_parent p) AS biggest, (SELECT count(*) FROM sq_child);
SELECT c.id, (SELECT min(sq_parent.data) FROM sq_parent) FROM sq_child c ORDER BY c.id;
SELECT (SELECT data FROM sq_parent WHERE id = 99);
SELECT (SELECT data FROM sq_parent);
SELECT (SELECT data FROM sq_parent WHERE id > 3) || 'x';
-- correlated, in the select list
SELECT c.id, (SELECT p.data FROM sq_parent p WHERE p.id = c.parent_id) FROM sq_child c ORDER BY c.id;
SELECT c.id, (SELECT max(p.data) FROM sq_parent p WHERE p.parent_id = c.id) AS top FROM sq_child c ORDER BY c.id;
SELECT c.id, (SELECT count(*) FROM sq_parent p WHERE p.parent_id = c.id) AS children FROM sq_child c ORDER BY c.id;
SELECT c.id, (SELECT p.data FROM sq_parent p WHERE p.parent_id = c.id) FROM sq_child c ORDER BY c.id;
SELECT c.id, (SELECT p.data FROM sq_parent p WHERE p.parent_id = c.id) FROM sq_child c WHERE c.id = 2 ORDER BY c.id;
SELECT c.id, (SELECT p.data FROM sq_parent p WHERE p.id = c.parent_id) AS up, (SELECT count(*) FROM sq_parent p WHERE p.parent_id = c.id) AS n FROM sq_child c ORDER BY c.id;
SELECT c.id, (SELECT p.data FROM sq_parent p WHERE p.id = c.parent_id AND p.data > 'd0') FROM sq_child c WHERE c.id > 3 ORDER BY c.id;
SELECT c.id, coalesce((SELECT p.data FROM sq_parent p WHERE p.id = c.parent_id), 'root') AS up FROM sq_child c ORDER BY c.id;
-- correlated on two inner columns of one name (DataFusion joined both outer columns to one)
CREATE TABLE sq_attr (name text, coll int, typ int);
CREATE TABLE sq_coll (oid int, collname text);
CREATE TABLE sq_type (oid int, typcoll int);
INSERT INTO sq_attr VALUES ('n', 0, 23), ('t', 950, 25), ('u', 100, 25);
INSERT INTO sq_coll VALUES (100, 'default'), (950, 'C');
INSERT INTO sq_type VALUES (23, 0), (25, 100);
SELECT a.name, (SELECT max(c.collname) FROM sq_coll c, sq_type t WHERE c.oid = a.coll AND t.oid = a.typ) AS coll FROM sq_attr a ORDER BY 1;
SELECT a.name, (SELECT c.collname FROM sq_coll c, sq_type t WHERE c.oid = a.coll AND t.oid = a.typ AND c.oid <> t.typcoll) AS coll FROM sq_attr a ORDER BY 1;
SELECT a.name FROM sq_attr a WHERE 'C' = (SELECT c.collname FROM sq_coll c, sq_type t WHERE c.oid = a.coll AND t.oid = a.typ);
DROP TABLE sq_attr;
DROP TABLE sq_coll;
DROP TABLE sq_type;
-- correlated by other than an equality, or with LIMIT: not run by Sluice (0A000)
SELECT c.id, (SELECT count(*) FROM sq_parent p WHERE p.id <= c.id) FROM sq_child c ORDER BY c.id;
SELECT c.id, (SELECT p.data FROM sq_parent p WHERE p.parent_id = c.id ORDER BY p.id LIMIT 1) FROM sq_child c ORDER BY c.id;
-- in WHERE
SELECT id FROM sq_child c WHERE c.data = (SELECT p.data FROM sq_parent p WHERE p.id = c.id) ORDER BY id;
SELECT id FROM sq_child c WHERE c.parent_id = (SELECT max(p.id) FROM sq_parent p WHERE p.id < 4) ORDER BY id;
SELECT id FROM sq_child c WHERE EXISTS (SELECT 1 FROM sq_parent p WHERE p.parent_id = c.id) ORDER BY id;
SELECT id FROM sq_child c WHERE c.id NOT IN (SELECT parent_id FROM sq_parent WHERE parent_id IS NOT NULL) ORDER BY id;
-- DELETE and UPDATE with a correlated scalar subquery (SQLAlchemy's CTE round trip)
WITH some_cte AS (SELECT sq_parent.id AS id, sq_parent.data AS data, sq_parent.parent_id AS parent_id FROM sq_parent WHERE sq_parent.data IN ('d2', 'd3', 'd4')) DELETE FROM sq_child WHERE sq_child.data = (SELECT some_cte.data FROM some_cte WHERE some_cte.id = sq_child.id);
SELECT * FROM sq_child ORDER BY id;
UPDATE sq_child SET data = (SELECT p.data || '!' FROM sq_parent p WHERE p.id = sq_child.parent_id);
SELECT * FROM sq_child ORDER BY id /* 2 */;
UPDATE sq_child SET data = (SELECT p.data FROM sq_parent p WHERE p.parent_id = sq_child.parent_id);
SELECT * FROM sq_child ORDER BY id /* 3 */;
DELETE FROM sq_child WHERE parent_id = (SELECT p.id FROM sq_parent p WHERE p.id = sq_child.parent_id);
SELECT * FROM sq_child ORDER BY id /* 4 */;
DROP TABLE sq_child;
DROP TABLE sq_parent;
