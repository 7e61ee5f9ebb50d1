-- Foreign keys, written for PostgreSQL 15 semantics: REFERENCES as a column and as a table
-- constraint (single, composite, named, self-referencing, to a UNIQUE column), errors at CREATE,
-- the checks on INSERT, UPDATE and DELETE of either side, ON DELETE CASCADE / SET NULL /
-- SET DEFAULT / RESTRICT, TRUNCATE and DROP TABLE of a referenced table, DROP COLUMN, ALTER TABLE
-- ADD / DROP CONSTRAINT and RENAME, transaction blocks, and the catalogs (pg_constraint,
-- information_schema). Run by server/tests/it/differential.rs through run.py; every statement's
-- outcome on Sluice is compared with PostgreSQL's. Each section has its own tables, named with
-- the section's prefix. Statements must be distinct (the known-differences list names them by
-- text; repeated ones carry a /* n */ mark) and deterministic. ON UPDATE CASCADE / SET NULL and
-- DEFERRABLE come last, so the catalog queries above them do not see those tables.
-- minimum: 160

-- Column REFERENCES, with a column list and without one (then the parent's primary key)
CREATE TABLE fk_basic_parent (id int PRIMARY KEY, name text);
CREATE TABLE fk_basic_child (id int PRIMARY KEY, parent_id int REFERENCES fk_basic_parent (id), note text);
CREATE TABLE fk_basic_child_pk (id int PRIMARY KEY, parent_id int REFERENCES fk_basic_parent, note text);
INSERT INTO fk_basic_parent VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four');
INSERT INTO fk_basic_child VALUES (10, 1, 'first');
INSERT INTO fk_basic_child VALUES (11, 5, 'missing parent');
INSERT INTO fk_basic_child VALUES (12, NULL, 'no parent at all');
INSERT INTO fk_basic_child (id, note) VALUES (13, 'parent omitted');
INSERT INTO fk_basic_child_pk VALUES (20, 2, 'references the primary key');
INSERT INTO fk_basic_child_pk VALUES (21, 6, 'primary key, missing parent');
SELECT id, parent_id, note FROM fk_basic_child ORDER BY id;
SELECT id, parent_id, note FROM fk_basic_child_pk ORDER BY id;

-- Multi-row INSERT and INSERT ... SELECT: one missing parent fails the whole statement
INSERT INTO fk_basic_child VALUES (14, 2, 'two'), (15, 9, 'nine is missing'), (16, 3, 'three');
SELECT count(*) AS after_failed_multirow FROM fk_basic_child;
INSERT INTO fk_basic_child VALUES (14, 2, 'two'), (16, 3, 'three');
INSERT INTO fk_basic_child SELECT id + 100, id, name FROM fk_basic_parent WHERE id >= 3;
INSERT INTO fk_basic_child SELECT id + 200, id * 10, name FROM fk_basic_parent;
SELECT id, parent_id, note FROM fk_basic_child WHERE id >= 100 ORDER BY id;
INSERT INTO fk_basic_child VALUES (17, 4, 'returned') RETURNING id, parent_id;
INSERT INTO fk_basic_child VALUES (18, 8, 'never returned') RETURNING id, parent_id;
INSERT INTO fk_basic_child VALUES (19, 7, 'on conflict does not skip the check') ON CONFLICT (id) DO NOTHING;
INSERT INTO fk_basic_child VALUES (10, 7, 'upsert to a missing parent') ON CONFLICT (id) DO UPDATE SET parent_id = EXCLUDED.parent_id;
INSERT INTO fk_basic_child VALUES (10, 3, 'upsert to parent three') ON CONFLICT (id) DO UPDATE SET parent_id = EXCLUDED.parent_id;
SELECT id, parent_id FROM fk_basic_child WHERE id < 100 ORDER BY id;

-- UPDATE of the child's foreign key column: to a missing parent, to an existing one, to NULL
UPDATE fk_basic_child SET parent_id = 8 WHERE id = 10;
UPDATE fk_basic_child SET parent_id = 1 WHERE id = 10;
UPDATE fk_basic_child SET parent_id = parent_id + 1 WHERE id IN (14, 16);
UPDATE fk_basic_child SET parent_id = parent_id + 10 WHERE id IN (14, 16);
UPDATE fk_basic_child SET parent_id = NULL WHERE id = 17;
UPDATE fk_basic_child SET note = 'note changed' WHERE parent_id = 4;
SELECT id, parent_id, note FROM fk_basic_child WHERE id < 100 ORDER BY id;

-- DELETE and UPDATE of a referenced parent (NO ACTION by default), of an unreferenced one
INSERT INTO fk_basic_parent VALUES (5, 'five'), (6, 'six');
DELETE FROM fk_basic_parent WHERE id = 1;
DELETE FROM fk_basic_parent WHERE id = 2;
DELETE FROM fk_basic_parent WHERE id = 5;
DELETE FROM fk_basic_parent WHERE id >= 4;
SELECT id, name FROM fk_basic_parent ORDER BY id;
UPDATE fk_basic_parent SET id = 11 WHERE id = 1;
UPDATE fk_basic_parent SET name = 'one (renamed)' WHERE id = 1;
UPDATE fk_basic_parent SET id = id WHERE id = 3;
UPDATE fk_basic_parent SET id = 60 WHERE id = 6;
SELECT id, name FROM fk_basic_parent ORDER BY name;
DELETE FROM fk_basic_child WHERE parent_id = 4;
DELETE FROM fk_basic_parent WHERE id = 4 RETURNING id, name;
SELECT p.id, p.name, count(c.id) AS children FROM fk_basic_parent p LEFT JOIN fk_basic_child c ON c.parent_id = p.id GROUP BY p.id, p.name ORDER BY p.id;

-- Catalogs: pg_constraint, information_schema.referential_constraints, table_constraints,
-- key_column_usage, constraint_column_usage (the composite key is referenced in another order)
CREATE TABLE fk_cat_parent (id int PRIMARY KEY, code text UNIQUE, a int, b int, UNIQUE (a, b));
CREATE TABLE fk_cat_child (id int PRIMARY KEY, pid int REFERENCES fk_cat_parent ON DELETE CASCADE, code text CONSTRAINT fk_cat_code REFERENCES fk_cat_parent (code) ON DELETE SET NULL ON UPDATE RESTRICT, a int, b int DEFAULT 0, CONSTRAINT fk_cat_pair FOREIGN KEY (b, a) REFERENCES fk_cat_parent (b, a) ON DELETE SET DEFAULT);
CREATE TABLE fk_cat_other (id int PRIMARY KEY, pid bigint REFERENCES fk_cat_parent (id) ON DELETE RESTRICT ON UPDATE NO ACTION);
SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'fk_cat_child'::regclass ORDER BY conname;
SELECT conname, pg_get_constraintdef(oid, true) AS pretty FROM pg_constraint WHERE conrelid = 'fk_cat_other'::regclass ORDER BY conname;
SELECT conname, confrelid::regclass::text AS referenced, conkey, confkey, confupdtype, confdeltype, confmatchtype FROM pg_constraint WHERE conrelid = 'fk_cat_child'::regclass AND contype = 'f' ORDER BY conname;
SELECT conname, conrelid::regclass::text AS referencing FROM pg_constraint WHERE confrelid = 'fk_cat_parent'::regclass AND contype = 'f' ORDER BY conname;
SELECT constraint_name, unique_constraint_name, match_option, update_rule, delete_rule FROM information_schema.referential_constraints ORDER BY constraint_name;
SELECT constraint_schema, constraint_name, unique_constraint_schema, unique_constraint_name FROM information_schema.referential_constraints WHERE constraint_name LIKE 'fk_cat%' ORDER BY constraint_name;
SELECT table_name, constraint_name FROM information_schema.table_constraints WHERE constraint_type = 'FOREIGN KEY' ORDER BY table_name, constraint_name;
SELECT constraint_name, column_name, ordinal_position, position_in_unique_constraint FROM information_schema.key_column_usage WHERE table_name = 'fk_cat_child' ORDER BY constraint_name, ordinal_position;
SELECT constraint_name, table_name, column_name FROM information_schema.constraint_column_usage WHERE constraint_name LIKE 'fk_cat%' ORDER BY constraint_name, column_name;
INSERT INTO fk_cat_parent VALUES (1, 'x', 1, 1), (2, 'y', 2, 2);
INSERT INTO fk_cat_child VALUES (1, 1, 'x', 2, 2);
INSERT INTO fk_cat_child VALUES (2, 1, 'x', 1, 2);
DELETE FROM fk_cat_parent WHERE id = 2;
SELECT id, pid, code, a, b FROM fk_cat_child ORDER BY id;
UPDATE fk_cat_parent SET code = 'z' WHERE id = 1;
DELETE FROM fk_cat_parent WHERE id = 1;
SELECT count(*) AS cat_children FROM fk_cat_child;

-- bigint and text keys; an int column may reference a bigint key, a varchar column a text key
CREATE TABLE fk_types_big_parent (id bigint PRIMARY KEY, label text);
CREATE TABLE fk_types_big_child (id bigint PRIMARY KEY, parent_id bigint REFERENCES fk_types_big_parent);
CREATE TABLE fk_types_int_child (id int PRIMARY KEY, parent_id int REFERENCES fk_types_big_parent (id));
INSERT INTO fk_types_big_parent VALUES (9000000000, 'big'), (1, 'small');
INSERT INTO fk_types_big_child VALUES (1, 9000000000);
INSERT INTO fk_types_big_child VALUES (2, 9000000001);
INSERT INTO fk_types_int_child VALUES (1, 1);
INSERT INTO fk_types_int_child VALUES (2, 2);
DELETE FROM fk_types_big_parent WHERE id = 9000000000;
SELECT c.id, c.parent_id, p.label FROM fk_types_big_child c JOIN fk_types_big_parent p ON p.id = c.parent_id ORDER BY c.id;
CREATE TABLE fk_types_text_parent (code text PRIMARY KEY, label text);
CREATE TABLE fk_types_text_child (id int PRIMARY KEY, code text REFERENCES fk_types_text_parent);
CREATE TABLE fk_types_varchar_child (id int PRIMARY KEY, code varchar(10) REFERENCES fk_types_text_parent (code));
INSERT INTO fk_types_text_parent VALUES ('abc', 'lower'), ('XYZ', 'upper');
INSERT INTO fk_types_text_child VALUES (1, 'abc'), (2, 'XYZ');
INSERT INTO fk_types_text_child VALUES (3, 'ABC');
INSERT INTO fk_types_text_child VALUES (4, 'abc ');
INSERT INTO fk_types_varchar_child VALUES (1, 'XYZ');
INSERT INTO fk_types_varchar_child VALUES (2, 'xyz');
UPDATE fk_types_text_parent SET code = 'abcd' WHERE code = 'abc';
UPDATE fk_types_text_parent SET label = 'still lower' WHERE code = 'abc';
SELECT c.id, c.code, p.label FROM fk_types_text_child c JOIN fk_types_text_parent p USING (code) ORDER BY c.id;

-- Table-level FOREIGN KEY, single column, with and without the referenced column list
CREATE TABLE fk_table_parent (id int PRIMARY KEY);
CREATE TABLE fk_table_child (id int PRIMARY KEY, pid int, FOREIGN KEY (pid) REFERENCES fk_table_parent (id));
CREATE TABLE fk_table_child_pk (id int PRIMARY KEY, pid int, FOREIGN KEY (pid) REFERENCES fk_table_parent);
INSERT INTO fk_table_parent VALUES (1), (2);
INSERT INTO fk_table_child VALUES (1, 1), (2, 2);
INSERT INTO fk_table_child VALUES (3, 3);
INSERT INTO fk_table_child_pk VALUES (1, 2);
INSERT INTO fk_table_child_pk VALUES (2, 4);
DELETE FROM fk_table_parent WHERE id = 2;
SELECT id, pid FROM fk_table_child ORDER BY id;

-- Composite FOREIGN KEY: both columns must match one parent row; a NULL in either skips the
-- check (MATCH SIMPLE) unless MATCH FULL
CREATE TABLE fk_comp_parent (region text, num int, label text, PRIMARY KEY (region, num));
CREATE TABLE fk_comp_child (id int PRIMARY KEY, region text, num int, FOREIGN KEY (region, num) REFERENCES fk_comp_parent (region, num));
CREATE TABLE fk_comp_child_pk (id int PRIMARY KEY, region text, num int, FOREIGN KEY (region, num) REFERENCES fk_comp_parent);
CREATE TABLE fk_comp_child_swapped (id int PRIMARY KEY, num int, region text, FOREIGN KEY (num, region) REFERENCES fk_comp_parent (num, region));
INSERT INTO fk_comp_parent VALUES ('eu', 1, 'eu one'), ('eu', 2, 'eu two'), ('us', 1, 'us one');
INSERT INTO fk_comp_child VALUES (1, 'eu', 1), (2, 'us', 1);
INSERT INTO fk_comp_child VALUES (3, 'us', 2);
INSERT INTO fk_comp_child VALUES (4, 'us', NULL);
INSERT INTO fk_comp_child VALUES (5, NULL, 99);
INSERT INTO fk_comp_child VALUES (6, NULL, NULL);
INSERT INTO fk_comp_child_pk VALUES (1, 'eu', 2);
INSERT INTO fk_comp_child_pk VALUES (2, 'asia', 1);
INSERT INTO fk_comp_child_swapped VALUES (1, 2, 'eu');
INSERT INTO fk_comp_child_swapped VALUES (2, 2, 'us');
UPDATE fk_comp_child SET num = 2 WHERE id = 4;
UPDATE fk_comp_child SET num = 1 WHERE id = 4;
DELETE FROM fk_comp_parent WHERE region = 'us';
DELETE FROM fk_comp_parent WHERE region = 'eu' AND num = 2;
UPDATE fk_comp_parent SET label = 'EU ONE' WHERE region = 'eu' AND num = 1;
SELECT c.id, c.region, c.num, p.label FROM fk_comp_child c LEFT JOIN fk_comp_parent p ON p.region = c.region AND p.num = c.num ORDER BY c.id;
CREATE TABLE fk_comp_full (id int PRIMARY KEY, region text, num int, FOREIGN KEY (region, num) REFERENCES fk_comp_parent MATCH FULL);
INSERT INTO fk_comp_full VALUES (1, 'eu', 1), (2, NULL, NULL);
INSERT INTO fk_comp_full VALUES (3, 'eu', NULL);

-- Named constraints (CONSTRAINT name REFERENCES, CONSTRAINT name FOREIGN KEY); two keys to one parent
CREATE TABLE fk_named_parent (id int PRIMARY KEY, code text UNIQUE);
CREATE TABLE fk_named_child (id int PRIMARY KEY, parent_id int CONSTRAINT fk_named_child_parent REFERENCES fk_named_parent, code text, CONSTRAINT fk_named_child_code FOREIGN KEY (code) REFERENCES fk_named_parent (code));
INSERT INTO fk_named_parent VALUES (1, 'a'), (2, 'b');
INSERT INTO fk_named_child VALUES (1, 1, 'b');
INSERT INTO fk_named_child VALUES (2, 3, 'a');
INSERT INTO fk_named_child VALUES (3, 1, 'c');
SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'fk_named_child'::regclass ORDER BY conname;
CREATE TABLE fk_named_clash (id int, a int CONSTRAINT fk_named_same REFERENCES fk_named_parent, b int, CONSTRAINT fk_named_same FOREIGN KEY (b) REFERENCES fk_named_parent);
CREATE TABLE fk_named_other (id int, pid int CONSTRAINT fk_named_child_parent REFERENCES fk_named_parent);
INSERT INTO fk_named_other VALUES (1, 5);
SELECT conrelid::regclass::text AS on_table, conname FROM pg_constraint WHERE conname = 'fk_named_child_parent' ORDER BY on_table;

-- Self-referencing table: employees.manager_id REFERENCES employees
CREATE TABLE fk_self_employees (id int PRIMARY KEY, name text NOT NULL, manager_id int REFERENCES fk_self_employees (id));
INSERT INTO fk_self_employees VALUES (1, 'ceo', NULL);
INSERT INTO fk_self_employees VALUES (2, 'vp', 1), (3, 'engineer', 2);
INSERT INTO fk_self_employees VALUES (4, 'reports to a ghost', 99);
INSERT INTO fk_self_employees VALUES (5, 'own manager', 5);
INSERT INTO fk_self_employees VALUES (6, 'manager comes later', 7), (7, 'later manager', 1);
SELECT e.id, e.name, m.name AS manager FROM fk_self_employees e LEFT JOIN fk_self_employees m ON m.id = e.manager_id ORDER BY e.id;
DELETE FROM fk_self_employees WHERE id = 2;
DELETE FROM fk_self_employees WHERE id = 5;
DELETE FROM fk_self_employees WHERE id IN (2, 3);
UPDATE fk_self_employees SET manager_id = 6 WHERE id = 7;
DELETE FROM fk_self_employees WHERE id = 7;
UPDATE fk_self_employees SET id = 70 WHERE id = 7;
UPDATE fk_self_employees SET manager_id = 42 WHERE id = 6;
SELECT id, name, manager_id FROM fk_self_employees ORDER BY id;
CREATE TABLE fk_self_tree (id int PRIMARY KEY, parent_id int REFERENCES fk_self_tree ON DELETE CASCADE, label text);
INSERT INTO fk_self_tree VALUES (1, NULL, 'root'), (2, 1, 'left'), (3, 1, 'right'), (4, 2, 'left leaf'), (5, NULL, 'other root'), (6, 5, 'other leaf');
DELETE FROM fk_self_tree WHERE id = 1;
SELECT id, parent_id, label FROM fk_self_tree ORDER BY id;
TRUNCATE fk_self_tree;
SELECT count(*) AS tree_rows FROM fk_self_tree;
DROP TABLE fk_self_tree;

-- References to a UNIQUE column (or columns) that is not the primary key, and to a unique index
CREATE TABLE fk_uq_parent (id int PRIMARY KEY, email text UNIQUE, a int, b int, UNIQUE (a, b));
CREATE TABLE fk_uq_child (id int PRIMARY KEY, email text REFERENCES fk_uq_parent (email));
CREATE TABLE fk_uq_pair_child (id int PRIMARY KEY, a int, b int, FOREIGN KEY (a, b) REFERENCES fk_uq_parent (a, b));
INSERT INTO fk_uq_parent VALUES (1, 'ann@example.com', 1, 1), (2, 'bob@example.com', 1, 2), (3, NULL, NULL, NULL);
INSERT INTO fk_uq_child VALUES (1, 'ann@example.com');
INSERT INTO fk_uq_child VALUES (2, 'carl@example.com');
INSERT INTO fk_uq_child VALUES (3, NULL);
INSERT INTO fk_uq_pair_child VALUES (1, 1, 2);
INSERT INTO fk_uq_pair_child VALUES (2, 2, 1);
UPDATE fk_uq_parent SET email = 'ann@example.org' WHERE id = 1;
UPDATE fk_uq_parent SET email = 'bob@example.org' WHERE id = 2;
UPDATE fk_uq_parent SET id = 10 WHERE id = 1;
DELETE FROM fk_uq_parent WHERE id = 3;
DELETE FROM fk_uq_parent WHERE id = 2;
SELECT id, email, a, b FROM fk_uq_parent ORDER BY id;
CREATE TABLE fk_uq_index_parent (code text NOT NULL);
CREATE UNIQUE INDEX fk_uq_index_parent_code ON fk_uq_index_parent (code);
CREATE TABLE fk_uq_index_child (code text REFERENCES fk_uq_index_parent (code));
INSERT INTO fk_uq_index_parent VALUES ('k1');
INSERT INTO fk_uq_index_child VALUES ('k1');
INSERT INTO fk_uq_index_child VALUES ('k2');

-- Errors at CREATE TABLE: missing table (42P01) or column (42703), no unique constraint on the
-- referenced columns (42830), no primary key when REFERENCES names no columns (42704), column
-- counts that disagree (42830), incompatible types (42804), a view as the parent (42809)
CREATE TABLE fk_err_parent (id int PRIMARY KEY, name text, code text UNIQUE, a int, b int, UNIQUE (a, b));
CREATE TABLE fk_err_keyless (id int, name text);
CREATE TABLE fk_err_no_table (id int, pid int REFERENCES fk_err_missing (id));
CREATE TABLE fk_err_no_table_pk (id int, pid int REFERENCES fk_err_missing);
CREATE TABLE fk_err_no_column (id int, pid int REFERENCES fk_err_parent (nope));
CREATE TABLE fk_err_no_local_column (id int, FOREIGN KEY (nope) REFERENCES fk_err_parent (id));
CREATE TABLE fk_err_not_unique (id int, name text REFERENCES fk_err_parent (name));
CREATE TABLE fk_err_part_of_unique (id int, a int REFERENCES fk_err_parent (a));
CREATE TABLE fk_err_no_primary_key (id int, pid int REFERENCES fk_err_keyless);
CREATE TABLE fk_err_count (id int, a int, b int, FOREIGN KEY (a, b) REFERENCES fk_err_parent (id));
CREATE TABLE fk_err_count_pk (id int, a int, b int, FOREIGN KEY (a, b) REFERENCES fk_err_parent);
CREATE TABLE fk_err_types (id int, pid text REFERENCES fk_err_parent (id));
CREATE TABLE fk_err_types_reverse (id int, code int REFERENCES fk_err_parent (code));
CREATE TABLE fk_err_types_bool (id int, pid boolean REFERENCES fk_err_parent);
CREATE VIEW fk_err_view AS SELECT id, name FROM fk_err_parent;
CREATE TABLE fk_err_to_view (id int, pid int REFERENCES fk_err_view (id));
SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'fk_err%' ORDER BY table_name;

-- ON DELETE RESTRICT and ON UPDATE RESTRICT / NO ACTION spelled out
CREATE TABLE fk_restrict_parent (id int PRIMARY KEY, name text);
CREATE TABLE fk_restrict_child (id int PRIMARY KEY, pid int REFERENCES fk_restrict_parent ON DELETE RESTRICT ON UPDATE RESTRICT);
CREATE TABLE fk_noaction_child (id int PRIMARY KEY, pid int REFERENCES fk_restrict_parent ON DELETE NO ACTION ON UPDATE NO ACTION);
INSERT INTO fk_restrict_parent VALUES (1, 'a'), (2, 'b'), (3, 'c');
INSERT INTO fk_restrict_child VALUES (1, 1);
INSERT INTO fk_noaction_child VALUES (1, 2);
DELETE FROM fk_restrict_parent WHERE id = 1;
DELETE FROM fk_restrict_parent WHERE id = 2;
DELETE FROM fk_restrict_parent WHERE id = 3;
UPDATE fk_restrict_parent SET id = 10 WHERE id = 1;
UPDATE fk_restrict_parent SET id = 20 WHERE id = 2;
UPDATE fk_restrict_parent SET name = 'renamed' WHERE id IN (1, 2);
SELECT id, name FROM fk_restrict_parent ORDER BY id;

-- ON DELETE CASCADE, one level
CREATE TABLE fk_cascade_parent (id int PRIMARY KEY, name text);
CREATE TABLE fk_cascade_child (id int PRIMARY KEY, pid int REFERENCES fk_cascade_parent ON DELETE CASCADE, note text);
INSERT INTO fk_cascade_parent VALUES (1, 'a'), (2, 'b'), (3, 'c');
INSERT INTO fk_cascade_child VALUES (1, 1, 'a1'), (2, 1, 'a2'), (3, 2, 'b1'), (4, NULL, 'orphan');
DELETE FROM fk_cascade_parent WHERE id = 1;
SELECT id, pid, note FROM fk_cascade_child ORDER BY id;
DELETE FROM fk_cascade_parent WHERE id = 3 RETURNING name;
UPDATE fk_cascade_parent SET id = 20 WHERE id = 2;
INSERT INTO fk_cascade_child VALUES (5, 3, 'parent gone');
DELETE FROM fk_cascade_parent;
SELECT id, pid, note FROM fk_cascade_child ORDER BY note;

-- ON DELETE CASCADE, two levels (grandparent -> parent -> child), then blocked by a NO ACTION key
CREATE TABLE fk_cascade2_grandparent (id int PRIMARY KEY);
CREATE TABLE fk_cascade2_parent (id int PRIMARY KEY, gid int REFERENCES fk_cascade2_grandparent ON DELETE CASCADE);
CREATE TABLE fk_cascade2_child (id int PRIMARY KEY, pid int REFERENCES fk_cascade2_parent ON DELETE CASCADE);
INSERT INTO fk_cascade2_grandparent VALUES (1), (2);
INSERT INTO fk_cascade2_parent VALUES (10, 1), (11, 1), (20, 2);
INSERT INTO fk_cascade2_child VALUES (100, 10), (101, 11), (200, 20);
DELETE FROM fk_cascade2_grandparent WHERE id = 1;
SELECT id, gid FROM fk_cascade2_parent ORDER BY id;
SELECT id, pid FROM fk_cascade2_child ORDER BY id;
CREATE TABLE fk_cascade2_blocker (id int PRIMARY KEY, cid int REFERENCES fk_cascade2_child);
INSERT INTO fk_cascade2_blocker VALUES (1, 200);
DELETE FROM fk_cascade2_grandparent WHERE id = 2;
SELECT (SELECT count(*) FROM fk_cascade2_grandparent) AS grandparents, (SELECT count(*) FROM fk_cascade2_parent) AS parents, (SELECT count(*) FROM fk_cascade2_child) AS children;

-- ON DELETE SET NULL, also on a NOT NULL column (23502) and on a composite key
CREATE TABLE fk_setnull_parent (id int PRIMARY KEY);
CREATE TABLE fk_setnull_child (id int PRIMARY KEY, pid int REFERENCES fk_setnull_parent ON DELETE SET NULL);
INSERT INTO fk_setnull_parent VALUES (1), (2);
INSERT INTO fk_setnull_child VALUES (1, 1), (2, 1), (3, 2);
DELETE FROM fk_setnull_parent WHERE id = 1;
SELECT id, pid FROM fk_setnull_child ORDER BY id;
UPDATE fk_setnull_parent SET id = 3 WHERE id = 2;
CREATE TABLE fk_setnull_required (id int PRIMARY KEY, pid int NOT NULL REFERENCES fk_setnull_parent ON DELETE SET NULL);
INSERT INTO fk_setnull_required VALUES (1, 2);
DELETE FROM fk_setnull_parent WHERE id = 2;
SELECT id, pid FROM fk_setnull_child WHERE pid IS NOT NULL ORDER BY id;
CREATE TABLE fk_setnull_pair_parent (a int, b int, PRIMARY KEY (a, b));
CREATE TABLE fk_setnull_pair_child (id int PRIMARY KEY, a int, b int, FOREIGN KEY (a, b) REFERENCES fk_setnull_pair_parent ON DELETE SET NULL);
INSERT INTO fk_setnull_pair_parent VALUES (1, 1), (1, 2);
INSERT INTO fk_setnull_pair_child VALUES (1, 1, 1), (2, 1, 2);
DELETE FROM fk_setnull_pair_parent WHERE b = 1;
SELECT id, a, b FROM fk_setnull_pair_child ORDER BY id;

-- ON DELETE SET DEFAULT: the default must itself be present in the parent
CREATE TABLE fk_setdefault_parent (id int PRIMARY KEY, name text);
CREATE TABLE fk_setdefault_child (id int PRIMARY KEY, pid int DEFAULT 0 REFERENCES fk_setdefault_parent ON DELETE SET DEFAULT);
INSERT INTO fk_setdefault_parent VALUES (0, 'unassigned'), (1, 'one'), (2, 'two');
INSERT INTO fk_setdefault_child VALUES (1, 1), (2, 2), (3, 1);
INSERT INTO fk_setdefault_child (id) VALUES (4);
DELETE FROM fk_setdefault_parent WHERE id = 1;
SELECT id, pid FROM fk_setdefault_child ORDER BY id;
DELETE FROM fk_setdefault_parent WHERE id = 0;
CREATE TABLE fk_setdefault_missing (id int PRIMARY KEY, pid int DEFAULT 99 REFERENCES fk_setdefault_parent ON DELETE SET DEFAULT);
INSERT INTO fk_setdefault_missing VALUES (1, 2);
DELETE FROM fk_setdefault_parent WHERE id = 2;
SELECT c.id, c.pid, p.name FROM fk_setdefault_child c JOIN fk_setdefault_parent p ON p.id = c.pid ORDER BY c.id;
CREATE TABLE fk_setdefault_no_default (id int PRIMARY KEY, pid int REFERENCES fk_setdefault_parent ON DELETE SET DEFAULT);
DELETE FROM fk_setdefault_missing;
INSERT INTO fk_setdefault_no_default VALUES (1, 2);
DELETE FROM fk_setdefault_parent WHERE name = 'two';
SELECT id, pid FROM fk_setdefault_no_default ORDER BY id;

-- TRUNCATE of a referenced table (0A000), both together, TRUNCATE ... CASCADE
CREATE TABLE fk_trunc_parent (id int PRIMARY KEY);
CREATE TABLE fk_trunc_child (id int PRIMARY KEY, pid int REFERENCES fk_trunc_parent);
INSERT INTO fk_trunc_parent VALUES (1), (2);
INSERT INTO fk_trunc_child VALUES (1, 1);
TRUNCATE fk_trunc_parent;
TRUNCATE TABLE fk_trunc_child;
TRUNCATE TABLE fk_trunc_parent;
SELECT count(*) AS trunc_parents FROM fk_trunc_parent;
INSERT INTO fk_trunc_child VALUES (2, 2);
TRUNCATE fk_trunc_parent, fk_trunc_child;
SELECT (SELECT count(*) FROM fk_trunc_parent) AS parents, (SELECT count(*) FROM fk_trunc_child) AS children;
INSERT INTO fk_trunc_parent VALUES (3);
INSERT INTO fk_trunc_child VALUES (3, 3);
TRUNCATE fk_trunc_parent RESTRICT;
TRUNCATE fk_trunc_parent CASCADE;
SELECT count(*) AS children_after_cascade FROM fk_trunc_child;

-- DROP TABLE of a referenced table (2BP01), DROP TABLE ... CASCADE drops the constraint and
-- keeps the child's rows, child then parent, both in one statement
CREATE TABLE fk_drop_parent (id int PRIMARY KEY);
CREATE TABLE fk_drop_child (id int PRIMARY KEY, pid int REFERENCES fk_drop_parent);
INSERT INTO fk_drop_parent VALUES (1);
INSERT INTO fk_drop_child VALUES (1, 1);
DROP TABLE fk_drop_parent;
DROP TABLE IF EXISTS fk_drop_parent;
DROP TABLE fk_drop_parent RESTRICT;
DROP TABLE fk_drop_parent CASCADE;
SELECT id, pid FROM fk_drop_child ORDER BY id;
INSERT INTO fk_drop_child VALUES (2, 42);
SELECT conname, contype FROM pg_constraint WHERE conrelid = 'fk_drop_child'::regclass ORDER BY conname;
CREATE TABLE fk_drop2_parent (id int PRIMARY KEY);
CREATE TABLE fk_drop2_child (pid int REFERENCES fk_drop2_parent);
DROP TABLE fk_drop2_child;
DROP TABLE fk_drop2_parent;
CREATE TABLE fk_drop3_parent (id int PRIMARY KEY);
CREATE TABLE fk_drop3_child (pid int REFERENCES fk_drop3_parent);
DROP TABLE fk_drop3_parent, fk_drop3_child;
SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'fk_drop%' ORDER BY table_name;

-- DROP COLUMN of a parent's referenced column and DROP CONSTRAINT of its key (2BP01, then
-- CASCADE), DROP COLUMN of the child's key column (the constraint goes with it)
CREATE TABLE fk_dropcol_parent (id int PRIMARY KEY, code text UNIQUE);
CREATE TABLE fk_dropcol_child (id int PRIMARY KEY, pid int REFERENCES fk_dropcol_parent, code text REFERENCES fk_dropcol_parent (code));
INSERT INTO fk_dropcol_parent VALUES (1, 'a');
INSERT INTO fk_dropcol_child VALUES (1, 1, 'a');
ALTER TABLE fk_dropcol_parent DROP COLUMN id;
ALTER TABLE fk_dropcol_parent DROP CONSTRAINT fk_dropcol_parent_pkey;
ALTER TABLE fk_dropcol_child DROP COLUMN pid;
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'fk_dropcol_child'::regclass ORDER BY conname;
ALTER TABLE fk_dropcol_parent DROP COLUMN code;
ALTER TABLE fk_dropcol_parent DROP COLUMN code CASCADE;
INSERT INTO fk_dropcol_child VALUES (2, 'no longer checked');
SELECT id, code FROM fk_dropcol_child ORDER BY id;
SELECT conname FROM pg_constraint WHERE conrelid = 'fk_dropcol_child'::regclass ORDER BY conname;

