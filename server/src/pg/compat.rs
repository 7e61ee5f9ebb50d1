//! Rewrites of Postgres constructs that datafusion-pg-catalog's rules leave and DataFusion does
//! not plan, found in the catalog queries real clients send.
//!
//! - `ARRAY(SELECT e FROM ... ORDER BY o)` (psql's `\d t`) becomes the scalar subquery
//!   `(SELECT array_agg(e ORDER BY o) FROM ...)`.
//! - [`substitute`]: fragments of known client queries that cannot be planned, replaced by what
//!   they evaluate to in Sluice (it has no TOAST tables, so their options are always empty).
//! - [`empty_catalog_columns`]: a catalog query that fails to plan but reads a catalog that is
//!   always empty in Sluice (policies, triggers, inheritance, publications, extended statistics)
//!   is answered with no rows.
//! - What pgjdbc's `DatabaseMetaData` and Metabase's sync send: `information_schema.
//!   _pg_expandarray(a)` and `(row).field`, `'name'::regproc` compared with a `regproc` column,
//!   int2vector subscripts (`indoption[i]`, from 0), comment functions over `::regclass` casts of
//!   computed names, and correlated subqueries in CASE that DataFusion can join.
//! - A system catalog's name cast to `regclass` (`'pg_catalog.pg_class'::regclass`, what clients
//!   compare `pg_description.classoid` with) is PostgreSQL's OID of that catalog.
//! - `x::regclass` printed (psql's `\d t` lists the tables that reference one so) becomes the
//!   relation's name, and pgcli's correlated subquery naming a foreign key's columns a function.
//! - `information_schema`'s constraint views (`table_constraints`, `key_column_usage`,
//!   `referential_constraints`, `constraint_column_usage`, `constraint_table_usage`) as queries
//!   over `pg_catalog`.
//! - A sequence function's name argument cast to `regclass` (`nextval('s'::regclass)`, how
//!   PostgreSQL prints a serial's default) is the name itself: the engine resolves it when it
//!   runs the call (`sluice::sql::sequences`), as PostgreSQL resolves the cast.

use std::borrow::Cow;

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_relations, Expr, FunctionArguments, GroupByExpr, Ident, OrderByKind, SelectItem, SetExpr, Statement,
    TableFactor, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// An expression's text, parsed as PostgreSQL's (what the rewrites below put in a statement).
pub(crate) fn parse_expr(sql: &str) -> Result<Expr, datafusion::sql::sqlparser::parser::ParserError> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).and_then(|mut p| p.parse_expr())
}

/// Query fragments clients send, and what Sluice answers in their place.
const SUBSTITUTIONS: &[(&str, &str)] = &[
    // psql `\d+ t`: the options of the table's TOAST table.
    (
        "pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ')",
        "''",
    ),
];

/// asyncpg's type introspection (`INTRO_LOOKUP_TYPES`: recursive CTEs inside CASE) in the
/// form Sluice plans: the requested types and, for arrays, their element types (Sluice has no
/// domains, ranges or composite column types). `$1` is the `oid[]` of the types asked for.
pub const ASYNCPG_TYPES: &str = "SELECT t.oid AS oid, ns.nspname AS ns, t.typname AS name, t.typtype AS kind,
    CAST(NULL AS INT) AS basetype, CASE WHEN t.typelem = 0 THEN NULL ELSE t.typelem END AS elemtype,
    e.typdelim AS elemdelim, CAST(NULL AS INT) AS range_subtype, CAST(NULL AS TEXT[]) AS attrtypoids,
    CAST(NULL AS TEXT[]) AS attrnames, 0 AS depth, CAST(NULL AS TEXT) AS basetype_name,
    e.typname AS elemtype_name, CAST(NULL AS TEXT) AS range_subtype_name
  FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace ns ON ns.oid = t.typnamespace
    LEFT JOIN pg_catalog.pg_type e ON t.typelem <> 0 AND e.oid = t.typelem
  WHERE array_has(CAST($1 AS INT[]), t.oid)
  UNION ALL
  SELECT e.oid, ns.nspname, e.typname, e.typtype, NULL, NULL, NULL, NULL, NULL, NULL, 1, NULL, NULL, NULL
  FROM pg_catalog.pg_type t JOIN pg_catalog.pg_type e ON e.oid = t.typelem
    JOIN pg_catalog.pg_namespace ns ON ns.oid = e.typnamespace
  WHERE array_has(CAST($1 AS INT[]), t.oid) AND t.typelem <> 0
  ORDER BY depth DESC";

/// Whether a query is asyncpg's type introspection.
pub fn is_asyncpg_introspection(sql: &str) -> bool {
    sql.contains("WITH RECURSIVE typeinfo_tree(")
}

/// Catalogs that hold no rows in Sluice.
const EMPTY_CATALOGS: &[&str] = &[
    "pg_policy",
    "pg_trigger",
    "pg_inherits",
    "pg_rewrite",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_namespace",
    "pg_statistic_ext",
    "pg_statistic_ext_data",
    "pg_event_trigger",
    "pg_foreign_table",
    "pg_partitioned_table",
    "pg_subscription",
];

/// Replaces the known unplannable fragments of client queries.
pub fn substitute(sql: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(sql);
    for (pattern, replacement) in SUBSTITUTIONS {
        if out.contains(pattern) {
            out = Cow::Owned(out.replace(pattern, replacement));
        }
    }
    out
}

/// The column names of a query that only reads Postgres catalogs, at least one of them always
/// empty in Sluice, so that its answer is no rows; `None` for any other statement.
pub fn empty_catalog_columns(statement: &Statement) -> Option<Vec<String>> {
    let Statement::Query(query) = statement else { return None };
    let reads = catalog_reads(statement);
    let mut body = query.body.as_ref();
    while let SetExpr::SetOperation { left, .. } = body {
        body = left.as_ref();
    }
    let SetExpr::Select(select) = body else { return None };
    if !reads.only_catalogs || !reads.an_empty_one {
        return None;
    }
    select.projection.iter().map(sluice::sql::query::select_item_name).collect()
}

/// What relations a statement reads.
struct CatalogReads {
    /// Every relation is a Postgres catalog (or a table function, which reads no table).
    only_catalogs: bool,
    /// One of them is always empty in Sluice ([`EMPTY_CATALOGS`]).
    an_empty_one: bool,
}

fn catalog_reads(statement: &Statement) -> CatalogReads {
    let mut reads = CatalogReads { only_catalogs: true, an_empty_one: false };
    let _ = visit_relations(statement, |name| {
        let parts: Vec<String> = name.0.iter().map(|p| p.to_string().to_lowercase()).collect();
        let table = parts.last().cloned().unwrap_or_default();
        reads.only_catalogs &= match parts.len() {
            1 => table.starts_with("pg_") || matches!(table.as_str(), "generate_series" | "unnest"),
            n => matches!(parts.get(n - 2).map(String::as_str), Some("pg_catalog" | "information_schema")),
        };
        reads.an_empty_one |= EMPTY_CATALOGS.contains(&table.as_str());
        ControlFlow::<()>::Continue(())
    });
    reads
}

/// datafusion-pg-catalog's statement rules, in its order (its `PostgresCompatibilityParser`),
/// but for `RemoveSubqueryFromProjection`, which turns a correlated scalar subquery of the
/// select list into NULL and stamps `LIMIT 1` on the others (so `SELECT (SELECT b.w FROM b)`
/// was NULL, and a subquery of two rows hid PostgreSQL's 21000). A user's subquery runs as
/// written (the engine plans the correlated ones, see `sluice::functions::single_row`); a
/// statement that reads nothing but the catalogs gets that rule only when it does not plan
/// without it ([`PgCatalogRules::catalog_subqueries_removed`]): clients write those for
/// PostgreSQL's planner (psql's `\d` has `a.attcollation <> t.typcollation`), and an empty
/// column is better for them than an error.
#[derive(Debug)]
pub struct PgCatalogRules {
    rules: Vec<std::sync::Arc<dyn datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule>>,
}

impl PgCatalogRules {
    pub fn new() -> Self {
        use datafusion_pg_catalog::sql::rules::*;
        use std::sync::Arc;
        Self {
            rules: vec![
                Arc::new(AliasDuplicatedProjectionRewrite),
                Arc::new(ResolveUnqualifiedIdentifier),
                Arc::new(RewriteArrayAnyAllOperation),
                Arc::new(PrependUnqualifiedPgTableName),
                Arc::new(StripCallableQualifier),
                Arc::new(FixArrayLiteral),
                Arc::new(CurrentUserVariableToSessionUserFunctionCall),
                Arc::new(StripCollate),
                Arc::new(RewritePgCatalogOperator),
                Arc::new(RewriteRegCastToSubquery::new()),
            ],
        }
    }

    pub fn rewrite(&self, statement: Statement) -> Statement {
        use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;
        let statement = self.rules.iter().fold(statement, |s, rule| rule.rewrite(s));
        FixVersionColumnName.rewrite(statement)
    }

