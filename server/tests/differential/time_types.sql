-- time and time with time zone: column types in every spelling, input and output text, precision,
-- casts from and to text and timestamps, comparisons and ORDER BY, interval arithmetic, keys,
-- ALTER TABLE, and the catalogs' names for the types.
-- Compared strictly: column names, column types and the text of every value.
-- compare: strict
-- minimum: 80

SET TIME ZONE 'UTC';

-- Literals and their text
SELECT '12:57:18'::time AS t;
SELECT '12:57:18.000396'::time AS micros;
SELECT '12:57:18.5'::time AS half;
SELECT '12:57:18.120'::time AS trailing_zero;
SELECT '00:00'::time AS midnight;
SELECT '1:05 pm'::time AS afternoon;
SELECT '12:57'::time AS no_seconds;
SELECT 'allballs'::time AS all_balls;
SELECT '2024-01-02 03:04:05'::time AS from_timestamp_text;
SELECT '12:57:18+05'::time AS zone_ignored;
SELECT time '10:00:00.25' AS typed_literal;
SELECT CAST('12:57:18' AS TIME) AS cast_form;
SELECT CAST('12:57:18' AS TIME WITHOUT TIME ZONE) AS long_form;
SELECT NULL::time AS null_time;
SELECT '12:57:18+00'::timetz AS tz;
SELECT '12:57:18.000396+00:00'::timetz AS tz_micros;
SELECT '12:57:18-05:30'::timetz AS tz_half_hour;
SELECT '12:57:18 +0200'::timetz AS tz_compact;
SELECT '12:57:18'::timetz AS tz_session_zone;
SELECT '12:57:18 UTC'::timetz AS tz_utc_word;
SELECT '2024-07-01 04:05:06 America/New_York'::timetz AS tz_named_summer;
SELECT '2024-01-01 04:05:06 America/New_York'::timetz AS tz_named_winter;
SELECT time with time zone '10:00:00.25+05:30' AS typed_tz;
SELECT CAST('12:57:18+01' AS TIME WITH TIME ZONE) AS cast_tz;
SELECT NULL::timetz AS null_tz;

-- Precision: rounded half up
SELECT '12:57:18.123456'::time(3) AS p3;
SELECT '12:57:18.5'::time(0) AS p0;
SELECT '12:57:18.4'::time(0) AS p0_down;
SELECT '12:57:18.123456+01'::timetz(2) AS tz_p2;

-- Errors
SELECT '25:00'::time;
SELECT '12:60'::time;
SELECT 'noon'::time;
SELECT ''::time;
SELECT 'banana'::timetz;
SELECT '12:00 Mars/Olympus'::timetz;

-- Casts to text and from timestamps
SELECT '12:57:18.5'::time::text AS t_text;
SELECT '12:57:18'::timetz::text AS tz_text;
SELECT CAST('12:57:18.000396'::time AS text) AS t_cast_text;
SELECT timestamp '2024-01-02 03:04:05.6'::time AS ts_time;
SELECT timestamptz '2024-01-02 03:04:05+02'::time AS tstz_time;
SELECT timestamptz '2024-01-02 03:04:05+02'::timetz AS tstz_timetz;
SELECT '12:57:18-05'::timetz::time AS tz_to_time;
SELECT '12:57:18'::time::timetz AS time_to_tz;

-- Comparisons and arithmetic
SELECT '12:57:18'::time = '12:57:18.000'::time AS equal;
SELECT '12:57:18'::time < '13:00'::time AS less;
SELECT '12:57:18'::time > '12:57:18.000001'::time AS greater;
SELECT '12:00+01'::timetz = '12:00+01:00'::timetz AS tz_equal;
SELECT '12:00:00'::time + interval '1 hour' AS plus_hour;
SELECT '23:30:00'::time + interval '1 hour' AS wraps;
SELECT '01:00:00'::time - interval '2 hours' AS wraps_back;
SELECT '12:00:00'::time - '10:30:00'::time AS difference;
SELECT extract(hour FROM '12:34:56'::time) AS hour_part;
SELECT date_trunc('hour', '12:34:56'::time) AS truncated;
SELECT pg_typeof('12:00'::time)::text AS time_type;
SELECT pg_typeof('12:00'::timetz)::text AS timetz_type;
SELECT pg_typeof('12:00'::time - '11:00'::time)::text AS difference_type;

