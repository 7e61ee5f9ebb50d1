-- COLLATE: Sluice compares text bytewise, which is PostgreSQL's "C" and "POSIX" order (the
-- reference cluster's default collation is C.UTF-8, also code point order). Expressions, ORDER
-- BY, column definitions, the catalogs that show a column's collation, and the errors for a
-- collation that does not exist and a type without collations.
-- minimum: 20

CREATE TABLE co (id int, name text COLLATE "C", label varchar(10) COLLATE pg_catalog."POSIX", note text COLLATE "default", plain text);
INSERT INTO co VALUES (1, 'b', 'x', 'n1', 'p1'), (2, 'B', 'y', 'n2', 'p2'), (3, 'a', 'z', 'n3', 'p3'), (4, '_', 'w', 'n4', 'p4');
SELECT name COLLATE "C" FROM co ORDER BY name COLLATE "C";
SELECT name FROM co ORDER BY name COLLATE "POSIX" DESC;
SELECT id FROM co WHERE name COLLATE "C" > 'a' ORDER BY id;
SELECT id FROM co WHERE name = 'b' COLLATE "C";
SELECT name COLLATE pg_catalog."C" AS qualified FROM co WHERE id = 1;
SELECT name COLLATE "default" FROM co WHERE id = 1;
SELECT max(name COLLATE "C") AS top FROM co;
SELECT 'a' COLLATE "C" < 'B' COLLATE "C" AS lower_after_upper;
SELECT 'abc' COLLATE "ucs_basic" AS ucs;
SELECT lower(name) COLLATE "C" FROM co ORDER BY 1;
SELECT name COLLATE "nonexistent" FROM co;
SELECT name COLLATE public."C" FROM co;
SELECT id COLLATE "C" FROM co;
SELECT '{}'::jsonb COLLATE "C";
-- COLLATE after a :: cast, and in ORDER BY with the other orderings' clauses
SELECT id::text COLLATE "C" AS id_text FROM co ORDER BY 1;
SELECT name::text COLLATE "C" AS cast_name FROM co WHERE name::text COLLATE "C" < 'b' ORDER BY 1;
SELECT label::varchar COLLATE "POSIX" || '!' AS shout FROM co ORDER BY 1 DESC;
SELECT name FROM co ORDER BY name::text COLLATE "C" DESC NULLS LAST, id;
SELECT name FROM co ORDER BY name COLLATE "default", id;
SELECT plain::text COLLATE "nonexistent" FROM co;
SELECT name FROM co ORDER BY name COLLATE "nonexistent";
SELECT id::int COLLATE "C" FROM co;
SELECT name::text COLLATE "C"::varchar AS recast FROM co ORDER BY 1;
SELECT name COLLATE "und-x-icu" FROM co;
CREATE TABLE co_bad_type (id int COLLATE "C");
CREATE TABLE co_bad_name (name text COLLATE "nonexistent");
CREATE TABLE co_icu (name text COLLATE "und-x-icu");
SELECT attname, attcollation FROM pg_attribute WHERE attrelid = 'co'::regclass AND attnum > 0 ORDER BY attnum;
SELECT column_name, collation_schema, collation_name FROM information_schema.columns WHERE table_name = 'co' ORDER BY ordinal_position;
SELECT a.attname, c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation WHERE a.attrelid = 'co'::regclass AND a.attnum > 0 ORDER BY a.attnum;
