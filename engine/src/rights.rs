//! What a role may run: the engine's checks of a statement, and of the plan that runs, against
//! the session's [`Privileges`].
//!
//! Three layers, each complete on its own for what it sees:
//!
//! 1. [`check_statement`]: before anything runs, a read-only role may run only statements that
//!    read (queries without data-modifying parts, SHOW, SET, EXPLAIN without ANALYZE of a write,
//!    cursors over reads, ...); the owner-only statements are refused to other roles.
//! 2. [`check_plan`]: a DataFusion plan about to run is walked; a read-only role's plan must hold
//!    no DML, DDL or COPY node.
//! 3. The commit gate ([`crate::control`]): whatever path a write takes, its commit asks the
//!    statement's control, which refuses a read-only role.

use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{CopySource, CopyTarget, Query, SetExpr, Statement, TableFactor, TableWithJoins};

use crate::error::{Error, Result};
use crate::privileges::Privileges;
use crate::syntax::parser::SluiceStatement;
use crate::syntax::streaming::StreamingStatement;

fn read_only_refusal(what: &str) -> Error {
    Error::ReadOnly(format!("this role is read-only and cannot run {what}"))
}

/// Refuses a statement the role may not run at all.
pub fn check_statement(statement: &SluiceStatement, privileges: Privileges) -> Result<()> {
    if privileges.read_only && !reads_only(statement) {
        return Err(read_only_refusal(&command_name(statement)));
    }
    if !privileges.owner {
        if let Some(action) = owner_only(statement) {
            return Err(Error::PermissionDenied(format!(
                "permission denied to {action}: only the warehouse owner manages roles"
            )));
        }
    }
    Ok(())
}

/// What an owner-only statement does (PostgreSQL's CREATEROLE right), for its refusal.
fn owner_only(statement: &SluiceStatement) -> Option<&'static str> {
    let SluiceStatement::Standard(statement) = statement else { return None };
    match &**statement {
        Statement::CreateRole(_) => Some("create role"),
        Statement::AlterRole { .. } => Some("alter role"),
        Statement::Drop { object_type: datafusion::sql::sqlparser::ast::ObjectType::Role, .. } => Some("drop role"),
        _ => None,
    }
}

/// Refuses a plan that writes, for a read-only role.
pub fn check_plan(plan: &LogicalPlan, privileges: Privileges) -> Result<()> {
    if !privileges.read_only {
        return Ok(());
    }
    let mut writes = None;
    let _ = plan.apply_with_subqueries(|node| {
        let kind = match node {
            LogicalPlan::Dml(dml) => Some(format!("{} on {}", dml.op, dml.table_name)),
            LogicalPlan::Ddl(ddl) => Some(ddl.name().to_string()),
            LogicalPlan::Copy(_) => Some("COPY".to_string()),
            _ => None,
        };
        Ok(match kind {
            Some(kind) => {
                writes = Some(kind);
                datafusion::common::tree_node::TreeNodeRecursion::Stop
            }
            None => datafusion::common::tree_node::TreeNodeRecursion::Continue,
        })
    });
    match writes {
        Some(kind) => Err(read_only_refusal(&kind)),
        None => Ok(()),
    }
}

/// Whether a statement only reads (a read-only role may run it).
pub fn reads_only(statement: &SluiceStatement) -> bool {
    match statement {
        SluiceStatement::DescribeHistory { .. } | SluiceStatement::Move { .. } => true,
        SluiceStatement::Streaming(streaming) => {
            matches!(
                **streaming,
                StreamingStatement::ExplainFlow { .. }
                    | StreamingStatement::ExplainMaterializedView { .. }
                    | StreamingStatement::Subscribe { .. }
                    | StreamingStatement::DeclareSubscribe { .. }
                    // Refused for every role (0A000).
                    | StreamingStatement::NotSupported(_)
            )
        }
        SluiceStatement::Standard(statement) => standard_reads_only(statement),
        _ => false,
    }
}

