//! Pieces of the statements the server answers itself: SET/RESET/SHOW names and values, Bind
//! checks, and parameter values and types.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::sql::sqlparser::ast::{Expr, ResetStatement, Set, Statement, Value};
use pgwire::api::Type;
use pgwire::error::PgWireResult;

use super::encode::user_error;

fn expr_text(expr: &Expr) -> String {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
            Value::Number(n, _) => n.clone(),
            Value::Boolean(b) => {
                if *b {
                    "on".into()
                } else {
                    "off".into()
                }
            }
            other => other.to_string(),
        },
        Expr::Identifier(ident) => ident.value.clone(),
        other => other.to_string().trim_matches('\'').to_string(),
    }
}

/// The settings a SET changes, as (name, value); `None` for SETs the engine handles
/// (DataFusion's `datafusion.*` options, SET TRANSACTION).
pub fn set_changes(set: &Set) -> Option<Vec<(String, String)>> {
    match set {
        Set::SingleAssignment { variable, values, .. } => {
            let name = variable.to_string();
            if name.to_lowercase().starts_with("datafusion.") {
                return None;
            }
            let value = values.iter().map(expr_text).collect::<Vec<_>>().join(", ");
            Some(vec![(name, value)])
        }
        Set::SetTimeZone { value, .. } => Some(vec![("TimeZone".into(), expr_text(value))]),
        Set::SetNames { charset_name, .. } => Some(vec![("client_encoding".into(), charset_name.to_string())]),
        Set::SetSessionParam(_) | Set::SetRole { .. } | Set::SetSessionAuthorization(_) => Some(vec![]),
        // The transaction block's own mode (sluice::transaction).
        Set::SetTransaction { session: false, .. } => None,
        other => {
            let text = other.to_string().to_uppercase();
            let mut changes = vec![];
            if text.contains("ISOLATION LEVEL") {
                let level = text.split("ISOLATION LEVEL").nth(1).unwrap_or("").trim().to_lowercase();
                let level = level.split(',').next().unwrap_or_default().trim().to_string();
                changes.push(("default_transaction_isolation".into(), level));
            }
            if text.contains("READ ONLY") {
                changes.push(("default_transaction_read_only".into(), "on".into()));
            } else if text.contains("READ WRITE") {
                changes.push(("default_transaction_read_only".into(), "off".into()));
            }
            Some(changes)
        }
    }
}

/// The settings that take a list of values (`SET search_path = a, b`): PostgreSQL 15's
/// `GUC_LIST_INPUT` ones, lower case.
const LIST_SETTINGS: [&str; 9] = [
    "datestyle",
    "search_path",
    "temp_tablespaces",
    "local_preload_libraries",
    "session_preload_libraries",
    "shared_preload_libraries",
    "log_destination",
    "unix_socket_directories",
    "wal_consistency_checking",
];

/// PostgreSQL's check, before any other of the setting (even that it exists): a SET of several
/// values (`SET transaction_isolation = 'a', 'b'`) is 22023 unless the setting takes a list.
pub fn check_value_count(set: &Set) -> PgWireResult<()> {
    let Set::SingleAssignment { variable, values, .. } = set else { return Ok(()) };
    if values.len() < 2 {
        return Ok(());
    }
    let written = variable.to_string();
    // An unquoted name is folded to lower case, as PostgreSQL names it in the message.
    let name = if written.contains('"') { written.replace('"', "") } else { written.to_lowercase() };
    if LIST_SETTINGS.contains(&name.to_lowercase().as_str()) {
        return Ok(());
    }
    Err(user_error("22023", format!("SET {name} takes only one argument")))
}

/// Whether a boolean setting's value is on, as PostgreSQL reads booleans.
pub fn setting_is_on(value: &str) -> bool {
    matches!(value.trim().trim_matches('\'').to_lowercase().as_str(), "on" | "true" | "1" | "yes" | "t" | "y")
}

/// Refuses `SET ROLE` / `SET SESSION AUTHORIZATION` to a role other than the one the connection
/// logged in as (0A000): a connection keeps its login's rights, so accepting the switch would
/// let a client believe it dropped (or gained) rights it still has (or lacks). `SET ROLE NONE`,
/// `... DEFAULT` and the login's own name change nothing and are accepted.
pub fn check_role_switch(set: &Set, user: &str) -> PgWireResult<()> {
    use datafusion::sql::sqlparser::ast::SetSessionAuthorizationParamKind;
    let target = match set {
        Set::SetRole { role_name: Some(role), .. } => role,
        Set::SetSessionAuthorization(param) => match &param.kind {
            SetSessionAuthorizationParamKind::User(role) => role,
            SetSessionAuthorizationParamKind::Default => return Ok(()),
        },
        _ => return Ok(()),
    };
    let matches =
        if target.quote_style.is_some() { target.value == user } else { target.value.eq_ignore_ascii_case(user) };
    if matches {
        return Ok(());
    }
    Err(user_error(
        "0A000",
        format!(
            "switching to role \"{}\" is not supported: a connection runs as the role it logged in as (\"{user}\")",
            target.value
        ),
    ))
}

