-- json, jsonb and uuid as PostgreSQL types (input, canonical output, type OIDs, operators and
-- functions), array text input and = ANY, set-returning functions in the select list, duplicate
-- output names, cast headings, and information_schema.columns with PostgreSQL's type names.
-- Compared strictly: column names, column types and the text of every value.
-- compare: strict
-- minimum: 190

-- uuid: input forms, output form, errors
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS u;
SELECT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid AS upper_case;
SELECT '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'::uuid AS braces;
SELECT 'a0eebc999c0b4ef8bb6d6bb9bd380a11'::uuid AS no_hyphens;
SELECT 'a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11'::uuid AS hyphen_groups;
SELECT 'not-a-uuid'::uuid;
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1'::uuid;
SELECT CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS uuid) AS cast_form;
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid AS same;
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid::text AS as_text;
SELECT NULL::uuid AS null_uuid;
SELECT length(gen_random_uuid()::text) AS random_length;

-- json: kept as written
SELECT '{"b": 2, "a": 1}'::json AS j;
SELECT '[1, 2,   3]'::json AS spaced;
SELECT '{"a":1}'::json -> 'a' AS arrow_on_json;
SELECT '{bad'::json;
SELECT 'null'::json AS json_null;

-- jsonb: canonical form
SELECT '{"b": 2, "a": 1}'::jsonb AS sorted_keys;
SELECT '{"bb": 1, "a": 2, "ccc": 3}'::jsonb AS shorter_keys_first;
SELECT '{"a": 1, "a": 2}'::jsonb AS last_duplicate_wins;
SELECT '[1,2,3]'::jsonb AS array_spacing;
SELECT '{"a":{"c":[true,false,null],"b":"x"}}'::jsonb AS nested;
SELECT '"text"'::jsonb AS scalar_string;
SELECT '42'::jsonb AS scalar_number;
SELECT 'true'::jsonb AS scalar_bool;
SELECT 'null'::jsonb AS scalar_null;
SELECT '{}'::jsonb AS empty_object;
SELECT '[]'::jsonb AS empty_array;
SELECT '"a\u0041"'::jsonb AS unicode_escape;
SELECT '{"k": "line\nbreak"}'::jsonb AS escaped_newline;
SELECT 'not json'::jsonb;
SELECT '{"a": }'::jsonb;
SELECT CAST('{"x": [1]}' AS jsonb) AS cast_form;
SELECT '{"a":1}'::jsonb::text AS jsonb_as_text;
SELECT NULL::jsonb AS null_jsonb;

