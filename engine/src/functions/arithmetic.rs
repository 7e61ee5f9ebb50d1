//! Arithmetic and numeric casts as PostgreSQL computes them.
//!
//! DataFusion's integer `+ - *` wrap around on overflow, float division by zero gives infinity,
//! and a cast from a float or numeric to an integer truncates. PostgreSQL raises 22003 ("integer
//! out of range") on overflow in every integer type, 22012 on division by zero (floats too), and
//! rounds when it casts to an integer (floats half to even, as `rint`; numerics half away from
//! zero). The analyzer rule [`PostgresArithmetic`] runs after DataFusion's type coercion and
//! replaces those operations, where their operands are integers or floats, by the functions of
//! this module, which compute the same value or raise PostgreSQL's error. Every plan goes
//! through it: queries, DML, flows and views alike. Names of output columns are kept.
//!
//! Decimal addition, subtraction and multiplication keep DataFusion's operators (their result
//! scales are PostgreSQL's: the larger operand scale, the sum of the scales); its division by
//! zero is reported as 22012 by [`crate::error`]. Decimal division takes PostgreSQL's result
//! scale ([`division`]), and so does `avg` of decimals ([`average`]); `div(numeric, numeric)` is
//! PostgreSQL's truncated quotient.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::compute::kernels::numeric;
use arrow::datatypes::{
    ArrowNativeTypeOp, ArrowPrimitiveType, DataType, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type,
};
use arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::Error;

mod average;
mod division;

/// An arithmetic operator computed as PostgreSQL does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl Op {
    fn of(operator: Operator) -> Option<Op> {
        Some(match operator {
            Operator::Plus => Op::Add,
            Operator::Minus => Op::Sub,
            Operator::Multiply => Op::Mul,
            Operator::Divide => Op::Div,
            Operator::Modulo => Op::Rem,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::Add => "__pg_add",
            Op::Sub => "__pg_sub",
            Op::Mul => "__pg_mul",
            Op::Div => "__pg_div",
            Op::Rem => "__pg_mod",
        }
    }
}

/// `a op b` on two integers or two floats of one type, with PostgreSQL's errors.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Arithmetic {
    op: Op,
    signature: Signature,
}

impl ScalarUDFImpl for Arithmetic {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        arg_types.first().cloned().ok_or_else(|| DataFusionError::Plan(format!("{} needs two arguments", self.name())))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [left, right] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(format!("{} needs two arguments", self.name())));
        };
        let result = compute(self.op, left, right)?;
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?));
        }
        Ok(ColumnarValue::Array(result))
    }
}

/// `column op constant` on integers as PostgreSQL computes it: in the wider of the two types,
/// 22003 on overflow. For the statements Sluice runs without a plan (`crate::sql::point`).
pub(crate) fn integer_arithmetic(
    operator: Operator,
    column: &ArrayRef,
    constant: &ScalarValue,
    rows: usize,
) -> DfResult<ArrayRef> {
    let op = Op::of(operator).ok_or_else(|| DataFusionError::Internal(format!("no arithmetic {operator}")))?;
    let rank = |t: &DataType| match t {
        DataType::Int8 => 0,
        DataType::Int16 => 1,
        DataType::Int32 => 2,
        _ => 3,
    };
    let wide = if rank(column.data_type()) >= rank(&constant.data_type()) {
        column.data_type().clone()
    } else {
        constant.data_type()
    };
    let left = arrow::compute::cast(column, &wide)?;
    let right = constant.cast_to(&wide)?.to_array_of_size(rows)?;
    compute(op, &left, &right)
}

fn compute(op: Op, left: &ArrayRef, right: &ArrayRef) -> DfResult<ArrayRef> {
    let data_type = left.data_type().clone();
    match data_type {
        DataType::Float32 => return float::<Float32Type>(op, left, right),
        DataType::Float64 => return float::<Float64Type>(op, left, right),
        _ => {}
    }
    let result = match op {
        Op::Add => numeric::add(left, right),
        Op::Sub => numeric::sub(left, right),
        Op::Mul => numeric::mul(left, right),
        Op::Div => numeric::div(left, right),
        Op::Rem => {
            return match data_type {
                DataType::Int8 => remainder::<Int8Type>(left, right),
                DataType::Int16 => remainder::<Int16Type>(left, right),
                DataType::Int32 => remainder::<Int32Type>(left, right),
                _ => remainder::<Int64Type>(left, right),
            }
        }
    };
    result.map_err(|e| match e {
        ArrowError::DivideByZero => division_by_zero(),
        ArrowError::ArithmeticOverflow(_) => out_of_range(&data_type),
        other => DataFusionError::ArrowError(Box::new(other), None),
    })
}

