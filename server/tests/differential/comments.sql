-- COMMENT ON as PostgreSQL 15 defines it: on tables, columns (also schema-qualified) and named
-- constraints (PRIMARY KEY, UNIQUE, CHECK, FOREIGN KEY), replaced, removed with IS NULL and IS '',
-- the errors for missing objects and wrong kinds, and the comments read back through
-- obj_description, col_description and pg_description (joined with pg_class and pg_constraint).
-- Run by server/tests/it/differential.rs through run.py, one connection per server in autocommit
-- mode. Statements must be distinct: repeated ones carry a /* n */ mark.
-- minimum: 60

-- Tables with one constraint of each kind.
CREATE TABLE cm_parts (id int PRIMARY KEY, code text UNIQUE, qty int CONSTRAINT cm_qty_positive CHECK (qty >= 0), note text);
CREATE TABLE cm_orders (id int PRIMARY KEY, part_id int CONSTRAINT cm_orders_part REFERENCES cm_parts (id), amount int);

-- A table's comment, set and replaced.
SELECT obj_description('cm_parts'::regclass, 'pg_class') AS before_any;
COMMENT ON TABLE cm_parts IS 'spare parts';
SELECT obj_description('cm_parts'::regclass, 'pg_class') AS table_comment;
SELECT obj_description('cm_parts'::regclass) AS any_catalog;
SELECT obj_description('cm_parts'::regclass, 'pg_constraint') AS wrong_catalog;
COMMENT ON TABLE cm_parts IS 'parts in stock';
SELECT obj_description('cm_parts'::regclass, 'pg_class') AS replaced;
COMMENT ON TABLE cm_parts IS $$dollar 'quoted'$$;
SELECT obj_description('cm_parts'::regclass, 'pg_class') AS dollar_quoted;
COMMENT ON TABLE cm_parts IS E'two\nlines';
SELECT obj_description('cm_parts'::regclass, 'pg_class') = E'two\nlines' AS escaped;
COMMENT ON TABLE cm_parts IS 'parts in stock' /* 2 */;

-- Column comments, by table.column and schema.table.column.
COMMENT ON COLUMN cm_parts.code IS 'the catalogue code';
COMMENT ON COLUMN public.cm_parts.note IS 'free text';
SELECT col_description('cm_parts'::regclass, 2) AS code_comment;
SELECT col_description('cm_parts'::regclass, 1) AS id_comment;
SELECT col_description('cm_parts'::regclass, 4) AS note_comment;
SELECT col_description('cm_parts'::regclass, 99) AS no_such_column;
SELECT a.attname, col_description(a.attrelid, a.attnum) AS comment FROM pg_attribute a WHERE a.attrelid = 'cm_parts'::regclass AND a.attnum > 0 ORDER BY a.attnum;
COMMENT ON COLUMN cm_parts.code IS 'the code, replaced';
SELECT col_description('cm_parts'::regclass, 2) AS code_replaced;

-- Constraint comments, one per kind.
COMMENT ON CONSTRAINT cm_parts_pkey ON cm_parts IS 'one row per part';
COMMENT ON CONSTRAINT cm_parts_code_key ON cm_parts IS 'codes are unique';
COMMENT ON CONSTRAINT cm_qty_positive ON cm_parts IS 'no negative stock';
COMMENT ON CONSTRAINT cm_orders_part ON cm_orders IS 'an order names a part';
SELECT c.conname, c.contype, d.description FROM pg_description d JOIN pg_constraint c ON c.oid = d.objoid WHERE c.conname LIKE 'cm%' ORDER BY c.conname;
SELECT c.conname, d.classoid = 'pg_catalog.pg_constraint'::regclass AS in_pg_constraint, d.objsubid FROM pg_description d JOIN pg_constraint c ON c.oid = d.objoid AND d.classoid = 'pg_constraint'::regclass WHERE c.conname LIKE 'cm%' ORDER BY 1;
SELECT c.conname, obj_description(c.oid, 'pg_constraint') AS comment FROM pg_constraint c WHERE c.conrelid = 'cm_parts'::regclass ORDER BY c.conname;

-- pg_description's rows for a table and its columns.
SELECT d.objsubid, d.description FROM pg_description d JOIN pg_class c ON c.oid = d.objoid AND d.classoid = 'pg_class'::regclass WHERE c.relname = 'cm_parts' ORDER BY d.objsubid;
SELECT c.relname, d.description FROM pg_class c LEFT JOIN pg_description d ON d.objoid = c.oid AND d.objsubid = 0 AND d.classoid = CAST('pg_catalog.pg_class' AS REGCLASS) WHERE c.relname IN ('cm_parts', 'cm_orders') ORDER BY c.relname;

-- IS NULL and IS '' remove a comment; removing one that is not there is no error.
COMMENT ON TABLE cm_parts IS NULL;
SELECT obj_description('cm_parts'::regclass, 'pg_class') AS removed;
COMMENT ON COLUMN cm_parts.code IS '';
SELECT col_description('cm_parts'::regclass, 2) AS code_removed;
COMMENT ON CONSTRAINT cm_qty_positive ON cm_parts IS NULL;
COMMENT ON TABLE cm_orders IS NULL;
COMMENT ON COLUMN cm_orders.amount IS NULL;
SELECT c.conname FROM pg_description d JOIN pg_constraint c ON c.oid = d.objoid WHERE c.conname LIKE 'cm%' ORDER BY 1;

