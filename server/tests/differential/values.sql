-- Values as PostgreSQL computes and prints them: literals, integer and float arithmetic,
-- division, casts and rounding, math functions and their errors, text forms of numbers and
-- times. Compared strictly: column names, column types and the text of every value.
-- compare: strict
-- minimum: 150

-- Literals and their types
SELECT 1 AS one;
SELECT 2147483648 AS big;
SELECT 9223372036854775807 AS max_bigint;
SELECT 1.5 AS numeric_literal;
SELECT 0.1 + 0.2 AS sum_of_decimals;
SELECT 1.50 AS keeps_scale;
SELECT -7 AS negative;
SELECT 1e3 AS exponent_literal;
SELECT 'abc' AS text_literal;
SELECT true AS t, false AS f;
SELECT NULL::int AS null_int;
SELECT pg_typeof(1) AS int_type;
SELECT pg_typeof(2147483648) AS bigint_type;
SELECT pg_typeof(1.5) AS numeric_type;
SELECT pg_typeof(1.5::float8) AS float8_type;
SELECT pg_typeof(1::int2) AS int2_type;
SELECT pg_typeof(true) AS bool_type;
SELECT pg_typeof(date '2024-01-01') AS date_type;
SELECT pg_typeof(timestamp '2024-01-01 10:00:00') AS timestamp_type;
SELECT pg_typeof('x'::text) AS text_type;

-- Integer arithmetic and overflow
SELECT 9223372036854775807 + 1;
SELECT -9223372036854775807 - 2;
SELECT 9223372036854775807 * 2;
SELECT 2147483647 + 1;
SELECT 2147483647::int + 1;
SELECT 2147483647::int8 + 1 AS widened;
SELECT 32767::int2 + 1::int2;
SELECT 32767::int2 + 1 AS smallint_plus_int;
SELECT 100::int2 * 100::int2 AS fits_smallint;
SELECT 1000::int2 * 1000::int2;
SELECT (-2147483647 - 1)::int / -1;
SELECT 46341::int * 46341::int;
SELECT 3037000500 * 3037000500;
SELECT 5 + 3 AS plus, 5 - 3 AS minus, 5 * 3 AS times;
SELECT 7 / 2 AS int_div, -7 / 2 AS neg_int_div, 7 % 3 AS modulo, -7 % 3 AS neg_modulo;
SELECT 7::int8 / 2::int8 AS bigint_div;
SELECT 1 / 0;
SELECT 1::int8 / 0::int8;
SELECT 5 % 0;
SELECT 5::int2 % 0::int2;
SELECT (-9223372036854775807 - 1) % -1 AS min_mod_minus_one;
SELECT 0 / 5 AS zero_div;
SELECT abs(-5) AS abs_int;
SELECT -(5) AS negated;

-- Numeric (decimal) arithmetic
SELECT 1.0 / 0;
SELECT 1.5 / 0.0;
SELECT 10 % 0.0;
SELECT 1.1 + 2.2 AS decimal_sum;
SELECT 1.5 * 2 AS decimal_times_int;
-- Numeric division: PostgreSQL's result scale (at least 16 significant digits, select_div_scale)
SELECT 1/3::numeric AS third, 10::numeric/4 AS quarter, 7.0/2 AS half, 1::numeric/3*3 AS almost_one;
SELECT 2/3.0 AS rounded_up, -2/3.0 AS negative_rounded, 1000000/3.0 AS large_quotient, 0.001/7 AS small_quotient;
SELECT 1/30000::numeric AS smaller_quotient, 1.50/0.5 AS exact_quotient, 10.123456789012345678/3 AS long_dividend;
SELECT round(1/3::numeric, 2) AS rounded_third, (2/3::numeric)::numeric(10,4) AS typed_third;
CREATE TABLE v_division (a numeric(10,2), b int);
INSERT INTO v_division VALUES (100.00, 3), (5.50, 2), (-7.00, 4);
SELECT a / b AS per_row, a / 3 AS by_constant, b / 2.0 AS int_by_numeric FROM v_division ORDER BY a;
SELECT a / 0 FROM v_division;
SELECT avg(a) AS numeric_avg FROM v_division;
SELECT 2.50 * 1.5 AS decimal_product;
SELECT 10.25 - 0.25 AS decimal_difference;
SELECT 1.5 + 1 AS decimal_plus_int;
SELECT -1.5 AS negative_decimal;
SELECT 123.456::numeric(6,2) AS rounded_numeric;
SELECT 2.345::numeric(4,2) AS half_up;
SELECT (-2.345)::numeric(4,2) AS negative_half_up;
SELECT 0.005::numeric(3,2) AS small_half_up;
SELECT 123.45::numeric(4,2);
SELECT 99.995::numeric(4,2);
SELECT 12345::numeric(5,0) AS whole_numeric;
SELECT 1.5::numeric AS plain_numeric;
SELECT 1::numeric(10,2) AS int_to_numeric;
SELECT 0.1::numeric(3,1) + 0.2::numeric(3,1) AS exact_sum;

