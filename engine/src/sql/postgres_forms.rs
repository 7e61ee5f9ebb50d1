//! PostgreSQL forms that DataFusion would plan differently, or not at all, rewritten in the
//! statement before it is planned:
//!
//! - numbers written with an exponent (`1e3`) as plain decimals (numeric in PostgreSQL);
//! - `'\x0102'::bytea` as the bytes it means;
//! - casts to `uuid`, `json` and `jsonb` as calls of their input functions (which check the text
//!   and mark the result's type, see [`crate::documents`]);
//! - casts to `time(p)` and `timetz`, `current_time` and `localtime`, as calls of the casts of
//!   [`crate::functions::time_of_day`];
//! - `'{a,b}'::T[]`, PostgreSQL's array text, as `CAST(ARRAY['a', 'b'] AS T[])`;
//! - the rows of a VALUES column some of whose rows have a declared type (`'12:00'::timetz`,
//!   `'...'::uuid`) read as that type in every row;
//! - `mod(a, b)` as `a % b` (checked like the operator), `sign(x)` as `signum(x)`, `~x` as a call
//!   of the bitwise NOT function (DataFusion has no such operator);
//! - set-returning functions in a select list (`SELECT generate_series(1, 3)`,
//!   `jsonb_array_elements(doc)`) as `unnest(...)` of their list, named as PostgreSQL names them;
//! - calls that differ only in a cast of an argument (`max(x)`, `max(x::bigint)`), which
//!   DataFusion names alike, told apart (see [`super::cast_names`]);
//! - an outermost select list with two columns of one name (`SELECT 1, 1`): the later ones get an
//!   internal alias, which [`output_name`] turns back into the name when results are named.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, DataType as SqlType, Expr, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident,
    ObjectName, SelectItem, SetExpr, Statement, Value, VisitMut, VisitorMut,
};

use crate::error::{Error, Result};

/// Rewrites a statement's PostgreSQL forms (see the module's documentation).
pub fn rewrite(statement: &mut Statement) -> Result<()> {
    super::cast_names::rewrite(statement);
    super::lateral::rewrite(statement)?;
    super::whole_rows::rewrite(statement);
    super::collations::rewrite(statement)?;
    let _ = statement.visit(&mut LiteralValues);
    let mut literals = Literals { error: None, arrays_only: false };
    let _ = statement.visit(&mut literals);
    if let Some(e) = literals.error {
        return Err(e);
    }
    float_casts(statement);
    make_intervals(statement)?;
    let _ = statement.visit(&mut SetReturning);
    let _ = statement.visit(&mut TypedValues);
    let _ = statement.visit(&mut WindowCounts);
    super::with_ties::rewrite(statement)?;
    let _ = statement.visit(&mut FetchAsLimit);
    super::query::name_inner_columns(statement);
    if let Statement::Query(query) = statement {
        if let SetExpr::Select(select) = query.body.as_mut() {
            name_duplicates(&mut select.projection);
        }
    }
    Ok(())
}

/// `CAST(x AS float)` (and `x::float`) as PostgreSQL reads the type: `float` and `float(25)`
/// to `float(53)` are `double precision`, `float(1)` to `float(24)` are `real` (DataFusion
/// reads a bare `float` as `real`, silently losing digits).
fn float_casts(statement: &mut Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let Expr::Cast { data_type, .. } = expr {
            if let SqlType::Float(info) = data_type {
                *data_type = match info {
                    ast::ExactNumberInfo::Precision(p) if *p <= 24 => SqlType::Real,
                    _ => SqlType::DoublePrecision,
                };
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `make_interval(years, months, weeks, days, hours, mins, secs)` (positional or named, each
/// 0 when left out) as the sum of each argument times its unit's interval: months, days and
/// time stay apart as in PostgreSQL's (`make_interval(days => 1, hours => 25)` is
/// `1 day 25:00:00`).
fn make_intervals(statement: &mut Statement) -> Result<()> {
    const UNITS: [(&str, &str); 7] = [
        ("years", "1 year"),
        ("months", "1 month"),
        ("weeks", "7 days"),
        ("days", "1 day"),
        ("hours", "1 hour"),
        ("mins", "1 minute"),
        ("secs", "1 second"),
    ];
    let mut error = None;
    let _ = ast::visit_expressions_mut(statement, |expr| {
        let Expr::Function(function) = &*expr else { return ControlFlow::Continue(()) };
        let named = function.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_ascii_lowercase());
        if named.as_deref() != Some("make_interval") {
            return ControlFlow::Continue(());
        }
        let FunctionArguments::List(list) = &function.args else {
            return ControlFlow::Continue(());
        };
        let mut terms: Vec<(usize, Expr)> = Vec::new();
        for (position, arg) in list.args.iter().enumerate() {
            let (slot, value) = match arg {
                // `weeks := 2`, PostgreSQL's older spelling of a named argument.
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::BinaryOp {
                    left,
                    op: ast::BinaryOperator::Assignment,
                    right,
                })) => match left.as_ref() {
                    Expr::Identifier(name) => {
                        (UNITS.iter().position(|(unit, _)| name.value.eq_ignore_ascii_case(unit)), right.as_ref())
                    }
                    _ => (None, right.as_ref()),
                },
                FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) => (Some(position), value),
                FunctionArg::Named { name, arg: FunctionArgExpr::Expr(value), .. } => {
                    (UNITS.iter().position(|(unit, _)| name.value.eq_ignore_ascii_case(unit)), value)
                }
                FunctionArg::ExprNamed { name: Expr::Identifier(name), arg: FunctionArgExpr::Expr(value), .. } => {
                    (UNITS.iter().position(|(unit, _)| name.value.eq_ignore_ascii_case(unit)), value)
                }
                _ => (None, &Expr::Value(Value::Null.into())),
            };
            match slot.filter(|s| *s < UNITS.len() && !terms.iter().any(|(t, _)| t == s)) {
                Some(slot) => terms.push((slot, value.clone())),
                None => {
                    error = Some(Error::data("42883", format!("function {function} does not exist")));
                    return ControlFlow::Break(());
                }
            }
        }
        terms.sort_by_key(|(slot, _)| *slot);
        let interval = |text: &str| {
            cast(
                Expr::value(Value::SingleQuotedString(text.into())),
                SqlType::Interval { fields: None, precision: None },
            )
        };
        let mut sum = interval("0 seconds");
        for (slot, value) in terms {
            let Some((_, unit)) = UNITS.get(slot) else { continue };
            let term = Expr::BinaryOp {
                left: Box::new(interval(unit)),
                op: ast::BinaryOperator::Multiply,
                right: Box::new(Expr::Nested(Box::new(value))),
            };
            sum = Expr::BinaryOp { left: Box::new(sum), op: ast::BinaryOperator::Plus, right: Box::new(term) };
        }
        *expr = Expr::Nested(Box::new(sum));
        ControlFlow::Continue(())
    });
    error.map_or(Ok(()), Err)
}