    /// `statement` with datafusion-pg-catalog's `RemoveSubqueryFromProjection` applied, when it
    /// reads nothing but the catalogs and the rule changes it (None otherwise).
    pub fn catalog_subqueries_removed(statement: &Statement) -> Option<Statement> {
        use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;
        if !catalog_reads(statement).only_catalogs {
            return None;
        }
        let removed = datafusion_pg_catalog::sql::rules::RemoveSubqueryFromProjection.rewrite(statement.clone());
        (removed != *statement).then_some(removed)
    }
}

use datafusion_pg_catalog::sql::rules::FixVersionColumnName;

impl Default for PgCatalogRules {
    fn default() -> Self {
        Self::new()
    }
}

/// Applies every rewrite of this module.
pub fn rewrite(statement: &mut Statement) {
    qualify_sluice_catalogs(statement);
    let _ = statement.visit(&mut SequenceNames);
    let _ = statement.visit(&mut InformationSchemaViews);
    let _ = statement.visit(&mut AttrdefSubquery);
    let _ = statement.visit(&mut AttributeNamesSubquery);
    let _ = statement.visit(&mut GenerateSubscripts);
    let _ = statement.visit(&mut ExpandArray);
    let _ = statement.visit(&mut CompositeFields);
    let _ = statement.visit(&mut Int2VectorSubscripts);
    let _ = statement.visit(&mut NoComments);
    let _ = statement.visit(&mut CatalogOids);
    let _ = statement.visit(&mut ComputedRegclass);
    function_results(statement);
    let _ = statement.visit(&mut RegprocNames);
    let _ = statement.visit(&mut RegtypeNames);
    regclass_names(statement);
    let _ = statement.visit(&mut ArraySubquery);
    if catalog_reads(statement).only_catalogs {
        super::correlation::propagate(statement);
        joined_scalar_subqueries(statement);
        let _ = statement.visit(&mut AggregateScalarSubqueries);
    }
}

/// The catalogs Sluice adds to `pg_catalog` (see `catalog.rs`), found without the schema as
/// PostgreSQL finds them (pg_catalog is first on every search path).
const SLUICE_PG_CATALOGS: &[&str] = &["pg_indexes", "pg_stat_activity", "pg_sequences"];