-- Float arithmetic and errors
SELECT 1.0::float8 / 0;
SELECT 1::float8 / 0::float8;
SELECT 0::float8 / 0::float8;
SELECT 1e308::float8 * 10;
SELECT 1e-308::float8 / 1e10::float8;
SELECT 0.1::float8 + 0.2::float8 AS float_sum;
SELECT 1::float8 / 3 AS third;
SELECT 2::float8 * 3.5::float8 AS float_product;
SELECT 1.5::float4 * 2 AS float4_product;
SELECT 20.0::float8 AS twenty;
SELECT 1e20::float8 AS e20;
SELECT 1e15::float8 AS e15;
SELECT 1e14::float8 AS e14;
SELECT 123456789012345::float8 AS fifteen_digits;
SELECT 1.5e-7::float8 AS tiny;
SELECT 0.0001::float8 AS ten_thousandth;
SELECT 0.00001::float8 AS hundred_thousandth;
SELECT -1.25::float8 AS negative_float;
SELECT 'infinity'::float8 AS inf;
SELECT '-infinity'::float8 AS neg_inf;
SELECT 'NaN'::float8 AS nan;
SELECT 1234567::float4 AS float4_exponent;
SELECT 123456::float4 AS float4_fixed;
SELECT 0.1::float4 AS float4_tenth;
SELECT 3.14159::real AS real_pi;
SELECT 1e-5::float8 * 1e-5::float8 AS small_product;
SELECT 'infinity'::float8 + 1 AS inf_plus_one;
SELECT 'infinity'::float8 * 0;

-- Casts between numbers: rounding and range
SELECT 2.5::int AS numeric_half, 3.5::int AS numeric_three_half, (-2.5)::int AS numeric_neg_half;
SELECT 2.5::float8::int AS float_half_even, 3.5::float8::int AS float_odd_half, (-2.5)::float8::int AS float_neg_half;
SELECT 2.4::int AS down, 2.6::int AS up;
SELECT 0.5::int2 AS smallint_half;
SELECT 1.5::int8 AS bigint_half;
SELECT 3000000000::int;
SELECT 70000::int2;
SELECT 2147483647.5::int;
SELECT 1e10::float8::int;
SELECT 'NaN'::float8::int;
SELECT 'infinity'::float8::int8;
SELECT 9.5::float4::int AS float4_half_even;
SELECT 42::int8::int2 AS narrowed;
SELECT (-32768)::int8::int2 AS smallest_smallint;
SELECT (-32769)::int8::int2;
SELECT 1::bool AS int_to_bool;
SELECT true::int AS bool_to_int;
SELECT 7::float8 AS int_to_float;
SELECT 7::numeric / 2 AS numeric_div_int;

-- Casts from text
SELECT '42'::int AS text_to_int;
SELECT ' 42 '::int AS padded_text_to_int;
SELECT 'abc'::int;
SELECT '4.5'::int;
SELECT '99999999999'::int;
SELECT '1.5'::numeric AS text_to_numeric;
SELECT '1e3'::float8 AS text_to_float;
SELECT 'true'::bool AS text_true, 'no'::bool AS text_no;
SELECT 'maybe'::bool;
SELECT '2024-02-30'::date;
SELECT '2024-01-01'::date AS text_to_date;
SELECT 12::text AS int_to_text;
SELECT 1.50::text AS numeric_to_text;
SELECT 2.5::float8::text AS float_to_text;