/// The setting a RESET names; `None` for RESET ALL.
pub fn reset_target(reset: &ResetStatement) -> Option<String> {
    let text = reset.to_string();
    let name = text.trim_start_matches("RESET").trim();
    (!name.eq_ignore_ascii_case("all")).then(|| name.to_string())
}

/// The column name of `SHOW name` (as Postgres names it).
pub fn show_column(name: &str) -> String {
    let lower = name.to_lowercase();
    let name = match lower.as_str() {
        "transaction isolation level" => "transaction_isolation".into(),
        "time zone" => "timezone".into(),
        _ => lower,
    };
    // PostgreSQL names the column as the setting is spelled (`TimeZone`, `DateStyle`).
    super::settings::REPORTED.iter().find(|r| r.eq_ignore_ascii_case(&name)).map_or(name, |r| r.to_string())
}

/// The highest `$n` in a statement (0 for none); `None` where Sluice's own statements cannot be
/// walked.
pub fn placeholder_count(statement: &sluice::sql::parser::SluiceStatement) -> Option<usize> {
    let statement = match statement {
        sluice::sql::parser::SluiceStatement::Standard(statement) => statement,
        sluice::sql::parser::SluiceStatement::InsertOverriding { insert, .. } => insert,
        _ => return None,
    };
    let mut highest = 0;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(&**statement, |expr| {
        if let Expr::Value(value) = expr {
            if let Value::Placeholder(name) = &value.value {
                if let Some(number) = name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                    highest = highest.max(number);
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    Some(highest)
}

/// Refuses a Bind that PostgreSQL refuses: unknown format codes (22023), a number of parameter
/// formats that is neither 0, 1 nor the number of values, or a number of values other than the
/// statement's parameters (08P01).
pub fn check_bind(
    bind: &pgwire::messages::extendedquery::Bind,
    statement: &str,
    parameters: Option<usize>,
) -> PgWireResult<()> {
    let supplied = bind.parameters.len();
    if let Some(code) =
        bind.parameter_format_codes.iter().chain(&bind.result_column_format_codes).find(|c| !matches!(c, 0 | 1))
    {
        return Err(user_error("22023", format!("unsupported format code: {code}")));
    }
    let formats = bind.parameter_format_codes.len();
    if formats > 1 && formats != supplied {
        return Err(user_error(
            "08P01",
            format!("bind message has {formats} parameter formats but {supplied} parameters"),
        ));
    }
    if let Some(required) = parameters {
        if supplied != required {
            return Err(user_error(
                "08P01",
                format!("bind message supplies {supplied} parameters, but prepared statement \"{statement}\" requires {required}"),
            ));
        }
    }
    Ok(())
}

/// The Arrow type to decode a parameter of a Postgres type into.
pub fn arrow_type_of(pg: &Type) -> Option<DataType> {
    Some(match *pg {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 => DataType::Int32,
        Type::INT8 => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        Type::DATE => DataType::Date32,
        Type::TIMESTAMP => DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
        Type::TIMESTAMPTZ => DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some(Arc::from("UTC"))),
        Type::BYTEA => DataType::Binary,
        Type::TEXT
        | Type::VARCHAR
        | Type::BPCHAR
        | Type::NAME
        | Type::UNKNOWN
        | Type::JSON
        | Type::JSONB
        | Type::UUID => DataType::Utf8,
        _ => return None,
    })
}

/// Parameter values as a list.
pub fn param_values(values: ParamValues) -> Vec<ScalarValue> {
    match values {
        ParamValues::List(list) => list.into_iter().map(|v| v.value).collect(),
        ParamValues::Map(map) => map.into_values().map(|v| v.value).collect(),
    }
}

/// An `oid[]` parameter (asyncpg's type introspection) in Postgres' binary array format, as a
/// list of Int32 (the catalog's oid type).
pub fn oid_array_parameter(raw: Option<bytes::Bytes>) -> PgWireResult<ScalarValue> {
    use fallible_iterator::FallibleIterator;
    let bad = |e: String| user_error("22P03", format!("invalid oid[] parameter: {e}"));
    let mut oids: Vec<Option<i32>> = Vec::new();
    if let Some(raw) = raw {
        let array = postgres_protocol::types::array_from_sql(&raw).map_err(|e| bad(e.to_string()))?;
        let mut values = array.values();
        while let Some(value) = values.next().map_err(|e| bad(e.to_string()))? {
            oids.push(match value {
                Some(v) => Some(postgres_protocol::types::oid_from_sql(v).map_err(|e| bad(e.to_string()))? as i32),
                None => None,
            });
        }
    }
    let values: Vec<ScalarValue> = oids.into_iter().map(ScalarValue::Int32).collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(&values, &arrow::datatypes::DataType::Int32)))
}

/// Whether the server may answer a statement itself (settings, cursors, notifications) rather
/// than the engine.
pub fn is_server_statement(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::Set(_)
            | Statement::Reset(_)
            | Statement::ShowVariable { .. }
            | Statement::Discard { .. }
            | Statement::Declare { .. }
            | Statement::Fetch { .. }
            | Statement::Close { .. }
            | Statement::LISTEN { .. }
            | Statement::UNLISTEN { .. }
    )
}
