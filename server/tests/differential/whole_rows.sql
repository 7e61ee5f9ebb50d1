-- A relation's whole row as the argument of the JSON functions: row_to_json(t), to_json(t),
-- to_jsonb(t), json_agg(t), jsonb_agg(t) of a table alias, a table name and a derived table, and
-- row(a, b). Compared strictly: column names, types and the text of every value.
-- compare: strict
-- minimum: 20

CREATE TABLE wr (id int, name text, ts timestamp, tz timestamptz, n numeric(5,2), f float8, doc jsonb, j json, arr int[], b bytea, d date, ok bool);
INSERT INTO wr VALUES (1, 'a', '2024-01-01 10:00:00.5', '2024-01-01 10:00:00+00', 1.50, 1.5, '{"b":1,"a":[1,2]}', '{"z" : 1}', '{1,2}', '\x0102', '2024-01-02', true), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT row_to_json(t) FROM wr t ORDER BY id;
SELECT to_json(t) FROM wr t ORDER BY id;
SELECT to_jsonb(t) FROM wr t ORDER BY id;
SELECT to_json(wr) FROM wr ORDER BY id;
SELECT row_to_json(row(t.id, t.name)) FROM wr t ORDER BY id;
SELECT row_to_json(row(1, 'x'));
SELECT json_agg(t ORDER BY id) FROM wr t;
SELECT jsonb_agg(t ORDER BY id) FROM wr t;
SELECT json_agg(t.id ORDER BY id) FROM wr t;
SELECT to_json(t) FROM (SELECT 1 AS a, 'x' AS b) t;
SELECT row_to_json(t) FROM (VALUES (1, 2)) t;
SELECT json_agg(x) FROM (VALUES (1), (2)) x(a);
SELECT to_json(t) FROM wr t WHERE false;
SELECT to_jsonb(t) ->> 'name' AS name FROM wr t ORDER BY id;
SELECT t.id, json_agg(t) FROM wr t GROUP BY t.id ORDER BY t.id;
SELECT to_json(t), to_json(u) FROM wr t JOIN wr u ON t.id = u.id WHERE t.id = 2;
SELECT to_json(name) FROM wr WHERE id = 1;
SELECT to_json(ARRAY[1, 2]) AS arr;
SELECT to_json(ARRAY[ARRAY[1, 2], ARRAY[3, 4]]) AS nested;
SELECT to_json('x'::text) AS text_value;
SELECT to_json(1.50) AS numeric_value;
SELECT to_json('2024-01-01 10:00:00'::timestamp) AS ts_value;
SELECT row_to_json(t) FROM (SELECT id, doc FROM wr) t ORDER BY id;
