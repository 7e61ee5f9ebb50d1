-- Standalone sequences as PostgreSQL 15 defines them: CREATE SEQUENCE with its options, nextval,
-- currval, setval and lastval, their errors, DROP and ALTER SEQUENCE, column defaults that call
-- nextval, the catalogs that list sequences (pg_class relkind S, pg_sequence, pg_sequences,
-- information_schema.sequences, what psql's \ds and SQLAlchemy's has_sequence read) and
-- transaction blocks (a sequence's creation is transactional, its values are not). Run by
-- server/tests/it/differential.rs through run.py, one connection per server in autocommit mode.
-- Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 120

-- A new sequence: 1, 2, ...; currval and lastval are the session's last value.
CREATE SEQUENCE sq_a;
SELECT currval('sq_a');
SELECT lastval();
SELECT nextval('sq_a');
SELECT nextval('sq_a') AS second, currval('sq_a') AS current;
SELECT lastval() AS last;
SELECT last_value, is_called FROM sq_a;
SELECT last_value, log_cnt, is_called FROM sq_a WHERE last_value = 2;
SELECT nextval('SQ_A') AS folded;
SELECT nextval('"sq_a"') AS quoted;
SELECT nextval('public.sq_a') AS qualified;
SELECT nextval('sq_a'::regclass) AS cast_to_regclass;
SELECT currval('sq_a') AS after_four;
SELECT nextval('sq_a') + 100 AS in_an_expression;

-- Options in any order: start, increment, bounds, cycle, cache, type.
CREATE SEQUENCE sq_b INCREMENT BY 5 START WITH 10 MAXVALUE 20 CYCLE MINVALUE 3;
SELECT currval('sq_b');
SELECT nextval('sq_b');
SELECT nextval('sq_b') /* 2 */;
SELECT nextval('sq_b') /* 3 */;
SELECT nextval('sq_b') /* 4 */;
SELECT nextval('sq_b') /* 5 */;
SELECT last_value, is_called FROM sq_b;
CREATE SEQUENCE sq_down INCREMENT -1 MINVALUE -2;
SELECT nextval('sq_down');
SELECT nextval('sq_down') /* 2 */;
SELECT nextval('sq_down') /* 3 */;
CREATE SEQUENCE sq_small AS smallint START 32766 CACHE 1 NO CYCLE;
SELECT nextval('sq_small');
SELECT nextval('sq_small') /* 2 */;
SELECT nextval('sq_small') /* 3 */;
CREATE SEQUENCE sq_int AS integer INCREMENT 1000000000 START 2000000000 NO MAXVALUE;
SELECT nextval('sq_int');
SELECT nextval('sq_int') /* 2 */;
CREATE SEQUENCE sq_cached CACHE 20 START 7;
SELECT nextval('sq_cached');

-- setval: the next nextval continues after the value, or gives it when is_called is false.
SELECT setval('sq_a', 100);
SELECT nextval('sq_a') /* after setval */;
SELECT currval('sq_a') /* after setval */;
SELECT setval('sq_a', 7, false);
SELECT currval('sq_a') /* after setval false */;
SELECT nextval('sq_a') /* after setval false */;
SELECT setval('sq_a', 50, true) AS called;
SELECT last_value, is_called FROM sq_a /* after setval true */;
SELECT setval('sq_a', 0);
SELECT setval('sq_small', 40000);
SELECT setval('sq_missing', 1);

-- Errors: a missing relation, another kind of relation, a missing schema.
SELECT nextval('sq_missing');
SELECT currval('sq_missing');
SELECT nextval('sq_nosuchschema.sq_a');
CREATE TABLE sq_rows (id int NOT NULL DEFAULT nextval('sq_ids'), data text);
CREATE SEQUENCE sq_ids;
CREATE TABLE sq_rows (id int NOT NULL DEFAULT nextval('sq_ids'), data text) /* 2 */;
SELECT nextval('sq_rows');
SELECT setval('sq_rows', 5);
CREATE VIEW sq_view AS SELECT 1 AS one;
SELECT nextval('sq_view');

-- CREATE SEQUENCE's errors.
CREATE SEQUENCE sq_a /* again */;
CREATE SEQUENCE IF NOT EXISTS sq_a;
CREATE SEQUENCE sq_rows;
CREATE TABLE sq_a (x int);
CREATE SEQUENCE sq_nosuchschema.sq_x;
CREATE SEQUENCE sq_bad INCREMENT 0;
CREATE SEQUENCE sq_bad START 0;
CREATE SEQUENCE sq_bad START 100 MAXVALUE 50;
CREATE SEQUENCE sq_bad MINVALUE 5 MAXVALUE 5;
CREATE SEQUENCE sq_bad MINVALUE 10 MAXVALUE 5;
CREATE SEQUENCE sq_bad AS smallint MAXVALUE 100000;
CREATE SEQUENCE sq_bad AS integer MINVALUE -3000000000;
CREATE SEQUENCE sq_bad AS numeric;
CREATE SEQUENCE sq_bad AS text;
CREATE SEQUENCE sq_bad CACHE 0;
CREATE SEQUENCE sq_bad START 1 START 2;
CREATE SEQUENCE sq_bad INCREMENT 1 NO MINVALUE MINVALUE 3;
CREATE SEQUENCE sq_bad OWNED BY sq_nosuchtable.id;
CREATE SEQUENCE sq_bad OWNED BY sq_rows.nope;
CREATE SEQUENCE sq_bad OWNED BY sq_rows;
SELECT count(*) AS no_bad_sequence FROM pg_class WHERE relname = 'sq_bad';

-- A column DEFAULT nextval('s') takes one value per row; nextval in VALUES, with RETURNING.
INSERT INTO sq_rows (data) VALUES ('a'), ('b'), ('c');
SELECT id, data FROM sq_rows ORDER BY id;
SELECT currval('sq_ids') AS after_default;
INSERT INTO sq_rows (id, data) VALUES (nextval('sq_ids'), 'd') RETURNING id;
INSERT INTO sq_rows (id, data) VALUES (nextval('sq_ids'), 'e'), (nextval('sq_ids'), 'f') RETURNING id, data;
INSERT INTO sq_rows (data) VALUES ('g') RETURNING id;
SELECT setval('sq_a', (SELECT max(id) FROM sq_rows));
SELECT column_name, column_default FROM information_schema.columns WHERE table_name = 'sq_rows' ORDER BY ordinal_position;

-- The catalogs: pg_class, pg_sequence, pg_sequences, information_schema.sequences.
SELECT relname, relkind FROM pg_class WHERE relname LIKE 'sq%' AND relkind = 'S' ORDER BY relname;
SELECT c.relname, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcache, s.seqcycle FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relname LIKE 'sq%' ORDER BY c.relname;
SELECT c.relname, t.typname FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_type t ON t.oid = s.seqtypid WHERE c.relname LIKE 'sq%' ORDER BY c.relname;
SELECT schemaname, sequencename, data_type, start_value, min_value, max_value, increment_by, cycle, cache_size FROM pg_sequences WHERE sequencename LIKE 'sq%' ORDER BY sequencename;
SELECT sequencename, last_value FROM pg_sequences WHERE sequencename IN ('sq_a', 'sq_b', 'sq_ids', 'sq_int') ORDER BY sequencename;
SELECT sequence_schema, sequence_name, data_type, numeric_precision, numeric_precision_radix, numeric_scale, start_value, minimum_value, maximum_value, increment, cycle_option FROM information_schema.sequences WHERE sequence_name LIKE 'sq%' ORDER BY sequence_name;

-- What psql's \ds (without the owner) and SQLAlchemy's has_sequence and get_sequence_names read.
SELECT n.nspname as "Schema", c.relname as "Name", CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type" FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam WHERE c.relkind IN ('S','') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' AND n.nspname <> 'information_schema' AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1,2;
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = 'S' AND pg_catalog.pg_class.relname = 'sq_a' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog';
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = 'S' AND pg_catalog.pg_class.relname = 'sq_rows' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog';

-- A sequence in another schema: found by its qualified name, not visible on the search path.
CREATE SCHEMA sq_schema;
CREATE SEQUENCE sq_schema.sq_c START 40;
SELECT nextval('sq_schema.sq_c');
SELECT nextval('sq_c');
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = 'S' AND pg_catalog.pg_class.relname = 'sq_c' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog';
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = 'S' AND pg_catalog.pg_namespace.nspname = 'sq_schema';
SELECT sequence_schema, sequence_name, start_value FROM information_schema.sequences WHERE sequence_schema = 'sq_schema';
CREATE SEQUENCE sq_schema.sq_bad OWNED BY sq_rows.id;
DROP SCHEMA sq_schema;
DROP SCHEMA sq_schema CASCADE;
SELECT nextval('sq_schema.sq_c') /* after the schema went */;

-- SERIAL and identity columns' sequences are listed too.
CREATE TABLE sq_serial (id serial, v text);
CREATE TABLE sq_ident (id bigint GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 10), v text);
SELECT sequencename, data_type, start_value, min_value, max_value, increment_by, last_value FROM pg_sequences WHERE sequencename IN ('sq_serial_id_seq', 'sq_ident_id_seq') ORDER BY sequencename;
INSERT INTO sq_serial (v) VALUES ('x');
INSERT INTO sq_ident (v) VALUES ('y');
SELECT sequencename, last_value FROM pg_sequences WHERE sequencename IN ('sq_serial_id_seq', 'sq_ident_id_seq') ORDER BY sequencename;
SELECT relname FROM pg_class WHERE relkind = 'S' AND relname IN ('sq_serial_id_seq', 'sq_ident_id_seq') ORDER BY relname;
CREATE SEQUENCE sq_serial_id_seq;
DROP SEQUENCE sq_serial_id_seq;

