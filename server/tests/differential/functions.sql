-- Date/time input as PostgreSQL reads it, timestamptz and the session's TimeZone, set-returning
-- functions in FROM (also lateral over the tables before them), number patterns of to_char and
-- to_number, more jsonb and array functions, and column headings.
-- Compared strictly: column names, column types and the text of every value.
-- compare: strict
-- minimum: 150

-- date/time input forms
SELECT '2024-01-01 10:00'::timestamp AS minutes_only;
SELECT '2024-01-01T10:00:05'::timestamp AS iso_t;
SELECT '2024-01-01 10:00:05.25'::timestamp AS fraction;
SELECT '2024-01-01 10:00:05.123456'::timestamp AS micros;
SELECT timestamp '2024-01-01 10:00' AS typed;
SELECT '0001-03-04 05:06:07'::timestamp AS year_one;
SELECT CAST('1000-01-01 00:00:00' AS TIMESTAMP WITHOUT TIME ZONE) AS year_thousand;
SELECT '0001-03-04 05:06:07+00'::timestamptz AS year_one_tz;
SELECT '2500-06-01 12:00'::timestamp AS after_2262;
SELECT '1000-01-01'::timestamp < '2024-01-01'::timestamp AS historic_compare;
SELECT '20240105'::date AS compact;
SELECT '1/8/1999'::date AS mdy;
SELECT 'January 8, 1999'::date AS month_name;
SELECT '8 Jan 1999'::date AS day_month;
SELECT date 'Feb 29, 2024' AS leap_day;
SELECT '2024-01-01 10:30'::date AS date_of_timestamp;
SELECT 'epoch'::timestamp AS epoch;
SELECT 'epoch'::date AS epoch_date;
SELECT 'EPOCH'::timestamptz AS epoch_tz;
SELECT 'yesterday'::date = current_date - 1 AS yesterday;
SELECT 'tomorrow'::date = current_date + 1 AS tomorrow;
SELECT 'today'::date = current_date AS today;
SELECT 'today'::timestamp = current_date::timestamp AS today_midnight;
SELECT 'now'::timestamptz <= now() + interval '1 minute' AS now_word;
SELECT time '10:30' AS time_minutes;
SELECT '10:30:15.5'::time AS time_fraction;
SELECT '1:05 pm'::time AS pm;
SELECT '12:00 am'::time AS midnight;
SELECT 'allballs'::time AS allballs;
SELECT '2024-02-30'::date AS bad_day;
SELECT '2024-13-01'::date AS bad_month;
SELECT 'banana'::date AS not_a_date;
SELECT '2024-01-01 25:00'::timestamp AS bad_hour;
SELECT ''::timestamp AS empty;
SELECT '2024-01-01 10:00 Mars/Olympus'::timestamptz AS bad_zone;

-- timestamptz: offsets, zone names, the session's zone
SELECT '2024-01-01 10:00:00+02'::timestamptz AS offset_hours;
SELECT '2024-01-01 10:00:00-05:30'::timestamptz AS offset_minutes;
SELECT '2024-01-01 10:00 UTC'::timestamptz AS utc_word;
SELECT '2024-01-01 10:00Z'::timestamptz AS zulu;
SELECT '2024-07-01 10:00 Europe/Paris'::timestamptz AS paris_summer;
SELECT '2024-01-01 10:00 Europe/Paris'::timestamptz AS paris_winter;
SELECT timestamptz '2024-01-01 10:00:00+02' AS typed_tz;
SELECT pg_typeof(timestamptz '2024-01-01 10:00:00+02') AS typeof_tz;
SELECT pg_typeof('2024-01-01'::timestamptz) AS typeof_cast_tz;
SELECT pg_typeof(now()) AS typeof_now;
SELECT '2024-01-01 10:00:00+02'::timestamp AS offset_dropped;
SELECT '2024-01-01 10:00'::timestamptz AS session_zone_input;
SET TIME ZONE 'America/New_York';
SHOW TimeZone;
SELECT '2024-01-01 10:00'::timestamptz AS new_york_input;
SELECT '2024-01-01 10:00:00+02'::timestamptz AS shown_in_new_york;
SELECT '2024-07-01 12:00:00+00'::timestamptz AS summer_time;
SELECT '2024-01-01 10:00'::timestamptz::timestamp AS local_time;
SELECT to_timestamp(0) AS epoch_in_new_york;
SET TIME ZONE 'Asia/Tokyo';
SELECT '2024-01-01 10:00'::timestamptz AS tokyo_input;
RESET TIME ZONE;
SHOW timezone;
SELECT '2024-01-01 10:00'::timestamptz AS after_reset;
SET TIME ZONE 'Europe/Paris';
RESET ALL;
SHOW time zone;
CREATE TABLE moments (id int, at timestamp, at_tz timestamptz, day date);
INSERT INTO moments VALUES (1, '2024-01-01 10:00', '2024-01-01 10:00+02', '20240105');
INSERT INTO moments VALUES (2, 'epoch', 'epoch', '1/8/1999');
INSERT INTO moments VALUES (3, '2024-01-01T09:08:07.5', '2024-06-01 12:00 Europe/Paris', 'January 8, 1999');
INSERT INTO moments (id, day) VALUES (4, '2024-13-45');
INSERT INTO moments (id, at) VALUES (5, 'soon');
SELECT * FROM moments ORDER BY id;
SET TIME ZONE 'US/Eastern';
SELECT id, at_tz FROM moments ORDER BY id;
INSERT INTO moments (id, at_tz) VALUES (6, '2024-03-01 08:00');
RESET timezone;
SELECT at_tz FROM moments WHERE id = 6;