/// `a % b` on integers: 22012 for `b = 0`, and `MIN % -1` is 0 (Arrow calls it an overflow).
fn remainder<T: ArrowPrimitiveType>(left: &ArrayRef, right: &ArrayRef) -> DfResult<ArrayRef> {
    let (l, r) = (left.as_primitive::<T>(), right.as_primitive::<T>());
    if r.iter().zip(l.iter()).any(|(b, a)| a.is_some() && b.is_some_and(|b| b.is_zero())) {
        return Err(division_by_zero());
    }
    let result: PrimitiveArray<T> = arrow::compute::binary(l, r, |a: T::Native, b: T::Native| a.mod_wrapping(b))?;
    Ok(Arc::new(result))
}

/// A float type's arithmetic, for PostgreSQL's float8 and float4 errors.
trait Real:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Rem<Output = Self>
{
    fn finite(self) -> bool;
    fn zero(self) -> bool;
}

impl Real for f32 {
    fn finite(self) -> bool {
        self.is_finite()
    }
    fn zero(self) -> bool {
        self == 0.0
    }
}

impl Real for f64 {
    fn finite(self) -> bool {
        self.is_finite()
    }
    fn zero(self) -> bool {
        self == 0.0
    }
}

fn float<T>(op: Op, left: &ArrayRef, right: &ArrayRef) -> DfResult<ArrayRef>
where
    T: ArrowPrimitiveType,
    T::Native: Real,
{
    let (l, r) = (left.as_primitive::<T>(), right.as_primitive::<T>());
    let apply = |a: T::Native, b: T::Native| match op {
        Op::Add => a + b,
        Op::Sub => a - b,
        Op::Mul => a * b,
        Op::Div => a / b,
        Op::Rem => a % b,
    };
    // Computed at once, then checked on the rows where both sides have a value.
    let result: PrimitiveArray<T> = arrow::compute::binary(l, r, apply)?;
    let rows = l.values().iter().zip(r.values().iter()).zip(result.values().iter());
    for (row, ((&a, &b), &value)) in rows.enumerate() {
        if result.is_valid(row) {
            float_check(op, a, b, value)?;
        }
    }
    Ok(Arc::new(result))
}

/// PostgreSQL's errors for `a op b = value` on floats.
fn float_check<F: Real>(op: Op, a: F, b: F, value: F) -> DfResult<()> {
    if matches!(op, Op::Div | Op::Rem) && b.zero() {
        return Err(division_by_zero());
    }
    if !value.finite() && a.finite() && b.finite() {
        return Err(data_error("22003", "value out of range: overflow"));
    }
    let underflow = match op {
        Op::Mul => value.zero() && !a.zero() && !b.zero(),
        Op::Div => value.zero() && !a.zero() && b.finite(),
        _ => false,
    };
    if underflow {
        return Err(data_error("22003", "value out of range: underflow"));
    }
    Ok(())
}

fn data_error(sqlstate: &'static str, message: &str) -> DataFusionError {
    DataFusionError::External(Box::new(Error::data(sqlstate, message)))
}

fn division_by_zero() -> DataFusionError {
    data_error("22012", "division by zero")
}

/// PostgreSQL's name of an integer type, as its out-of-range message says it.
fn integer_name(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Int8 | DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        _ => "bigint",
    }
}

fn out_of_range(data_type: &DataType) -> DataFusionError {
    if data_type.is_floating() {
        return data_error("22003", "value out of range: overflow");
    }
    data_error("22003", &format!("{} out of range", integer_name(data_type)))
}

/// `__pg_cast(x, NULL::target)`: a cast to an integer type as PostgreSQL makes it. The second
/// argument only names the target type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerCast {
    signature: Signature,
}