-- jsonb operators
SELECT '{"a": {"b": 1}}'::jsonb -> 'a' AS get_object;
SELECT '{"a": {"b": 1}}'::jsonb -> 'a' -> 'b' AS get_chain;
SELECT '{"a": "x"}'::jsonb ->> 'a' AS get_text;
SELECT '{"a": 1}'::jsonb ->> 'a' AS get_text_number;
SELECT '{"a": null}'::jsonb ->> 'a' AS get_text_null;
SELECT '{"a": 1}'::jsonb -> 'missing' AS get_missing;
SELECT '[10, 20, 30]'::jsonb -> 1 AS get_index;
SELECT '[10, 20, 30]'::jsonb -> -1 AS get_negative_index;
SELECT '[10, 20, 30]'::jsonb -> 5 AS get_out_of_range;
SELECT '[10, 20, 30]'::jsonb ->> 0 AS get_index_text;
SELECT '{"a": [1, {"b": "c"}]}'::jsonb #> '{a,1}' AS path_get;
SELECT '{"a": [1, {"b": "c"}]}'::jsonb #>> '{a,1,b}' AS path_get_text;
SELECT '{"a": [1, {"b": "c"}]}'::jsonb #> '{a,9}' AS path_missing;
SELECT '{"a": 1, "b": [1, 2, 3]}'::jsonb @> '{"b": [3, 1]}'::jsonb AS contains_array_part;
SELECT '{"a": 1, "b": 2}'::jsonb @> '{"a": 2}'::jsonb AS contains_other_value;
SELECT '{"a": 1}'::jsonb <@ '{"a": 1, "b": 2}'::jsonb AS contained_in;
SELECT '[1, 2, [3, 4]]'::jsonb @> '[[4]]'::jsonb AS nested_array;
SELECT '["a", "b"]'::jsonb @> '"a"'::jsonb AS array_has_scalar;
SELECT '{"a": [1, 2]}'::jsonb @> '{"a": 1}'::jsonb AS nested_scalar_not_contained;
SELECT '{"a": 1, "b": 2}'::jsonb ? 'a' AS has_key;
SELECT '{"a": 1, "b": 2}'::jsonb ? 'z' AS lacks_key;
SELECT '["a", "b"]'::jsonb ? 'b' AS array_has_string;
SELECT '{"a": 1, "b": 2}'::jsonb ?| array['z', 'b'] AS has_any;
SELECT '{"a": 1, "b": 2}'::jsonb ?& array['a', 'b'] AS has_all;
SELECT '{"a": 1, "b": 2}'::jsonb ?& array['a', 'z'] AS lacks_one;
SELECT '{"a": 1}'::jsonb || '{"b": 2}'::jsonb AS concat_objects;
SELECT '{"a": 1}'::jsonb || '{"a": 3}'::jsonb AS concat_replaces;
SELECT '[1, 2]'::jsonb || '[3]'::jsonb AS concat_arrays;
SELECT '[1, 2]'::jsonb || '3'::jsonb AS concat_scalar;
SELECT '{"a": 1, "b": 2}'::jsonb - 'a' AS remove_key;
SELECT '["a", "b", "a"]'::jsonb - 'a' AS remove_string_elements;
SELECT '[1, 2, 3]'::jsonb - 1 AS remove_index;
SELECT '[1, 2, 3]'::jsonb - -1 AS remove_last;
SELECT '{"a": 1, "b": 2, "c": 3}'::jsonb - array['a', 'c'] AS remove_keys;
SELECT '{"a": 1}'::jsonb - 0;

-- jsonb numbers are numerics: every digit, the scale as written, no exponent
SELECT '[1e2, 1.50, 1.5e-3, -0.0, 0.00001e3, 1.2300e1, 1E+2, -0, 1e-20]'::jsonb AS numbers;
SELECT '{"k": 99998969694839.983485848}'::jsonb AS many_digits;
SELECT ('{"k": 99998969694839.983485848}'::jsonb ->> 'k')::numeric(23, 9) AS as_numeric;
SELECT '12345678901234567890123'::jsonb AS big_integer;
SELECT '{"a": 1.50}'::jsonb ->> 'a' AS keeps_scale, '{"a": 1.50}'::json ->> 'a' AS json_keeps_scale;
SELECT '{"a": 1e2}'::json ->> 'a' AS json_as_written;
SELECT '1e200000'::jsonb;
SELECT '1e-20000'::jsonb;
SELECT '[1.0, 2]'::jsonb @> '[2, 1]' AS contains_by_value;
SELECT '{"a": 1.0}'::jsonb = '{"a": 1}'::jsonb AS equal_by_value, '[1, 1]'::jsonb = '[1]'::jsonb AS not_equal, '{"a": 1}'::jsonb <> '{"a": 2}' AS differ;
SELECT to_jsonb(2.5::numeric(5, 2)) AS numeric_scale, to_jsonb(100::float8) AS float_integral, to_jsonb(0.1::float8) AS float_short;
SELECT to_jsonb('NaN'::float8) AS nan, to_jsonb(1e20::float8) AS float_big;
SELECT jsonb_build_object('n', 1.25::numeric(6, 3)) AS built;

-- arrays cast to text print as PostgreSQL prints them
SELECT array[1, 2]::text AS ints, cast(array['a', 'b c', NULL, ''] AS text) AS texts, array[true, false]::text AS flags;
SELECT array[array[1, 2], array[3, 4]]::text AS nested, array[timestamp '2024-01-01 10:00']::text AS stamps, array[1.5::float8, 2]::text AS floats;
SELECT array[1, 2]::varchar AS as_varchar, array[1, 2]::text || 'x' AS concatenated, array['2024-01-01'::date]::text AS dates;