-- OWNED BY: pg_get_serial_sequence names the sequence; dropping the table drops it.
CREATE TABLE sq_owner (id int, v text);
CREATE SEQUENCE sq_owned OWNED BY sq_owner.id;
SELECT pg_get_serial_sequence('sq_owner', 'id');
SELECT pg_get_serial_sequence('sq_owner', 'v');
SELECT nextval('sq_owned');
DROP TABLE sq_owner;
SELECT nextval('sq_owned') /* after its table went */;
CREATE TABLE sq_owner2 (id int);
CREATE SEQUENCE sq_owned2;
ALTER SEQUENCE sq_owned2 OWNED BY sq_owner2.id;
SELECT pg_get_serial_sequence('sq_owner2', 'id');
ALTER SEQUENCE sq_owned2 OWNED BY NONE;
SELECT pg_get_serial_sequence('sq_owner2', 'id') AS not_owned;
DROP TABLE sq_owner2;
SELECT nextval('sq_owned2');

-- ALTER SEQUENCE: RESTART, options, RENAME TO.
ALTER SEQUENCE sq_ids RESTART WITH 500;
SELECT nextval('sq_ids') /* after restart with */;
ALTER SEQUENCE sq_ids INCREMENT BY 10;
SELECT nextval('sq_ids') /* after increment */;
ALTER SEQUENCE sq_ids RESTART;
SELECT nextval('sq_ids') /* after restart */;
ALTER SEQUENCE sq_ids START WITH 5 RESTART;
SELECT nextval('sq_ids') /* after start and restart */;
ALTER SEQUENCE sq_ids MAXVALUE 50;
SELECT start_value, max_value, increment_by FROM pg_sequences WHERE sequencename = 'sq_ids';
ALTER SEQUENCE sq_ids RESTART WITH 0;
ALTER SEQUENCE sq_ids MAXVALUE 4;
ALTER SEQUENCE sq_ids AS smallint;
SELECT data_type, max_value FROM pg_sequences WHERE sequencename = 'sq_ids';
ALTER SEQUENCE sq_b AS smallint;
SELECT data_type, max_value FROM pg_sequences WHERE sequencename = 'sq_b';
ALTER SEQUENCE sq_ids RENAME TO sq_ids2;
SELECT currval('sq_ids2') AS renamed;
SELECT nextval('sq_ids2') AS renamed_next;
SELECT nextval('sq_ids');
ALTER SEQUENCE sq_ids2 RENAME TO sq_a;
ALTER SEQUENCE sq_missing RESTART;
ALTER SEQUENCE IF EXISTS sq_missing RESTART;
ALTER SEQUENCE sq_rows RESTART;
ALTER SEQUENCE sq_ids2 NO CYCLE CACHE 5 MINVALUE 2;
SELECT min_value, cycle, cache_size FROM pg_sequences WHERE sequencename = 'sq_ids2';