impl ScalarUDFImpl for IntegerCast {
    fn name(&self) -> &str {
        "__pg_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        arg_types.get(1).cloned().ok_or_else(|| DataFusionError::Plan("__pg_cast needs a target type".into()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let target = args.return_field.data_type().clone();
        let Some(value) = args.args.first() else {
            return Err(DataFusionError::Plan("__pg_cast needs a value".into()));
        };
        match value {
            ColumnarValue::Scalar(s) => {
                let array = s.to_array_of_size(1)?;
                let cast = to_integer(&array, &target)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&cast, 0)?))
            }
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(to_integer(array, &target)?)),
        }
    }
}

/// `value` (an integer, float, decimal or text array) as the integer type `target`: rounded as
/// PostgreSQL rounds (floats half to even, decimals half away from zero), 22003 when a value
/// does not fit, 22P02 for text that is not an integer.
pub fn to_integer(value: &ArrayRef, target: &DataType) -> DfResult<ArrayRef> {
    let rounded: ArrayRef = match value.data_type() {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let doubles = arrow::compute::cast(value, &DataType::Float64)?;
            let doubles = doubles.as_primitive::<Float64Type>();
            if doubles.iter().flatten().any(|v| !v.is_finite()) {
                return Err(out_of_range(target));
            }
            Arc::new(doubles.unary::<_, Float64Type>(f64::round_ties_even))
        }
        DataType::Decimal128(_, scale) if *scale > 0 => {
            let divisor = 10i128.pow(u32::from(scale.unsigned_abs()));
            let decimals = value.as_primitive::<Decimal128Type>();
            let rounded: PrimitiveArray<Decimal128Type> = decimals.unary(|v| {
                let (quotient, remainder) = (v / divisor, v % divisor);
                if remainder.abs() * 2 >= divisor {
                    quotient + v.signum()
                } else {
                    quotient
                }
            });
            Arc::new(rounded.with_precision_and_scale(38, 0)?)
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = arrow::compute::cast(value, &DataType::Utf8)?;
            let mut parsed = Vec::with_capacity(text.len());
            for v in text.as_string::<i32>().iter() {
                parsed.push(match v {
                    None => None,
                    Some(v) => Some(parse_integer(v, target)?),
                });
            }
            Arc::new(arrow::array::Int64Array::from(parsed))
        }
        _ => value.clone(),
    };
    let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
    arrow::compute::cast_with_options(&rounded, target, &options).map_err(|e| match e {
        ArrowError::CastError(_) | ArrowError::ArithmeticOverflow(_) => out_of_range(target),
        other => DataFusionError::ArrowError(Box::new(other), None),
    })
}

/// Text as an integer, as PostgreSQL reads it: surrounding spaces allowed, 22P02 when it is not
/// an integer, 22003 when it is one too large.
fn parse_integer(text: &str, target: &DataType) -> DfResult<i64> {
    let trimmed = text.trim();
    if let Ok(v) = trimmed.parse::<i64>() {
        return Ok(v);
    }
    let digits = trimmed.strip_prefix(['-', '+']).unwrap_or(trimmed);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(out_of_range(target));
    }
    Err(data_error("22P02", &format!("invalid input syntax for type {}: \"{text}\"", integer_name(target))))
}

fn is_integer(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64)
}

fn is_float(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Float32 | DataType::Float64)
}

fn udf(function: impl ScalarUDFImpl + 'static) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(function))
}

/// The functions of this module a session calls by name: `div(numeric, numeric)`.
pub fn functions() -> Vec<ScalarUDF> {
    vec![ScalarUDF::new_from_impl(division::IntegerQuotient::new())]
}

/// Replaces integer and float arithmetic and casts to integers by PostgreSQL's (see the module
/// docs). Runs after type coercion.
#[derive(Debug, Default)]
pub struct PostgresArithmetic;

impl AnalyzerRule for PostgresArithmetic {
    fn name(&self) -> &str {
        "sluice_postgres_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let retyped = std::cell::Cell::new(false);
        let plan = plan.transform_up_with_subqueries(|node| rewrite_plan(node, &retyped))?.data;
        // A numeric avg's column has another scale than DataFusion's avg, `date - date` another
        // type: the nodes above them take their schemas anew.
        if retyped.get() || plan.exists(|node| Ok(averages_numerics(node)))? {
            return super::recompute_schemas(plan);
        }
        Ok(plan)
    }
}

