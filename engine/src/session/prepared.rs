//! SQL's `PREPARE`, `EXECUTE` and `DEALLOCATE`, as PostgreSQL has them: a session's named
//! statements (a query, INSERT, UPDATE, DELETE or MERGE) with parameters `$1..$n`, typed by the
//! PREPARE or inferred from the statement. EXECUTE reads its arguments as values of those types
//! (a date in the session's DateStyle) and runs the statement as any statement of its kind runs:
//! an INSERT checks keys and constraints, a query's columns are named as PostgreSQL names them,
//! and the command tag is the statement's own (`INSERT 0 1`). Names are the session's, kept
//! until DEALLOCATE or the session's end (a ROLLBACK does not undo a PREPARE, as in PostgreSQL).
//! The protocol's prepared statements (Parse) are the server's; it hands DEALLOCATE of a name it
//! does not know to this one.

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, DataType as SqlType, Expr, Ident, SelectItem, Statement};

use super::Session;
use crate::control::StatementControl;
use crate::error::{Error, Result};
use crate::sql::context::StatementResult;
use crate::syntax::parser::SluiceStatement;

/// A statement PREPARE named.
#[derive(Debug, Clone)]
pub(super) struct Prepared {
    statement: Statement,
    /// The types PREPARE gave `$1..$n` (may be fewer than the statement uses, or more).
    declared: Vec<SqlType>,
    /// The types of `$1..$n` inferred from the statement at PREPARE, where it could tell.
    inferred: Vec<Option<arrow::datatypes::DataType>>,
}

impl Session {
    /// Runs PREPARE, EXECUTE and DEALLOCATE (None for other statements).
    pub(super) async fn prepared_statement(
        &self,
        statement: &SluiceStatement,
        control: &std::sync::Arc<StatementControl>,
    ) -> Option<Result<StatementResult>> {
        let SluiceStatement::Standard(standard) = statement else { return None };
        let result = match standard.as_ref() {
            Statement::Prepare { name, data_types, statement } => {
                self.sql_prepare(&name.value, data_types, statement.as_ref()).await
            }
            Statement::Deallocate { name, .. } => self.sql_deallocate(&name.value),
            Statement::Execute { name: Some(name), parameters, immediate: false, into, using, .. }
                if into.is_empty() && using.is_empty() =>
            {
                let name = crate::names::table_name(name).map(|n| n.name).unwrap_or_default();
                match self.execution(&name, parameters).await {
                    Ok((statement, values)) => {
                        return Some(Box::pin(self.run_with(statement, &values, control.clone())).await)
                    }
                    Err(e) => Err(e),
                }
            }
            Statement::Execute { .. } => {
                Err(Error::NotSupported("this form of EXECUTE (PostgreSQL's is EXECUTE name [(arguments)])".into()))
            }
            _ => return None,
        };
        self.block.finished(false, result.is_ok());
        Some(Box::pin(self.statement_ended(result)).await)
    }

    async fn sql_prepare(&self, name: &str, declared: &[SqlType], statement: &Statement) -> Result<StatementResult> {
        if !matches!(
            statement,
            Statement::Query(_)
                | Statement::Insert(_)
                | Statement::Update(_)
                | Statement::Delete(_)
                | Statement::Merge(_)
        ) {
            return Err(Error::data(
                "42601",
                "PREPARE takes a SELECT, VALUES, INSERT, UPDATE, DELETE or MERGE statement".to_string(),
            ));
        }
        if crate::util::lock(&self.prepared).contains_key(name) {
            return Err(Error::data("42P05", format!("prepared statement \"{name}\" already exists")));
        }
        for data_type in declared {
            crate::types::declared_type(data_type)?;
        }
        // A query is planned now, so that a missing table or column is PREPARE's error, as in
        // PostgreSQL (DML is checked when it runs).
        if let Statement::Query(_) = statement {
            let mut checked = SluiceStatement::Standard(Box::new(statement.clone()));
            self.qualify(&mut checked)?;
            self.set_staging_mode(crate::transaction::stages(&checked));
            let planned = match checked {
                SluiceStatement::Standard(standard) => self.query.plan_statement(*standard).await.map(|_| ()),
                _ => Ok(()),
            };
            self.block.staging().set_mode(crate::staging::Mode::Off);
            self.query.clear_statement_state();
            planned?;
        }
        let inferred =
            self.describe_statement(&SluiceStatement::Standard(Box::new(statement.clone()))).await.parameter_types;
        let prepared = Prepared { statement: statement.clone(), declared: declared.to_vec(), inferred };
        crate::util::lock(&self.prepared).insert(name.to_string(), prepared);
        Ok(StatementResult::command("PREPARE"))
    }