-- jsonb functions
SELECT jsonb_typeof('{"a": 1}'::jsonb) AS object_type;
SELECT jsonb_typeof('[1]'::jsonb) AS array_type;
SELECT jsonb_typeof('"s"'::jsonb) AS string_type;
SELECT jsonb_typeof('1.5'::jsonb) AS number_type;
SELECT jsonb_typeof('false'::jsonb) AS boolean_type;
SELECT jsonb_typeof('null'::jsonb) AS null_type;
SELECT jsonb_array_length('[1, 2, 3]'::jsonb) AS three;
SELECT jsonb_array_length('{"a": 1}'::jsonb);
SELECT jsonb_set('{"a": 1, "b": 2}'::jsonb, '{b}', '5'::jsonb) AS set_existing;
SELECT jsonb_set('{"a": 1}'::jsonb, '{c}', '"new"'::jsonb) AS set_new_key;
SELECT jsonb_set('{"a": 1}'::jsonb, '{c}', '3'::jsonb, false) AS set_without_create;
SELECT jsonb_set('{"a": [1, 2]}'::jsonb, '{a,0}', '9'::jsonb) AS set_in_array;
SELECT jsonb_set('{"a": [1, 2]}'::jsonb, '{a,5}', '9'::jsonb) AS set_appends;
SELECT jsonb_extract_path('{"a": {"b": [1, 2]}}'::jsonb, 'a', 'b') AS extract_path;
SELECT jsonb_extract_path_text('{"a": {"b": "x"}}'::jsonb, 'a', 'b') AS extract_path_text;
SELECT to_jsonb(42) AS int_to_jsonb;
SELECT to_jsonb('he said "hi"'::text) AS text_to_jsonb;
SELECT to_jsonb(true) AS bool_to_jsonb;
SELECT to_jsonb('{"a": 1}'::jsonb) AS jsonb_to_jsonb;
SELECT jsonb_array_elements('[1, "two", {"three": 3}]'::jsonb) AS element;
SELECT jsonb_array_elements_text('[1, "two", null]'::jsonb) AS element_text;
SELECT jsonb_object_keys('{"b": 1, "a": 2, "ccc": 3}'::jsonb) AS key;
SELECT jsonb_array_elements('{"a": 1}'::jsonb);
SELECT jsonb_object_keys('[1]'::jsonb);

-- Tables with uuid, json, jsonb and array columns
CREATE TABLE docs (id uuid PRIMARY KEY, body jsonb, raw json, tags text[], n int[]);
INSERT INTO docs VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"kind": "a", "size": 3, "tags": ["x", "y"]}', '{"b":1, "a":2}', '{red,green}', '{1,2,3}');
INSERT INTO docs VALUES ('b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', '{"kind": "b", "size": 5}', '[1,2]', '{"with space",NULL}', '{}');
INSERT INTO docs VALUES ('not-a-uuid', '{}', '{}', '{}', '{}');
INSERT INTO docs VALUES ('c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13', 'not json', '{}', '{}', '{}');
INSERT INTO docs VALUES ('d0eebc99-9c0b-4ef8-bb6d-6bb9bd380a14', '{}', 'not json', '{}', '{}');
INSERT INTO docs VALUES ('e0eebc99-9c0b-4ef8-bb6d-6bb9bd380a15', '{}', '{}', 'no braces', '{}');
INSERT INTO docs VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{}', '{}', '{}', '{}');
SELECT id, body, raw, tags, n FROM docs ORDER BY id;
SELECT id FROM docs WHERE id = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';
SELECT id FROM docs WHERE body @> '{"kind": "b"}' ORDER BY id;
SELECT id FROM docs WHERE body ? 'tags' ORDER BY id;
SELECT body ->> 'kind' AS kind, (body ->> 'size')::int + 1 AS size_plus_one FROM docs ORDER BY id;
SELECT body -> 'tags' -> 0 AS first_tag FROM docs ORDER BY id;
SELECT tags[1] AS first, array_length(tags, 1) AS tag_count FROM docs ORDER BY id;
SELECT cardinality(n) AS numbers FROM docs ORDER BY id;
SELECT jsonb_array_elements_text(body -> 'tags') AS tag FROM docs ORDER BY tag;
SELECT jsonb_object_keys(body) AS key FROM docs ORDER BY key;
UPDATE docs SET body = body || '{"seen": true}'::jsonb WHERE id = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';
UPDATE docs SET body = jsonb_set(body, '{size}', '10') WHERE body ->> 'kind' = 'b';
/* 2 */ SELECT id, body FROM docs ORDER BY id;
UPDATE docs SET id = 'bad' WHERE body ->> 'kind' = 'a';
SELECT count(*) AS with_kind FROM docs WHERE body ? 'kind';
DELETE FROM docs WHERE body @> '{"seen": true}';
SELECT count(*) AS remaining FROM docs;