-- ALTER TABLE ... ADD CONSTRAINT ... FOREIGN KEY over valid and violating rows, DROP CONSTRAINT
-- [IF EXISTS], ADD FOREIGN KEY without a name, ADD COLUMN ... REFERENCES, NOT VALID / VALIDATE
CREATE TABLE fk_alter_parent (id int PRIMARY KEY, name text);
CREATE TABLE fk_alter_child (id int PRIMARY KEY, pid int);
INSERT INTO fk_alter_parent VALUES (1, 'a'), (2, 'b');
INSERT INTO fk_alter_child VALUES (1, 1), (2, 2), (3, NULL);
ALTER TABLE fk_alter_child ADD CONSTRAINT fk_alter_child_pid FOREIGN KEY (pid) REFERENCES fk_alter_parent (id);
INSERT INTO fk_alter_child VALUES (4, 3);
DELETE FROM fk_alter_parent WHERE id = 2;
ALTER TABLE fk_alter_child DROP CONSTRAINT fk_alter_child_pid;
INSERT INTO fk_alter_child VALUES (5, 3);
ALTER TABLE fk_alter_child ADD CONSTRAINT fk_alter_child_pid_again FOREIGN KEY (pid) REFERENCES fk_alter_parent;
ALTER TABLE fk_alter_child DROP CONSTRAINT fk_alter_child_pid_again;
ALTER TABLE fk_alter_child DROP CONSTRAINT IF EXISTS fk_alter_child_pid_again;
SELECT id, pid FROM fk_alter_child ORDER BY id;
DELETE FROM fk_alter_child WHERE pid = 3;
ALTER TABLE fk_alter_child ADD FOREIGN KEY (pid) REFERENCES fk_alter_parent (id);
ALTER TABLE fk_alter_child ADD COLUMN other_id int REFERENCES fk_alter_parent;
ALTER TABLE fk_alter_child ADD CONSTRAINT fk_alter_child_by_name FOREIGN KEY (pid) REFERENCES fk_alter_parent (name);
ALTER TABLE fk_alter_child ADD CONSTRAINT fk_alter_child_to_nothing FOREIGN KEY (pid) REFERENCES fk_alter_nothing (id);
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'fk_alter_child'::regclass AND contype = 'f' ORDER BY conname;
UPDATE fk_alter_child SET other_id = 9 WHERE id = 1;
UPDATE fk_alter_child SET other_id = 2 WHERE id = 1;
ALTER TABLE fk_alter_child DROP CONSTRAINT IF EXISTS fk_alter_child_other_id_fkey;
INSERT INTO fk_alter_child (id, other_id) VALUES (6, 7);
ALTER TABLE fk_alter_child ADD CONSTRAINT fk_alter_child_other FOREIGN KEY (other_id) REFERENCES fk_alter_parent NOT VALID;
INSERT INTO fk_alter_child (id, other_id) VALUES (7, 8);
ALTER TABLE fk_alter_child VALIDATE CONSTRAINT fk_alter_child_other;
DELETE FROM fk_alter_child WHERE other_id = 7;
ALTER TABLE IF EXISTS fk_alter_child VALIDATE CONSTRAINT fk_alter_child_other;
SELECT conname, convalidated FROM pg_constraint WHERE conrelid = 'fk_alter_child'::regclass AND contype = 'f' ORDER BY conname;