/// Rewrites only the array texts (`'{a,b}'::T[]`, `= ANY('{a,b}')`), which the pgwire layer does
/// before its own rewrites (datafusion-pg-catalog's would split the text naively).
pub fn array_literals(statement: &mut Statement) -> Result<()> {
    let mut literals = Literals { error: None, arrays_only: true };
    let _ = statement.visit(&mut literals);
    literals.error.map_or(Ok(()), Err)
}

/// `CAST(expr AS data_type)`.
fn cast(expr: Expr, data_type: SqlType) -> Expr {
    Expr::Cast { kind: ast::CastKind::Cast, expr: Box::new(expr), data_type, array: false, format: None }
}

/// A function call expression.
pub fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(ast::Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args.into_iter().map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a))).collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn function_name(function: &ast::Function) -> String {
    function.name.0.last().map(|part| part.to_string().to_lowercase()).unwrap_or_default()
}

fn plain_args(function: &ast::Function) -> Option<Vec<Expr>> {
    let FunctionArguments::List(list) = &function.args else { return None };
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn string_literal(expr: &Expr) -> Option<&str> {
    let Expr::Value(value) = expr else { return None };
    match &value.value {
        Value::SingleQuotedString(text) | Value::EscapedStringLiteral(text) => Some(text),
        _ => None,
    }
}

struct Literals {
    error: Option<Error>,
    /// Only the array texts.
    arrays_only: bool,
}

impl VisitorMut for Literals {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match self.rewritten(expr) {
            Ok(Some(new)) => *expr = new,
            Ok(None) => {}
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

impl Literals {
    fn rewritten(&self, expr: &mut Expr) -> Result<Option<Expr>> {
        if self.arrays_only {
            return match expr {
                Expr::Cast { expr: inner, data_type: data_type @ SqlType::Array(_), .. } => {
                    Self::cast(inner, data_type)
                }
                Expr::AnyOp { .. } | Expr::AllOp { .. } => Self::any_array(expr),
                _ => Ok(None),
            };
        }
        match expr {
            // `1e3` is numeric 1000 in PostgreSQL; DataFusion cannot read an exponent as a decimal.
            Expr::Value(value) => {
                if let Value::Number(text, _) = &mut value.value {
                    if let Some(plain) = plain_decimal(text) {
                        *text = plain;
                    }
                }
                Ok(None)
            }
            Expr::Cast { expr: inner, data_type, .. } => Self::cast(inner, data_type),
            // `~x`: DataFusion has no bitwise NOT.
            Expr::UnaryOp { op: ast::UnaryOperator::BitwiseNot, expr: operand } => {
                Ok(Some(call(crate::functions::math::BITWISE_NOT, vec![(**operand).clone()])))
            }
            // `interval '1 day 04:05:06'`: PostgreSQL's interval text, as Arrow reads it.
            Expr::Interval(interval)
                if interval.leading_field.is_none()
                    && interval.last_field.is_none()
                    && string_literal(&interval.value).is_some() =>
            {
                if let Some(text) = string_literal(&interval.value) {
                    let text = crate::datetime::interval_text(text)?;
                    *interval.value = Expr::Value(Value::SingleQuotedString(text).into());
                }
                Ok(None)
            }
            // `LIKE p ESCAPE '#'`: DataFusion knows only the backslash; the pattern is rewritten
            // to escape with it.
            Expr::Like { pattern, escape_char, .. } | Expr::ILike { pattern, escape_char, .. }
                if escape_char.is_some() =>
            {
                let escape = escape_char.as_ref().and_then(|v| match &v.value {
                    Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(s.clone()),
                    _ => None,
                });
                let escape = match escape.as_deref().map(|e| e.chars().collect::<Vec<_>>()).as_deref() {
                    Some([c]) => Some(*c),
                    Some([]) => None,
                    _ => return Err(Error::data("22025", "invalid escape string")),
                };
                let Some(text) = string_literal(pattern) else {
                    // A pattern made at run time (`'%' || $1 || '%'`) is rewritten row by row.
                    let escape =
                        Expr::Value(Value::SingleQuotedString(escape.map(String::from).unwrap_or_default()).into());
                    **pattern = call(crate::functions::LIKE_PATTERN, vec![(**pattern).clone(), escape]);
                    *escape_char = None;
                    return Ok(None);
                };
                **pattern =
                    Expr::Value(Value::SingleQuotedString(crate::functions::like_pattern(text, escape)?).into());
                *escape_char = None;
                Ok(None)
            }
            // `x = ANY('{a,b}')`: the text of an array (a parameter bound as text, most often).
            Expr::AnyOp { .. } | Expr::AllOp { .. } => Self::any_array(expr),
            Expr::TypedString(typed) => {
                let text = typed.value.value.clone().into_string();
                let inner = text.map(|t| Expr::Value(Value::SingleQuotedString(t).into()));
                match inner {
                    Some(mut inner) => Self::cast(&mut inner, &typed.data_type),
                    None => Ok(None),
                }
            }
            Expr::Function(function) if matches!(function_name(function).as_str(), "json_agg" | "jsonb_agg") => {
                // `jsonb_agg(x [ORDER BY ...])` is the JSON array of `array_agg(x [ORDER BY ...])`.
                let wrapper =
                    if function_name(function) == "json_agg" { "__pg_json_array" } else { "__pg_jsonb_array" };
                let mut aggregate = function.clone();
                aggregate.name = ObjectName::from(vec![Ident::new("array_agg")]);
                Ok(Some(call(wrapper, vec![Expr::Function(aggregate)])))
            }
            // SQL's LOCALTIMESTAMP: the statement's time without its zone (the session's zone
            // is UTC unless set).
            Expr::Function(function)
                if function_name(function) == "localtimestamp" && matches!(function.args, FunctionArguments::None) =>
            {
                Ok(Some(cast(call("now", vec![]), SqlType::Timestamp(None, ast::TimezoneInfo::WithoutTimeZone))))
            }
            Expr::Function(function) if matches!(function_name(function).as_str(), "current_time" | "localtime") => {
                Ok(clock_time(function))
            }
            Expr::Function(function)
                if matches!(function_name(function).as_str(), "json_object_agg" | "jsonb_object_agg") =>
            {
                // `json_object_agg(k, v)`: the object of `array_agg(k)` and `array_agg(v)` (one
                // aggregation, so the two lists pair up row by row).
                let Some([key, value]) = plain_args(function).and_then(|a| <[Expr; 2]>::try_from(a).ok()) else {
                    return Ok(None);
                };
                let wrapper = if function_name(function) == "json_object_agg" {
                    "__pg_json_object_agg"
                } else {
                    "__pg_jsonb_object_agg"
                };
                let mut keys = function.clone();
                keys.name = ObjectName::from(vec![Ident::new("array_agg")]);
                let mut values = keys.clone();
                if let FunctionArguments::List(list) = &mut keys.args {
                    list.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(key))];
                }
                if let FunctionArguments::List(list) = &mut values.args {
                    list.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(value))];
                }
                Ok(Some(call(wrapper, vec![Expr::Function(keys), Expr::Function(values)])))
            }
            Expr::Function(function) => {
                let name = function_name(function);
                let Some(args) = plain_args(function) else { return Ok(None) };
                Ok(match (name.as_str(), <[Expr; 2]>::try_from(args.clone()), args.as_slice()) {
                    ("mod", Ok([a, b]), _) => Some(Expr::Nested(Box::new(Expr::BinaryOp {
                        left: Box::new(Expr::Nested(Box::new(a))),
                        op: ast::BinaryOperator::Modulo,
                        right: Box::new(Expr::Nested(Box::new(b))),
                    }))),
                    ("sign", _, [x]) => Some(call("signum", vec![x.clone()])),
                    // PostgreSQL's array_remove removes every occurrence.
                    ("array_remove", _, [array, element]) => {
                        Some(call("array_remove_all", vec![array.clone(), element.clone()]))
                    }
                    // double precision in PostgreSQL (extract is numeric).
                    ("date_part", _, _) if !self.cast_marked(function) => {
                        let mut marked = function.clone();
                        marked.name = ObjectName::from(vec![Ident::with_quote('"', name.clone())]);
                        Some(cast(Expr::Function(marked), SqlType::DoublePrecision))
                    }
                    // `x = ANY($1)` as datafusion-pg-catalog plans it, with the parameter's array
                    // text bound in: the text is the array.
                    ("array_has" | "array_contains", _, [array, element]) => string_literal(array)
                        .and_then(array_of_text)
                        .map(|array| call(&name, vec![array, element.clone()])),
                    // integer in PostgreSQL, an unsigned 64-bit count in DataFusion.
                    ("array_length" | "cardinality" | "array_ndims" | "array_position", _, _)
                        if !self.cast_marked(function) =>
                    {
                        let mut marked = function.clone();
                        marked.name = ObjectName::from(vec![Ident::with_quote('"', name.clone())]);
                        Some(cast(Expr::Function(marked), SqlType::Int(None)))
                    }
                    // `to_char(1234.5, '9G999D99')`: a number pattern.
                    ("to_char", _, [value, pattern])
                        if string_literal(pattern).is_some_and(|p| p.contains(['9', '0'])) =>
                    {
                        Some(call("__pg_to_char_number", vec![value.clone(), pattern.clone()]))
                    }
                    ("to_char" | "to_date" | "to_timestamp", _, [value, pattern]) => match string_literal(pattern) {
                        Some(pattern) => {
                            // Only to_char pads names: parsing takes them as they come.
                            let (format, upper) = chrono_format_with(pattern, name == "to_char")?;
                            let padded = format.contains(crate::functions::NAME_START);
                            let literal = Expr::Value(Value::SingleQuotedString(format).into());
                            let mut converted = call(&name, vec![value.clone(), literal]);
                            if padded {
                                converted = call(crate::functions::PAD_NAMES, vec![converted]);
                            }
                            Some(if upper { call("__pg_upper", vec![converted]) } else { converted })
                        }
                        None => None,
                    },
                    _ => None,
                })
            }
            _ => Ok(None),
        }
    }

    /// Whether a call was already rewritten (its name quoted by the rewrite).
    fn cast_marked(&self, function: &ast::Function) -> bool {
        matches!(function.name.0.last(), Some(ast::ObjectNamePart::Identifier(i)) if i.quote_style.is_some())
    }

    fn any_array(expr: &mut Expr) -> Result<Option<Expr>> {
        let (Expr::AnyOp { right, .. } | Expr::AllOp { right, .. }) = expr else { return Ok(None) };
        if let Some(array) = string_literal(right).and_then(array_of_text) {
            **right = array;
        }
        Ok(None)
    }

    fn cast(inner: &mut Expr, data_type: &SqlType) -> Result<Option<Expr>> {
        if let Some(cast) = time_cast(inner, data_type) {
            return Ok(Some(cast));
        }
        let input = match data_type {
            SqlType::Uuid => Some("__pg_uuid"),
            SqlType::JSON => Some("__pg_json"),
            SqlType::JSONB => Some("__pg_jsonb"),
            SqlType::Custom(name, _) => match name.to_string().to_lowercase().as_str() {
                "uuid" => Some("__pg_uuid"),
                "json" => Some("__pg_json"),
                "jsonb" => Some("__pg_jsonb"),
                _ => None,
            },
            _ => None,
        };
        if let Some(function) = input {
            return Ok(Some(call(function, vec![inner.clone()])));
        }
        // `'abcdef'::varchar(3)` is `abc`: a cast cuts, where an assignment fails (22001).
        if let SqlType::Varchar(Some(ast::CharacterLength::IntegerLength { length, .. }))
        | SqlType::CharacterVarying(Some(ast::CharacterLength::IntegerLength { length, .. })) = data_type
        {
            let length = Expr::Value(Value::Number(length.to_string(), false).into());
            return Ok(Some(call("__pg_varchar", vec![inner.clone(), length])));
        }
        // `x::varchar` is varchar (as clients see its type), of x's text.
        if matches!(data_type, SqlType::Varchar(None) | SqlType::CharacterVarying(None) | SqlType::CharVarying(None)) {
            let text = Self::cast(inner, &SqlType::Text)?.unwrap_or_else(|| cast(inner.clone(), SqlType::Text));
            return Ok(Some(call("__pg_varchar", vec![text])));
        }
        // `id::text` of a uuid (json, jsonb) column is text: the cast drops the column's type,
        // which DataFusion's cast of a string to a string would keep.
        if matches!(data_type, SqlType::Text | SqlType::String(None))
            && string_literal(inner).is_none()
            && !matches!(inner, Expr::Value(_))
        {
            return Ok(Some(call("__pg_text", vec![inner.clone()])));
        }
        if let (SqlType::Interval { .. }, Some(text)) = (data_type, string_literal(inner)) {
            let text = crate::datetime::interval_text(text)?;
            return Ok(Some(cast(Expr::Value(Value::SingleQuotedString(text).into()), data_type.clone())));
        }
        if let (Some(kind), Some(text)) = (datetime_kind(data_type), string_literal(inner)) {
            return Ok(Some(datetime_literal(text, kind, data_type)?));
        }
        match data_type {
            SqlType::Bytea => {
                let Some(text) = string_literal(inner) else { return Ok(None) };
                let bytes = crate::types::bytea_from_text(text).map_err(|e| Error::data("22P02", e))?;
                Ok(super::params::literal(&datafusion::common::ScalarValue::Binary(Some(bytes))).ok())
            }
            SqlType::Array(_) => {
                let Some(text) = string_literal(inner) else { return Ok(None) };
                let array = crate::types::array_text(text)?;
                // PostgreSQL's `int[]` is an array of any dimensions: the cast is to as many as
                // the text has (`'{{1,2},{3,4}}'::int[]` is `int[][]`).
                let mut element = data_type;
                while let SqlType::Array(
                    ast::ArrayElemTypeDef::SquareBracket(inner, _) | ast::ArrayElemTypeDef::AngleBracket(inner),
                ) = element
                {
                    element = inner;
                }
                let mut target = element.clone();
                for _ in 0..array.dimensions() {
                    target = SqlType::Array(ast::ArrayElemTypeDef::SquareBracket(Box::new(target), None));
                }
                Ok(Some(cast(array_expression(array, element)?, target)))
            }
            _ => Ok(None),
        }
    }
}

