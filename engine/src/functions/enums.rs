//! Values of enum types in queries: their input function, and their order.
//!
//! An enum value is a string whose field metadata names its type (see
//! [`crate::catalog::enums`]). PostgreSQL orders enum values by their labels' declared order, not
//! alphabetically, so [`EnumOrder`] (an analyzer rule) rewrites what orders or compares them:
//!
//! - `ORDER BY e`, and the ORDER BY of window functions and aggregates, sort by
//!   `__pg_enum_position(e, ...)`, the label's position;
//! - `e < x`, `e <= x`, `e > x`, `e >= x` and `e BETWEEN x AND y` compare positions (a text
//!   literal on the other side is read as a label of `e`'s type: 22P02 when it is none, as in
//!   PostgreSQL);
//! - `e = 'x'`, `e <> 'x'`, `e IN ('x', ...)` compare the text, after checking the literals are
//!   labels (22P02 otherwise);
//! - `e::text` is plain text again (`__pg_enum_text`), which sorts and compares as text;
//! - comparing values of two different enum types is 42883, as PostgreSQL has no such operator;
//! - `min(e)` and `max(e)` are the first value in label order (`first_value(e ORDER BY
//!   __pg_enum_position(e, ...) [DESC] NULLS LAST)`, which keeps `e`'s type); `greatest`,
//!   `least`, and `min` and `max` as window functions, are refused (0A000) rather than answered
//!   in alphabetical order.
//!
//! The labels travel in the calls' arguments (taken from the catalog when the statement is
//! planned), so the functions need no catalog when they run.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, Between, BinaryExpr, Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::catalog::enums::{invalid_input, EnumEntry, ENUM_OID_KEY};
use crate::catalog::CatalogState;
use crate::error::{Error, Result};
use crate::types::DECLARED_TYPE_KEY;

/// `__pg_enum(value, 'name', oid, 'label', ...)`: the value as a value of the enum type (22P02
/// when it is no label); what casts to an enum type are rewritten to (see `sql::enums`).
pub const ENUM_INPUT: &str = "__pg_enum";
/// `__pg_enum_position(value, 'name', 'label', ...)`: the label's position (from 0).
pub const ENUM_POSITION: &str = "__pg_enum_position";
/// `__pg_enum_text(value)`: an enum value as plain text.
pub const ENUM_TEXT: &str = "__pg_enum_text";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Input,
    Position,
    Text,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct EnumFunction {
    kind: Kind,
    signature: Signature,
}

/// The enum functions, to register in a session.
pub fn functions() -> Vec<ScalarUDF> {
    [Kind::Input, Kind::Position, Kind::Text]
        .into_iter()
        .map(|kind| ScalarUDF::from(EnumFunction { kind, signature: Signature::variadic_any(Volatility::Immutable) }))
        .collect()
}

fn text_argument(args: &[ColumnarValue], index: usize) -> DfResult<String> {
    match args.get(index) {
        Some(ColumnarValue::Scalar(value)) => match value.cast_to(&DataType::Utf8)? {
            ScalarValue::Utf8(Some(text)) => Ok(text),
            _ => Err(Error::Internal("an enum function's argument is NULL".into()).into()),
        },
        _ => Err(Error::Internal("an enum function's argument is not a constant".into()).into()),
    }
}