-- set-returning functions in FROM
SELECT * FROM unnest(ARRAY[1, 2, 3]);
SELECT * FROM unnest(ARRAY[1, 2]) AS u;
SELECT u.x FROM unnest(ARRAY['a', 'b']) AS u(x);
SELECT * FROM unnest(ARRAY[1, 2], ARRAY['a', 'b', 'c']);
SELECT * FROM generate_series(1, 3);
SELECT * FROM generate_series(1, 3) g;
SELECT g FROM generate_series(1, 3) g;
SELECT * FROM generate_series(1, 3) AS g(n);
SELECT n * 2 AS doubled FROM generate_series(1, 3) AS g(n) ORDER BY n DESC;
SELECT * FROM generate_series(10, 1, -4);
SELECT * FROM generate_series(1::bigint, 2);
SELECT count(*) FROM generate_series(1, 100000) g;
SELECT * FROM jsonb_array_elements('[1, "a", {"b": null}]');
SELECT * FROM jsonb_array_elements_text('[1, "a", null]') AS e(x);
SELECT value FROM json_array_elements('[true, 2]') e;
SELECT * FROM jsonb_each('{"a": 1, "b": "x", "c": [1]}');
SELECT * FROM jsonb_each_text('{"a": 1, "b": "x", "c": null}');
SELECT key, value FROM json_each('{"a": [1, 2]}');
SELECT j.key FROM jsonb_each('{"b": 1, "a": 2}') AS j ORDER BY j.key;
SELECT * FROM jsonb_object_keys('{"b": 1, "aa": 2}');
SELECT * FROM jsonb_object_keys('{"b": 1}') AS k;
SELECT * FROM regexp_split_to_table('a b  c', ' +');
SELECT * FROM jsonb_each('[1]');
SELECT * FROM jsonb_array_elements('{"a": 1}');
CREATE TABLE baskets (id int, items int[], doc jsonb);
INSERT INTO baskets VALUES (1, '{1,2}', '{"k": [1, 2], "m": {"z": 1}}'), (2, '{3}', '{"k": []}'), (3, NULL, NULL);
SELECT id, x FROM baskets, unnest(items) x ORDER BY id, x;
SELECT id, u.x FROM baskets, unnest(items) AS u(x) ORDER BY id, x;
SELECT * FROM baskets b, unnest(b.items) AS item ORDER BY id, item;
SELECT id, g FROM baskets, generate_series(1, id) g ORDER BY id, g;
SELECT id, g FROM baskets CROSS JOIN LATERAL generate_series(1, id) g ORDER BY id, g;
SELECT id, g FROM baskets JOIN LATERAL generate_series(1, id) g ON g > 1 ORDER BY id, g;
SELECT baskets.id, e FROM baskets, jsonb_array_elements_text(doc -> 'k') e ORDER BY 1, 2;
SELECT baskets.id, e.value FROM baskets, jsonb_array_elements(doc -> 'k') e ORDER BY 1, 2;
SELECT id, k, v FROM baskets, jsonb_each(doc) AS j(k, v) ORDER BY id, k;
SELECT id, j.* FROM baskets LEFT JOIN LATERAL jsonb_each(baskets.doc -> 'm') j ON true ORDER BY id;
SELECT id, x FROM baskets LEFT JOIN LATERAL unnest(items) x ON true ORDER BY id, x;
SELECT count(*) AS n FROM baskets, unnest(items) x WHERE x > 1;
SELECT id, sum(x) AS total FROM baskets, unnest(items) x GROUP BY id ORDER BY id;
SELECT id, x FROM baskets, unnest(items) x WHERE id = 1 ORDER BY x;
SELECT * FROM unnest(ARRAY[1, 2]) WITH ORDINALITY;
SELECT u.x, u.n FROM unnest(ARRAY['p', 'q']) WITH ORDINALITY AS u(x, n) ORDER BY u.n DESC;
SELECT * FROM unnest(ARRAY[1, 2, 3], ARRAY['a']) WITH ORDINALITY;
SELECT * FROM generate_series(10, 16, 3) WITH ORDINALITY AS g(v, i);
SELECT * FROM generate_series(5, 1, -2) WITH ORDINALITY;
SELECT value, ordinality FROM jsonb_array_elements_text('["x","y"]') WITH ORDINALITY;
SELECT * FROM jsonb_each('{"a": 1, "b": [2]}') WITH ORDINALITY ORDER BY key;
SELECT baskets.id, e.value, e.ordinality FROM baskets, jsonb_array_elements_text(doc -> 'k') WITH ORDINALITY e ORDER BY 1, 3;
SELECT id, g, o FROM baskets CROSS JOIN LATERAL generate_series(1, id) WITH ORDINALITY AS s(g, o) ORDER BY 1, 2;