-- Inserting numbers into typed columns
CREATE TABLE v_ints (i int, s smallint, b bigint);
INSERT INTO v_ints VALUES (3.7, 1, 1);
INSERT INTO v_ints VALUES (2.5, 2.5, 2.5);
INSERT INTO v_ints VALUES (-2.5, -1.5, -0.5);
INSERT INTO v_ints VALUES (1, 40000, 1);
INSERT INTO v_ints VALUES (3000000000, 1, 1);
INSERT INTO v_ints VALUES (1.5::float8, 2.5::float8, 3.5::float8);
SELECT i, s, b FROM v_ints ORDER BY i, s, b;
SELECT i + 1 AS next_i FROM v_ints ORDER BY next_i;
SELECT sum(i) AS total, pg_typeof(sum(i)) AS total_type FROM v_ints;
SELECT i * 1000000000 FROM v_ints;
UPDATE v_ints SET i = i * 2147483647;
UPDATE v_ints SET s = s * 1000;
CREATE TABLE v_nums (n numeric(5,2), f float8, r real);
INSERT INTO v_nums VALUES (1.005, 0.1, 0.1);
INSERT INTO v_nums VALUES (2.345, 1e20, 1234567);
INSERT INTO v_nums VALUES (1234.5, 20, 20);
INSERT INTO v_nums VALUES (-0.125, -1.5e-7, 0.5);
SELECT n, f, r FROM v_nums ORDER BY n;
SELECT n * 2 AS doubled FROM v_nums ORDER BY doubled;
SELECT f / 0 FROM v_nums;
SELECT max(f) AS max_f, min(r) AS min_r FROM v_nums;

-- Math functions
SELECT ln(0);
SELECT ln(-1);
SELECT log(0);
SELECT log10(-5);
SELECT sqrt(-1);
SELECT sqrt(4::float8) AS root;
SELECT power(0::float8, -1);
SELECT power((-8)::float8, 0.5);
SELECT power(2::float8, 10) AS two_to_ten;
SELECT exp(1000::float8);
SELECT exp(0::float8) AS exp_zero;
SELECT ln(1::float8) AS ln_one;
SELECT floor(2.7::float8) AS floor_float, ceil(2.1::float8) AS ceil_float;
SELECT round(2.5::float8) AS round_float;
SELECT round(2.5) AS round_numeric, round(-2.5) AS round_negative_numeric;
SELECT round(2.345, 2) AS round_to_two;
SELECT trunc(2.7::float8) AS trunc_float;
SELECT mod(7, 3) AS mod_fn;
SELECT mod(7, 0);
SELECT abs(-2.5::float8) AS abs_float;
SELECT sign(-3::float8) AS sign_float;
SELECT greatest(1, 5, 3) AS greatest_int, least(1, 5, 3) AS least_int;
SELECT pi() AS pi;

-- Times as text
SELECT timestamp '2024-01-01 10:00:00' AS ts;
SELECT timestamp '2024-01-01 10:00:00.5' AS ts_half;
SELECT timestamp '2024-01-01 10:00:00.123456' AS ts_micros;
SELECT timestamp '2024-01-01 10:00' AS ts_no_seconds;
SELECT timestamptz '2024-01-01 10:00:00+00' AS tstz;
SELECT timestamptz '2024-01-01 10:00:00+02' AS tstz_offset;
SELECT date '2024-01-01' AS d;
SELECT time '10:00:00' AS t10;
SELECT time '10:00:00.25' AS t_quarter;
SELECT date '2024-01-01' + 1 AS next_day;
SELECT date '2024-03-01' - date '2024-02-01' AS days_between;
SELECT timestamp '2024-01-01 10:00:00' + interval '1 hour' AS plus_hour;
SELECT extract(year FROM date '2024-05-06') AS y;
SELECT date_trunc('month', timestamp '2024-05-06 07:08:09') AS month_start;
CREATE TABLE v_times (ts timestamp, tz timestamptz);
INSERT INTO v_times VALUES ('2024-01-01 10:00:00', '2024-01-01 10:00:00.5+00');
INSERT INTO v_times VALUES ('2024-06-01 12:30:00.25', '2024-06-01 12:30:00-02');
SELECT ts, tz FROM v_times ORDER BY ts;
SET TIME ZONE 'America/New_York';
SELECT tz AS new_york FROM v_times ORDER BY tz;
SELECT timestamptz '2024-07-01 12:00:00+00' AS summer_in_new_york;
SET TIME ZONE 'Asia/Kolkata';
SELECT tz AS kolkata FROM v_times ORDER BY tz;
SET TIME ZONE 'UTC';
SELECT tz AS utc_again FROM v_times ORDER BY tz;