/// `avg` of integers and `sum` of `bigint`s as those of their numerics, as in PostgreSQL (`avg`
/// of 1 and 2 is `1.5000000000000000`, DataFusion's a `double precision`; a `bigint` sum does not
/// overflow at 2^63). Runs before type coercion, so what is computed from them is typed for a
/// numeric; [`PostgresArithmetic`] then gives the average PostgreSQL's scale ([`average`]). A
/// window's `avg` and `sum` stay DataFusion's, and so does the `sum` of an `integer` cast to
/// `bigint` (which a plan analyzed twice cannot tell from type coercion's cast).
#[derive(Debug, Default)]
pub struct IntegerAggregates;

/// The numeric type an aggregate of integers of `data_type` is computed in, if it is one.
fn integer_aggregate_type(function: &str, data_type: &DataType) -> Option<DataType> {
    match function {
        "avg" if is_integer(data_type) => Some(DataType::Decimal128(20, 0)),
        "sum" if *data_type == DataType::Int64 => Some(DataType::Decimal128(38, 0)),
        _ => None,
    }
}

impl AnalyzerRule for IntegerAggregates {
    fn name(&self) -> &str {
        "sluice_integer_aggregates"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let changed = std::cell::Cell::new(false);
        let plan = plan
            .transform_up_with_subqueries(|node| {
                let LogicalPlan::Aggregate(_) = &node else { return Ok(Transformed::no(node)) };
                let schema = super::expression_schema(&node)?;
                super::rewrite_node_expressions(node, |expr| {
                    expr.transform_up(|e| match e {
                        Expr::AggregateFunction(mut aggregate) => {
                            let numeric = match aggregate.params.args.as_slice() {
                                // A plan analyzed again: the `bigint` that type coercion made of an
                                // `integer` for DataFusion's `sum` stays.
                                [Expr::Cast(cast)]
                                    if cast
                                        .expr
                                        .get_type(&schema)
                                        .is_ok_and(|t| is_integer(&t) && t != DataType::Int64) =>
                                {
                                    None
                                }
                                [arg] => arg
                                    .get_type(&schema)
                                    .ok()
                                    .and_then(|t| integer_aggregate_type(aggregate.func.name(), &t)),
                                _ => None,
                            };
                            let Some(numeric) = numeric else {
                                return Ok(Transformed::no(Expr::AggregateFunction(aggregate)));
                            };
                            for arg in &mut aggregate.params.args {
                                *arg = arg.clone().cast_to(&numeric, &schema)?;
                            }
                            changed.set(true);
                            Ok(Transformed::yes(Expr::AggregateFunction(aggregate)))
                        }
                        other => Ok(Transformed::no(other)),
                    })
                })
            })?
            .data;
        if changed.get() {
            return super::recompute_schemas(plan);
        }
        Ok(plan)
    }
}

/// Types integer literals as PostgreSQL does: `integer` when the value fits, else `bigint`
/// (DataFusion types them all `bigint`). Runs before type coercion, so `2147483647 + 1` is
/// `integer` arithmetic and overflows as in PostgreSQL, and `SELECT 1` is an `integer` column.
/// A VALUES column of integer literals alone (and NULLs) is `integer` when they all fit, as in
/// PostgreSQL; the nodes above take their schemas anew.
#[derive(Debug, Default)]
pub struct IntegerLiterals;

/// A VALUES plan with its columns of small integer literals as `integer`; `narrowed` is set if
/// any was.
fn narrow_values(plan: LogicalPlan, narrowed: &std::cell::Cell<bool>) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Values(values) = &plan else { return Ok(Transformed::no(plan)) };
    let width = values.schema.fields().len();
    let small = |e: &Expr| match e {
        Expr::Literal(ScalarValue::Int64(v), _) => v.is_none_or(|v| i32::try_from(v).is_ok()),
        Expr::Literal(ScalarValue::Null, _) => true,
        _ => false,
    };
    let narrow: Vec<bool> = (0..width)
        .map(|c| {
            values.schema.field(c).data_type() == &DataType::Int64
                && values.values.iter().all(|row| row.get(c).is_some_and(small))
                && values
                    .values
                    .iter()
                    .any(|row| matches!(row.get(c), Some(Expr::Literal(ScalarValue::Int64(Some(_)), _))))
        })
        .collect();
    if !narrow.contains(&true) {
        return Ok(Transformed::no(plan));
    }
    let fields = values
        .schema
        .iter()
        .zip(&narrow)
        .map(|((qualifier, field), narrow)| {
            let field = match narrow {
                true => Arc::new(field.as_ref().clone().with_data_type(DataType::Int32)),
                false => field.clone(),
            };
            (qualifier.cloned(), field)
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, values.schema.metadata().clone())?;
    let rows = values
        .values
        .iter()
        .map(|row| {
            row.iter()
                .zip(&narrow)
                .map(|(e, narrow)| match (e, narrow) {
                    (Expr::Literal(ScalarValue::Int64(v), metadata), true) => {
                        Expr::Literal(ScalarValue::Int32(v.map(|v| v as i32)), metadata.clone())
                    }
                    (e, _) => e.clone(),
                })
                .collect()
        })
        .collect();
    narrowed.set(true);
    Ok(Transformed::yes(LogicalPlan::Values(datafusion::logical_expr::Values {
        schema: Arc::new(schema),
        values: rows,
    })))
}