-- DROP SEQUENCE: a default that uses it holds it back unless CASCADE; several at once; errors.
DROP SEQUENCE sq_ids2;
DROP SEQUENCE sq_ids2 CASCADE;
SELECT column_name, column_default FROM information_schema.columns WHERE table_name = 'sq_rows' ORDER BY ordinal_position /* 2 */;
INSERT INTO sq_rows (data) VALUES ('no default');
INSERT INTO sq_rows (id, data) VALUES (1000, 'explicit');
DROP SEQUENCE sq_missing;
DROP SEQUENCE IF EXISTS sq_missing;
DROP SEQUENCE sq_down, sq_missing;
SELECT nextval('sq_down') /* still there */;
DROP SEQUENCE IF EXISTS sq_missing, sq_down;
SELECT nextval('sq_down') /* gone */;
DROP SEQUENCE sq_rows;
DROP TABLE sq_a;
DROP VIEW sq_view;
DROP SEQUENCE sq_int, sq_small RESTRICT;
SELECT count(*) AS left_sequences FROM pg_class WHERE relkind = 'S' AND relname IN ('sq_int', 'sq_small', 'sq_down');

-- lastval follows the last nextval, and is not defined once its sequence is gone.
CREATE SEQUENCE sq_last;
SELECT nextval('sq_last');
SELECT setval('sq_a', 10);
SELECT lastval() AS after_setval;
DROP SEQUENCE sq_last;
SELECT lastval() AS after_drop;

