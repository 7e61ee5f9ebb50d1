-- Views: their columns are fixed when they are created (a `*` is the columns it named then);
-- their definitions as pg_get_viewdef and pg_views print them; dependencies. Run by
-- server/tests/it/differential.rs through run.py. Statements must be distinct.
-- minimum: 25
CREATE TABLE vw_t (a int, b text);
CREATE TABLE vw_u (id int, w text);
INSERT INTO vw_t VALUES (1, 'x'), (2, 'y');
INSERT INTO vw_u VALUES (1, 'p');
CREATE VIEW vw_star AS SELECT * FROM vw_t;
CREATE VIEW vw_qualified AS SELECT vw_t.*, vw_u.w FROM vw_t JOIN vw_u ON vw_t.a = vw_u.id;
CREATE VIEW vw_union AS SELECT * FROM vw_t UNION ALL SELECT * FROM vw_t;
CREATE VIEW vw_cte AS WITH c AS (SELECT * FROM vw_t) SELECT * FROM c;
CREATE VIEW vw_derived AS SELECT * FROM (SELECT a FROM vw_t) s, generate_series(1, 2) g;
CREATE VIEW vw_over_view AS SELECT * FROM vw_star WHERE a > 1;
CREATE VIEW vw_named (n, m) AS SELECT * FROM vw_t;
-- a column added later is not in the views
ALTER TABLE vw_t ADD COLUMN c int;
INSERT INTO vw_t VALUES (3, 'z', 30);
SELECT * FROM vw_star ORDER BY a;
SELECT * FROM vw_qualified;
SELECT * FROM vw_union ORDER BY a;
SELECT * FROM vw_cte ORDER BY a;
SELECT * FROM vw_derived ORDER BY a, g;
SELECT * FROM vw_over_view ORDER BY a;
SELECT * FROM vw_named ORDER BY n;
SELECT column_name FROM information_schema.columns WHERE table_name = 'vw_star' ORDER BY ordinal_position;
-- a new view over the table sees the new column
CREATE VIEW vw_star_again AS SELECT * FROM vw_t;
SELECT * FROM vw_star_again ORDER BY a;
SELECT count(*) FROM vw_star_again WHERE c IS NULL;
-- definitions
SELECT pg_get_viewdef('vw_star'::regclass);
SELECT pg_get_viewdef('vw_named'::regclass);
SELECT viewname FROM pg_views WHERE viewname LIKE 'vw_%' ORDER BY viewname;
-- dependencies
DROP TABLE vw_u;
DROP VIEW vw_star;
DROP VIEW vw_over_view;
DROP VIEW vw_star /* 2 */;
DROP TABLE vw_u CASCADE;
SELECT viewname FROM pg_views WHERE viewname LIKE 'vw_%' ORDER BY viewname /* 2 */;
DROP VIEW vw_union, vw_cte, vw_derived, vw_named, vw_star_again;
DROP TABLE vw_t;