impl AnalyzerRule for IntegerLiterals {
    fn name(&self) -> &str {
        "sluice_integer_literals"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let narrowed = std::cell::Cell::new(false);
        let plan = plan
            .transform_up_with_subqueries(|plan| {
                if matches!(plan, LogicalPlan::Values(_)) {
                    return narrow_values(plan, &narrowed);
                }
                if matches!(plan, LogicalPlan::Dml(_) | LogicalPlan::Limit(_)) {
                    return Ok(Transformed::no(plan));
                }
                let schema = merge_schema(&plan.inputs());
                let temporal =
                    |e: &Expr| e.get_type(&schema).is_ok_and(|t| t.is_temporal() || matches!(t, DataType::Interval(_)));
                super::rewrite_node_expressions(plan, |expr| {
                    expr.transform_down(|e| match e {
                        // `date + 1`: DataFusion's date arithmetic wants a bigint.
                        Expr::BinaryExpr(ref b) if temporal(&b.left) || temporal(&b.right) => {
                            Ok(Transformed::new(e, false, TreeNodeRecursion::Jump))
                        }
                        Expr::Literal(ScalarValue::Int64(Some(v)), metadata) if i32::try_from(v).is_ok() => {
                            Ok(Transformed::yes(Expr::Literal(ScalarValue::Int32(Some(v as i32)), metadata)))
                        }
                        // `count(*)` is planned as `count(1)`; its name stays.
                        Expr::AggregateFunction(ref f) if f.func.name() == "count" => {
                            Ok(Transformed::new(e, false, TreeNodeRecursion::Jump))
                        }
                        other => Ok(Transformed::no(other)),
                    })
                })
            })?
            .data;
        if narrowed.get() {
            return super::recompute_schemas(plan);
        }
        Ok(plan)
    }
}

/// A float beside a numeric (`x::float8 = 1234567.89`, `f + 1.5`) compares and computes in
/// double precision, as PostgreSQL casts the numeric to the float's type; DataFusion casts the
/// float to the numeric's precision, which overflows for a float beyond it (22003) and rounds
/// others. Runs before type coercion.
#[derive(Debug, Default)]
pub struct FloatBesideNumeric;

impl AnalyzerRule for FloatBesideNumeric {
    fn name(&self) -> &str {
        "sluice_float_beside_numeric"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan
            .transform_up_with_subqueries(|plan| {
                if matches!(plan, LogicalPlan::Values(_) | LogicalPlan::Dml(_)) {
                    return Ok(Transformed::no(plan));
                }
                let schema = merge_schema(&plan.inputs());
                super::rewrite_node_expressions(plan, |expr| {
                    expr.transform_up(|e| match e {
                        Expr::BinaryExpr(mut b) if b.op.is_numerical_operators() || b.op.supports_propagation() => {
                            let (Ok(left), Ok(right)) = (b.left.get_type(&schema), b.right.get_type(&schema)) else {
                                return Ok(Transformed::no(Expr::BinaryExpr(b)));
                            };
                            let decimal =
                                |t: &DataType| matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..));
                            let to_float = |e: Box<Expr>| {
                                Box::new(Expr::Cast(datafusion::logical_expr::Cast::new(e, DataType::Float64)))
                            };
                            if is_float(&left) && decimal(&right) {
                                b.right = to_float(b.right);
                            } else if decimal(&left) && is_float(&right) {
                                b.left = to_float(b.left);
                            } else {
                                return Ok(Transformed::no(Expr::BinaryExpr(b)));
                            }
                            Ok(Transformed::yes(Expr::BinaryExpr(b)))
                        }
                        other => Ok(Transformed::no(other)),
                    })
                })
            })?
            .data)
    }
}