-- Transaction blocks: CREATE and DROP SEQUENCE are transactional, the values are not.
BEGIN;
CREATE SEQUENCE sq_block;
SELECT nextval('sq_block');
SELECT relname FROM pg_class WHERE relname = 'sq_block';
ROLLBACK;
SELECT nextval('sq_block') /* after rollback */;
SELECT relname FROM pg_class WHERE relname = 'sq_block' /* after rollback */;
BEGIN /* 2 */;
CREATE SEQUENCE sq_block /* 2 */;
SELECT nextval('sq_block') /* 2 */;
COMMIT;
SELECT nextval('sq_block') /* after commit */;
BEGIN /* 3 */;
SELECT nextval('sq_block') /* in a block */;
ROLLBACK /* 3 */;
SELECT nextval('sq_block') /* not undone */;
BEGIN /* 4 */;
DROP SEQUENCE sq_block;
SELECT nextval('sq_block') /* dropped in the block */;
ROLLBACK /* 4 */;
SELECT nextval('sq_block') /* drop undone */;
BEGIN /* 5 */;
ALTER SEQUENCE sq_block RENAME TO sq_block2;
SELECT nextval('sq_block2');
ROLLBACK /* 5 */;
SELECT nextval('sq_block') /* rename undone */;
BEGIN /* 6 */;
DROP SEQUENCE sq_block /* 6 */;
COMMIT /* 6 */;
SELECT nextval('sq_block') /* dropped */;
BEGIN /* 7 */;
ALTER SEQUENCE sq_a RESTART WITH 3;
ROLLBACK /* 7 */;
ROLLBACK /* 8 */;
SELECT nextval('sq_a') /* after a restart in a block */;