-- RENAME COLUMN of the child's key column, RENAME of the parent table and of its column,
-- RENAME CONSTRAINT, ALTER COLUMN TYPE of the child's key column: the key is still enforced
CREATE TABLE fk_rename_parent (id int PRIMARY KEY);
CREATE TABLE fk_rename_child (id int PRIMARY KEY, pid int REFERENCES fk_rename_parent);
INSERT INTO fk_rename_parent VALUES (1);
ALTER TABLE fk_rename_child RENAME COLUMN pid TO parent_ref;
INSERT INTO fk_rename_child VALUES (1, 2);
INSERT INTO fk_rename_child (id, parent_ref) VALUES (2, 1);
ALTER TABLE fk_rename_parent RENAME TO fk_rename_parent_new;
INSERT INTO fk_rename_child VALUES (3, 3);
DELETE FROM fk_rename_parent_new WHERE id = 1;
ALTER TABLE fk_rename_parent_new RENAME COLUMN id TO parent_id;
INSERT INTO fk_rename_child VALUES (4, 4);
ALTER TABLE fk_rename_child RENAME CONSTRAINT fk_rename_child_pid_fkey TO fk_rename_child_parent;
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'fk_rename_child'::regclass AND contype = 'f' ORDER BY conname;
ALTER TABLE fk_rename_child ALTER COLUMN parent_ref TYPE bigint;
INSERT INTO fk_rename_child VALUES (5, 5);
ALTER TABLE fk_rename_child ALTER COLUMN parent_ref TYPE text;
SELECT id, parent_ref FROM fk_rename_child ORDER BY id;