fn is_interval(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Interval(_))
}

fn interval_key(expr: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(super::interval::comparison_key()), vec![expr]))
}

/// A sort by intervals sorts by their spans, as PostgreSQL does.
fn sort_intervals(plan: LogicalPlan, schema: &DFSchema) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Sort(mut sort) = plan else { return Ok(Transformed::no(plan)) };
    let mut changed = false;
    for sort_expr in &mut sort.expr {
        if sort_expr.expr.get_type(schema).is_ok_and(|t| is_interval(&t)) {
            sort_expr.expr = interval_key(sort_expr.expr.clone());
            changed = true;
        }
    }
    Ok(Transformed::new_transformed(LogicalPlan::Sort(sort), changed))
}

/// The mean of numerics whose sum (of scale `scale`) and count are given, as `avg` computes it
/// (PostgreSQL's rounding), at `column_scale`: for a materialized view's maintained `avg`.
pub fn numeric_mean(sum: i128, scale: i8, count: i64, column_scale: i8) -> crate::error::Result<i128> {
    average::mean(sum, scale, count, column_scale).map_err(crate::error::Error::from)
}

fn is_numeric_average(function: &datafusion::logical_expr::AggregateUDF) -> bool {
    let inner: &dyn std::any::Any = function.inner().as_ref();
    inner.is::<average::NumericAverage>()
}

/// Whether a node is an aggregate with a numeric avg of [`average`].
fn averages_numerics(node: &LogicalPlan) -> bool {
    let LogicalPlan::Aggregate(aggregate) = node else { return false };
    aggregate.aggr_expr.iter().any(|e| {
        e.exists(|e| Ok(matches!(e, Expr::AggregateFunction(f) if is_numeric_average(&f.func)))).unwrap_or(false)
    })
}

fn rewrite_plan(plan: LogicalPlan, retyped: &std::cell::Cell<bool>) -> DfResult<Transformed<LogicalPlan>> {
    let schema = super::expression_schema(&plan)?;
    let sorted = sort_intervals(plan, &schema)?;
    let transformed = sorted.transformed;
    let rewritten =
        super::rewrite_node_expressions(sorted.data, |expr| expr.transform_up(|e| rewrite_expr(e, &schema, retyped)))?;
    Ok(if transformed { Transformed::yes(rewritten.data) } else { rewritten })
}