    fn sql_deallocate(&self, name: &str) -> Result<StatementResult> {
        let mut prepared = crate::util::lock(&self.prepared);
        if name.eq_ignore_ascii_case("all") {
            prepared.clear();
            return Ok(StatementResult::command("DEALLOCATE ALL"));
        }
        match prepared.remove(name) {
            Some(_) => Ok(StatementResult::command("DEALLOCATE")),
            None => Err(Error::data("26000", format!("prepared statement \"{name}\" does not exist"))),
        }
    }

    /// The statement EXECUTE runs and its parameter values.
    async fn execution(&self, name: &str, arguments: &[Expr]) -> Result<(SluiceStatement, Vec<ScalarValue>)> {
        let prepared = crate::util::lock(&self.prepared)
            .get(name)
            .cloned()
            .ok_or_else(|| Error::data("26000", format!("prepared statement \"{name}\" does not exist")))?;
        let statement = SluiceStatement::Standard(Box::new(prepared.statement.clone()));
        let inferred = &prepared.inferred;
        let expected = prepared.declared.len().max(inferred.len());
        if arguments.len() != expected {
            return Err(Error::data(
                "42601",
                format!(
                    "wrong number of parameters for prepared statement \"{name}\": expected {expected}, got {}",
                    arguments.len()
                ),
            ));
        }
        if arguments.is_empty() {
            return Ok((statement, Vec::new()));
        }
        // The arguments are read as a query reads them (a declared type by a cast: a date in the
        // session's DateStyle), then given the inferred type where none was declared.
        let projection = arguments
            .iter()
            .enumerate()
            .map(|(i, argument)| {
                let expr = match prepared.declared.get(i) {
                    Some(data_type) => Expr::Cast {
                        kind: ast::CastKind::Cast,
                        expr: Box::new(argument.clone()),
                        data_type: data_type.clone(),
                        format: None,
                        array: false,
                    },
                    None => argument.clone(),
                };
                SelectItem::ExprWithAlias { expr, alias: Ident::new(format!("p{}", i + 1)) }
            })
            .collect();
        let query = crate::sql::dml::select_query(projection, Vec::new(), None)?;
        let values = match self.query.run_query(query).await? {
            StatementResult::Rows { batches, .. } => batches,
            _ => Vec::new(),
        };
        let row = values.iter().find(|b| b.num_rows() > 0).ok_or_else(|| Error::Internal("no arguments".into()))?;
        let mut parameters = Vec::with_capacity(arguments.len());
        for (i, column) in row.columns().iter().enumerate() {
            let value = ScalarValue::try_from_array(column, 0)?;
            let value = match inferred.get(i).cloned().flatten() {
                Some(wanted)
                    if prepared.declared.get(i).is_none() && !value.is_null() && value.data_type() != wanted =>
                {
                    value.cast_to(&wanted).map_err(|e| {
                        Error::data("22P02", format!("EXECUTE {name}: argument {} is not a {wanted}: {e}", i + 1))
                    })?
                }
                _ => value,
            };
            parameters.push(value);
        }
        Ok((statement, parameters))
    }
}
