//! JSON on text columns (json and jsonb are stored as text): the `->` and `->>` operators and the
//! Postgres functions `json_extract_path[_text]`, `json_array_length`, `json_typeof` (and their
//! `jsonb_` names).
//!
//! `->` returns JSON text, `->>` returns text (a JSON string unquoted; other values as JSON). A
//! key on a non-object, an index on a non-array, or text that is not JSON gives NULL, as Postgres
//! gives NULL for missing paths (Postgres raises an error for invalid JSON input; Sluice reads it
//! as NULL so that one malformed row does not fail a whole scan).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use serde_json::Value;

/// What a JSON function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Output {
    /// The element as JSON text.
    Json,
    /// The element as text.
    Text,
    /// The length of an array.
    ArrayLength,
    /// The type name.
    TypeOf,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFunction {
    name: &'static str,
    aliases: Vec<String>,
    output: Output,
    signature: Signature,
}

impl JsonFunction {
    fn new(name: &'static str, aliases: &[&str], output: Output, variadic: bool) -> Self {
        let signature = if variadic {
            Signature::variadic_any(Volatility::Immutable)
        } else {
            Signature::any(1, Volatility::Immutable)
        };
        Self { name, aliases: aliases.iter().map(|a| a.to_string()).collect(), output, signature }
    }
}

impl ScalarUDFImpl for JsonFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(match self.output {
            Output::ArrayLength => DataType::Int64,
            _ => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.clone().into_array(rows).and_then(|a| Ok(arrow::compute::cast(&a, &DataType::Utf8)?)))
            .collect::<DfResult<_>>()?;
        let Some((documents, path)) = arrays.split_first() else {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)));
        };
        let documents = documents.as_string::<i32>();
        let path: Vec<_> = path.iter().map(|p| p.as_string::<i32>()).collect();
        let indexable: Vec<bool> = args.arg_fields.iter().skip(1).map(|f| f.data_type().is_integer()).collect();
        let mut texts: Vec<Option<String>> = Vec::with_capacity(rows);
        let mut lengths: Vec<Option<i64>> = Vec::with_capacity(rows);
        for row in 0..rows {
            let element = if documents.is_null(row) {
                None
            } else {
                serde_json::from_str::<Value>(documents.value(row)).ok().and_then(|doc| {
                    let mut current = doc;
                    for (step, by_index) in path.iter().zip(&indexable) {
                        if step.is_null(row) {
                            return None;
                        }
                        current = descend(current, step.value(row), *by_index)?;
                    }
                    Some(current)
                })
            };
            match self.output {
                Output::Json => texts.push(element.map(|v| v.to_string())),
                Output::Text => texts.push(element.and_then(|v| match v {
                    Value::String(s) => Some(s),
                    Value::Null => None,
                    other => Some(other.to_string()),
                })),
                Output::TypeOf => texts.push(element.map(|v| type_name(&v).to_string())),
                Output::ArrayLength => lengths.push(element.and_then(|v| v.as_array().map(|a| a.len() as i64))),
            }
        }
        let array: ArrayRef = match self.output {
            Output::ArrayLength => Arc::new(Int64Array::from(lengths)),
            _ => Arc::new(StringArray::from(texts)),
        };
        Ok(ColumnarValue::Array(array))
    }
}

fn descend(value: Value, step: &str, by_index: bool) -> Option<Value> {
    match value {
        Value::Object(mut map) if !by_index => map.remove(step),
        Value::Array(mut items) => {
            let index: i64 = step.trim().parse().ok()?;
            let len = items.len() as i64;
            let index = if index < 0 { len + index } else { index };
            (0..len).contains(&index).then(|| items.swap_remove(index as usize))
        }
        Value::Object(mut map) => map.remove(step),
        _ => None,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The JSON functions.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(JsonFunction::new(
            "json_get",
            &["json_extract_path", "jsonb_extract_path"],
            Output::Json,
            true,
        )),
        ScalarUDF::from(JsonFunction::new(
            "json_get_text",
            &["json_extract_path_text", "jsonb_extract_path_text"],
            Output::Text,
            true,
        )),
        ScalarUDF::from(JsonFunction::new("json_array_length", &["jsonb_array_length"], Output::ArrayLength, false)),
        ScalarUDF::from(JsonFunction::new("json_typeof", &["jsonb_typeof"], Output::TypeOf, false)),
    ]
}

/// Plans `a -> b` and `a ->> b` as `json_get(a, b)` and `json_get_text(a, b)`.
#[derive(Debug)]
pub struct JsonOperators;

impl ExprPlanner for JsonOperators {
    fn plan_binary_op(&self, expr: RawBinaryExpr, _schema: &DFSchema) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let output = match expr.op {
            BinaryOperator::Arrow => Output::Json,
            BinaryOperator::LongArrow => Output::Text,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let function = match output {
            Output::Json => {
                JsonFunction::new("json_get", &["json_extract_path", "jsonb_extract_path"], Output::Json, true)
            }
            _ => JsonFunction::new(
                "json_get_text",
                &["json_extract_path_text", "jsonb_extract_path_text"],
                Output::Text,
                true,
            ),
        };
        let udf = Arc::new(ScalarUDF::from(function));
        Ok(PlannerResult::Planned(Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
            udf,
            vec![expr.left, expr.right],
        ))))
    }
}