fn qualify_sluice_catalogs(statement: &mut Statement) {
    let _ = datafusion::sql::sqlparser::ast::visit_relations_mut(statement, |name| {
        if let [datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(ident)] = name.0.as_slice() {
            if ident.quote_style.is_none() && SLUICE_PG_CATALOGS.contains(&ident.value.to_lowercase().as_str()) {
                let table = ident.clone();
                name.0 = vec![
                    datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(
                        datafusion::sql::sqlparser::ast::Ident::new("pg_catalog"),
                    ),
                    datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(table),
                ];
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `information_schema` views that DataFusion's `information_schema` lacks (constraints, sequences) or has
/// with other columns (`views`: Sluice's views cannot be written through, so `is_updatable` is NO), as
/// queries over `pg_catalog` (whose rows come from `relations.rs`), with PostgreSQL 15's columns.
/// NOT NULL columns are listed as CHECK constraints named `<schema oid>_<table oid>_<attnum>_not_null`,
/// as PostgreSQL lists them.
const INFORMATION_SCHEMA_VIEWS: &[(&str, &str)] = &[
    (
        "table_constraints",
        "SELECT CAST(current_database() AS TEXT) AS constraint_catalog, CAST(n.nspname AS TEXT) AS constraint_schema,
           CAST(c.conname AS TEXT) AS constraint_name, CAST(current_database() AS TEXT) AS table_catalog,
           CAST(n.nspname AS TEXT) AS table_schema, CAST(r.relname AS TEXT) AS table_name,
           CAST(CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' WHEN 'f' THEN 'FOREIGN KEY'
             ELSE 'CHECK' END AS TEXT) AS constraint_type,
           CAST('NO' AS TEXT) AS is_deferrable, CAST('NO' AS TEXT) AS initially_deferred,
           CAST('YES' AS TEXT) AS enforced,
           CAST(CASE WHEN c.contype = 'u' THEN CASE WHEN i.indnullsnotdistinct THEN 'NO' ELSE 'YES' END END AS TEXT)
             AS nulls_distinct
         FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_class r ON r.oid = c.conrelid
           JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
           LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.conindid
         UNION ALL
         SELECT CAST(current_database() AS TEXT) AS constraint_catalog, CAST(n.nspname AS TEXT) AS constraint_schema,
           CAST(CAST(n.oid AS TEXT) || '_' || CAST(r.oid AS TEXT) || '_' || CAST(a.attnum AS TEXT) || '_not_null' AS TEXT)
             AS constraint_name,
           CAST(current_database() AS TEXT) AS table_catalog, CAST(n.nspname AS TEXT) AS table_schema,
           CAST(r.relname AS TEXT) AS table_name, CAST('CHECK' AS TEXT) AS constraint_type,
           CAST('NO' AS TEXT) AS is_deferrable, CAST('NO' AS TEXT) AS initially_deferred,
           CAST('YES' AS TEXT) AS enforced, CAST(NULL AS TEXT) AS nulls_distinct
         FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class r ON r.oid = a.attrelid
           JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
         WHERE a.attnotnull AND a.attnum > 0 AND r.relkind IN ('r', 'p')
           AND n.nspname NOT IN ('pg_catalog', 'information_schema')",
    ),
    (
        "sequences",
        "SELECT CAST(current_database() AS TEXT) AS sequence_catalog, CAST(s.schemaname AS TEXT) AS sequence_schema,
           CAST(s.sequencename AS TEXT) AS sequence_name, CAST(s.data_type AS TEXT) AS data_type,
           CAST(CASE s.data_type WHEN 'smallint' THEN 16 WHEN 'integer' THEN 32 ELSE 64 END AS INT)
             AS numeric_precision,
           CAST(2 AS INT) AS numeric_precision_radix, CAST(0 AS INT) AS numeric_scale,
           CAST(s.start_value AS TEXT) AS start_value, CAST(s.min_value AS TEXT) AS minimum_value,
           CAST(s.max_value AS TEXT) AS maximum_value, CAST(s.increment_by AS TEXT) AS increment,
           CAST(CASE WHEN s.cycle THEN 'YES' ELSE 'NO' END AS TEXT) AS cycle_option
         FROM pg_catalog.pg_sequences s",
    ),
    (
        "views",
        "SELECT CAST(current_database() AS TEXT) AS table_catalog, CAST(v.schemaname AS TEXT) AS table_schema,
           CAST(v.viewname AS TEXT) AS table_name, CAST(v.definition AS TEXT) AS view_definition,
           CAST('NONE' AS TEXT) AS check_option, CAST('NO' AS TEXT) AS is_updatable,
           CAST('NO' AS TEXT) AS is_insertable_into, CAST('NO' AS TEXT) AS is_trigger_updatable,
           CAST('NO' AS TEXT) AS is_trigger_deletable, CAST('NO' AS TEXT) AS is_trigger_insertable_into
         FROM pg_catalog.pg_views v",
    ),
    (
        "columns",
        "SELECT CAST(current_database() AS TEXT) AS table_catalog, CAST(n.nspname AS TEXT) AS table_schema,
           CAST(r.relname AS TEXT) AS table_name, CAST(a.attname AS TEXT) AS column_name,
           CAST(a.attnum AS INT) AS ordinal_position,
           CAST(CASE WHEN a.attgenerated = '' THEN sluice_attribute_default(a.attrelid, a.attnum) END AS TEXT)
             AS column_default,
           CAST(CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END AS TEXT) AS is_nullable,
           CAST(CASE WHEN substr(t.typname, 1, 1) = '_' THEN 'ARRAY' WHEN t.typtype = 'e' THEN 'USER-DEFINED'
             ELSE format_type(a.atttypid, -1) END AS TEXT) AS data_type,
           CAST(CASE WHEN a.atttypid IN (1042, 1043) AND a.atttypmod > 4 THEN a.atttypmod - 4 END AS INT)
             AS character_maximum_length,
           CAST(CASE WHEN a.atttypid IN (25, 1042, 1043) THEN 1073741824 END AS INT) AS character_octet_length,
           CAST(CASE a.atttypid WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53
             WHEN 1700 THEN CASE WHEN a.atttypmod > 4 THEN (a.atttypmod - 4) / 65536 END END AS INT)
             AS numeric_precision,
           CAST(CASE WHEN a.atttypid IN (21, 23, 20, 700, 701) THEN 2 WHEN a.atttypid = 1700 THEN 10 END AS INT)
             AS numeric_precision_radix,
           CAST(CASE WHEN a.atttypid IN (21, 23, 20) THEN 0
             WHEN a.atttypid = 1700 AND a.atttypmod > 4 THEN (a.atttypmod - 4) % 65536 END AS INT) AS numeric_scale,
           CAST(CASE WHEN a.atttypid = 1082 THEN 0
             WHEN a.atttypid IN (1083, 1114, 1184, 1266) AND a.atttypmod >= 0 THEN a.atttypmod
             WHEN a.atttypid IN (1083, 1114, 1184, 1266, 1186) THEN 6 END AS INT)
             AS datetime_precision,
           CAST(NULL AS TEXT) AS interval_type, CAST(NULL AS INT) AS interval_precision,
           CAST(NULL AS TEXT) AS character_set_catalog, CAST(NULL AS TEXT) AS character_set_schema,
           CAST(NULL AS TEXT) AS character_set_name,
           CAST(CASE WHEN a.attcollation IN (950, 951, 12340) THEN current_database() END AS TEXT)
             AS collation_catalog,
           CAST(CASE WHEN a.attcollation IN (950, 951, 12340) THEN 'pg_catalog' END AS TEXT) AS collation_schema,
           CAST(CASE a.attcollation WHEN 950 THEN 'C' WHEN 951 THEN 'POSIX' WHEN 12340 THEN 'ucs_basic' END AS TEXT)
             AS collation_name,
           CAST(NULL AS TEXT) AS domain_catalog, CAST(NULL AS TEXT) AS domain_schema, CAST(NULL AS TEXT) AS domain_name,
           CAST(current_database() AS TEXT) AS udt_catalog, CAST(COALESCE(tn.nspname, 'pg_catalog') AS TEXT) AS udt_schema,
           CAST(t.typname AS TEXT) AS udt_name, CAST(NULL AS TEXT) AS scope_catalog, CAST(NULL AS TEXT) AS scope_schema,
           CAST(NULL AS TEXT) AS scope_name, CAST(NULL AS INT) AS maximum_cardinality,
           CAST(CAST(a.attnum AS TEXT) AS TEXT) AS dtd_identifier, CAST('NO' AS TEXT) AS is_self_referencing,
           CAST(CASE WHEN a.attidentity IN ('a', 'd') THEN 'YES' ELSE 'NO' END AS TEXT) AS is_identity,
           CAST(CASE a.attidentity WHEN 'a' THEN 'ALWAYS' WHEN 'd' THEN 'BY DEFAULT' END AS TEXT)
             AS identity_generation,
           CAST(seq.start_value AS TEXT) AS identity_start, CAST(seq.increment_by AS TEXT) AS identity_increment,
           CAST(seq.max_value AS TEXT) AS identity_maximum, CAST(seq.min_value AS TEXT) AS identity_minimum,
           CAST(CASE WHEN seq.cycle THEN 'YES' ELSE 'NO' END AS TEXT)
             AS identity_cycle,
           CAST(CASE WHEN a.attgenerated = '' THEN 'NEVER' ELSE 'ALWAYS' END AS TEXT) AS is_generated,
           CAST(CASE WHEN a.attgenerated <> '' THEN sluice_attribute_default(a.attrelid, a.attnum) END AS TEXT)
             AS generation_expression,
           CAST(CASE WHEN r.relkind IN ('r', 'p') THEN 'YES' ELSE 'NO' END AS TEXT) AS is_updatable
         FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class r ON r.oid = a.attrelid
           JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
           LEFT JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
           LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
           LEFT JOIN pg_catalog.pg_sequences seq ON a.attidentity IN ('a', 'd') AND seq.schemaname = n.nspname
             AND seq.sequencename = r.relname || '_' || a.attname || '_seq'
         WHERE a.attnum > 0 AND r.relkind IN ('r', 'v', 'm', 'p', 'f')",
    ),
    (
        "key_column_usage",
        "SELECT current_database() AS constraint_catalog, k.nspname AS constraint_schema, k.conname AS constraint_name,
           current_database() AS table_catalog, k.nspname AS table_schema, k.relname AS table_name,
           a.attname AS column_name, CAST(k.ordinal_position AS INT) AS ordinal_position,
           CAST(CASE WHEN k.contype = 'f' THEN array_position(i.indkey, k.confkey[k.ordinal_position]) END AS INT)
             AS position_in_unique_constraint
         FROM (SELECT n.nspname, c.conname, c.contype, c.conindid, c.confkey, r.relname, c.conrelid,
                 unnest(c.conkey) AS attnum,
                 unnest(generate_series(1, CAST(cardinality(c.conkey) AS BIGINT))) AS ordinal_position
               FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_class r ON r.oid = c.conrelid
                 JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
               WHERE c.contype IN ('p', 'u', 'f')) k
           JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.attnum
           LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = k.conindid",
    ),
    // A foreign key's unique constraint is the parent's key whose index it uses (PostgreSQL finds it
    // through pg_depend): none when that is a unique index made by CREATE UNIQUE INDEX.
    (
        "referential_constraints",
        "SELECT CAST(current_database() AS TEXT) AS constraint_catalog, CAST(ncon.nspname AS TEXT) AS constraint_schema,
           CAST(con.conname AS TEXT) AS constraint_name,
           CAST(CASE WHEN npkc.nspname IS NULL THEN NULL ELSE current_database() END AS TEXT)
             AS unique_constraint_catalog,
           CAST(npkc.nspname AS TEXT) AS unique_constraint_schema, CAST(pkc.conname AS TEXT) AS unique_constraint_name,
           CAST(CASE con.confmatchtype WHEN 'f' THEN 'FULL' WHEN 'p' THEN 'PARTIAL' WHEN 's' THEN 'NONE' END AS TEXT)
             AS match_option,
           CAST(CASE con.confupdtype WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT'
             WHEN 'r' THEN 'RESTRICT' WHEN 'a' THEN 'NO ACTION' END AS TEXT) AS update_rule,
           CAST(CASE con.confdeltype WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT'
             WHEN 'r' THEN 'RESTRICT' WHEN 'a' THEN 'NO ACTION' END AS TEXT) AS delete_rule
         FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_namespace ncon ON ncon.oid = con.connamespace
           LEFT JOIN pg_catalog.pg_constraint pkc ON pkc.conindid = con.conindid AND pkc.conrelid = con.confrelid
             AND pkc.contype IN ('p', 'u')
           LEFT JOIN pg_catalog.pg_namespace npkc ON npkc.oid = pkc.connamespace
         WHERE con.contype = 'f'",
    ),
    // The columns a constraint uses: a key's own, the referenced ones of a foreign key, those a
    // CHECK reads (its conkey).
    (
        "constraint_column_usage",
        "SELECT CAST(current_database() AS TEXT) AS table_catalog, CAST(nr.nspname AS TEXT) AS table_schema,
           CAST(r.relname AS TEXT) AS table_name, CAST(a.attname AS TEXT) AS column_name,
           CAST(current_database() AS TEXT) AS constraint_catalog, CAST(nc.nspname AS TEXT) AS constraint_schema,
           CAST(c.conname AS TEXT) AS constraint_name
         FROM (SELECT conname, connamespace, CASE WHEN contype = 'f' THEN confrelid ELSE conrelid END AS relid,
                 unnest(CASE WHEN contype = 'f' THEN confkey ELSE conkey END) AS attnum
               FROM pg_catalog.pg_constraint WHERE contype IN ('c', 'p', 'u', 'f')) c
           JOIN pg_catalog.pg_namespace nc ON nc.oid = c.connamespace
           JOIN pg_catalog.pg_class r ON r.oid = c.relid
           JOIN pg_catalog.pg_namespace nr ON nr.oid = r.relnamespace
           JOIN pg_catalog.pg_attribute a ON a.attrelid = c.relid AND a.attnum = c.attnum
         WHERE r.relkind IN ('r', 'p')",
    ),
    // The table a constraint uses: a key's own, the referenced one of a foreign key.
    (
        "constraint_table_usage",
        "SELECT CAST(current_database() AS TEXT) AS table_catalog, CAST(nr.nspname AS TEXT) AS table_schema,
           CAST(r.relname AS TEXT) AS table_name, CAST(current_database() AS TEXT) AS constraint_catalog,
           CAST(nc.nspname AS TEXT) AS constraint_schema, CAST(c.conname AS TEXT) AS constraint_name
         FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_namespace nc ON nc.oid = c.connamespace
           JOIN pg_catalog.pg_class r ON r.oid = CASE WHEN c.contype = 'f' THEN c.confrelid ELSE c.conrelid END
           JOIN pg_catalog.pg_namespace nr ON nr.oid = r.relnamespace
         WHERE c.contype IN ('p', 'u', 'f') AND r.relkind IN ('r', 'p')",
    ),
];

/// A reference to one of [`INFORMATION_SCHEMA_VIEWS`] becomes its query, under the reference's
/// alias (or the view's name).
struct InformationSchemaViews;

impl VisitorMut for InformationSchemaViews {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let Some(derived) = information_schema_view(factor) {
            *factor = derived;
        }
        ControlFlow::Continue(())
    }
}

fn information_schema_view(factor: &TableFactor) -> Option<TableFactor> {
    use datafusion::sql::sqlparser::ast::ObjectNamePart;
    // Every relation of every statement passes here: names are compared without allocating.
    let TableFactor::Table { name, alias, args: None, .. } = factor else { return None };
    let [.., ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(table)] = name.0.as_slice() else {
        return None;
    };
    if !schema.value.eq_ignore_ascii_case("information_schema") {
        return None;
    }
    let (view, sql) = INFORMATION_SCHEMA_VIEWS.iter().find(|(view, _)| table.value.eq_ignore_ascii_case(view))?;
    let alias = alias.as_ref().map_or_else(|| (*view).to_string(), |a| a.name.to_string());
    let text = format!("SELECT * FROM ({sql}) AS {alias}");
    let statement =
        Parser::new(&PostgreSqlDialect {}).try_with_sql(&text).and_then(|mut p| p.parse_statement()).ok()?;
    let Statement::Query(query) = statement else { return None };
    let SetExpr::Select(select) = *query.body else { return None };
    select.from.into_iter().next().map(|from| from.relation)
}

/// The correlated subquery psql's `\d t` and SQLAlchemy's `get_columns` read a column's default
/// with, `(SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d WHERE d.adrelid = a.attrelid
/// AND d.adnum = a.attnum [AND ...])`, becomes `sluice_attribute_default(a.attrelid, a.attnum)`:
/// DataFusion does not plan it, and datafusion-pg-catalog's rules would make it NULL.
struct AttrdefSubquery;

impl VisitorMut for AttrdefSubquery {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(call) = attrdef_subquery(expr) {
            *expr = call;
        }
        ControlFlow::Continue(())
    }
}

fn attrdef_subquery(expr: &Expr) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{BinaryOperator, TableFactor};
    let Expr::Subquery(query) = expr else { return None };
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let [from] = select.from.as_slice() else { return None };
    let TableFactor::Table { name, alias, .. } = &from.relation else { return None };
    if !from.joins.is_empty() || !name.to_string().to_lowercase().ends_with("pg_attrdef") {
        return None;
    }
    let reference = alias.as_ref().map(|a| a.name.value.to_lowercase());
    // Whether an expression is the column `column` of pg_attrdef.
    let is_attrdef_column = |e: &Expr, column: &str| -> bool {
        match e {
            Expr::Identifier(ident) => ident.value.eq_ignore_ascii_case(column),
            Expr::CompoundIdentifier(parts) => match parts.split_last() {
                Some((last, [.., table])) => {
                    let table = table.value.to_lowercase();
                    last.value.eq_ignore_ascii_case(column)
                        && (reference.as_deref() == Some(table.as_str()) || table == "pg_attrdef")
                }
                _ => false,
            },
            _ => false,
        }
    };
    let (mut relation, mut number) = (None, None);
    for e in conjuncts(select.selection.as_ref()?) {
        let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = e else { continue };
        for (ours, theirs) in [(left, right), (right, left)] {
            if is_attrdef_column(ours, "adrelid") && !is_attrdef_column(theirs, "adrelid") {
                relation = Some(theirs.as_ref().clone());
            } else if is_attrdef_column(ours, "adnum") && !is_attrdef_column(theirs, "adnum") {
                number = Some(theirs.as_ref().clone());
            }
        }
    }
    // pg_get_expr(adbin, adrelid, true): the pretty form (psql's).
    let pretty = select.projection.iter().any(|item| {
        let datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(Expr::Function(f)) = item else { return false };
        let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &f.args else { return false };
        list.args.len() == 3 && list.args.last().is_some_and(|a| a.to_string().eq_ignore_ascii_case("true"))
    });
    let sql = format!("pg_catalog.sluice_attribute_default({}, {}, {pretty})", relation?, number?);
    parse_expr(&sql).ok()
}

/// pgcli's foreign keys name a constraint's columns with a correlated subquery DataFusion does not
/// plan, `(SELECT array_agg(attname ORDER BY i) FROM (SELECT unnest(k) AS attnum,
/// generate_subscripts(k, 1) AS i) x JOIN pg_attribute c USING (attnum) WHERE c.attrelid = r)`:
/// it becomes `sluice_attribute_names(r, k)`, the same names in the same order (see relations.rs).
struct AttributeNamesSubquery;

impl VisitorMut for AttributeNamesSubquery {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(call) = attribute_names_subquery(expr) {
            *expr = call;
        }
        ControlFlow::Continue(())
    }
}

fn attribute_names_subquery(expr: &Expr) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{BinaryOperator, FunctionArg, FunctionArgExpr};
    let Expr::Subquery(query) = expr else { return None };
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let [SelectItem::UnnamedExpr(Expr::Function(aggregate))] = select.projection.as_slice() else { return None };
    let [from] = select.from.as_slice() else { return None };
    let [join] = from.joins.as_slice() else { return None };
    let TableFactor::Table { name, alias, .. } = &join.relation else { return None };
    let TableFactor::Derived { subquery, .. } = &from.relation else { return None };
    let SetExpr::Select(numbered) = subquery.body.as_ref() else { return None };
    if !aggregate.name.to_string().eq_ignore_ascii_case("array_agg")
        || !name.to_string().to_lowercase().ends_with("pg_attribute")
    {
        return None;
    }
    // The array unnested as `attnum`.
    let array = numbered.projection.iter().find_map(|item| {
        let SelectItem::ExprWithAlias { expr: Expr::Function(unnest), alias } = item else { return None };
        let FunctionArguments::List(list) = &unnest.args else { return None };
        let [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] = list.args.as_slice() else { return None };
        let unnests = unnest.name.to_string().eq_ignore_ascii_case("unnest");
        (unnests && alias.value.eq_ignore_ascii_case("attnum")).then_some(array)
    })?;
    // The relation, from `c.attrelid = r`.
    let attribute = alias.as_ref().map_or_else(|| "pg_attribute".to_string(), |a| a.name.value.to_lowercase());
    let is_attrelid = |e: &Expr| match e {
        Expr::Identifier(ident) => ident.value.eq_ignore_ascii_case("attrelid"),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [table, column] => {
                table.value.eq_ignore_ascii_case(&attribute) && column.value.eq_ignore_ascii_case("attrelid")
            }
            _ => false,
        },
        _ => false,
    };
    let Some(Expr::BinaryOp { left, op: BinaryOperator::Eq, right }) = &select.selection else { return None };
    let relation = match (is_attrelid(left), is_attrelid(right)) {
        (true, false) => right,
        (false, true) => left,
        _ => return None,
    };
    parse_expr(&format!("pg_catalog.sluice_attribute_names({relation}, {array})")).ok()
}