-- A READ ONLY transaction reads a sequence but does not move it or create one.
START TRANSACTION READ ONLY;
SELECT last_value FROM sq_b /* read only */;
SELECT nextval('sq_b') /* read only */;
ROLLBACK /* 9 */;
START TRANSACTION READ ONLY /* 2 */;
SELECT setval('sq_b', 5) /* read only */;
ROLLBACK /* 10 */;
START TRANSACTION READ ONLY /* 3 */;
CREATE SEQUENCE sq_read_only;
ROLLBACK /* 11 */;

-- Not supported by Sluice: temporary sequences, nextval called per row of a query.
CREATE TEMPORARY SEQUENCE sq_temp;
CREATE SEQUENCE sq_rows_per_row;
SELECT nextval('sq_rows_per_row') AS n FROM generate_series(1, 3) ORDER BY n;

-- identity columns with MINVALUE and MAXVALUE
CREATE TABLE ident_bounded (id int GENERATED BY DEFAULT AS IDENTITY (INCREMENT BY -5 START WITH 0 MINVALUE -1000 MAXVALUE 0) PRIMARY KEY, d text);
INSERT INTO ident_bounded (d) VALUES ('a'), ('b');
SELECT * FROM ident_bounded ORDER BY id;
SELECT seqstart, seqincrement, seqmin, seqmax FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relname = 'ident_bounded_id_seq';
CREATE TABLE ident_tiny (id int GENERATED ALWAYS AS IDENTITY (MAXVALUE 2), d text);
INSERT INTO ident_tiny (d) VALUES ('a'), ('b');
INSERT INTO ident_tiny (d) VALUES ('c');
SELECT * FROM ident_tiny ORDER BY id;
CREATE TABLE ident_bad1 (id int GENERATED ALWAYS AS IDENTITY (MINVALUE 5 MAXVALUE 5));
CREATE TABLE ident_bad2 (id int GENERATED ALWAYS AS IDENTITY (START WITH 1 MINVALUE 5));
CREATE TABLE ident_bad3 (id int GENERATED ALWAYS AS IDENTITY (START WITH 10 MAXVALUE 5));
DROP TABLE ident_bounded;
DROP TABLE ident_tiny;

-- identity columns that CYCLE, and CACHE as declared
CREATE TABLE ident_cycle (id2 int GENERATED ALWAYS AS IDENTITY (START WITH 2 INCREMENT BY 3 MINVALUE -2 MAXVALUE 42 CYCLE CACHE 4), v int);
INSERT INTO ident_cycle (v) SELECT generate_series(1, 18);
SELECT id2, v FROM ident_cycle ORDER BY v;
SELECT seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle FROM pg_sequence WHERE seqrelid = 'ident_cycle_id2_seq'::regclass;
SELECT column_name, is_identity, identity_start, identity_increment, identity_maximum, identity_minimum, identity_cycle FROM information_schema.columns WHERE table_name = 'ident_cycle' ORDER BY ordinal_position;
CREATE TABLE ident_cycle_down (id smallint GENERATED BY DEFAULT AS IDENTITY (INCREMENT BY -1 CYCLE), v int);
INSERT INTO ident_cycle_down (v) VALUES (1), (2);
SELECT * FROM ident_cycle_down ORDER BY v;
SELECT min_value, max_value, cycle, cache_size FROM pg_sequences WHERE sequencename = 'ident_cycle_down_id_seq';
CREATE TABLE ident_bad_bounds (id int GENERATED ALWAYS AS IDENTITY (MAXVALUE 1 NO CYCLE), v int);
CREATE TABLE ident_no_cycle (id int GENERATED ALWAYS AS IDENTITY (MAXVALUE 2 NO CYCLE), v int);
INSERT INTO ident_no_cycle (v) VALUES (1), (2);
INSERT INTO ident_no_cycle (v) VALUES (3);
SELECT * FROM ident_no_cycle;
CREATE TABLE ident_bad_cache (id int GENERATED ALWAYS AS IDENTITY (CACHE 0));
DROP TABLE ident_cycle;
DROP TABLE ident_cycle_down;
DROP TABLE ident_no_cycle;
