-- Interval columns: input forms, output form, comparison and ordering, arithmetic with dates
-- and timestamps, aggregates, window frames over a timestamp, and the catalog's type name.
-- Compared strictly: column names, column types and the text of every value.
-- compare: strict
CREATE TABLE iv (id int, d interval, ts timestamp);
INSERT INTO iv VALUES (1, '1 day 02:00', '2024-01-01 10:00'), (2, '3 months', '2024-01-02'), (3, 'P1D', '2024-01-03');
INSERT INTO iv VALUES (4, '-1 year', '2024-01-04'), (5, NULL, '2024-01-05'), (6, '25 hours', '2024-01-05 12:00');
INSERT INTO iv VALUES (7, '1 year 2 mons 3 days 04:05:06.5', '2024-01-06'), (8, '-01:30', '2024-01-07');
SELECT id, d FROM iv ORDER BY id;
SELECT id, d FROM iv ORDER BY d, id;
SELECT id FROM iv WHERE d > interval '1 day' ORDER BY id;
SELECT id FROM iv WHERE d = interval '24 hours' ORDER BY id;
SELECT id, ts + d AS moved, ts - d AS moved_back FROM iv ORDER BY id;
SELECT id, date '2024-01-31' + d AS from_date FROM iv WHERE id IN (2, 3) ORDER BY id;
SELECT id, d * 2 AS doubled, d / 2 AS halved FROM iv WHERE id IN (1, 2, 7) ORDER BY id;
SELECT sum(d) AS total FROM iv WHERE id IN (1, 3, 6);
SELECT min(d) AS shortest, max(d) AS longest FROM iv WHERE id IN (2, 4, 7);
SELECT avg(d) AS mean FROM iv WHERE id IN (1, 3);
UPDATE iv SET d = d + interval '1 hour' WHERE id = 3;
SELECT d FROM iv WHERE id = 3;
INSERT INTO iv VALUES (9, 'banana', '2024-01-08');
SELECT id, count(*) OVER (ORDER BY ts RANGE BETWEEN interval '1 day' PRECEDING AND CURRENT ROW) AS in_last_day FROM iv ORDER BY id;
SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'iv' ORDER BY ordinal_position;
SELECT format_type(atttypid, atttypmod) AS type_name FROM pg_attribute WHERE attrelid = 'iv'::regclass AND attname = 'd';
CREATE TABLE iv_copy AS SELECT id, d * 3 AS tripled FROM iv WHERE id IN (1, 2);
SELECT id, tripled FROM iv_copy ORDER BY id;
SELECT format_type(atttypid, atttypmod) AS type_name FROM pg_attribute WHERE attrelid = 'iv_copy'::regclass AND attname = 'tripled';

-- make_interval, positional and named; interval(p) above 6 is a plain interval.
SELECT make_interval(secs => 86404.0) AS secs_only, make_interval(days => 1, hours => 25) AS apart, make_interval(1, 2, 3, 4, 5, 6, 7.5) AS all_fields;
SELECT make_interval() AS zero, make_interval(weeks := 2) AS old_spelling, make_interval(months => -1, mins => 90) AS mixed;
SELECT make_interval(foo => 1) AS unknown_argument;
CREATE TABLE iv_precise (x interval(9));
INSERT INTO iv_precise VALUES ('1 day 2 hours'), ('-1 year 2 mons -3 days 04:00:00');
INSERT INTO iv_precise SELECT make_interval(secs => 1.5);
SELECT x FROM iv_precise ORDER BY x;
SELECT (interval '-1 month 90 minutes')::text AS as_text, 'x' || interval '2 days 1 second' AS concatenated, CAST(interval '1.5 seconds' AS text) AS cast_text;
SELECT x::text AS stored_as_text FROM iv_precise ORDER BY x;