-- Transaction blocks: parent and child in one block (COMMIT, ROLLBACK), a key error aborts the
-- block (25P02 until ROLLBACK), a savepoint rolls back only the failed insert
CREATE TABLE fk_tx_parent (id int PRIMARY KEY, name text);
CREATE TABLE fk_tx_child (id int PRIMARY KEY, pid int REFERENCES fk_tx_parent);
BEGIN;
INSERT INTO fk_tx_parent VALUES (1, 'committed');
INSERT INTO fk_tx_child VALUES (1, 1);
COMMIT;
SELECT c.id, p.name FROM fk_tx_child c JOIN fk_tx_parent p ON p.id = c.pid ORDER BY c.id;
BEGIN TRANSACTION;
INSERT INTO fk_tx_parent VALUES (2, 'rolled back');
INSERT INTO fk_tx_child VALUES (2, 2);
ROLLBACK;
SELECT id, name FROM fk_tx_parent ORDER BY id;
INSERT INTO fk_tx_child VALUES (3, 2);
START TRANSACTION;
INSERT INTO fk_tx_child VALUES (4, 9);
SELECT count(*) AS refused_in_failed_block FROM fk_tx_child;
ROLLBACK WORK;
BEGIN WORK;
DELETE FROM fk_tx_parent WHERE id = 1;
INSERT INTO fk_tx_parent VALUES (5, 'refused after the error');
COMMIT WORK;
SELECT id, name FROM fk_tx_parent ORDER BY name;
/* 2 */ BEGIN;
INSERT INTO fk_tx_parent VALUES (3, 'kept by the savepoint');
SAVEPOINT before_child;
INSERT INTO fk_tx_child VALUES (5, 4);
ROLLBACK TO SAVEPOINT before_child;
INSERT INTO fk_tx_child VALUES (5, 3);
/* 2 */ COMMIT;
SELECT c.id, c.pid, p.name FROM fk_tx_child c JOIN fk_tx_parent p ON p.id = c.pid ORDER BY c.id;
/* 3 */ BEGIN;
DELETE FROM fk_tx_child WHERE pid = 1;
DELETE FROM fk_tx_parent WHERE name = 'committed';
/* 2 */ ROLLBACK;
SELECT count(*) AS tx_children FROM fk_tx_child;
/* 4 */ BEGIN;
DELETE FROM fk_tx_child WHERE pid = 3;
DELETE FROM fk_tx_parent WHERE id = 3;
/* 3 */ COMMIT;
SELECT p.id, p.name, c.id AS child FROM fk_tx_parent p LEFT JOIN fk_tx_child c ON c.pid = p.id ORDER BY p.id;