-- Array text input and ANY
SELECT '{1,2,3}'::int[] AS ints;
SELECT '{a,"b c",NULL}'::text[] AS texts;
SELECT '{}'::int[] AS empty_ints;
SELECT 2 = ANY('{1,2,3}'::int[]) AS found;
SELECT 5 = ANY('{1,2,3}'::int[]) AS not_found;
SELECT 'b' = ANY('{a,b}'::text[]) AS text_found;
SELECT 3 > ALL('{1,2}'::int[]) AS greater_than_all;
SELECT '{1,x}'::int[];
SELECT 'a,b'::text[];
SELECT array_length('{1,2,3}'::int[], 1) AS len;

-- Set-returning functions in the select list
SELECT generate_series(1, 3) AS g;
SELECT generate_series(1, 10, 4) AS stepped;
SELECT unnest('{7,8}'::int[]) AS u;
SELECT generate_series(1, 2) AS g, 'x' AS label;

-- Duplicate output names and headings
SELECT 1, 1;
SELECT 1 AS a, 2 AS a;
SELECT 'x' AS v, 'y' AS v, 'z' AS v;
SELECT count(*), count(*) FROM docs;
SELECT id, id FROM docs ORDER BY 1;
SELECT '1'::int;
SELECT '1.5'::numeric;
SELECT 1::text;
SELECT 'x'::varchar;
SELECT '2024-01-01'::date;
SELECT '{"a": 1}'::jsonb;
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid;
SELECT 1 = ANY('{1}'::int[]);

-- mod and sign
SELECT mod(7, 3) AS m;
SELECT mod(-7, 3) AS negative_m;
SELECT mod(7, 0);
SELECT sign(-2.5) AS negative_sign;
SELECT sign(0::float8) AS zero_sign;

-- information_schema.columns with PostgreSQL's type names
CREATE TABLE typed (id uuid, doc jsonb, raw json, name varchar(20), code char(3), price numeric(10,2), qty int NOT NULL DEFAULT 1, big bigint, small smallint, ratio float8, flag boolean, day date, at timestamp, at_tz timestamptz, labels text[], body text);
SELECT column_name, ordinal_position, is_nullable, data_type, udt_name FROM information_schema.columns WHERE table_name = 'typed' ORDER BY ordinal_position;
SELECT column_name, character_maximum_length FROM information_schema.columns WHERE table_name = 'typed' AND character_maximum_length IS NOT NULL ORDER BY ordinal_position;
SELECT column_name, numeric_precision, numeric_precision_radix, numeric_scale FROM information_schema.columns WHERE table_name = 'typed' AND numeric_precision IS NOT NULL ORDER BY ordinal_position;
SELECT column_name, column_default FROM information_schema.columns WHERE table_name = 'typed' AND column_default IS NOT NULL;
-- defaults as pg_get_expr prints them (psql's \d, SQLAlchemy's reflection)
CREATE TABLE doc_defaults (a int DEFAULT -1, b text DEFAULT 'x', c text DEFAULT $$y$$, d varchar(5) DEFAULT 'v', e char(2) DEFAULT 'ab', f text[] DEFAULT '{}', g uuid DEFAULT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', h jsonb DEFAULT '{"b": 1, "a": 2}', i int DEFAULT 1 + 2, j text DEFAULT 'a' || 'b', k text DEFAULT upper('x'), l boolean DEFAULT 't', m numeric(5, 2) DEFAULT -1.5, n date DEFAULT '2024-01-01', o text DEFAULT 'x'::text);
SELECT a.attname::text, pg_get_expr(d.adbin, d.adrelid) AS shown FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = 'doc_defaults'::regclass ORDER BY a.attnum;
DROP TABLE doc_defaults;
SELECT column_name, is_identity FROM information_schema.columns WHERE table_name = 'typed' AND column_name = 'id';
SELECT count(*) AS typed_columns FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'typed';
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = 'typed' AND a.attnum > 0 ORDER BY a.attnum;
INSERT INTO typed (id, doc, raw, name, code, price, big, small, ratio, flag, day, at, at_tz, labels, body) VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"z": 1, "a": 2}', '{"z": 1, "a": 2}', 'nm', 'abc', 12.5, 1, 2, 0.5, true, '2024-01-02', '2024-01-02 03:04:05', '2024-01-02 03:04:05+00', '{a}', 'b');
SELECT id, doc, raw, name, code, price, qty, labels FROM typed;
SELECT pg_typeof(id) AS id_type, pg_typeof(doc) AS doc_type FROM typed;