-- DateStyle: output of dates and timestamps in each style, and the order dates are read in
SET timezone = 'America/New_York';
SET DateStyle = 'SQL, DMY';
SELECT date '2024-01-02' AS d, timestamp '2024-01-02 10:00:00' AS ts, timestamp '2024-01-02 10:00:00.25' AS ts_fraction, timestamptz '2024-07-02 10:00:00+00' AS tstz;
SELECT '02/01/2024'::date AS day_first, date '13/01/2024' AS unambiguous;
SELECT current_setting('DateStyle') AS sql_dmy_style;
SET DateStyle = 'SQL, MDY';
SELECT date '2024-01-02' AS sql_mdy_d, timestamp '2024-01-02 10:00:00' AS ts, timestamptz '2024-07-02 10:00:00+00' AS tstz;
SELECT '02/01/2024'::date AS month_first;
SELECT date '13/01/2024';
SET DateStyle = 'Postgres, MDY';
SELECT date '2024-01-02' AS d, timestamp '2024-01-02 10:00:00.5' AS ts, timestamptz '2024-01-02 10:00:00+00' AS tstz;
SET DateStyle = 'Postgres, DMY';
SELECT date '2024-01-02' AS postgres_dmy_d, timestamp '2024-01-02 10:00:00' AS ts, timestamptz '2024-07-02 10:00:00+00' AS tstz;
SET DateStyle = 'German';
SELECT current_setting('DateStyle') AS german_style;
SELECT date '2024-01-02' AS german_d, timestamp '2024-01-02 10:00:00' AS ts, timestamptz '2024-07-02 10:00:00+00' AS tstz, '02.01.2024'::date AS german_input;
SET DateStyle = 'SQL';
SELECT current_setting('DateStyle') AS style_keeps_order;
SET DateStyle = 'banana';
-- DateStyle's order on write: text stored into date and timestamp columns (a timestamptz
-- without an offset in the session's zone, New York here)
SET datestyle TO 'ISO, DMY';
CREATE TABLE v_dmy (n int, d date, ts timestamp, tz timestamptz);
INSERT INTO v_dmy VALUES (1, '02/01/2024', '03/01/2024 10:00', '04/01/2024 10:00');
INSERT INTO v_dmy (n, d) VALUES (2, '13/01/2024');
UPDATE v_dmy SET d = '05/01/2024' WHERE n = 2;
SELECT n, d, ts, tz FROM v_dmy ORDER BY n;
SET DateStyle TO 'German';
INSERT INTO v_dmy (n, d) VALUES (3, '06.01.2024');
INSERT INTO v_dmy (n, d) VALUES (4, '01/13/2024');
SELECT n, d FROM v_dmy WHERE n >= 3 ORDER BY n;
SET datestyle TO 'SQL, MDY';
INSERT INTO v_dmy (n, d) VALUES (5, '02/01/2024');
SELECT n, d FROM v_dmy WHERE n = 5;
-- DateStyle's order on read: text cast to date, timestamp and timestamptz (a text column,
-- an untyped literal compared with a date/time column, a prepared statement's parameters at
-- EXECUTE time), and PostgreSQL's errors for text that is no date (22007) or out of range
-- (22008); YMD reads the year first
SET DateStyle = 'ISO, DMY';
CREATE TABLE v_read (n int, x text, d date, ts timestamp, tz timestamptz);
INSERT INTO v_read VALUES (1, '05/01/2024', '2024-01-05', '2024-01-05 10:00', '2024-01-05 10:00-05'), (2, '13/01/2024 08:30', '2024-01-13', '2024-01-13 08:30', '2024-01-13 08:30-05');
SELECT n, x::date AS cast_day_first FROM v_read ORDER BY n;
SELECT n, CAST(x AS timestamp) AS ts_day_first, x::timestamptz AS tz_day_first FROM v_read ORDER BY n;
SELECT n FROM v_read WHERE d = '05/01/2024';
SELECT n FROM v_read WHERE d IN ('13/01/2024', '14/01/2024');
SELECT n FROM v_read WHERE d BETWEEN '01/01/2024' AND '10/01/2024';
SELECT n FROM v_read WHERE ts = '13/01/2024 08:30';
SELECT n FROM v_read WHERE tz = '05/01/2024 10:00';
SELECT n, d > '06/01/2024' AS after_sixth FROM v_read ORDER BY n;
SELECT '05/01/2024 10:00'::timestamptz AS literal_tz, '05/01/2024 10:00'::timestamp AS literal_ts;
SELECT x::date AS bad_day FROM (VALUES ('31/02/2024')) v(x);
SELECT x::date AS not_a_date FROM (VALUES ('garbage')) v(x);
SELECT x::timestamp AS not_a_timestamp FROM (VALUES ('05/01/2024 25:00')) v(x);
SELECT x::timestamptz AS not_a_timestamptz FROM (VALUES ('banana')) v(x);
SELECT n FROM v_read WHERE d = '32/01/2024';
SELECT n FROM v_read WHERE d = 'soon';
PREPARE v_on_day(date) AS SELECT n FROM v_read WHERE d = $1;
EXECUTE v_on_day('05/01/2024');
PREPARE v_at(timestamptz) AS SELECT n, $1 AS at FROM v_read WHERE tz = $1;
EXECUTE v_at('13/01/2024 08:30');
EXECUTE v_on_day('31/01/2024x');
SET DateStyle TO 'ISO, MDY';
EXECUTE v_on_day('01/13/2024');
SELECT n, x::date AS cast_month_first FROM v_read WHERE n = 1;
SELECT n FROM v_read WHERE d = '01/05/2024';
SELECT x::date AS month_out_of_range FROM v_read WHERE n = 2;
SET DateStyle = 'ISO, YMD';
SELECT '24/01/05'::date AS ymd_literal, '05/01/24'::date AS ymd_two_digit, 'jan-05-24'::date AS ymd_named_month;
SELECT x::date AS ymd_cast FROM (VALUES ('24/01/13')) v(x);
SELECT n FROM v_read WHERE d = '24/01/13';
SELECT x::date AS ymd_day_out_of_range FROM v_read WHERE n = 1;
SELECT '24-jan-05'::date AS ymd_day_after_month, '05/jan/2024'::date AS ymd_long_year;
SET DateStyle TO 'ISO, DMY';
SELECT '24-jan-05'::date AS dmy_named_month, 'jan-05-24'::date AS dmy_month_first;
DROP TABLE v_read;
SET DateStyle = 'ISO, MDY';
SET timezone TO 'UTC';
SELECT timestamp '2024-01-02 10:00:00' AS iso_again;