-- Foreign keys left at the end, as information_schema lists them
SELECT tc.table_name, tc.constraint_name, kcu.column_name, kcu.position_in_unique_constraint FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name AND kcu.table_name = tc.table_name WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_name LIKE 'fk_comp%' ORDER BY tc.table_name, tc.constraint_name, kcu.ordinal_position;
SELECT rc.constraint_name, rc.delete_rule, ccu.table_name AS referenced_table, ccu.column_name AS referenced_column FROM information_schema.referential_constraints rc JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = rc.constraint_name WHERE rc.constraint_name LIKE 'fk_set%' ORDER BY rc.constraint_name, ccu.column_name;

-- ON UPDATE CASCADE (Sluice refuses it with 0A000), ON UPDATE SET NULL and SET DEFAULT
CREATE TABLE fk_onupdate_parent (id int PRIMARY KEY);
CREATE TABLE fk_onupdate_cascade (pid int REFERENCES fk_onupdate_parent ON UPDATE CASCADE);
CREATE TABLE fk_onupdate_setnull (pid int, FOREIGN KEY (pid) REFERENCES fk_onupdate_parent ON DELETE CASCADE ON UPDATE SET NULL);
CREATE TABLE fk_onupd_parent (id int PRIMARY KEY, x int DEFAULT 0);
CREATE TABLE fk_onupd_null (id int PRIMARY KEY, pid int REFERENCES fk_onupd_parent ON UPDATE SET NULL);
CREATE TABLE fk_onupd_default (id int PRIMARY KEY, pid int DEFAULT 3 REFERENCES fk_onupd_parent ON UPDATE SET DEFAULT ON DELETE SET NULL);
INSERT INTO fk_onupd_parent (id) VALUES (1), (2), (3), (4);
INSERT INTO fk_onupd_null VALUES (1, 1), (2, 2), (3, 3);
INSERT INTO fk_onupd_default VALUES (1, 1), (2, 2), (3, 4);
UPDATE fk_onupd_parent SET x = 1;
SELECT id, pid FROM fk_onupd_null ORDER BY id;
UPDATE fk_onupd_parent SET id = id + 10 WHERE id IN (1, 2);
SELECT id, pid FROM fk_onupd_null ORDER BY id /* 2 */;
SELECT id, pid FROM fk_onupd_default ORDER BY id;
UPDATE fk_onupd_parent SET id = 5 WHERE id = 3;
SELECT id, pid FROM fk_onupd_null ORDER BY id /* 3 */;
SELECT id, pid FROM fk_onupd_default ORDER BY id /* 2 */;
DELETE FROM fk_onupd_parent WHERE id = 4;
SELECT id, pid FROM fk_onupd_default ORDER BY id /* 3 */;
UPDATE fk_onupd_parent SET id = 6 WHERE id = 11;
SELECT id FROM fk_onupd_parent ORDER BY id;
BEGIN /* on update set null */;
UPDATE fk_onupd_parent SET id = 7 WHERE id = 12;
SELECT id, pid FROM fk_onupd_null ORDER BY id /* in the block */;
ROLLBACK /* on update set null */;
SELECT id, pid FROM fk_onupd_null ORDER BY id /* after rollback */;
SELECT conname, confupdtype, confdeltype FROM pg_constraint WHERE left(conname, 9) = 'fk_onupd_' ORDER BY conname;
SELECT constraint_name, update_rule, delete_rule FROM information_schema.referential_constraints WHERE left(constraint_name, 9) = 'fk_onupd_' ORDER BY constraint_name;

-- DEFERRABLE INITIALLY DEFERRED: in autocommit the check runs when the statement commits
CREATE TABLE fk_deferred_child (id int, pid int REFERENCES fk_onupdate_parent DEFERRABLE INITIALLY DEFERRED);
INSERT INTO fk_deferred_child VALUES (1, 5);