-- Functions people use
SELECT 'abcdef'::varchar(3) AS cut;
SELECT regexp_split_to_table('a  b c', '\s+') AS part;
SELECT regexp_split_to_array('a,b', ',') AS parts;
SELECT pg_is_in_recovery();
SELECT localtimestamp IS NOT NULL AS has_localtimestamp;
SELECT format('%s-%s', 1, 'x') AS formatted;
SELECT format('%I.%I', 'public', 'My Table') AS qualified;
SELECT format('%L', 'O''Reilly') AS literal;
SELECT to_char(date '2024-03-05', 'YYYY-MM-DD') AS iso_day;
SELECT to_char(timestamp '2024-03-05 14:07:09', 'HH24:MI:SS') AS clock;
SELECT to_char(timestamp '2024-03-05 14:07:09', 'HH12:MI AM') AS twelve_hour;
SELECT to_char(date '2024-03-05', 'DD-MON-YYYY') AS upper_month;
SELECT to_char(date '2024-03-05', 'FMDD Mon YYYY') AS fill_mode;
SELECT to_char(date '2024-05-05', 'Month|Day|Mon|Dy') AS padded_names;
SELECT to_char(date '2024-09-04', 'DAY, DD MONTH') AS padded_upper_names;
SELECT to_char(date '2024-05-05', 'FMMonth FMDay, Month DD') AS fill_and_padding;
SELECT to_date('05 May 2024', 'DD Month YYYY') AS parsed_month_name;
SELECT to_date('05/03/2024', 'DD/MM/YYYY') AS parsed_date;
SELECT interval '1 day' * 3 AS three_days;
SELECT interval '1 month' * 1.5 AS month_and_half;
SELECT interval '3 days' / 2 AS half;
SELECT 2 * interval '1 hour' AS two_hours;
SELECT age(timestamp '2001-04-10', timestamp '1957-06-13') AS lifetime;
SELECT jsonb_agg(x ORDER BY x DESC) AS agg FROM (VALUES (1), (2)) AS v(x);
SELECT json_build_object('a', 1, 'b', 'x') AS built;
SELECT jsonb_build_object('b', 1, 'a', 2) AS built_jsonb;

-- search_path
CREATE SCHEMA sp;
CREATE TABLE sp.only_here (x int);
SELECT current_schema(), current_schema;
SET search_path TO sp, public;
SELECT count(*) AS found FROM only_here;
SELECT current_schema(), current_schemas(false);
CREATE TABLE made_here (y int);
SELECT table_schema::text AS made_in FROM information_schema.tables WHERE table_name = 'made_here';
SET search_path TO nosuch;
SELECT current_schema() IS NULL AS no_schema;
CREATE TABLE nowhere (z int);
RESET search_path;
SELECT count(*) AS not_on_path FROM only_here;

-- DEALLOCATE
DEALLOCATE ALL;
DEALLOCATE nosuch;