/// A cast to `time` or `timetz` as a call of its cast function (see
/// [`crate::functions::time_of_day`]): DataFusion's `TIME` is `Time64(ns)`, which does not
/// compare with the `Time64(µs)` of Sluice's times.
fn time_cast(inner: &Expr, data_type: &SqlType) -> Option<Expr> {
    use crate::functions::time_of_day::{TIMETZ_CAST, TIME_CAST};
    let SqlType::Time(precision, zone) = data_type else { return None };
    let with_zone = matches!(zone, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz);
    let mut args = vec![inner.clone()];
    if let Some(p) = precision {
        let p = (*p).min(crate::types::SECONDS_PRECISION_MAX);
        args.push(Expr::Value(Value::Number(p.to_string(), false).into()));
    }
    Some(call(if with_zone { TIMETZ_CAST } else { TIME_CAST }, args))
}

/// `current_time` (a `timetz`) and `localtime` (a `time`), with an optional precision: the
/// statement's time in the session's zone.
fn clock_time(function: &ast::Function) -> Option<Expr> {
    use crate::functions::time_of_day::{TIMETZ_CAST, TIME_CAST};
    let name = match function_name(function).as_str() {
        "current_time" => TIMETZ_CAST,
        "localtime" => TIME_CAST,
        _ => return None,
    };
    let mut args = vec![call("now", vec![])];
    match &function.args {
        FunctionArguments::None => {}
        FunctionArguments::List(_) => match plain_args(function)?.as_slice() {
            [precision @ Expr::Value(_)] => args.push(precision.clone()),
            _ => return None,
        },
        FunctionArguments::Subquery(_) => return None,
    }
    Some(call(name, args))
}