fn standard_reads_only(statement: &Statement) -> bool {
    match statement {
        Statement::Query(query) => query_reads_only(query),
        // EXPLAIN ANALYZE runs its statement; a plain EXPLAIN only plans it.
        Statement::Explain { analyze, statement, .. } => !*analyze || standard_reads_only(statement),
        Statement::Declare { stmts } => stmts.iter().all(|d| d.for_query.as_ref().is_none_or(|q| query_reads_only(q))),
        Statement::Copy { to: true, target: CopyTarget::Stdout, source, .. } => match source {
            CopySource::Query(query) => query_reads_only(query),
            CopySource::Table { .. } => true,
        },
        Statement::ExplainTable { .. }
        | Statement::ShowVariable { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowFunctions { .. }
        | Statement::Set(_)
        | Statement::Reset(_)
        | Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. }
        | Statement::Fetch { .. }
        | Statement::Close { .. }
        | Statement::Discard { .. }
        | Statement::UNLISTEN { .. } => true,
        _ => false,
    }
}

/// Whether a query reads only: no data-modifying CTE or body, no `SELECT ... INTO` (which
/// creates a table), in any nested query.
pub fn query_reads_only(query: &Query) -> bool {
    // `SELECT ... FOR UPDATE | SHARE` locks what it reads: PostgreSQL asks UPDATE rights for it
    // and refuses it in a read-only transaction (25006).
    query.locks.is_empty() && !advances_a_sequence(query) && reads_only_relations(query)
}

/// Whether a query calls `nextval` or `setval`, which commit a sequence's new value: a write.
fn advances_a_sequence(query: &Query) -> bool {
    datafusion::sql::sqlparser::ast::visit_expressions(query, |expr| match expr {
        datafusion::sql::sqlparser::ast::Expr::Function(function)
            if function.name.0.last().is_some_and(|part| {
                let name = part.to_string().to_ascii_lowercase();
                name == "nextval" || name == "setval"
            }) =>
        {
            std::ops::ControlFlow::Break(())
        }
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}

fn reads_only_relations(query: &Query) -> bool {
    let ctes_read =
        query.with.as_ref().is_none_or(|with| with.cte_tables.iter().all(|cte| reads_only_relations(&cte.query)));
    ctes_read && set_expr_reads_only(&query.body)
}

fn set_expr_reads_only(body: &SetExpr) -> bool {
    match body {
        SetExpr::Select(select) => select.into.is_none() && select.from.iter().all(from_reads_only),
        SetExpr::Query(query) => reads_only_relations(query),
        SetExpr::SetOperation { left, right, .. } => set_expr_reads_only(left) && set_expr_reads_only(right),
        SetExpr::Values(_) | SetExpr::Table(_) => true,
        _ => false,
    }
}

fn from_reads_only(from: &TableWithJoins) -> bool {
    std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)).all(|factor| match factor {
        TableFactor::Derived { subquery, .. } => reads_only_relations(subquery),
        _ => true,
    })
}

/// Table properties that loosen safety, and the least value a role other than the owner may give
/// them: Delta's defaults. A shorter `deletedFileRetentionDuration` lets VACUUM delete files that
/// readers of recent versions still need.
const GUARDED_PROPERTIES: [(&str, i64); 2] =
    [("delta.deletedFileRetentionDuration", 7 * 86_400_000), ("delta.logRetentionDuration", 30 * 86_400_000)];

/// Refuses table properties that only the owner may set.
pub fn check_table_properties<'a>(
    properties: impl IntoIterator<Item = (&'a String, &'a String)>,
    privileges: Privileges,
) -> Result<()> {
    if privileges.owner {
        return Ok(());
    }
    for (key, value) in properties {
        let Some((name, least_ms)) = GUARDED_PROPERTIES.iter().find(|(name, _)| name.eq_ignore_ascii_case(key)) else {
            continue;
        };
        let shorter = sluice_storage::snapshot::parse_interval_ms(value).is_none_or(|ms| ms < *least_ms);
        if shorter {
            return Err(Error::PermissionDenied(format!(
                "only the warehouse owner may set {name} below its default of {} days (given '{value}')",
                least_ms / 86_400_000
            )));
        }
    }
    Ok(())
}

