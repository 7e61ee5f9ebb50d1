//! Statement parameters: `$1`, `$2`, ... replaced by literal values before planning.
//!
//! Substituting values into the statement (rather than binding them into a DataFusion plan) lets
//! every statement take parameters, DML and Sluice's own statements included. Values become typed
//! literals (`CAST('2024-01-01' AS DATE)`), so they keep their type.

use std::ops::ControlFlow;

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, CastKind, DataType as SqlType, Expr, Value, VisitMut, VisitorMut};

use crate::error::{Error, Result};
use crate::syntax::parser::SluiceStatement;

struct Binder<'a> {
    parameters: &'a [ScalarValue],
    error: Option<Error>,
}

impl VisitorMut for Binder<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Value(value) = expr {
            if let Value::Placeholder(name) = &value.value {
                let index = name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()).filter(|n| *n >= 1);
                match index.and_then(|n| self.parameters.get(n - 1)) {
                    Some(parameter) => match literal(parameter) {
                        Ok(replacement) => *expr = replacement,
                        Err(e) => {
                            self.error = Some(e);
                            return ControlFlow::Break(());
                        }
                    },
                    None => {
                        self.error = Some(Error::Plan(format!(
                            "there is no parameter {name} ({} given)",
                            self.parameters.len()
                        )));
                        return ControlFlow::Break(());
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Replaces the placeholders of a statement by the parameters (a no-op without parameters).
pub fn bind(statement: SluiceStatement, parameters: &[ScalarValue]) -> Result<SluiceStatement> {
    if parameters.is_empty() {
        return Ok(statement);
    }
    let mut binder = Binder { parameters, error: None };
    let statement = match statement {
        SluiceStatement::Standard(mut s) => {
            let _ = s.visit(&mut binder);
            SluiceStatement::Standard(s)
        }
        SluiceStatement::InsertOverriding { mut insert, overriding } => {
            let _ = insert.visit(&mut binder);
            SluiceStatement::InsertOverriding { insert, overriding }
        }
        SluiceStatement::CreateTable(mut create) => {
            if let Some(query) = create.query.as_mut() {
                let _ = query.visit(&mut binder);
            }
            SluiceStatement::CreateTable(create)
        }
        other => other,
    };
    match binder.error {
        Some(e) => Err(e),
        None => Ok(statement),
    }
}

fn number(text: String) -> Expr {
    Expr::value(Value::Number(text, false))
}

fn string(text: String) -> Expr {
    Expr::value(Value::SingleQuotedString(text))
}

fn cast(expr: Expr, data_type: SqlType) -> Expr {
    Expr::Cast { kind: CastKind::Cast, expr: Box::new(expr), data_type, array: false, format: None }
}

/// A value as Arrow displays it (ISO dates and timestamps, with the zone's offset).
fn display(value: &ScalarValue) -> Result<String> {
    let array = value.to_array()?;
    let formatter = arrow::util::display::ArrayFormatter::try_new(array.as_ref(), &Default::default())?;
    Ok(formatter.value(0).to_string())
}

/// The SQL literal of a value.
pub fn literal(value: &ScalarValue) -> Result<Expr> {
    if value.is_null() {
        return Ok(Expr::value(Value::Null));
    }
    Ok(match value {
        ScalarValue::Boolean(Some(b)) => Expr::value(Value::Boolean(*b)),
        ScalarValue::Int8(Some(v)) => cast(number(v.to_string()), SqlType::SmallInt(None)),
        ScalarValue::Int16(Some(v)) => cast(number(v.to_string()), SqlType::SmallInt(None)),
        ScalarValue::Int32(Some(v)) => cast(number(v.to_string()), SqlType::Int(None)),
        ScalarValue::Int64(Some(v)) => cast(number(v.to_string()), SqlType::BigInt(None)),
        ScalarValue::UInt8(Some(v)) => number(v.to_string()),
        ScalarValue::UInt16(Some(v)) => number(v.to_string()),
        ScalarValue::UInt32(Some(v)) => number(v.to_string()),
        ScalarValue::UInt64(Some(v)) => number(v.to_string()),
        ScalarValue::Float32(Some(v)) => cast(string(v.to_string()), SqlType::Real),
        ScalarValue::Float64(Some(v)) => cast(string(v.to_string()), SqlType::DoublePrecision),
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
            string(s.clone())
        }
        ScalarValue::Decimal128(Some(_), precision, scale) => cast(
            number(value.to_string()),
            SqlType::Numeric(ast::ExactNumberInfo::PrecisionAndScale(u64::from(*precision), i64::from(*scale))),
        ),
        ScalarValue::Date32(Some(_)) => cast(string(display(value)?), SqlType::Date),
        ScalarValue::Time64Microsecond(Some(_))
        | ScalarValue::Time64Nanosecond(Some(_))
        | ScalarValue::Time32Millisecond(Some(_))
        | ScalarValue::Time32Second(Some(_)) => {
            let micros = value.cast_to(&crate::time_of_day::TIME_MICROS)?;
            let ScalarValue::Time64Microsecond(Some(micros)) = micros else {
                return Err(Error::Internal(format!("a time parameter read as {micros:?}")));
            };
            // The cast's function, which gives Sluice's `Time64(µs)` (see `postgres_forms`).
            crate::sql::postgres_forms::call(
                crate::functions::time_of_day::TIME_CAST,
                vec![string(crate::time_of_day::time_text(micros))],
            )
        }
        ScalarValue::TimestampMicrosecond(Some(_), zone)
        | ScalarValue::TimestampMillisecond(Some(_), zone)
        | ScalarValue::TimestampNanosecond(Some(_), zone)
        | ScalarValue::TimestampSecond(Some(_), zone) => {
            let info = if zone.is_some() { ast::TimezoneInfo::WithTimeZone } else { ast::TimezoneInfo::None };
            let text = display(value)?;
            // A zoned value shows its zone's offset (`-05:00`), a UTC one may show none.
            let offset = text.split_once('T').is_none_or(|(_, time)| time.contains(['+', '-', 'Z']));
            let text = if zone.is_some() && !offset { format!("{text}Z") } else { text };
            cast(string(text), SqlType::Timestamp(None, info))
        }
        ScalarValue::Binary(Some(bytes))
        | ScalarValue::LargeBinary(Some(bytes))
        | ScalarValue::BinaryView(Some(bytes)) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Expr::Function(ast::Function {
                name: ast::ObjectName::from(vec![ast::Ident::new("decode")]),
                uses_odbc_syntax: false,
                parameters: ast::FunctionArguments::None,
                args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                    duplicate_treatment: None,
                    args: vec![
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(string(hex))),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(string("hex".into()))),
                    ],
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            })
        }
        ScalarValue::List(list) if arrow::array::Array::len(list.as_ref()) == 1 => {
            let values = list.value(0);
            let elements = (0..values.len())
                .map(|i| ScalarValue::try_from_array(&values, i).map_err(Error::from).and_then(|v| literal(&v)))
                .collect::<Result<Vec<_>>>()?;
            Expr::Array(ast::Array { elem: elements, named: true })
        }
        other => string(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parser::parse_statement_text;

    #[test]
    fn binds_placeholders() {
        let statement = parse_statement_text("SELECT * FROM t WHERE a = $1 AND b = $2").unwrap();
        let bound = bind(statement, &[ScalarValue::Int64(Some(5)), ScalarValue::Utf8(Some("it's".into()))]).unwrap();
        let SluiceStatement::Standard(s) = bound else { panic!("standard") };
        assert_eq!(s.to_string(), "SELECT * FROM t WHERE a = CAST(5 AS BIGINT) AND b = 'it''s'");
        let list = ScalarValue::List(
            datafusion::common::utils::SingleRowListArrayBuilder::new(std::sync::Arc::new(
                arrow::array::StringArray::from(vec![Some("x"), None]),
            ))
            .build_list_array()
            .into(),
        );
        let bound = bind(parse_statement_text("SELECT $1").unwrap(), &[list]).unwrap();
        let SluiceStatement::Standard(s) = bound else { panic!("standard") };
        assert_eq!(s.to_string(), "SELECT ARRAY['x', NULL]");
        let statement = parse_statement_text("SELECT $3").unwrap();
        assert!(bind(statement, &[ScalarValue::Int64(Some(1))]).is_err());
    }

    #[test]
    fn zoned_timestamps_keep_their_offset() {
        // 2024-01-13 13:30 UTC.
        let at = 1_705_152_600_000_000;
        for (zone, text) in [
            ("-05:00", "'2024-01-13T08:30:00-05:00'"),
            ("+01:00", "'2024-01-13T14:30:00+01:00'"),
            ("UTC", "'2024-01-13T13:30:00Z'"),
        ] {
            let value = ScalarValue::TimestampMicrosecond(Some(at), Some(zone.into()));
            let bound = bind(parse_statement_text("SELECT $1").unwrap(), &[value]).unwrap();
            let SluiceStatement::Standard(s) = bound else { panic!("standard") };
            assert_eq!(s.to_string(), format!("SELECT CAST({text} AS TIMESTAMP WITH TIME ZONE)"), "{zone}");
        }
    }
}