-- Multidimensional arrays print as PostgreSQL prints them (elements quoted where needed).
SELECT ARRAY[ARRAY['a', 'b'], ARRAY['c d', NULL]] AS text_matrix, ARRAY[ARRAY[1, 2], ARRAY[3, 4]] AS int_matrix;
SELECT ARRAY[ARRAY['x,y', '"q'], ARRAY['', 'null']] AS quoted_matrix, ARRAY[ARRAY[true, false]] AS bool_matrix;
CREATE TABLE v_matrix (id int, m text[][]);
INSERT INTO v_matrix VALUES (1, ARRAY[ARRAY['a', 'b'], ARRAY['c', 'd']]), (2, NULL);
SELECT id, m FROM v_matrix ORDER BY id;
-- ... and read from PostgreSQL's array text, in a cast and into a column.
SELECT '{{1,2},{3,4}}'::int[] AS int_text, ('{{1,2},{3,4}}'::int[])[2][1] AS element, '{{a,"b c"},{NULL,d}}'::text[] AS text_text;
SELECT '{}'::int[] AS empty_array, '{{{1}}}'::int[] AS three_dimensions, ' { { 7 } } '::int[] AS spaced;
SELECT '{{1,2},{3}}'::int[] AS ragged;
SELECT '{{1,x},{3,4}}'::int[] AS bad_element;
SELECT '{{1},2}'::int[] AS mixed;
INSERT INTO v_matrix VALUES (3, '{{e,f},{g,"h i"}}'), (4, '{}'), (5, '{{NULL}}');
SELECT id, m, m[2][2] AS corner FROM v_matrix ORDER BY id;