impl ScalarUDFImpl for EnumFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Input => ENUM_INPUT,
            Kind::Position => ENUM_POSITION,
            Kind::Text => ENUM_TEXT,
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(if self.kind == Kind::Position { DataType::Int32 } else { DataType::Utf8 })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = match self.kind {
            Kind::Position => Field::new(self.name(), DataType::Int32, true),
            Kind::Text => Field::new(self.name(), DataType::Utf8, true),
            Kind::Input => {
                let constant = |i: usize| args.scalar_arguments.get(i).copied().flatten().map(|v| v.to_string());
                let (Some(name), Some(oid)) = (constant(1), constant(2)) else {
                    return Err(Error::Internal(format!("{ENUM_INPUT} without its type")).into());
                };
                Field::new(self.name(), DataType::Utf8, true).with_metadata(HashMap::from([
                    (DECLARED_TYPE_KEY.to_string(), name),
                    (ENUM_OID_KEY.to_string(), oid),
                ]))
            }
        };
        Ok(Arc::new(field))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let Some(value) = args.args.first() else {
            return Err(Error::Internal(format!("{} takes a value", self.name())).into());
        };
        let scalar = matches!(value, ColumnarValue::Scalar(_));
        let array = arrow::compute::cast(&value.clone().into_array(args.number_rows)?, &DataType::Utf8)?;
        let values: ArrayRef = match self.kind {
            Kind::Text => array,
            Kind::Input | Kind::Position => {
                let name = text_argument(&args.args, 1)?;
                let first_label = if self.kind == Kind::Input { 3 } else { 2 };
                let labels = (first_label..args.args.len())
                    .map(|i| text_argument(&args.args, i))
                    .collect::<DfResult<Vec<_>>>()?;
                let positions: HashMap<&str, i32> =
                    labels.iter().zip(0i32..).map(|(label, i)| (label.as_str(), i)).collect();
                let strings = array.as_string::<i32>();
                let mut found = Vec::with_capacity(strings.len());
                for value in strings.iter() {
                    found.push(match value {
                        None => None,
                        Some(value) => Some(*positions.get(value).ok_or_else(|| invalid_input(&name, value))?),
                    });
                }
                if self.kind == Kind::Position {
                    Arc::new(Int32Array::from(found))
                } else {
                    Arc::new(StringArray::from_iter(strings.iter()))
                }
            }
        };
        Ok(if scalar && values.len() == 1 {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&values, 0)?)
        } else {
            ColumnarValue::Array(values)
        })
    }
}

/// The source of the catalog a rule reads the enum types from (a session's view of it).
pub type CatalogSource = Arc<dyn Fn() -> Arc<CatalogState> + Send + Sync>;

/// The analyzer rule that orders and compares enum values by their labels' order (see the
/// module's documentation).
pub struct EnumOrder {
    catalog: CatalogSource,
}

impl EnumOrder {
    pub fn new(catalog: CatalogSource) -> Self {
        Self { catalog }
    }
}

impl std::fmt::Debug for EnumOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnumOrder")
    }
}

impl AnalyzerRule for EnumOrder {
    fn name(&self) -> &str {
        "sluice_enum_order"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let state = (self.catalog)();
        if state.enums.is_empty() {
            return Ok(plan);
        }
        Ok(plan
            .transform_up_with_subqueries(|plan| {
                let schema = datafusion::logical_expr::utils::merge_schema(&plan.inputs());
                let rules = Rules { state: &state, schema: &schema };
                let sorts = matches!(plan, LogicalPlan::Sort(_));
                super::rewrite_node_expressions(plan, |expr| {
                    let rewritten = expr.transform_up(|e| rules.rewrite(e))?;
                    // A Sort node's expressions are its sort keys.
                    match (sorts, rules.enum_of(&rewritten.data)) {
                        (true, Some(entry)) => Ok(Transformed::yes(position_call(rewritten.data, entry))),
                        _ => Ok(rewritten),
                    }
                })
            })?
            .data)
    }
}

struct Rules<'a> {
    state: &'a CatalogState,
    schema: &'a DFSchema,
}

fn is_text(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    let function = functions().into_iter().find(|f| f.name() == name);
    match function {
        Some(function) => Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(function), args)),
        None => Expr::Literal(ScalarValue::Null, None),
    }
}

fn text_literal(text: &str) -> Expr {
    Expr::Literal(ScalarValue::Utf8(Some(text.to_string())), None)
}

/// `__pg_enum_position(expr, 'name', 'label', ...)`.
fn position_call(expr: Expr, entry: &EnumEntry) -> Expr {
    let mut args = vec![expr, text_literal(&entry.declared_name())];
    args.extend(entry.labels.iter().map(|l| text_literal(&l.label)));
    call(ENUM_POSITION, args)
}