/// The date/time kind a cast to `data_type` reads text as.
fn datetime_kind(data_type: &SqlType) -> Option<crate::datetime::Kind> {
    use crate::datetime::Kind;
    Some(match data_type {
        SqlType::Date => Kind::Date,
        SqlType::Timestamp(_, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => Kind::TimestampTz,
        SqlType::Timestamp(..) | SqlType::Datetime(_) => Kind::Timestamp,
        _ => return None,
    })
}

/// `'2024-01-01 10:00'::timestamp`, `'yesterday'::date`: the literal as Arrow reads it, or
/// the clock's expression for the words that name a time relative to now.
fn datetime_literal(text: &str, kind: crate::datetime::Kind, data_type: &SqlType) -> Result<Expr> {
    use crate::datetime::Input;
    let string = |text: String| Expr::Value(Value::SingleQuotedString(text).into());
    // A timestamp without a precision is read at microseconds, PostgreSQL's (and Delta's)
    // resolution: DataFusion's default of nanoseconds cannot hold years before 1677 or after
    // 2262, which PostgreSQL's timestamps do ('0001-01-01' is a common sentinel).
    let value_type = match data_type {
        SqlType::Timestamp(None, zone) => SqlType::Timestamp(Some(6), *zone),
        other => other.clone(),
    };
    Ok(match crate::datetime::parse(text, kind)? {
        Input::Value(text) => cast(string(text), value_type),
        Input::Now => cast(call("now", vec![]), data_type.clone()),
        Input::Today(days) => {
            let today = call("current_date", vec![]);
            let day = match days {
                0 => today,
                n => Expr::BinaryOp {
                    left: Box::new(today),
                    op: ast::BinaryOperator::Plus,
                    right: Box::new(cast(
                        Expr::Value(Value::SingleQuotedString(format!("{n} days")).into()),
                        SqlType::Interval { fields: None, precision: None },
                    )),
                },
            };
            cast(day, data_type.clone())
        }
    })
}

/// A PostgreSQL date/time pattern (`YYYY-MM-DD HH24:MI:SS`, `FMMonth DD, YYYY`) as the chrono
/// format DataFusion's `to_char`, `to_date` and `to_timestamp` take, and whether the result is to
/// be upper-cased (`MON`, `MONTH`, `DAY`, `DY`, `AM`). 0A000 names a pattern Sluice lacks.
pub fn chrono_format(pattern: &str) -> Result<(String, bool)> {
    chrono_format_with(pattern, false)
}

/// [`chrono_format`]; with `pad_names`, a month or day name without `FM` is put between
/// [`crate::functions::NAME_START`] and [`crate::functions::NAME_END`], for
/// [`crate::functions::PAD_NAMES`] to blank-pad it to nine characters as PostgreSQL's `to_char`
/// does (chrono's formats have no width for names).
fn chrono_format_with(pattern: &str, pad_names: bool) -> Result<(String, bool)> {
    // Longest first, so that `HH24` is not read as `HH` then `24`.
    const TOKENS: &[(&str, &str, &str)] = &[
        ("HH24", "%H", "%-H"),
        ("HH12", "%I", "%-I"),
        ("HH", "%I", "%-I"),
        ("MI", "%M", "%-M"),
        ("SSSS", "", ""),
        ("SS", "%S", "%-S"),
        ("MS", "%3f", "%3f"),
        ("US", "%6f", "%6f"),
        ("YYYY", "%Y", "%Y"),
        ("YYY", "", ""),
        ("YY", "%y", "%y"),
        ("MONTH", "%B", "%B"),
        ("Month", "%B", "%B"),
        ("month", "", ""),
        ("MON", "%b", "%b"),
        ("Mon", "%b", "%b"),
        ("mon", "", ""),
        ("MM", "%m", "%-m"),
        ("DAY", "%A", "%A"),
        ("Day", "%A", "%A"),
        ("day", "", ""),
        ("DY", "%a", "%a"),
        ("Dy", "%a", "%a"),
        ("dy", "", ""),
        ("DDD", "%j", "%-j"),
        ("DD", "%d", "%-d"),
        ("IW", "%V", "%-V"),
        ("AM", "%p", "%p"),
        ("PM", "%p", "%p"),
        ("am", "%P", "%P"),
        ("pm", "%P", "%P"),
        ("TZ", "%Z", "%Z"),
    ];
    let mut out = String::new();
    let mut upper = false;
    let mut lower_literal = false;
    let mut fill = false;
    let mut rest = pattern;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("FM") {
            fill = true;
            rest = after;
            continue;
        }
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            let text = quoted.get(..end).unwrap_or_default();
            lower_literal |= text.chars().any(|c| c.is_lowercase());
            out.push_str(&text.replace('%', "%%"));
            rest = quoted.get(end + 1..).unwrap_or_default();
            continue;
        }
        if let Some((token, plain, filled)) = TOKENS.iter().find(|(t, _, _)| rest.starts_with(t)) {
            if plain.is_empty() {
                return Err(Error::NotSupported(format!("the date/time pattern {token} in \"{pattern}\"")));
            }
            upper |= matches!(*token, "MONTH" | "MON" | "DAY" | "DY");
            let padded = pad_names && !fill && matches!(*token, "MONTH" | "Month" | "DAY" | "Day");
            if padded {
                out.push(crate::functions::NAME_START);
            }
            out.push_str(if fill { filled } else { plain });
            if padded {
                out.push(crate::functions::NAME_END);
            }
            fill = false;
            rest = rest.get(token.len()..).unwrap_or_default();
            continue;
        }
        let mut chars = rest.chars();
        let c = chars.next().unwrap_or_default();
        if matches!(c, 'Y' | 'D' | 'Q' | 'J' | 'W') {
            return Err(Error::NotSupported(format!("the date/time pattern {c} in \"{pattern}\"")));
        }
        lower_literal |= c.is_ascii_lowercase();
        match c {
            '%' => out.push_str("%%"),
            '\\' => {
                let escaped = chars.next().unwrap_or_default();
                out.push(escaped);
            }
            c => out.push(c),
        }
        rest = chars.as_str();
    }
    if upper && lower_literal {
        return Err(Error::NotSupported(format!(
            "upper-case month or day names with lower-case text in the pattern \"{pattern}\""
        )));
    }
    Ok((out, upper))
}