-- Columns of every spelling
CREATE TABLE tt (id int, t time, t3 time(3), tw time without time zone, tz timetz, tzw time with time zone, tz0 time(0) with time zone);
INSERT INTO tt VALUES (1, '12:57:18.000396', '12:57:18.123456', '12:57:18', '12:57:18.000396+00:00', '12:57:18-05:30', '12:57:18.5+02');
INSERT INTO tt VALUES (2, '01:02:03', '01:02:03.0005', '23:59:59.999999', '01:02:03', '13:02:03+02', '00:00:00');
INSERT INTO tt VALUES (3, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM tt ORDER BY id;
SELECT id FROM tt WHERE t = '12:57:18.000396';
SELECT id FROM tt WHERE tw > '12:00' ORDER BY id;
SELECT id FROM tt WHERE tz = '12:57:18.000396+00';
SELECT id FROM tt WHERE tzw = '13:02:03+02:00';
SELECT id, t FROM tt ORDER BY t DESC NULLS LAST;
SELECT id, tz FROM tt ORDER BY tz NULLS FIRST;
SELECT min(t) AS earliest, max(tw) AS latest FROM tt;
SELECT count(DISTINCT t) AS distinct_times FROM tt;
SELECT t::text AS a, tz::text AS b FROM tt WHERE id = 1;
SELECT tzw::time AS local_part FROM tt WHERE id = 1;
SELECT t + interval '12 hours' AS shifted FROM tt WHERE id = 2;
UPDATE tt SET t = '13:00', tz = '13:00+01' WHERE id = 2;
SELECT t, tz FROM tt WHERE id = 2;
INSERT INTO tt (id, t) VALUES (4, '24:00:01');
INSERT INTO tt (id, tz) VALUES (5, 'not a time');

-- Keys and defaults
CREATE TABLE shifts (starts time PRIMARY KEY, zone_start timetz, ends time DEFAULT '17:00');
INSERT INTO shifts (starts, zone_start) VALUES ('09:00', '09:00+01'), ('13:00', '13:00+01');
INSERT INTO shifts (starts) VALUES ('09:00:00');
INSERT INTO shifts (starts, zone_start) VALUES ('09:00', '10:00+01') ON CONFLICT (starts) DO UPDATE SET zone_start = excluded.zone_start;
SELECT * FROM shifts ORDER BY starts;
DELETE FROM shifts WHERE starts = '13:00';
SELECT starts FROM shifts ORDER BY starts;

-- ALTER TABLE
ALTER TABLE shifts ADD COLUMN breaks time(0) with time zone;
UPDATE shifts SET breaks = '12:00:00.7-03';
ALTER TABLE shifts ALTER COLUMN ends TYPE timetz;
ALTER TABLE shifts ALTER COLUMN zone_start TYPE time;
SELECT starts, zone_start, ends, breaks FROM shifts ORDER BY starts;
CREATE TABLE counts (n bigint);
ALTER TABLE counts ALTER COLUMN n TYPE time;
CREATE TABLE stamps (s timestamp);
INSERT INTO stamps VALUES ('2024-01-02 03:04:05.25');
ALTER TABLE stamps ALTER COLUMN s TYPE time;
SELECT s FROM stamps;

-- Catalogs (their name and varchar columns cast to text, which Sluice's are)
SELECT column_name::text AS column_name, data_type::text AS data_type, udt_name::text AS udt_name, datetime_precision FROM information_schema.columns WHERE table_name = 'tt' ORDER BY ordinal_position;
SELECT attname::text AS attname, format_type(atttypid, atttypmod) AS shown FROM pg_attribute WHERE attrelid = 'tt'::regclass AND attnum > 0 ORDER BY attnum;
SELECT a.attname::text AS attname, t.typname::text AS typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = 'tt'::regclass AND a.attnum > 1 ORDER BY a.attnum;

-- 'now', 'today', 'tomorrow' read from a column are the session's local time and day (one of
-- these two zones is on another day than UTC at any hour).
CREATE TABLE tt_words (w text);
INSERT INTO tt_words VALUES ('today'), ('tomorrow'), ('yesterday');
SET TimeZone = 'Pacific/Kiritimati';
SELECT w, w::date - current_date AS days_from_today FROM tt_words ORDER BY w;
SELECT x::timestamp::date = current_date AS now_is_local FROM (VALUES ('now')) v(x);
SELECT x::timestamptz::date = current_date AS now_tz_is_local FROM (VALUES ('now')) v(x);
SET TimeZone = 'Etc/GMT+12';
SELECT w, w::date - current_date AS days_from_today FROM tt_words ORDER BY w /* 2 */;
SELECT x::timestamp::date = current_date AS now_is_local FROM (VALUES ('now')) v(x) /* 2 */;
SELECT x::timestamptz::date = current_date AS now_tz_is_local FROM (VALUES ('now')) v(x) /* 2 */;
RESET TimeZone;