-- A renamed foreign key keeps its comment; a dropped constraint's comment goes with it.
ALTER TABLE cm_orders RENAME CONSTRAINT cm_orders_part TO cm_orders_part_fk;
SELECT c.conname, d.description FROM pg_description d JOIN pg_constraint c ON c.oid = d.objoid WHERE c.conrelid = 'cm_orders'::regclass ORDER BY 1;
ALTER TABLE cm_orders DROP CONSTRAINT cm_orders_part_fk;
ALTER TABLE cm_parts DROP CONSTRAINT cm_parts_code_key;
ALTER TABLE cm_parts ADD CONSTRAINT cm_parts_code_key UNIQUE (code);
SELECT c.conname AS still_commented FROM pg_description d JOIN pg_constraint c ON c.oid = d.objoid WHERE c.conname LIKE 'cm%' ORDER BY 1;

-- A dropped column's comment goes with it.
COMMENT ON COLUMN cm_orders.amount IS 'in cents';
ALTER TABLE cm_orders DROP COLUMN amount;
SELECT count(*) AS column_comments FROM pg_description d WHERE d.objoid = 'cm_orders'::regclass AND d.objsubid > 0;

-- Names: quoted identifiers and another schema.
CREATE TABLE "CmMixed" ("Code" text, id int CONSTRAINT "CmCheck" CHECK (id > 0));
COMMENT ON TABLE "CmMixed" IS 'mixed case';
COMMENT ON COLUMN "CmMixed"."Code" IS 'quoted column';
COMMENT ON CONSTRAINT "CmCheck" ON "CmMixed" IS 'quoted constraint';
SELECT obj_description('"CmMixed"'::regclass, 'pg_class') AS mixed_table, col_description('"CmMixed"'::regclass, 1) AS mixed_column;
COMMENT ON COLUMN "CmMixed".code IS 'folded to lower case';
CREATE SCHEMA cm_other;
CREATE TABLE cm_other.items (id int PRIMARY KEY, label text);
COMMENT ON TABLE cm_other.items IS 'in another schema';
COMMENT ON COLUMN cm_other.items.label IS 'qualified column';
COMMENT ON CONSTRAINT items_pkey ON cm_other.items IS 'qualified table';
SELECT obj_description('cm_other.items'::regclass, 'pg_class') AS other_table, col_description('cm_other.items'::regclass, 2) AS other_column;
COMMENT ON TABLE items IS 'not on the search path';

-- Errors: missing table, column and constraint, a constraint of another table, wrong kinds.
COMMENT ON TABLE cm_missing IS 'x';
COMMENT ON COLUMN cm_parts.missing IS 'x';
COMMENT ON COLUMN cm_missing.id IS 'x';
COMMENT ON CONSTRAINT cm_missing ON cm_parts IS 'x';
COMMENT ON CONSTRAINT cm_parts_pkey ON cm_orders IS 'x';
COMMENT ON CONSTRAINT cm_parts_pkey ON cm_missing IS 'x';
COMMENT ON TABLE cm_parts IS 42;
COMMENT ON COLUMN cm_parts IS 'x';
CREATE VIEW cm_view AS SELECT id, qty FROM cm_parts;
COMMENT ON TABLE cm_view IS 'x';
COMMENT ON VIEW cm_parts IS 'x';
COMMENT ON VIEW cm_missing IS 'x';
COMMENT ON VIEW cm_view IS 'a view';
SELECT obj_description('cm_view'::regclass, 'pg_class') AS view_comment;
CREATE OR REPLACE VIEW cm_view AS SELECT id, qty FROM cm_parts WHERE qty > 0;
SELECT obj_description('cm_view'::regclass, 'pg_class') AS replaced_view_comment;
COMMENT ON SCHEMA cm_other IS 'a schema';

-- In a transaction block: a comment on a table the block created commits with it.
BEGIN;
CREATE TABLE cm_drafts (id int);
COMMENT ON TABLE cm_drafts IS 'work in progress';
COMMENT ON COLUMN cm_drafts.id IS 'draft id';
SELECT obj_description('cm_drafts'::regclass, 'pg_class') AS in_block;
COMMIT;
SELECT obj_description('cm_drafts'::regclass, 'pg_class') AS after_commit, col_description('cm_drafts'::regclass, 1) AS draft_column;
BEGIN /* 2 */;
COMMENT ON TABLE cm_missing IS 'fails the block';
SELECT 1 AS after_failure;
ROLLBACK;

-- A read-only transaction cannot comment.
BEGIN READ ONLY;
COMMENT ON TABLE cm_parts IS 'read only';
ROLLBACK /* 2 */;
SELECT obj_description('cm_parts'::regclass, 'pg_class') AS still_removed;