/// The command a statement runs, as PostgreSQL names it in errors (`INSERT`, `CREATE TABLE`,
/// `COPY FROM`, `TRUNCATE TABLE`).
pub fn command_name(statement: &SluiceStatement) -> String {
    let kind = statement_kind(statement);
    let mut words = kind.split(' ');
    let first = words.next().unwrap_or_default();
    match (first, words.next()) {
        ("CREATE" | "DROP" | "ALTER" | "REFRESH", Some(second @ ("MATERIALIZED" | "STREAMING"))) => {
            format!("{first} {second} {}", words.next().unwrap_or_default())
        }
        ("CREATE" | "DROP" | "ALTER", Some(second)) => format!("{first} {second}"),
        ("TRUNCATE", _) => "TRUNCATE TABLE".into(),
        ("COPY", _) => "COPY FROM".into(),
        _ => first.to_string(),
    }
}

fn statement_kind(statement: &SluiceStatement) -> String {
    use StreamingStatement as S;
    let text = match statement {
        SluiceStatement::Standard(s) => s.to_string(),
        SluiceStatement::InsertOverriding { insert, .. } => insert.to_string(),
        SluiceStatement::CreateTable(_) => "CREATE TABLE".into(),
        SluiceStatement::DescribeHistory { .. } => "DESCRIBE HISTORY".into(),
        SluiceStatement::Optimize { purge: false, .. } => "OPTIMIZE".into(),
        SluiceStatement::Optimize { purge: true, .. } => "REORG TABLE".into(),
        SluiceStatement::DropFeature { .. } => "ALTER TABLE".into(),
        SluiceStatement::Vacuum { .. } => "VACUUM".into(),
        SluiceStatement::Restore { .. } => "RESTORE".into(),
        SluiceStatement::InsertByName { .. } => "INSERT".into(),
        SluiceStatement::Comment(_) => "COMMENT".into(),
        SluiceStatement::Move { .. } => "MOVE".into(),
        SluiceStatement::Sequence(sequence) => match sequence.as_ref() {
            crate::syntax::sequence::SequenceStatement::Create { .. } => "CREATE SEQUENCE".into(),
            crate::syntax::sequence::SequenceStatement::Alter { .. } => "ALTER SEQUENCE".into(),
        },
        SluiceStatement::Streaming(streaming) => match streaming.as_ref() {
            S::CreateStreamingTable(_) => "CREATE STREAMING TABLE",
            S::CreateFlow(_) => "CREATE FLOW",
            S::AlterStreamingTable { .. } => "ALTER STREAMING TABLE",
            S::ResumeFlow { .. } => "RESUME FLOW",
            S::Refresh { .. } => "REFRESH STREAMING TABLE",
            S::ExplainFlow { .. } => "EXPLAIN FLOW",
            S::DropFlow { .. } => "DROP FLOW",
            S::CreateSource(_) => "CREATE SOURCE",
            S::DropSource { .. } => "DROP SOURCE",
            S::CreateMaterializedView(_) => "CREATE MATERIALIZED VIEW",
            S::RefreshMaterializedView { .. } => "REFRESH MATERIALIZED VIEW",
            S::ExplainMaterializedView { .. } => "EXPLAIN MATERIALIZED VIEW",
            S::DropMaterializedView { .. } => "DROP MATERIALIZED VIEW",
            S::Subscribe { .. } => "SUBSCRIBE",
            S::DeclareSubscribe { .. } => "DECLARE CURSOR",
            S::CreateSubscription { .. } => "CREATE SUBSCRIPTION",
            S::AcknowledgeSubscription { .. } => "ALTER SUBSCRIPTION",
            S::DropSubscription { .. } => "DROP SUBSCRIPTION",
            S::CreateAlert(_) => "CREATE ALERT",
            S::DropAlert { .. } => "DROP ALERT",
            S::NotSupported(_) => "SUBSCRIPTION",
        }
        .into(),
    };
    let words: Vec<&str> = text.split_whitespace().take(3).collect();
    words.join(" ").to_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parser::parse_statement_text;

    fn reads(sql: &str) -> bool {
        reads_only(&parse_statement_text(sql).unwrap())
    }

    #[test]
    fn commands_are_named_as_postgres_names_them() {
        let name = |sql: &str| command_name(&parse_statement_text(sql).unwrap());
        assert_eq!(name("CREATE TABLE t (a int)"), "CREATE TABLE");
        assert_eq!(name("INSERT INTO t VALUES (1)"), "INSERT");
        assert_eq!(name("TRUNCATE t"), "TRUNCATE TABLE");
        assert_eq!(name("OPTIMIZE t"), "OPTIMIZE");
        assert_eq!(name("DROP MATERIALIZED VIEW v"), "DROP MATERIALIZED VIEW");
        assert_eq!(name("COMMENT ON TABLE t IS 'x'"), "COMMENT");
    }

    #[test]
    fn reads_are_told_from_writes_inside_any_statement() {
        assert!(reads("SELECT 1"));
        assert!(reads("WITH a AS (SELECT 1) SELECT * FROM a"));
        assert!(reads("EXPLAIN INSERT INTO t VALUES (1)"));
        assert!(reads("COPY (SELECT 1) TO STDOUT"));
        assert!(reads("COPY t TO STDOUT"));
        assert!(!reads("COPY (INSERT INTO t VALUES (1)) TO STDOUT"));
        assert!(!reads("COPY (DELETE FROM t) TO STDOUT"));
        assert!(!reads("COPY t TO '/tmp/x'"));
        assert!(!reads("COPY t FROM STDIN"));
        assert!(!reads("WITH a AS (INSERT INTO t VALUES (1)) SELECT 1"));
        assert!(!reads("EXPLAIN ANALYZE INSERT INTO t VALUES (1)"));
        assert!(!reads("SELECT * INTO t2 FROM t"));
        assert!(!reads("INSERT INTO t VALUES (1)"));
        assert!(!reads("CREATE TABLE x (a int)"));
        assert!(!reads("VACUUM t"));
        assert!(!reads("COMMENT ON TABLE t IS 'x'"));
        assert!(!reads("COMMENT ON CONSTRAINT c ON t IS NULL"));
        assert!(!reads("CREATE ROLE r"));
        assert!(!reads("GRANT SELECT ON t TO r"));
        // nextval and setval commit a sequence's new value; currval only reads the session's.
        assert!(reads("SELECT currval('t_id_seq')"));
        assert!(!reads("SELECT nextval('t_id_seq')"));
        assert!(!reads("SELECT 1 FROM (SELECT pg_catalog.setval('t_id_seq', 5)) AS s"));
        assert!(!reads("COPY (SELECT nextval('t_id_seq')) TO STDOUT"));
    }

    #[test]
    fn only_the_owner_manages_roles() {
        for sql in ["CREATE ROLE r PASSWORD 'x'", "ALTER ROLE r PASSWORD 'y'", "DROP ROLE r"] {
            let statement = parse_statement_text(sql).unwrap();
            assert!(check_statement(&statement, Privileges::OWNER).is_ok(), "{sql}");
            let refused = check_statement(&statement, Privileges::NORMAL).unwrap_err();
            assert_eq!(refused.sqlstate(), "42501", "{sql}");
            assert!(check_statement(&statement, Privileges::READ_ONLY).is_err(), "{sql}");
        }
    }
}