/// `generate_subscripts(a, d)` (SQLAlchemy's key reflection numbers `conkey` with it) is
/// `unnest(generate_series(1, cardinality(a)))` for the first dimension (none for another), which DataFusion plans, and which pairs with an
/// `unnest(a)` beside it row by row as in PostgreSQL.
struct GenerateSubscripts;

impl VisitorMut for GenerateSubscripts {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        let named = matches!(
            function.name.0.last(),
            Some(datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(n))
                if n.value.eq_ignore_ascii_case("generate_subscripts")
        );
        let FunctionArguments::List(list) = &function.args else { return ControlFlow::Continue(()) };
        let [array, dimension] = list.args.as_slice() else { return ControlFlow::Continue(()) };
        if !named {
            return ControlFlow::Continue(());
        }
        // Sluice's arrays have one dimension: any other has no subscripts.
        let sql = format!(
            "unnest(generate_series(1, CAST(CASE WHEN {dimension} = 1 THEN cardinality({array}) ELSE 0 END AS BIGINT)))"
        );
        if let Ok(rewritten) = parse_expr(&sql) {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

/// `information_schema._pg_expandarray(a)`, the set-returning function pgjdbc's and Metabase's
/// key and index queries number `indkey` and `conkey` with, becomes
/// `unnest(sluice_expand_array(a))`: one `(x, n)` struct per element (see catalog.rs), which
/// `(... ).x` and `(... ).n` read as PostgreSQL's composite fields. Two such calls in one select
/// list unnest in step, as PostgreSQL runs set-returning functions side by side.
struct ExpandArray;

impl VisitorMut for ExpandArray {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::ObjectNamePart;
        let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        let named = match function.name.0.as_slice() {
            [ObjectNamePart::Identifier(name)] => name.value.eq_ignore_ascii_case("_pg_expandarray"),
            [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(name)] => {
                schema.value.eq_ignore_ascii_case("information_schema")
                    && name.value.eq_ignore_ascii_case("_pg_expandarray")
            }
            _ => false,
        };
        let FunctionArguments::List(list) = &function.args else { return ControlFlow::Continue(()) };
        let [array] = list.args.as_slice() else { return ControlFlow::Continue(()) };
        if !named {
            return ControlFlow::Continue(());
        }
        let sql = format!("unnest(pg_catalog.sluice_expand_array({array}))");
        if let Ok(rewritten) = parse_expr(&sql) {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

/// `(composite).field`, PostgreSQL's access to a field of a row value (`(keys).x` of
/// `_pg_expandarray`'s rows), becomes `get_field(composite, 'field')`: DataFusion reads a field
/// after a dot only from a column name, not from a function's value or a subquery's column.
struct CompositeFields;

impl VisitorMut for CompositeFields {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::AccessExpr;
        let Expr::CompoundFieldAccess { root, access_chain } = expr else { return ControlFlow::Continue(()) };
        let Expr::Nested(inner) = root.as_ref() else { return ControlFlow::Continue(()) };
        let mut fields = Vec::with_capacity(access_chain.len());
        for access in access_chain.iter() {
            match access {
                AccessExpr::Dot(Expr::Identifier(field)) => fields.push(field.value.clone()),
                _ => return ControlFlow::Continue(()),
            }
        }
        let mut text = inner.to_string();
        for field in fields {
            text = format!("get_field({text}, '{}')", field.replace('\'', "''"));
        }
        if let Ok(rewritten) = parse_expr(&text) {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

/// `indoption[i]`: Sluice keeps `pg_index.indoption` in int2vector's text form (`0 0`, which
/// SQLAlchemy splits), and int2vector's subscripts count from 0; pgjdbc's `getIndexInfo` reads
/// `I_INDOPTION[ORDINAL_POSITION - 1] & 1` for a column's order. The subscript becomes the
/// `i + 1`th word of the text, as a smallint (NULL past the end, as PostgreSQL's).
struct Int2VectorSubscripts;

impl VisitorMut for Int2VectorSubscripts {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::{AccessExpr, Subscript};
        let Expr::CompoundFieldAccess { root, access_chain } = expr else { return ControlFlow::Continue(()) };
        // `t.indoption[i]` is the root `t` with `.indoption` and `[i]` (or `t.indoption` with `[i]`).
        let mut column: Vec<String> = match root.as_ref() {
            Expr::Identifier(ident) => vec![ident.to_string()],
            Expr::CompoundIdentifier(parts) => parts.iter().map(ToString::to_string).collect(),
            _ => return ControlFlow::Continue(()),
        };
        let Some((AccessExpr::Subscript(Subscript::Index { index }), fields)) = access_chain.split_last() else {
            return ControlFlow::Continue(());
        };
        for field in fields {
            match field {
                AccessExpr::Dot(Expr::Identifier(ident)) => column.push(ident.to_string()),
                _ => return ControlFlow::Continue(()),
            }
        }
        let named = column.last().is_some_and(|name| name.trim_matches('"').to_lowercase().ends_with("indoption"));
        if !named {
            return ControlFlow::Continue(());
        }
        let column = column.join(".");
        let sql = format!("CAST(NULLIF(split_part({column}, ' ', CAST(({index}) + 1 AS INT)), '') AS SMALLINT)");
        if let Ok(rewritten) = parse_expr(&sql) {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

/// A type's name from its oid: `x::regtype::text` becomes `format_type(x, NULL)` and
/// `x::regtype[]::text[]` (also over `COALESCE` of such casts) `sluice_format_types(x)`, as
/// PostgreSQL prints a `regtype` (`bigint`, `character varying`, `text[]`). Sluice's `regtype` is an
/// `integer` (datafusion-pg-catalog's), whose text would be the number. pgcli's completion and
/// psql's `\df` read argument and column types so.
/// `nextval('s'::regclass)` (and `currval`, `setval`) as `nextval('s')`.
struct SequenceNames;

impl VisitorMut for SequenceNames {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        let name = function.name.0.last().map(|part| part.to_string().to_lowercase()).unwrap_or_default();
        if !matches!(name.as_str(), "nextval" | "currval" | "setval") {
            return ControlFlow::Continue(());
        }
        let FunctionArguments::List(list) = &mut function.args else { return ControlFlow::Continue(()) };
        if let Some(datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
            datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(argument),
        )) = list.args.first_mut()
        {
            if let Expr::Cast { expr: inner, data_type, .. } = argument {
                if cast_type(data_type) == "regclass" && matches!(inner.as_ref(), Expr::Value(_)) {
                    *argument = (**inner).clone();
                }
            }
        }
        ControlFlow::Continue(())
    }
}

struct RegtypeNames;

/// `'pg_catalog.pg_class'::regclass` (or any constant naming a catalog of
/// `descriptions::CATALOG_OIDS`) is PostgreSQL's OID of that catalog, which is what clients
/// compare with a `classoid`: the rows of `pg_description` (ours, see descriptions.rs, and the
/// built-in objects' of datafusion-pg-catalog) carry PostgreSQL's catalog OIDs, while
/// datafusion-pg-catalog gives the catalogs' own `pg_class` rows OIDs of its own (and finds an
/// unqualified name only in `public`). A parameter cast to `regclass` (`$1::regclass`, as
/// SQLAlchemy over psycopg 3 sends it) becomes `COALESCE(sluice_catalog_oid($1), $1::regclass)`.
struct CatalogOids;

impl VisitorMut for CatalogOids {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast { expr: inner, data_type, .. } = expr else { return ControlFlow::Continue(()) };
        let Expr::Value(value) = inner.as_ref() else { return ControlFlow::Continue(()) };
        if cast_type(data_type) != "regclass" {
            return ControlFlow::Continue(());
        }
        let replacement = match &value.value {
            Value::SingleQuotedString(name) => super::descriptions::catalog_oid(name).map(|oid| oid.to_string()),
            Value::Placeholder(placeholder) => Some(format!(
                "COALESCE(pg_catalog.sluice_catalog_oid({placeholder}), CAST({placeholder} AS {data_type}))"
            )),
            _ => None,
        };
        if let Some(replacement) = replacement.and_then(|sql| parse_expr(&sql).ok()) {
            *expr = replacement;
        }
        ControlFlow::Continue(())
    }
}

/// `e::regclass` of a text computed by a function or `||` (`pg_get_serial_sequence(...)::regclass`,
/// `format('%I.%I', s, t)::regclass`) becomes `sluice_regclass_oid(e)`, which looks the name up
/// (see relations.rs): datafusion-pg-catalog resolves only constants and reads anything else as
/// an OID. (A describer's argument was made NULL by [`NoComments`] before this runs.)
struct ComputedRegclass;

/// Whether `expr` computes a text: a call of a function that returns one, `||`, or a cast to text.
fn computes_text(expr: &Expr) -> bool {
    const TEXT_FUNCTIONS: [&str; 12] = [
        "pg_get_serial_sequence",
        "format",
        "concat",
        "concat_ws",
        "quote_ident",
        "lower",
        "upper",
        "replace",
        "trim",
        "btrim",
        "current_schema",
        "substring",
    ];
    match expr {
        Expr::Nested(inner) => computes_text(inner),
        Expr::Function(function) => function
            .name
            .0
            .last()
            .and_then(|part| part.as_ident())
            .is_some_and(|name| TEXT_FUNCTIONS.contains(&name.value.to_lowercase().as_str())),
        Expr::BinaryOp { op: datafusion::sql::sqlparser::ast::BinaryOperator::StringConcat, .. } => true,
        Expr::Cast { data_type, .. } => matches!(cast_type(data_type).as_str(), "text" | "varchar" | "name"),
        _ => false,
    }
}

impl VisitorMut for ComputedRegclass {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast { expr: inner, data_type, .. } = expr else { return ControlFlow::Continue(()) };
        if cast_type(data_type) != "regclass" || !computes_text(inner) {
            return ControlFlow::Continue(());
        }
        if let Ok(lookup) = parse_expr(&format!("pg_catalog.sluice_regclass_oid({inner})")) {
            *expr = lookup;
        }
        ControlFlow::Continue(())
    }
}

/// The type of a cast in lower case without a `pg_catalog.` qualifier (`regtype`, `text[]`).
fn cast_type(data_type: &datafusion::sql::sqlparser::ast::DataType) -> String {
    let text = data_type.to_string().to_lowercase();
    text.strip_prefix("pg_catalog.").map(str::to_string).unwrap_or(text)
}

/// Replaces each `CAST(e AS regtype[])` in `expr` (through parentheses and `COALESCE`) by
/// `sluice_format_types(e)`; whether there was one.
fn name_type_arrays(expr: &mut Expr) -> bool {
    match expr {
        Expr::Nested(inner) => name_type_arrays(inner),
        Expr::Cast { expr: inner, data_type, .. } if cast_type(data_type) == "regtype[]" => {
            let sql = format!("pg_catalog.sluice_format_types({inner})");
            match parse_expr(&sql) {
                Ok(named) => {
                    *expr = named;
                    true
                }
                Err(_) => false,
            }
        }
        Expr::Function(function) if function.name.to_string().eq_ignore_ascii_case("coalesce") => {
            let FunctionArguments::List(list) = &mut function.args else { return false };
            let mut any = false;
            for arg in list.args.iter_mut() {
                if let datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
                    datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(e),
                ) = arg
                {
                    any |= name_type_arrays(e);
                }
            }
            any
        }
        _ => false,
    }
}

impl VisitorMut for RegtypeNames {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast { expr: inner, data_type, .. } = expr else { return ControlFlow::Continue(()) };
        match cast_type(data_type).as_str() {
            "text" | "varchar" | "character varying" | "name" => {
                let Expr::Cast { expr: oid, data_type: reg, .. } = inner.as_ref() else {
                    return ControlFlow::Continue(());
                };
                // A name's cast (`'int4'::regtype::text`) is datafusion-pg-catalog's to resolve.
                let literal = matches!(oid.as_ref(), Expr::Value(v) if !matches!(v.value, Value::Number(..)));
                if cast_type(reg) != "regtype" || literal {
                    return ControlFlow::Continue(());
                }
                let sql = format!("pg_catalog.format_type({oid}, NULL)");
                if let Ok(named) = parse_expr(&sql) {
                    *expr = named;
                }
            }
            "text[]" | "varchar[]" | "name[]" => {
                let mut operand = inner.as_ref().clone();
                if name_type_arrays(&mut operand) {
                    *expr = operand;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// `col_description(...)`, `obj_description(...)`, `shobj_description(...)` over a cast of a
/// computed name to `regclass` are NULL, their arguments not evaluated: datafusion-pg-catalog
/// resolves a constant's cast (`'t'::regclass`) and reads a column's as its OID, but cannot cast
/// other text (Metabase's describe-fields names its table with `format('%I.%I', schema,
/// table)::regclass`). Other calls are answered by descriptions.rs.
struct NoComments;

/// Whether `expr` casts to `regclass` something other than a constant or a column.
fn casts_computed_name_to_regclass(expr: &Expr) -> bool {
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
        if let Expr::Cast { expr: inner, data_type, .. } = e {
            let mut operand = inner.as_ref();
            while let Expr::Nested(nested) = operand {
                operand = nested;
            }
            let plain = matches!(operand, Expr::Value(_) | Expr::Identifier(_) | Expr::CompoundIdentifier(_));
            if cast_type(data_type) == "regclass" && !plain {
                found = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    found
}

impl VisitorMut for NoComments {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::ObjectNamePart;
        let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        let describer = matches!(
            function.name.0.last(),
            Some(ObjectNamePart::Identifier(n))
                if ["col_description", "obj_description", "shobj_description"]
                    .iter()
                    .any(|f| n.value.eq_ignore_ascii_case(f))
        );
        let computed = match &function.args {
            FunctionArguments::List(list) => list.args.iter().any(|arg| match arg {
                datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
                    datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(e),
                ) => casts_computed_name_to_regclass(e),
                _ => false,
            }),
            _ => false,
        };
        if describer && computed {
            if let Ok(null) = parse_expr("CAST(NULL AS TEXT)") {
                *expr = null;
            }
        }
        ControlFlow::Continue(())
    }
}

/// `pg_get_function_result(p.oid)` of a `pg_proc` row `p` (psql's `\df`, pgjdbc's
/// `getFunctions`, which tells set-returning functions by its `SETOF`) becomes what PostgreSQL
/// prints for a function without `TABLE` arguments, from `p`'s own columns:
/// `CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END || format_type(p.prorettype, NULL)`.
fn function_results(statement: &mut Statement) {
    use datafusion::sql::sqlparser::ast::ObjectNamePart;
    // The names `pg_proc` goes by in the statement.
    let mut procs = Vec::new();
    let mut aliases = ProcAliases(&mut procs);
    let _ = statement.visit(&mut aliases);
    if procs.is_empty() {
        return;
    }
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(statement, |expr| {
        let Expr::Function(function) = &*expr else { return ControlFlow::<()>::Continue(()) };
        let named = matches!(
            function.name.0.last(),
            Some(ObjectNamePart::Identifier(n)) if n.value.eq_ignore_ascii_case("pg_get_function_result")
        );
        let FunctionArguments::List(list) = &function.args else { return ControlFlow::Continue(()) };
        let [argument] = list.args.as_slice() else { return ControlFlow::Continue(()) };
        let argument = argument.to_string();
        let Some((row, column)) = argument.rsplit_once('.') else { return ControlFlow::Continue(()) };
        if !named || !column.eq_ignore_ascii_case("oid") || !procs.iter().any(|p| p.eq_ignore_ascii_case(row)) {
            return ControlFlow::Continue(());
        }
        let sql = format!(
            "CASE WHEN {row}.proretset THEN 'SETOF ' ELSE '' END || pg_catalog.format_type({row}.prorettype, NULL)"
        );
        if let Ok(result) = parse_expr(&sql) {
            *expr = Expr::Nested(Box::new(result));
        }
        ControlFlow::Continue(())
    });
}

/// Collects the alias (or name) of each reference to `pg_proc`.
struct ProcAliases<'a>(&'a mut Vec<String>);

impl VisitorMut for ProcAliases<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, alias, .. } = factor {
            let table = name.0.last().map(|p| p.to_string().to_lowercase()).unwrap_or_default();
            if table == "pg_proc" {
                self.0.push(alias.as_ref().map_or_else(|| name.to_string(), |a| a.name.to_string()));
            }
        }
        ControlFlow::Continue(())
    }
}

/// `column = 'pg_catalog.array_in'::regproc` (pgjdbc's type cache asks which types are arrays
/// so): Sluice's `regproc` columns (`pg_type.typinput`, ...) hold the function's name as
/// PostgreSQL prints a `regproc`, so the literal is compared as that name. (datafusion-pg-catalog
/// would look the name up in `pg_proc` and compare the column's text with an oid.)
struct RegprocNames;

impl VisitorMut for RegprocNames {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::BinaryOperator;
        let Expr::BinaryOp { left, op: BinaryOperator::Eq | BinaryOperator::NotEq, right } = expr else {
            return ControlFlow::Continue(());
        };
        let is_column = |e: &Expr| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
        if is_column(right) {
            if let Some(name) = regproc_literal(left) {
                **left = Expr::value(Value::SingleQuotedString(name));
            }
        } else if is_column(left) {
            if let Some(name) = regproc_literal(right) {
                **right = Expr::value(Value::SingleQuotedString(name));
            }
        }
        ControlFlow::Continue(())
    }
}

/// The function name of `'name'::regproc` (without `pg_catalog.`, which PostgreSQL does not print
/// for its own functions).
fn regproc_literal(expr: &Expr) -> Option<String> {
    let Expr::Cast { expr, data_type, .. } = expr else { return None };
    let type_name = data_type.to_string().to_lowercase();
    if type_name != "regproc" && type_name != "pg_catalog.regproc" {
        return None;
    }
    let Expr::Value(value) = expr.as_ref() else { return None };
    let Value::SingleQuotedString(name) = &value.value else { return None };
    Some(name.strip_prefix("pg_catalog.").unwrap_or(name).to_string())
}

/// `x::regclass` printed is the relation's name in PostgreSQL (psql's `\d` shows the tables
/// that reference one so: `conrelid::pg_catalog.regclass AS ontable`). datafusion-pg-catalog keeps
/// it an OID, so that it compares with OIDs; where it is printed (an item of the statement's own
/// select list) or cast on to text, it becomes `sluice_regclass_name(x)` (see relations.rs). A
/// constant (`'t'::regclass`, `$1::regclass`) is left to datafusion-pg-catalog, which looks the
/// name up.
fn regclass_names(statement: &mut Statement) {
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(statement, |expr| {
        let Expr::Cast { expr: inner, data_type, .. } = &*expr else { return ControlFlow::<()>::Continue(()) };
        let text = matches!(
            data_type.to_string().to_lowercase().as_str(),
            "text" | "pg_catalog.text" | "varchar" | "character varying" | "name" | "pg_catalog.name"
        );
        if let Some(name) = regclass_name(inner).filter(|_| text) {
            *expr = name;
        }
        ControlFlow::Continue(())
    });
    if let Statement::Query(query) = statement {
        regclass_select_items(query.body.as_mut());
    }
}

fn regclass_select_items(body: &mut SetExpr) {
    match body {
        SetExpr::SetOperation { left, right, .. } => {
            regclass_select_items(left);
            regclass_select_items(right);
        }
        SetExpr::Select(select) => {
            for item in &mut select.projection {
                match item {
                    SelectItem::UnnamedExpr(expr) => {
                        let Some(name) = regclass_name(expr) else { continue };
                        // PostgreSQL names the column after the cast's column, or `regclass`.
                        let alias = match expr {
                            Expr::Cast { expr: inner, .. } => match inner.as_ref() {
                                Expr::Identifier(ident) => ident.clone(),
                                Expr::CompoundIdentifier(parts) => {
                                    parts.last().cloned().unwrap_or_else(|| Ident::new("regclass"))
                                }
                                _ => Ident::new("regclass"),
                            },
                            _ => Ident::new("regclass"),
                        };
                        *item = SelectItem::ExprWithAlias { expr: name, alias };
                    }
                    SelectItem::ExprWithAlias { expr, .. } => {
                        if let Some(name) = regclass_name(expr) {
                            *expr = name;
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// `sluice_regclass_name(x)` for `x::regclass` of an `x` that is not a constant.
fn regclass_name(expr: &Expr) -> Option<Expr> {
    let Expr::Cast { expr: inner, data_type, .. } = expr else { return None };
    let type_name = data_type.to_string().to_lowercase();
    if (type_name != "regclass" && type_name != "pg_catalog.regclass") || matches!(inner.as_ref(), Expr::Value(_)) {
        return None;
    }
    parse_expr(&format!("pg_catalog.sluice_regclass_name({inner})")).ok()
}

/// `CASE WHEN c THEN (SELECT e FROM ... WHERE w) [ELSE NULL] END` is
/// `(SELECT e FROM ... WHERE (w) AND c)` once aggregated; DataFusion cannot plan such subqueries
/// inside CASE (see [`joinable_case_subquery`] for those it can). As a whole select item, a
/// correlated one is then NULL (datafusion-pg-catalog's RemoveSubqueryFromProjection).
fn case_subquery(expr: &Expr) -> Option<Expr> {
    let Expr::Case { operand: None, conditions, else_result, .. } = expr else { return None };
    let [when] = conditions.as_slice() else { return None };
    if let Some(other) = else_result {
        if !matches!(other.as_ref(), Expr::Value(v) if v.value == Value::Null) {
            return None;
        }
    }
    let Expr::Subquery(query) = &when.result else { return None };
    let mut query = query.clone();
    let SetExpr::Select(select) = query.body.as_mut() else { return None };
    let condition = Expr::Nested(Box::new(when.condition.clone()));
    select.selection = Some(match select.selection.take() {
        Some(w) => Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(w))),
            op: datafusion::sql::sqlparser::ast::BinaryOperator::And,
            right: Box::new(condition),
        },
        None => condition,
    });
    Some(Expr::Subquery(query))
}

const AGGREGATES: &[&str] =
    &["count", "sum", "min", "max", "avg", "array_agg", "string_agg", "bool_and", "bool_or", "every", "json_agg"];

/// Catalog queries (SQLAlchemy's `get_columns`) use correlated scalar subqueries that return at
/// most one row by the catalog's keys; DataFusion only plans aggregated ones, so their value is
/// wrapped in `max(...)`, which is the same value for one row (and NULL for none).
struct AggregateScalarSubqueries;

impl VisitorMut for AggregateScalarSubqueries {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        // A subquery DataFusion can join to stays in its CASE (and is aggregated as the visit
        // goes on); another has its condition moved in, and is then NULL (see case_subquery).
        if !joinable_case_subquery(expr) {
            if let Some(moved) = case_subquery(expr) {
                *expr = moved;
            }
        }
        if let Expr::Subquery(query) = expr {
            aggregate_scalar_subquery(query);
        }
        ControlFlow::Continue(())
    }
}

/// Whether `expr` is `CASE WHEN c THEN (SELECT e FROM t WHERE a = b [AND ...]) [ELSE NULL] END`
/// with one table and only equalities of columns, which DataFusion plans as a join once the
/// subquery is aggregated (pgjdbc's `getUDTs` reads a domain's base type so:
/// `CASE WHEN t.typtype = 'd' THEN (SELECT ... FROM pg_type base_type WHERE base_type.oid =
/// t.typbasetype) END`). SQLAlchemy's reflection has CASE subqueries over joins and casts of
/// columns to `regclass`, which it cannot.
fn joinable_case_subquery(expr: &Expr) -> bool {
    use datafusion::sql::sqlparser::ast::BinaryOperator;
    let Expr::Case { operand: None, conditions, .. } = expr else { return false };
    let [when] = conditions.as_slice() else { return false };
    let Expr::Subquery(query) = &when.result else { return false };
    let SetExpr::Select(select) = query.body.as_ref() else { return false };
    let [from] = select.from.as_slice() else { return false };
    if !from.joins.is_empty() || !matches!(from.relation, TableFactor::Table { .. }) {
        return false;
    }
    let Some(selection) = &select.selection else { return false };
    let is_column = |e: &Expr| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
    conjuncts(selection).into_iter().all(
        |e| matches!(e, Expr::BinaryOp { left, op: BinaryOperator::Eq, right } if is_column(left) && is_column(right)),
    )
}

/// The terms of a condition's top-level ANDs (parentheses removed).
fn conjuncts(condition: &Expr) -> Vec<&Expr> {
    use datafusion::sql::sqlparser::ast::BinaryOperator;
    let mut pending = vec![condition];
    let mut terms = Vec::new();
    while let Some(e) = pending.pop() {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::And, right } => pending.extend([left.as_ref(), right.as_ref()]),
            Expr::Nested(inner) => pending.push(inner),
            term => terms.push(term),
        }
    }
    terms
}

/// The key columns of catalogs by which a scalar subquery finds at most one row.
const CATALOG_KEYS: [&str; 2] = ["oid", "seqrelid"];

/// A correlated scalar subquery in a catalog query's select list that finds its one row by a
/// catalog key equal to an expression of the outer row, `(SELECT e FROM t WHERE t.key = f(outer)
/// [AND ...])`, becomes a LEFT JOIN of `t` under a fresh alias on the subquery's condition and
/// `e` in its place: DataFusion decorrelates only equalities of columns (SQLAlchemy reflects a
/// column's identity options so, with `pg_sequence.seqrelid =
/// pg_get_serial_sequence(...)::regclass::oid`). Every column the subquery names must be
/// qualified, and the outer query must read one FROM item.
fn joined_scalar_subqueries(statement: &mut Statement) {
    let Statement::Query(query) = statement else { return };
    let mut next = 0;
    joined_in_body(query.body.as_mut(), &mut next);
}

fn joined_in_body(body: &mut SetExpr, next: &mut usize) {
    match body {
        SetExpr::SetOperation { left, right, .. } => {
            joined_in_body(left, next);
            joined_in_body(right, next);
        }
        SetExpr::Query(query) => joined_in_body(query.body.as_mut(), next),
        SetExpr::Select(select) => {
            for from in &mut select.from {
                for relation in
                    std::iter::once(&mut from.relation).chain(from.joins.iter_mut().map(|j| &mut j.relation))
                {
                    if let TableFactor::Derived { subquery, .. } = relation {
                        joined_in_body(subquery.body.as_mut(), next);
                    }
                }
            }
            if select.from.len() != 1 {
                return;
            }
            let mut joins = Vec::new();
            for item in &mut select.projection {
                let (SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. }) = item else { continue };
                let before = joins.len();
                let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(expr, |e| {
                    if let Expr::Subquery(query) = &*e {
                        if let Some((join, value)) = subquery_join(query, *next) {
                            *next += 1;
                            joins.push(join);
                            *e = value;
                        }
                    }
                    ControlFlow::<()>::Continue(())
                });
                // A CASE over a JSON value is JSON (DataFusion's CASE drops the type's mark).
                if joins.len() > before && json_case(expr) {
                    if let Ok(cast) = parse_expr(&format!("CAST({expr} AS JSON)")) {
                        *expr = cast;
                    }
                }
            }
            if let Some(from) = select.from.first_mut() {
                from.joins.extend(joins);
            }
        }
        _ => {}
    }
}

/// Whether `expr` is a CASE one of whose results builds a JSON value.
fn json_case(expr: &Expr) -> bool {
    let Expr::Case { conditions, else_result, .. } = expr else { return false };
    let builds_json = |e: &Expr| {
        let mut e = e;
        while let Expr::Nested(inner) = e {
            e = inner;
        }
        matches!(e, Expr::Function(f) if f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|n| {
            matches!(n.value.to_lowercase().as_str(), "json_build_object" | "json_build_array" | "to_json" | "row_to_json")
        }))
    };
    conditions.iter().any(|w| builds_json(&w.result)) || else_result.as_deref().is_some_and(builds_json)
}

/// The LEFT JOIN and the value that stand for a scalar subquery (see [`joined_scalar_subqueries`]).
fn subquery_join(
    query: &datafusion::sql::sqlparser::ast::Query,
    next: usize,
) -> Option<(datafusion::sql::sqlparser::ast::Join, Expr)> {
    use datafusion::sql::sqlparser::ast::BinaryOperator;
    if query.with.is_some() || query.order_by.is_some() || query.limit_clause.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let [from] = select.from.as_slice() else { return None };
    let TableFactor::Table { name, alias, args: None, .. } = &from.relation else { return None };
    if !from.joins.is_empty()
        || select.distinct.is_some()
        || select.having.is_some()
        || select.group_by != GroupByExpr::Expressions(vec![], vec![])
    {
        return None;
    }
    let [SelectItem::UnnamedExpr(value) | SelectItem::ExprWithAlias { expr: value, .. }] = select.projection.as_slice()
    else {
        return None;
    };
    let selection = select.selection.as_ref()?;
    // The qualifiers that name the subquery's table.
    let lower = |i: &Ident| i.value.to_lowercase();
    let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(lower).collect();
    let qualifiers: Vec<Vec<String>> = match alias {
        Some(alias) => vec![vec![lower(&alias.name)]],
        None => {
            let mut all = vec![parts.clone()];
            if let Some(last) = parts.last() {
                all.push(vec![last.clone()]);
            }
            all
        }
    };
    let inner = |e: &Expr| match e {
        Expr::CompoundIdentifier(idents) if idents.len() >= 2 => {
            let prefix: Vec<String> = idents.iter().take(idents.len() - 1).map(lower).collect();
            qualifiers.contains(&prefix)
        }
        _ => false,
    };
    // Every column is qualified, so that inner and outer ones are told apart.
    let mut unqualified = false;
    let mut refers_inner = |e: &Expr| {
        let mut found = false;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x| {
            unqualified |= matches!(x, Expr::Identifier(_));
            found |= inner(x);
            ControlFlow::<()>::Continue(())
        });
        found
    };
    let mut keyed = false;
    for e in conjuncts(selection) {
        match e {
            Expr::BinaryOp { left, op: BinaryOperator::Eq, right } => {
                for (key, other) in [(left, right), (right, left)] {
                    let is_key = matches!(key.as_ref(), Expr::CompoundIdentifier(idents)
                        if inner(key) && idents.last().is_some_and(|c| CATALOG_KEYS.contains(&lower(c).as_str())));
                    if is_key && !refers_inner(other) {
                        keyed = true;
                    }
                }
                refers_inner(e);
            }
            other => {
                refers_inner(other);
            }
        }
    }
    refers_inner(value);
    if !keyed || unqualified {
        return None;
    }
    let alias_name = format!("__sluice_joined_{next}");
    let rename = |e: &Expr| {
        let mut e = e.clone();
        let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut e, |x| {
            if inner(x) {
                if let Expr::CompoundIdentifier(idents) = x {
                    if let Some(column) = idents.last().cloned() {
                        *x = Expr::CompoundIdentifier(vec![Ident::new(alias_name.clone()), column]);
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
        e
    };
    let sql = format!("SELECT 1 FROM t LEFT JOIN {name} AS {alias_name} ON {}", rename(selection));
    let parsed = Parser::new(&PostgreSqlDialect {}).try_with_sql(&sql).and_then(|mut p| p.parse_statement()).ok()?;
    let Statement::Query(joined) = parsed else { return None };
    let SetExpr::Select(joined) = *joined.body else { return None };
    let join = joined.from.into_iter().next()?.joins.into_iter().next()?;
    Some((join, Expr::Nested(Box::new(rename(value)))))
}

/// A scalar subquery's one value as `max(value)`, unless it is aggregated already.
fn aggregate_scalar_subquery(query: &mut datafusion::sql::sqlparser::ast::Query) {
    {
        let SetExpr::Select(select) = query.body.as_mut() else { return };
        if select.projection.len() != 1 || select.group_by != GroupByExpr::Expressions(vec![], vec![]) {
            return;
        }
        let Some(SelectItem::UnnamedExpr(item) | SelectItem::ExprWithAlias { expr: item, .. }) =
            select.projection.first_mut()
        else {
            return;
        };
        let text = item.to_string().to_lowercase();
        if AGGREGATES.iter().any(|a| text.contains(&format!("{a}("))) {
            return;
        }
        if let Ok(wrapped) = parse_expr(&format!("max({item})")) {
            *item = wrapped;
        }
    }
}

struct ArraySubquery;

impl VisitorMut for ArraySubquery {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(rewritten) = array_subquery(expr) {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

fn array_subquery(expr: &Expr) -> Option<Expr> {
    let Expr::Function(function) = expr else { return None };
    if !function.name.to_string().eq_ignore_ascii_case("array") {
        return None;
    }
    let FunctionArguments::Subquery(query) = &function.args else { return None };
    let mut query = query.clone();
    let SetExpr::Select(select) = query.body.as_mut() else { return None };
    if select.projection.len() != 1 || select.distinct.is_some() {
        return None;
    }
    let item = match select.projection.first() {
        Some(SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) => e.clone(),
        _ => return None,
    };
    let order = match query.order_by.take() {
        None => String::new(),
        Some(order_by) => {
            let OrderByKind::Expressions(exprs) = order_by.kind else { return None };
            let keys: Vec<String> = exprs
                .iter()
                .map(|o| {
                    // ORDER BY 1 names the (only) select item.
                    let key = match &o.expr {
                        Expr::Value(v) if matches!(v.value, Value::Number(ref n, _) if n == "1") => item.clone(),
                        other => other.clone(),
                    };
                    format!("{key} {}", o.options)
                })
                .collect();
            format!(" ORDER BY {}", keys.join(", "))
        }
    };
    let aggregate = parse_expr(&format!("array_agg({item}{order})")).ok()?;
    select.projection = vec![SelectItem::UnnamedExpr(aggregate)];
    Some(Expr::Subquery(query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_query_reads_an_empty_catalog() {
        let sql = "SELECT pol.polname, pol.polpermissive, 1 AS n FROM pg_catalog.pg_policy pol WHERE pol.polrelid = 1";
        let statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        assert_eq!(empty_catalog_columns(&statement), Some(vec!["polname".into(), "polpermissive".into(), "n".into()]));
        let sql = "SELECT a FROM t JOIN pg_catalog.pg_policy p ON true";
        let statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        assert_eq!(empty_catalog_columns(&statement), None);
    }

    #[test]
    fn expandarray_unnests_numbered_elements() {
        let sql = "SELECT (information_schema._pg_expandarray(i.indkey)).n, information_schema._pg_expandarray(i.indkey) AS keys FROM pg_index i";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT get_field(unnest(pg_catalog.sluice_expand_array(i.indkey)), 'n'), \
             unnest(pg_catalog.sluice_expand_array(i.indkey)) AS keys FROM pg_index i"
        );
        let sql = "SELECT a FROM t JOIN u ON t.a = (u.keys).x";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(statement.to_string(), "SELECT a FROM t JOIN u ON t.a = get_field(u.keys, 'x')");
    }

    #[test]
    fn indoption_subscripts_count_from_zero() {
        let sql = "SELECT tmp.I_INDOPTION[tmp.ORDINAL_POSITION - 1] & 1 FROM tmp";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT CAST(NULLIF(split_part(tmp.I_INDOPTION, ' ', CAST((tmp.ORDINAL_POSITION - 1) + 1 AS INT)), '') \
             AS SMALLINT) & 1 FROM tmp"
        );
    }

    #[test]
    fn catalogs_named_as_regclass_have_postgres_oids() {
        let sql = "SELECT 1 FROM pg_description d WHERE d.classoid = CAST('pg_catalog.pg_class' AS REGCLASS) \
                   AND d.objoid > 'pg_constraint'::regclass AND d.objsubid = 't'::regclass";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT 1 FROM pg_description d WHERE d.classoid = 1259 AND d.objoid > 2606 \
             AND d.objsubid = 't'::REGCLASS"
        );
        let sql = "SELECT 1 FROM pg_description d WHERE d.classoid = CAST($1 AS REGCLASS)";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT 1 FROM pg_description d WHERE d.classoid = \
             COALESCE(pg_catalog.sluice_catalog_oid($1), CAST($1 AS REGCLASS))"
        );
    }

    #[test]
    fn comments_of_computed_names_are_null_without_their_arguments() {
        let sql = "SELECT col_description(CAST(format('%I.%I', s, t) AS REGCLASS), 1) AS c FROM x";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(statement.to_string(), "SELECT CAST(NULL AS TEXT) AS c FROM x");
        for kept in [
            "SELECT col_description(a.attrelid, a.attnum) FROM pg_attribute AS a",
            "SELECT obj_description(CAST('t' AS REGCLASS), 'pg_class')",
            "SELECT obj_description(CAST(c.oid AS REGCLASS))",
        ] {
            let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, kept).unwrap().remove(0);
            rewrite(&mut statement);
            assert_eq!(statement.to_string(), kept);
        }
    }

    #[test]
    fn function_results_are_read_from_pg_proc() {
        let sql = "SELECT pg_get_function_result(p.oid) FROM pg_catalog.pg_proc p WHERE p.proname = 'abs'";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT (CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END || pg_catalog.format_type(p.prorettype, NULL)) \
             FROM pg_catalog.pg_proc p WHERE p.proname = 'abs'"
        );
    }

    #[test]
    fn regproc_literal_compares_as_a_name() {
        let sql = "SELECT typinput = 'pg_catalog.array_in'::regproc AS is_array, 'x'::regproc FROM pg_type";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(statement.to_string(), "SELECT typinput = 'array_in' AS is_array, 'x'::regproc FROM pg_type");
    }

    #[test]
    fn regclass_printed_is_a_name() {
        let sql = "SELECT conname, conrelid::pg_catalog.regclass AS ontable, c.confrelid::regclass, \
                   conrelid::regclass::text AS t FROM pg_constraint c \
                   WHERE conrelid = 'x'::regclass AND confrelid IN (SELECT conrelid::regclass FROM pg_constraint) \
                   ORDER BY c.oid::regclass::pg_catalog.text";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT conname, pg_catalog.sluice_regclass_name(conrelid) AS ontable, \
             pg_catalog.sluice_regclass_name(c.confrelid) AS confrelid, \
             pg_catalog.sluice_regclass_name(conrelid) AS t FROM pg_constraint c \
             WHERE conrelid = 'x'::REGCLASS AND confrelid IN (SELECT conrelid::REGCLASS FROM pg_constraint) \
             ORDER BY pg_catalog.sluice_regclass_name(c.oid)"
        );
    }

    #[test]
    fn pgcli_key_columns_are_named_by_a_function() {
        let sql = "SELECT unnest((SELECT array_agg(attname ORDER BY i) FROM \
                   (SELECT unnest(confkey) AS attnum, generate_subscripts(confkey, 1) AS i) x \
                   JOIN pg_catalog.pg_attribute c USING (attnum) WHERE c.attrelid = fk.confrelid)) AS parentcolumn \
                   FROM pg_catalog.pg_constraint fk WHERE fk.contype = 'f'";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT unnest(pg_catalog.sluice_attribute_names(fk.confrelid, confkey)) AS parentcolumn \
             FROM pg_catalog.pg_constraint fk WHERE fk.contype = 'f'"
        );
        // Another table than pg_attribute: left as it is.
        let sql = "SELECT (SELECT array_agg(a ORDER BY i) FROM (SELECT unnest(k) AS attnum) x \
                   JOIN t c USING (attnum) WHERE c.attrelid = r) FROM u";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert!(statement.to_string().contains("array_agg"), "{statement}");
    }

    #[test]
    fn array_subquery_becomes_array_agg() {
        let sql = "SELECT array(select rolname from pg_roles where oid = 1 order by 1) FROM t";
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT (SELECT array_agg(rolname ORDER BY rolname) FROM pg_roles WHERE oid = 1) FROM t"
        );
    }
}