-- to_char and to_number with number patterns
SELECT to_char(123.456, '999D99') AS d;
SELECT to_char(1234567.8, 'FM9,999,999.00') AS grouped;
SELECT to_char(42, '0000') AS zeros;
SELECT to_char(42, 'S999') AS plus;
SELECT to_char(-42, 'S999') AS minus;
SELECT to_char(42, '999MI') AS mi_positive;
SELECT to_char(-42, '999MI') AS mi_negative;
SELECT to_char(-42, '9999') AS minus_default;
SELECT to_char(0.5, '9.99') AS no_leading_zero;
SELECT to_char(0.5, '0.99') AS leading_zero;
SELECT to_char(42, '9099') AS zero_from_here;
SELECT to_char(1, 'FM9.99') AS fm_point;
SELECT to_char(1234, '9,999') AS thousands;
SELECT to_char(12, '9,999') AS group_blank;
SELECT to_char(12345, '999') AS overflow;
SELECT to_char(12.345, '99.9') AS rounded;
SELECT to_char(-0.004, '9.99') AS negative_zero;
SELECT to_char(1234.5, '$9,999.99') AS dollars;
SELECT to_char(-1234.5, '$9,999.99') AS negative_dollars;
SELECT to_char(1234.5, 'L9G999D99') AS locale_marks;
SELECT to_char(-5, 'FM999') AS fm_negative;
SELECT to_char(5, 'FM000') AS fm_zeros;
SELECT to_char(-42, '999PR') AS brackets;
SELECT to_char(0, '999') AS zero;
SELECT to_char(0.0, 'FM9.99') AS fm_zero;
SELECT to_char(3.14159::float8, '9.999') AS float_value;
SELECT to_char(7::smallint, '00') AS small;
SELECT to_char(1234567.891, '9G999G999D999') AS all_marks;
SELECT to_char(42, '9.9EEEE') AS exponent;
SELECT to_number('12,345.67', '99G999D99') AS n;
SELECT to_number('-12.5', '999.9') AS negative;
SELECT to_number('$1,234', 'L9,999') AS currency;
SELECT to_number('  42', '9999') AS padded;
SELECT to_number('abc', '999') AS not_a_number;