fn rewrite_expr(expr: Expr, schema: &DFSchema, retyped: &std::cell::Cell<bool>) -> DfResult<Transformed<Expr>> {
    match expr {
        Expr::BinaryExpr(binary) => {
            let (Ok(left), Ok(right)) = (binary.left.get_type(schema), binary.right.get_type(schema)) else {
                return Ok(Transformed::no(Expr::BinaryExpr(binary)));
            };
            if binary.op == Operator::Minus && left == DataType::Date32 && right == DataType::Date32 {
                // `date - date` is an integer number of days (DataFusion's is a bigint); every
                // difference of two dates fits.
                retyped.set(true);
                let days = Expr::BinaryExpr(binary);
                return Ok(Transformed::yes(Expr::Cast(datafusion::logical_expr::Cast::new(
                    Box::new(days),
                    DataType::Int32,
                ))));
            }
            if binary.op.supports_propagation() && is_interval(&left) && is_interval(&right) {
                // Intervals compare by their whole span, as in PostgreSQL (see `interval::comparison_key`).
                let (l, r) = (interval_key(*binary.left), interval_key(*binary.right));
                return Ok(Transformed::yes(Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
                    Box::new(l),
                    binary.op,
                    Box::new(r),
                ))));
            }
            let Some(op) = Op::of(binary.op) else { return Ok(Transformed::no(Expr::BinaryExpr(binary))) };
            if op == Op::Div {
                if let Some(division) = numeric_division(&binary.left, &binary.right, &left, &right) {
                    return Ok(Transformed::yes(division));
                }
            }
            let ours = left == right && (is_integer(&left) || is_float(&left));
            if !ours {
                return Ok(Transformed::no(Expr::BinaryExpr(binary)));
            }
            let function = udf(Arithmetic { op, signature: Signature::any(2, Volatility::Immutable) });
            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                function,
                vec![*binary.left, *binary.right],
            ))))
        }
        // `floor`, `ceil` and `trunc` of a numeric are whole numbers of scale 0, and `trunc(x, n)`
        // has scale `n`, as in PostgreSQL (`floor(2.5)` is `2`, not `2.0`).
        Expr::ScalarFunction(function) if matches!(function.name(), "floor" | "ceil" | "trunc") => {
            let Some(Ok(DataType::Decimal128(precision, scale))) = function.args.first().map(|a| a.get_type(schema))
            else {
                return Ok(Transformed::no(Expr::ScalarFunction(function)));
            };
            let constant = |e: &Expr| match e {
                Expr::Literal(n, _) => Some(n.clone()),
                Expr::Cast(cast) => match cast.expr.as_ref() {
                    Expr::Literal(n, _) => Some(n.clone()),
                    _ => None,
                },
                _ => None,
            };
            let digits = match function.args.get(1).map(|e| (e, constant(e))) {
                None => 0,
                Some((_, Some(n))) if function.name() == "trunc" => match n.cast_to(&DataType::Int64) {
                    Ok(ScalarValue::Int64(Some(n))) => i8::try_from(n).unwrap_or(i8::MAX),
                    _ => return Ok(Transformed::no(Expr::ScalarFunction(function))),
                },
                Some(_) => return Ok(Transformed::no(Expr::ScalarFunction(function))),
            };
            // PostgreSQL's `trunc(x, -1)` has scale 0.
            let digits = digits.max(0);
            if digits >= scale {
                return Ok(Transformed::no(Expr::ScalarFunction(function)));
            }
            retyped.set(true);
            let target = DataType::Decimal128(precision, digits);
            Ok(Transformed::yes(Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(Expr::ScalarFunction(function)),
                target,
            ))))
        }
        Expr::Cast(mut cast) => {
            let target = cast.field.data_type().clone();
            let Ok(from) = cast.expr.get_type(schema) else { return Ok(Transformed::no(Expr::Cast(cast))) };
            // A numeric with more decimals than an unconstrained numeric's 10 keeps them when cast
            // to one (`0.000000000001::numeric` is not 0), as PostgreSQL's numerics keep each
            // value's scale; so does one with more than 28 integer digits, which the 10 decimals
            // would push past 38 digits (`1234567890123456789012345678901234567::numeric`).
            if let (&DataType::Decimal128(precision, scale), &DataType::Decimal128(p, s)) = (&from, &target) {
                let (precision_max, unconstrained_scale) = crate::types::NUMERIC_DEFAULT;
                let integer_digits = i16::from(precision) - i16::from(scale);
                let fits = integer_digits <= i16::from(precision_max) - i16::from(unconstrained_scale);
                let fitted = if scale > unconstrained_scale || !fits { scale } else { unconstrained_scale };
                if (p, s) == crate::types::NUMERIC_DEFAULT && fitted != unconstrained_scale {
                    retyped.set(true);
                    let wider = DataType::Decimal128(precision_max, fitted);
                    cast.field = Arc::new(cast.field.as_ref().clone().with_data_type(wider));
                    return Ok(Transformed::yes(Expr::Cast(cast)));
                }
                return Ok(Transformed::no(Expr::Cast(cast)));
            }
            let narrowing = is_integer(&from) && integer_width(&from) > integer_width(&target);
            let text = matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
            let ours = is_integer(&target)
                && (from.is_floating() || matches!(from, DataType::Decimal128(..)) || narrowing || text);
            if !ours {
                return Ok(Transformed::no(Expr::Cast(cast)));
            }
            let function = udf(IntegerCast { signature: Signature::any(2, Volatility::Immutable) });
            let target = Expr::Literal(ScalarValue::try_from(&target)?, None);
            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(function, vec![*cast.expr, target]))))
        }
        // `avg` of numerics divides as numeric division does (see [`average`]).
        Expr::AggregateFunction(mut aggregate)
            if aggregate.func.name() == "avg"
                && !aggregate.params.distinct
                && matches!(aggregate.params.args.as_slice(), [arg] if matches!(arg.get_type(schema), Ok(DataType::Decimal128(..)))) =>
        {
            if is_numeric_average(&aggregate.func) {
                return Ok(Transformed::no(Expr::AggregateFunction(aggregate)));
            }
            aggregate.func =
                Arc::new(datafusion::logical_expr::AggregateUDF::new_from_impl(average::NumericAverage::new()));
            Ok(Transformed::yes(Expr::AggregateFunction(aggregate)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `a / b` where one operand is a numeric and the other a numeric or an integer, with
/// PostgreSQL's result scale (see [`division`]).
fn numeric_division(left: &Expr, right: &Expr, left_type: &DataType, right_type: &DataType) -> Option<Expr> {
    let decimal = |expr: &Expr, data_type: &DataType| match data_type {
        DataType::Decimal128(_, scale) => Some((expr.clone(), *scale)),
        // An integer is a numeric of scale 0 (PostgreSQL resolves `numeric / int` so).
        t if is_integer(t) => Some((expr.clone().cast_to(&DataType::Decimal128(20, 0), &DFSchema::empty()).ok()?, 0)),
        _ => None,
    };
    if !matches!(left_type, DataType::Decimal128(..)) && !matches!(right_type, DataType::Decimal128(..)) {
        return None;
    }
    let ((left, left_scale), (right, right_scale)) = (decimal(left, left_type)?, decimal(right, right_type)?);
    let scale = division::result_scale(&left, &right, left_scale, right_scale);
    let function = udf(division::NumericDivision::new(scale));
    Some(Expr::ScalarFunction(ScalarFunction::new_udf(function, vec![left, right])))
}

fn integer_width(data_type: &DataType) -> u8 {
    match data_type {
        DataType::Int8 => 1,
        DataType::Int16 => 2,
        DataType::Int32 => 4,
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Float64Array, Int16Array, Int32Array, Int64Array};

    fn sqlstate(e: DataFusionError) -> &'static str {
        Error::from(e).sqlstate()
    }

    #[test]
    fn integer_overflow_is_22003_in_every_type() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        assert_eq!(sqlstate(compute(Op::Add, &a, &b).unwrap_err()), "22003");
        let a: ArrayRef = Arc::new(Int16Array::from(vec![32767]));
        let b: ArrayRef = Arc::new(Int16Array::from(vec![1]));
        let e = compute(Op::Add, &a, &b).unwrap_err();
        assert!(e.to_string().contains("smallint out of range"), "{e}");
        let a: ArrayRef = Arc::new(Int32Array::from(vec![i32::MIN]));
        let b: ArrayRef = Arc::new(Int32Array::from(vec![-1]));
        assert_eq!(sqlstate(compute(Op::Div, &a, &b).unwrap_err()), "22003");
        let rem = compute(Op::Rem, &a, &b).unwrap();
        assert_eq!(rem.as_primitive::<Int32Type>().value(0), 0);
    }

    #[test]
    fn division_by_zero_is_22012_for_floats_too() {
        let a: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        let b: ArrayRef = Arc::new(Float64Array::from(vec![0.0]));
        assert_eq!(sqlstate(compute(Op::Div, &a, &b).unwrap_err()), "22012");
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![Some(0), Some(0)]));
        assert_eq!(sqlstate(compute(Op::Div, &a, &b).unwrap_err()), "22012");
        let a: ArrayRef = Arc::new(Float64Array::from(vec![1e308]));
        let b: ArrayRef = Arc::new(Float64Array::from(vec![10.0]));
        assert_eq!(sqlstate(compute(Op::Mul, &a, &b).unwrap_err()), "22003");
    }

    #[test]
    fn casts_to_integers_round_as_postgres() {
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![2.5, 3.5, -2.5, 0.4]));
        let ints = to_integer(&floats, &DataType::Int32).unwrap();
        assert_eq!(ints.as_primitive::<Int32Type>().values().to_vec(), vec![2, 4, -2, 0]);
        let decimals: ArrayRef =
            Arc::new(Decimal128Array::from(vec![25, 35, -25, 37, -37]).with_precision_and_scale(5, 1).unwrap());
        let ints = to_integer(&decimals, &DataType::Int64).unwrap();
        assert_eq!(ints.as_primitive::<Int64Type>().values().to_vec(), vec![3, 4, -3, 4, -4]);
        let big: ArrayRef = Arc::new(Int64Array::from(vec![1 << 40]));
        assert_eq!(sqlstate(to_integer(&big, &DataType::Int32).unwrap_err()), "22003");
        let nan: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN]));
        assert_eq!(sqlstate(to_integer(&nan, &DataType::Int16).unwrap_err()), "22003");
    }
}