/// Array text (`'{1,2}'`, `'{a,b}'`, most often a parameter bound in) compared with `ANY` as an
/// `ARRAY[...]` of its elements: numbers when they all are integers, else strings. `None` when
/// the text is not an array.
fn array_of_text(text: &str) -> Option<Expr> {
    let items = crate::types::array_from_text(text).ok()?;
    let numbers = items.iter().flatten().all(|i| i.parse::<i64>().is_ok());
    let elem = items
        .into_iter()
        .map(|item| match item {
            Some(text) if numbers => Expr::Value(Value::Number(text, false).into()),
            Some(text) => Expr::Value(Value::SingleQuotedString(text).into()),
            None => Expr::Value(Value::Null.into()),
        })
        .collect();
    Some(Expr::Array(ast::Array { elem, named: true }))
}

/// `ARRAY[...]` (nested for each dimension) of an array text's elements as text literals,
/// checked against the element type (see [`check_elements`]).
fn array_expression(array: crate::types::ArrayText, element: &SqlType) -> Result<Expr> {
    let elem = match array {
        crate::types::ArrayText::Elements(items) => {
            check_elements(element, &items)?;
            items
                .into_iter()
                .map(|item| match item {
                    Some(text) => Expr::Value(Value::SingleQuotedString(text).into()),
                    None => Expr::Value(Value::Null.into()),
                })
                .collect()
        }
        crate::types::ArrayText::Arrays(arrays) => {
            arrays.into_iter().map(|a| array_expression(a, element)).collect::<Result<_>>()?
        }
    };
    Ok(Expr::Array(ast::Array { elem, named: true }))
}