-- jsonb and json functions
SELECT jsonb_strip_nulls('{"a": null, "b": [null, {"c": null}], "d": 1}') AS stripped;
SELECT jsonb_pretty('{"a": 1, "b": [1, {"c": null}], "e": {}, "f": []}') AS pretty;
SELECT jsonb_pretty('[]') AS pretty_empty;
SELECT json_object_agg(k, v) AS object FROM (VALUES ('a', 1), ('b', 2)) AS t(k, v);
SELECT jsonb_object_agg(k, v) AS object FROM (VALUES ('b', 1), ('a', 2), ('b', 3)) AS t(k, v);
SELECT json_object_agg(id, items) AS object FROM baskets WHERE id < 3;
SELECT jsonb_object_agg(id, doc) AS object FROM baskets WHERE id < 3;

-- arrays and other functions
SELECT array_remove(ARRAY[1, 2, 1], 1) AS removed;
SELECT array_position(ARRAY['a', 'b'], 'b') AS position;
SELECT pg_typeof(array_position(ARRAY['a', 'b'], 'b')) AS position_type;
SELECT date_part('year', date '2024-05-01') AS year;
SELECT pg_typeof(date_part('day', timestamp '2024-05-01 10:00')) AS part_type;
SELECT pg_sleep(0.01) AS slept;
SELECT pg_sleep(1000) AS too_long;
SELECT (ARRAY[1, 2, 3])[2];
SELECT (ARRAY[1, 2, 3])[2:3];
SELECT ARRAY[1, 2];
SELECT interval '90 minutes';
SELECT interval '1 day' * 3;
SELECT date '2024-01-31' + 1;
SELECT date '2024-01-31' - date '2024-01-01';

-- interval text as PostgreSQL reads it
SELECT interval '1 year 2 months 3 days 04:05:06' AS mixed;
SELECT interval 'P1Y2M' AS iso_months;
SELECT interval 'PT1H30M' AS iso_time;
SELECT interval 'P1DT2H' AS iso_both;
SELECT interval '1 day ago' AS ago;
SELECT interval '-1:30' AS negative_clock;
SELECT interval '1:30:15.5' AS clock_fraction;
SELECT interval '@ 2 hours' AS at_sign;
SELECT interval '3 mins' AS abbreviated;
SELECT interval '1 week 2 d' AS week_days;
SELECT interval '1.5 hours' AS fractional_hours;
SELECT '2 hours 30 minutes'::interval AS cast_text;
SELECT interval 'banana' AS not_an_interval;
SELECT now() - interval '1 day' < now() AS arithmetic;

-- LIKE with ESCAPE, and the headings of SQL's special forms
SELECT 'a%c' LIKE 'a#%c' ESCAPE '#' AS escaped_percent;
SELECT 'abc' LIKE 'a#%c' ESCAPE '#' AS escaped_no_match;
SELECT 'a\c' LIKE 'a\c' ESCAPE '#' AS backslash_plain;
SELECT 'A%C' ILIKE 'a#%c' ESCAPE '#' AS ilike_escaped;
SELECT 'a_c' LIKE 'a\_c' AS default_escape;
SELECT 'ab' LIKE 'a#' ESCAPE '#' AS dangling_escape;
SELECT position('b' in 'abc'), substr('abcdef', 2, 3), substring('abc' from 2);
SELECT trim('  x '), trim(leading 'x' from 'xxa'), trim(trailing 'x' from 'axx');
SELECT quote_literal('it''s'), quote_ident('A b'), quote_literal(NULL);
SHOW DateStyle;

-- names of unaliased expressions inside derived tables and CTEs, and catalog names
WITH w AS (SELECT x, count(1) FROM generate_series(1, 3) AS t(x) GROUP BY x) SELECT x, count FROM w ORDER BY x;
SELECT * FROM (SELECT lower('A'), upper('b'), 1 + 1) s;
SELECT s.max FROM (SELECT max(x) FROM generate_series(3, 5) AS t(x)) s;
SELECT * FROM (SELECT x, row_number() OVER (ORDER BY x), rank() OVER (ORDER BY x) FROM generate_series(7, 8) AS t(x)) s ORDER BY row_number;
SELECT 20::regtype::text AS bigint_name, 1043::regtype::text AS varchar_name, 1009::regtype::text AS array_name;
SELECT current_schemas(true) AS with_implicit, current_schemas(false) AS path_only;
SELECT pg_encoding_to_char(6) AS utf8, pg_encoding_to_char(0) AS ascii;
SELECT proname, proargnames FROM pg_proc WHERE proname = 'aclexplode';
SELECT proname, proallargtypes::regtype[]::text[] AS all_types FROM pg_proc WHERE proname = 'aclexplode';