-- float is double precision, float(1..24) real; a float beside a numeric is computed as a float.
SELECT CAST('1234567.89' AS FLOAT) AS float_is_double, '1.1'::float(10) AS float10_is_real, '2.5'::float(30) AS float30;
SELECT '1e300'::float8 > 1.5 AS float_beside_numeric, 2.5 * 2::float8 AS float_times_numeric, 1.5::float4 + 1.5 AS real_plus_numeric;
SELECT x FROM (VALUES (CAST('99998969694839.98' AS float8))) v(x) WHERE x > 1234567.89;

-- In INSERT ... VALUES, a quoted literal beside other expressions takes its column's type.
CREATE TABLE v_mixed (t timestamptz, n numeric(5,2), i interval, d date, k int);
INSERT INTO v_mixed (t) VALUES ('2024-01-01 10:00+00'), (timestamptz '2024-02-01 00:00+00');
INSERT INTO v_mixed (i, d) VALUES ('1 day', current_date - 1), (interval '2 days', '2024-03-01');
INSERT INTO v_mixed VALUES ('2024-01-05 00:00+00', '1.5', '3 hours', '2024-01-01', 1), (NULL, 2.25, NULL, NULL, 2 + 1);
INSERT INTO v_mixed (k) VALUES ('7'), (1 + 1);
INSERT INTO v_mixed (k) VALUES ('x'), (1 + 1);
SELECT t, n, i, d, k FROM v_mixed WHERE d IS NULL OR d < '2024-06-01' ORDER BY k, t;
-- A VALUES query's quoted literal takes the type the column's other rows write out.
SELECT d FROM (VALUES ('1 day'), (interval '2 days'), (NULL)) v(d) ORDER BY d;
SELECT x FROM (VALUES ('2024-01-02'::date), ('2024-01-01')) v(x) ORDER BY x;
SELECT n, pg_typeof(n) AS n_type FROM (VALUES (1.5::numeric(4,2)), ('2.25')) v(n) ORDER BY n;
SELECT y FROM (VALUES (CAST('x' AS varchar)), ('y')) v(y) ORDER BY y;
-- FETCH FIRST with an expression in parentheses; FOR UPDATE of a query without tables.
SELECT g FROM (VALUES (1), (2), (3)) v(g) ORDER BY g FETCH FIRST (1 + 1) ROWS ONLY;
SELECT g FROM (VALUES (1), (2), (3)) v(g) ORDER BY g OFFSET 1 ROWS FETCH NEXT (2 * 1) ROW ONLY;
SELECT 1 AS locked FOR UPDATE;
SELECT 2 FOR SHARE;
-- numerics of more than 28 integer digits keep them when cast to an unconstrained numeric
SELECT 1234567890123456789012345678901234567::numeric AS wide;
SELECT 12345678901234567890123456789.5::numeric AS wide_fraction;
SELECT 1234567890123456789012345678901234567::numeric * 2 AS wide_product;
SELECT 30000000000000000000000000000000000000::numeric / 10000000000000000000000000000000000000 AS wide_quotient;
SELECT 5 / 1234567890123456789012345678901234567::numeric AS tiny_quotient;