/// 22P02 for an element of integer array text that is not an integer, as PostgreSQL reports it
/// (DataFusion's cast would fail while planning, with another code).
fn check_elements(element: &SqlType, items: &[Option<String>]) -> Result<()> {
    let name = match element {
        SqlType::SmallInt(_) | SqlType::Int2(_) => "smallint",
        SqlType::Int(_) | SqlType::Integer(_) | SqlType::Int4(_) => "integer",
        SqlType::BigInt(_) | SqlType::Int8(_) => "bigint",
        _ => return Ok(()),
    };
    for item in items.iter().flatten() {
        if item.trim().parse::<i64>().is_err() {
            return Err(Error::data("22P02", format!("invalid input syntax for type {name}: \"{item}\"")));
        }
    }
    Ok(())
}

/// `FETCH FIRST|NEXT [n] ROW[S] ONLY` (SQL's form of LIMIT, which SQLAlchemy writes for
/// PostgreSQL) as `LIMIT n`, which DataFusion plans (it refuses FETCH). `WITH TIES` is
/// [`super::with_ties`]'s; `PERCENT` stays, and is refused as not supported.
struct FetchAsLimit;

impl VisitorMut for FetchAsLimit {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        let Some(fetch) = &query.fetch else { return ControlFlow::Continue(()) };
        if fetch.with_ties || fetch.percent {
            return ControlFlow::Continue(());
        }
        let count = fetch.quantity.clone().unwrap_or_else(|| Expr::value(Value::Number("1".into(), false)));
        match &mut query.limit_clause {
            None => {
                query.limit_clause =
                    Some(ast::LimitClause::LimitOffset { limit: Some(count), offset: None, limit_by: vec![] })
            }
            Some(ast::LimitClause::LimitOffset { limit: limit @ None, .. }) => *limit = Some(count),
            // LIMIT and FETCH both: left for the planner to refuse.
            Some(_) => return ControlFlow::Continue(()),
        }
        query.fetch = None;
        ControlFlow::Continue(())
    }
}