-- FETCH FIRST|NEXT, as SQLAlchemy writes a limit for PostgreSQL
SELECT x FROM generate_series(1, 5) AS t(x) ORDER BY x OFFSET (1) ROWS FETCH FIRST (2) ROWS ONLY;
SELECT x FROM generate_series(1, 5) AS t(x) ORDER BY x DESC FETCH NEXT 1 ROW ONLY;
SELECT x FROM generate_series(1, 5) AS t(x) ORDER BY x FETCH FIRST ROWS ONLY;
SELECT x FROM generate_series(1, 5) AS t(x) ORDER BY x OFFSET 3 ROWS FETCH FIRST 10 ROWS ONLY;

-- LIKE ... ESCAPE with a pattern made at run time (SQLAlchemy's contains(autoescape=True))
SELECT s, s LIKE '%' || '50/%' || '%' ESCAPE '/' AS m FROM (VALUES ('a50%b'), ('a50xb'), ('a\b')) t(s) ORDER BY s;
SELECT 'ab%' LIKE 'ab' || '#%' ESCAPE '#' AS escaped, 'abc' LIKE 'ab' || '#' ESCAPE '#' AS dangling;
SELECT 'a\b' LIKE 'a' || '\b' ESCAPE '' AS no_escape, 'AB%' ILIKE 'ab' || '!%' ESCAPE '!' AS case_blind;
SELECT 'x' LIKE 'x' || '' ESCAPE 'ab' AS two_characters;

-- text compared with timestamp columns, also outside nanoseconds' years
CREATE TABLE historic (t timestamp, tz timestamptz, d date);
INSERT INTO historic VALUES ('0001-03-04 05:06:07', '0001-03-04 05:06:07+00', '0001-03-04'), ('2024-05-06 07:08:09.5', '2024-05-06 07:08:09.5+02', '2024-05-06');
SELECT t FROM historic WHERE t = '0001-03-04 05:06:07';
SELECT t FROM historic WHERE t < '1000-01-01';
SELECT t FROM historic WHERE '2000-01-01' < t;
SELECT t FROM historic WHERE t IN ('0001-03-04 05:06:07', '2024-05-06 07:08:09.5') ORDER BY t;
SELECT tz FROM historic WHERE tz = '0001-03-04 05:06:07+00';
SELECT d FROM historic WHERE d = '0001-03-04';
SELECT t FROM historic WHERE t = 'not a time';
DROP TABLE historic;

-- bitwise operators, ~ in the operand's type
CREATE TABLE bits (i2 smallint, i4 int, i8 bigint);
INSERT INTO bits VALUES (5, -6, 9223372036854775807), (NULL, 0, -9223372036854775808);
SELECT ~i2, ~i4, ~i8 FROM bits ORDER BY i4;
SELECT ~5, ~(-1), 1 & 3, 1 | 2, 5 # 1, 1 << 2, 16 >> 2;
SELECT ~'a'::text;
DROP TABLE bits;

-- div(numeric, numeric): the quotient truncated toward zero; avg of numerics at PostgreSQL's
-- division scale (16 significant digits)
SELECT div(7::numeric, 2::numeric) AS d1, div(-7.5, 2) AS d2, div(9, 4) AS d3, div(7.9::numeric, 2.1::numeric) AS d4;
SELECT div(1, 0::numeric) AS div_zero;
SELECT avg(x) AS avg_thirds FROM (VALUES (1::numeric), (2), (2)) v(x);
SELECT avg(x) AS avg_scaled FROM (VALUES (1.5::numeric), (2.25)) v(x);
SELECT avg(x) AS avg_big FROM (VALUES (100000001::numeric), (1), (1)) v(x);
SELECT avg(x) AS avg_negative FROM (VALUES (-1::numeric), (-2), (-2)) v(x);
SELECT avg(x) AS avg_typed FROM (VALUES (1::numeric(10,2)), (2)) v(x);
SELECT avg(x) AS avg_by_group FROM (VALUES (1, 1.5), (1, 2.5), (2, NULL::numeric)) v(g, x) GROUP BY g ORDER BY g;
-- avg of integers is a numeric; floor, ceil and trunc of a numeric have scale 0 (or trunc's).
SELECT avg(x) AS avg_ints, pg_typeof(avg(x)) AS avg_type, avg(x) + 0.5 AS plus_half, avg(x) * 2 AS doubled FROM (VALUES (1), (2)) v(x);
SELECT avg(x::int2) AS a2, avg(x::int8) AS a8 FROM (VALUES (1), (2), (2)) v(x);
SELECT g, avg(x) AS mean FROM (VALUES (1, 1), (1, 2), (1, 2), (2, 5)) v(g, x) GROUP BY g HAVING avg(x) > 1 ORDER BY avg(x);
SELECT avg(x) AS avg_null FROM (VALUES (NULL::int)) v(x);
SELECT floor(x) AS f, ceil(x) AS c, ceiling(x) AS c2, trunc(x) AS t, round(x) AS r, trunc(x, 1) AS t1, trunc(x, -1) AS tneg, floor(-x) AS fneg FROM (SELECT avg(n) AS x FROM (VALUES (1), (2), (2)) v(n)) s;
SELECT floor(2.5) AS f_lit, ceil(2.5) AS c_lit, trunc(2.55, 1) AS t_lit, floor(2.5::float8) AS f_float, floor(x) + 0.5 AS f_plus FROM (VALUES (1.25::numeric)) v(x);
-- Aggregates of one column with and without a cast.
SELECT sum(x) AS s, sum(x::bigint) AS s8, max(x) AS m, max(x::text) AS mt FROM (VALUES (1), (2)) v(x);
SELECT max(x) AS m, max(x::int8) AS m8 FROM (VALUES (1), (2)) v(x) GROUP BY x HAVING max(x::int8) > 1 ORDER BY max(x::int8);
-- Unconstrained numerics print their digits, not ten decimals.
CREATE TABLE num_t (a numeric, b numeric(8,2));
INSERT INTO num_t VALUES (1.5, 1.5), (2.25, 3), (100, 4.567), (-0.001, 0);
SELECT a, b, a + 1 AS a_plus, a * 3 AS a_times, sum(a) OVER () AS total FROM num_t ORDER BY a;
SELECT 10::numeric AS ten, 1e3::numeric AS thousand, 0::numeric AS zero, -2.5::numeric AS neg, 1::numeric / 2 AS half;
SELECT 1.50::numeric AS kept_scale, a * b AS product FROM num_t ORDER BY a;
SELECT 0.000000000001::numeric AS tiny, 1.123456789012345::numeric AS many_decimals, 1 / 0.000000000001::numeric AS by_tiny, 0.000000000001::numeric + 1 AS tiny_plus;

-- Window frames with offsets: RANGE over numbers, floats and dates (an interval offset written
-- as a cast, as psycopg sends a timedelta).
CREATE TABLE win_t (col1 int, col2 int, col3 float8);
INSERT INTO win_t SELECT g, g * 5, g + 0.5 FROM generate_series(1, 30) g;
SELECT max(col1) OVER (PARTITION BY col2 ORDER BY col2 RANGE BETWEEN 0 PRECEDING AND 1 FOLLOWING) AS m FROM win_t WHERE col1 < 20;
SELECT max(col3) OVER (PARTITION BY col3 ORDER BY col3 RANGE BETWEEN 1.25 PRECEDING AND 1.25 FOLLOWING) AS m FROM win_t WHERE col1 < 20;
SELECT col1, sum(col1) OVER (ORDER BY col2 RANGE BETWEEN 10 PRECEDING AND 5 FOLLOWING) AS s FROM win_t ORDER BY col1;
CREATE TABLE win_d (value int, oder date);
INSERT INTO win_d VALUES (1, '2025-10-01'), (2, '2025-10-02'), (3, '2025-10-10'), (4, '2025-10-13'), (5, '2025-10-16');
SELECT sum(value) OVER (ORDER BY oder RANGE BETWEEN '7 days 0.000000 seconds'::interval PRECEDING AND CURRENT ROW) AS s FROM win_d ORDER BY oder;
SELECT sum(value) OVER (ORDER BY oder RANGE BETWEEN INTERVAL '3 days' PRECEDING AND INTERVAL '1 day' FOLLOWING) AS s2 FROM win_d ORDER BY oder;