/// The text of a text literal (`Some(None)`: a NULL one).
fn literal_text(expr: &Expr) -> Option<Option<&str>> {
    match expr {
        Expr::Literal(ScalarValue::Utf8(text) | ScalarValue::LargeUtf8(text) | ScalarValue::Utf8View(text), _) => {
            Some(text.as_deref())
        }
        Expr::Literal(ScalarValue::Null, _) => Some(None),
        _ => None,
    }
}

fn no_operator(op: Operator, left: &EnumEntry, right: &EnumEntry) -> Error {
    Error::data("42883", format!("operator does not exist: {} {op} {}", left.declared_name(), right.declared_name()))
}

fn refused(what: &str, entry: &EnumEntry) -> Error {
    Error::NotSupported(format!(
        "{what} of enum type {} (Sluice compares enum values in ORDER BY and comparisons only)",
        entry.declared_name()
    ))
}

impl Rules<'_> {
    /// The enum type of an expression's values, if they are of one.
    fn enum_of(&self, expr: &Expr) -> Option<&EnumEntry> {
        let (_, field) = expr.to_field(self.schema).ok()?;
        self.state.enum_of_field(field.metadata())
    }

    /// Checks that a literal compared with values of `entry` is a label.
    fn check_literal(&self, expr: &Expr, entry: &EnumEntry) -> Result<()> {
        match literal_text(expr) {
            Some(Some(text)) if entry.position(text).is_none() => Err(invalid_input(&entry.declared_name(), text)),
            _ => Ok(()),
        }
    }

    /// An operand of an ordering comparison as its label's position: a literal now, anything
    /// else when it runs.
    fn position_of(&self, expr: Expr, entry: &EnumEntry) -> Result<Expr> {
        match literal_text(&expr) {
            Some(None) => Ok(Expr::Literal(ScalarValue::Int32(None), None)),
            Some(Some(text)) => {
                let position = entry.position(text).ok_or_else(|| invalid_input(&entry.declared_name(), text))?;
                let position = i32::try_from(position).map_err(|_| invalid_input(&entry.declared_name(), text))?;
                Ok(Expr::Literal(ScalarValue::Int32(Some(position)), None))
            }
            None => Ok(position_call(expr, entry)),
        }
    }

    /// The one enum type two operands compare as (42883 for two different ones).
    fn compared_type(&self, op: Operator, left: &Expr, right: &Expr) -> Result<Option<EnumEntry>> {
        match (self.enum_of(left), self.enum_of(right)) {
            (Some(l), Some(r)) if l.oid != r.oid => Err(no_operator(op, l, r)),
            (Some(e), _) | (None, Some(e)) => Ok(Some(e.clone())),
            (None, None) => Ok(None),
        }
    }

    fn rewrite(&self, expr: Expr) -> DfResult<Transformed<Expr>> {
        Ok(match expr {
            // `e::text`: plain text from here on.
            Expr::Cast(Cast { expr: inner, field }) if is_text(field.data_type()) && self.enum_of(&inner).is_some() => {
                let text = call(ENUM_TEXT, vec![*inner]);
                Transformed::yes(if *field.data_type() == DataType::Utf8 {
                    text
                } else {
                    Expr::Cast(Cast { expr: Box::new(text), field })
                })
            }
            Expr::TryCast(TryCast { expr: inner, field })
                if is_text(field.data_type()) && self.enum_of(&inner).is_some() =>
            {
                Transformed::yes(Expr::TryCast(TryCast { expr: Box::new(call(ENUM_TEXT, vec![*inner])), field }))
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => self.comparison(*left, op, *right)?,
            Expr::Between(Between { expr: inner, negated, low, high }) => match self.enum_of(&inner).cloned() {
                Some(entry) => Transformed::yes(Expr::Between(Between {
                    expr: Box::new(self.position_of(*inner, &entry)?),
                    negated,
                    low: Box::new(self.position_of(*low, &entry)?),
                    high: Box::new(self.position_of(*high, &entry)?),
                })),
                None => Transformed::no(Expr::Between(Between { expr: inner, negated, low, high })),
            },
            Expr::InList(list) => {
                if let Some(entry) = self.enum_of(&list.expr) {
                    for item in &list.list {
                        self.check_literal(item, entry)?;
                    }
                }
                Transformed::no(Expr::InList(list))
            }
            Expr::AggregateFunction(mut aggregate) => {
                if let Some(first) = self.extreme_in_label_order(&aggregate) {
                    return Ok(Transformed::yes(first));
                }
                let changed = self.order_by_positions(&mut aggregate.params.order_by);
                Transformed::new_transformed(Expr::AggregateFunction(aggregate), changed)
            }
            Expr::WindowFunction(window) if matches!(window.fun.name(), "min" | "max") => {
                if let Some(entry) = window.params.args.iter().find_map(|a| self.enum_of(a)) {
                    return Err(refused(&format!("{} OVER (...)", window.fun.name()), entry).into());
                }
                Transformed::no(Expr::WindowFunction(window))
            }
            Expr::WindowFunction(mut window) => {
                let changed = self.order_by_positions(&mut window.params.order_by);
                Transformed::new_transformed(Expr::WindowFunction(window), changed)
            }
            Expr::ScalarFunction(function) => {
                if matches!(function.name(), "greatest" | "least") {
                    if let Some(entry) = function.args.iter().find_map(|a| self.enum_of(a)) {
                        return Err(refused(function.name(), entry).into());
                    }
                }
                Transformed::no(Expr::ScalarFunction(function))
            }
            other => Transformed::no(other),
        })
    }

    /// A comparison: ordering ones of enum values compare positions; equality ones check their
    /// literals.
    fn comparison(&self, left: Expr, op: Operator, right: Expr) -> Result<Transformed<Expr>> {
        let ordering = matches!(op, Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq);
        let equality =
            matches!(op, Operator::Eq | Operator::NotEq | Operator::IsDistinctFrom | Operator::IsNotDistinctFrom);
        let unchanged = |left: Expr, right: Expr| {
            Transformed::no(Expr::BinaryExpr(BinaryExpr { left: Box::new(left), op, right: Box::new(right) }))
        };
        if !ordering && !equality {
            return Ok(unchanged(left, right));
        }
        let Some(entry) = self.compared_type(op, &left, &right)? else { return Ok(unchanged(left, right)) };
        if equality {
            self.check_literal(&left, &entry)?;
            self.check_literal(&right, &entry)?;
            return Ok(unchanged(left, right));
        }
        Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
            left: Box::new(self.position_of(left, &entry)?),
            op,
            right: Box::new(self.position_of(right, &entry)?),
        })))
    }

    /// Sort keys of enum values sorted by their positions; whether one was.
    fn order_by_positions(&self, order_by: &mut [datafusion::logical_expr::SortExpr]) -> bool {
        let mut changed = false;
        for sort in order_by.iter_mut() {
            if let Some(entry) = self.enum_of(&sort.expr).cloned() {
                let expr = std::mem::replace(&mut sort.expr, Expr::Literal(ScalarValue::Null, None));
                sort.expr = position_call(expr, &entry);
                changed = true;
            }
        }
        changed
    }

    /// `min(e)` and `max(e)` of enum values as PostgreSQL answers them, in label order (not
    /// alphabetical): the first value in that order, NULLs last (so NULL only when all are).
    /// None for any other aggregate.
    fn extreme_in_label_order(&self, aggregate: &AggregateFunction) -> Option<Expr> {
        let descending = match aggregate.func.name() {
            "min" => false,
            "max" => true,
            _ => return None,
        };
        let [value] = aggregate.params.args.as_slice() else { return None };
        let entry = self.enum_of(value)?;
        let order = position_call(value.clone(), entry).sort(!descending, false);
        Some(Expr::AggregateFunction(AggregateFunction::new_udf(
            datafusion::functions_aggregate::first_last::first_value_udaf(),
            vec![value.clone()],
            false,
            aggregate.params.filter.clone(),
            vec![order],
            None,
        )))
    }
}