/// `row_number()`, `rank()`, `dense_rank()` and `ntile(n)` as `bigint`, PostgreSQL's type for
/// them (DataFusion's are unsigned, which a client would be told is `numeric`).
struct WindowCounts;

impl VisitorMut for WindowCounts {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        if function.over.is_none()
            || !matches!(function_name(function).as_str(), "row_number" | "rank" | "dense_rank" | "ntile")
        {
            return ControlFlow::Continue(());
        }
        *expr = cast(expr.clone(), SqlType::BigInt(None));
        ControlFlow::Continue(())
    }
}

/// Set-returning functions in select lists, as `unnest` of their lists.
/// The functions that give a value a declared type (field metadata) Arrow's type does not tell.
const TYPED_INPUTS: &[&str] = &["__pg_uuid", "__pg_json", "__pg_jsonb", "__pg_varchar", "__pg_timetz"];

/// `VALUES ('12:00'::timetz), (NULL), ('13:00')`: a column some rows give a declared type (a
/// `timetz`, `uuid`, `jsonb`) is of that type in every row, as PostgreSQL resolves a VALUES
/// column to one type; the other rows are read through the same function. (DataFusion refuses
/// rows whose types' metadata differ.)
struct TypedValues;

impl VisitorMut for TypedValues {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        let SetExpr::Values(values) = query.body.as_mut() else { return ControlFlow::Continue(()) };
        let width = values.rows.first().map_or(0, |row| row.len());
        for column in 0..width {
            let typed = values.rows.iter().find_map(|row| match row.get(column) {
                Some(Expr::Function(f)) if TYPED_INPUTS.contains(&function_name(f).as_str()) => Some(f.clone()),
                _ => None,
            });
            let Some(typed) = typed else { continue };
            let name = function_name(&typed);
            let extra: Vec<Expr> =
                plain_args(&typed).map(|args| args.into_iter().skip(1).collect()).unwrap_or_default();
            for row in values.rows.iter_mut() {
                let Some(value) = row.get_mut(column) else { continue };
                let same = matches!(value, Expr::Function(f) if function_name(f) == name);
                if !same {
                    let args = std::iter::once(value.clone()).chain(extra.iter().cloned()).collect();
                    *value = call(&name, args);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// `VALUES ('1 day'), (interval '2 days')`: in a VALUES column whose other rows are of a type
/// written out (a cast or a typed literal), a quoted literal is read as that type, as PostgreSQL
/// resolves an unknown literal by the column's other values (DataFusion refuses the list: text in
/// one row, an interval in the next). Runs before [`Literals`], which then reads each literal as
/// it reads a cast.
struct LiteralValues;

impl VisitorMut for LiteralValues {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        let SetExpr::Values(values) = query.body.as_mut() else { return ControlFlow::Continue(()) };
        let width = values.rows.first().map_or(0, |row| row.len());
        for column in 0..width {
            let written = values.rows.iter().find_map(|row| match row.get(column) {
                Some(Expr::Cast { data_type, .. }) => Some(data_type.clone()),
                Some(Expr::TypedString(typed)) => Some(typed.data_type.clone()),
                Some(Expr::Interval(_)) => Some(SqlType::Interval { fields: None, precision: None }),
                _ => None,
            });
            if let Some(data_type) = written {
                cast_quoted_cells(values, column, &data_type);
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether a VALUES cell is a quoted literal (PostgreSQL's `unknown`, typed by its context).
pub(crate) fn is_quoted(cell: &Expr) -> bool {
    string_literal(cell).is_some()
}

/// Casts the quoted literals of a VALUES column to `data_type`.
pub(crate) fn cast_quoted_cells(values: &mut ast::Values, column: usize, data_type: &SqlType) {
    for row in values.rows.iter_mut() {
        if let Some(cell) = row.content.get_mut(column).filter(|c| is_quoted(c)) {
            *cell = cast(cell.clone(), data_type.clone());
        }
    }
}

struct SetReturning;

impl VisitorMut for SetReturning {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            for item in select.projection.iter_mut() {
                let (expr, alias) = match item {
                    SelectItem::UnnamedExpr(expr) => (expr, None),
                    SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
                    _ => continue,
                };
                let Expr::Function(function) = expr else { continue };
                let name = function_name(function);
                if !crate::functions::json::SET_RETURNING.contains(&name.as_str()) {
                    continue;
                }
                // `generate_series` of integers is integer (int4) in PostgreSQL, bigint here.
                let integers = name == "generate_series"
                    && plain_args(function).is_some_and(|args| args.iter().all(small_integer));
                let mut listed = expr.clone();
                if let (Expr::Function(list), Some(list_name)) =
                    (&mut listed, crate::functions::json::list_function(&name))
                {
                    list.name = ObjectName::from(vec![Ident::new(list_name)]);
                }
                let mut unnested = call("unnest", vec![listed]);
                // The elements of a jsonb array are jsonb (unnest does not keep the list's element
                // type).
                if matches!(name.as_str(), "jsonb_array_elements" | "json_array_elements") {
                    unnested = call("__pg_jsonb", vec![unnested]);
                }
                if integers {
                    unnested = cast(unnested, SqlType::Int(None));
                }
                *item = SelectItem::ExprWithAlias {
                    expr: unnested,
                    alias: alias.unwrap_or_else(|| Ident::with_quote('"', name)),
                };
            }
        }
        ControlFlow::Continue(())
    }
}

/// An integer literal that fits `integer`.
fn small_integer(expr: &Expr) -> bool {
    match expr {
        Expr::Value(v) => matches!(&v.value, Value::Number(n, _) if n.parse::<i32>().is_ok()),
        Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => small_integer(expr),
        _ => false,
    }
}

/// Marks an alias given to tell apart columns of one name.
const DUPLICATE_MARK: char = '\u{1}';

/// The name a result column is shown with, for a select-list alias (the duplicates' aliases give
/// back the name they stand for).
pub fn output_name(alias: &str) -> Option<&str> {
    let rest = alias.strip_prefix(DUPLICATE_MARK)?;
    rest.split_once(DUPLICATE_MARK).map(|(_, name)| name)
}

/// An internal alias for the `i`th of several columns named `name` (see [`output_name`]).
pub fn duplicate_alias(i: usize, name: &str) -> String {
    format!("{DUPLICATE_MARK}{i}{DUPLICATE_MARK}{name}")
}

fn name_duplicates(projection: &mut [SelectItem]) {
    let mut seen = HashSet::new();
    for (i, item) in projection.iter_mut().enumerate() {
        let Some(name) = super::query::select_item_name(item) else { continue };
        if seen.insert(name.clone()) {
            continue;
        }
        let alias = Ident::with_quote('"', duplicate_alias(i, &name));
        match item {
            SelectItem::UnnamedExpr(expr) => *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias },
            SelectItem::ExprWithAlias { alias: given, .. } => *given = alias,
            _ => {}
        }
    }
}

/// A number written with an exponent (`1.5e-7`) as plain decimal digits (`0.00000015`); `None`
/// when it has no exponent or would need more than 38 digits (it is then read as written).
fn plain_decimal(text: &str) -> Option<String> {
    let (mantissa, exponent) = text.split_once(['e', 'E'])?;
    let exponent: i32 = exponent.parse().ok()?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    // The position of the decimal point in `digits`.
    let point = whole.len() as i32 + exponent;
    if digits.len() as i32 - point.min(0) > 38 || point > 38 {
        return None;
    }
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else {
        match (digits.get(..point as usize), digits.get(point as usize..)) {
            (Some(whole), Some(fraction)) if !fraction.is_empty() => format!("{whole}.{fraction}"),
            _ => format!("{digits}{}", "0".repeat((point as usize).saturating_sub(digits.len()))),
        }
    };
    let text = text.trim_start_matches('0');
    Some(if text.is_empty() || text.starts_with('.') { format!("0{text}") } else { text.to_string() })
}

#[cfg(test)]
mod tests {
    use super::{chrono_format, plain_decimal};

    #[test]
    fn date_patterns_become_chrono_formats() {
        let format = |p: &str| chrono_format(p).unwrap();
        assert_eq!(format("YYYY/MM/DD"), ("%Y/%m/%d".to_string(), false));
        assert_eq!(format("YYYY-MM-DD HH24:MI:SS.US"), ("%Y-%m-%d %H:%M:%S.%6f".to_string(), false));
        assert_eq!(format("FMMonth FMDD, YYYY"), ("%B %-d, %Y".to_string(), false));
        assert_eq!(format("DD-MON-YYYY"), ("%d-%b-%Y".to_string(), true));
        assert_eq!(format("HH12:MI AM \"o'clock\""), ("%I:%M %p o'clock".to_string(), false));
        assert_eq!(format("100%"), ("100%%".to_string(), false));
        assert_eq!(chrono_format("Q").unwrap_err().sqlstate(), "0A000");
        assert_eq!(chrono_format("DD MON \"de\"").unwrap_err().sqlstate(), "0A000");
    }

    #[test]
    fn numbers_with_exponents_become_plain_decimals() {
        assert_eq!(plain_decimal("1e3").as_deref(), Some("1000"));
        assert_eq!(plain_decimal("1.5e-7").as_deref(), Some("0.00000015"));
        assert_eq!(plain_decimal("2.5E1").as_deref(), Some("25"));
        assert_eq!(plain_decimal("0.5e1").as_deref(), Some("5"));
        assert_eq!(plain_decimal("12.34e-1").as_deref(), Some("1.234"));
        assert_eq!(plain_decimal("1e308"), None);
        assert_eq!(plain_decimal("15"), None);
    }
}
