//! `json`/`jsonb` operators and functions, and the input functions of `uuid`, `json` and `jsonb`
//! (casts to those types are planned as calls to them).
//!
//! Documents are text (see [`crate::documents`]); what returns `jsonb` returns its canonical text
//! in a field marked `jsonb`, so clients see the type. Operators, as PostgreSQL defines them:
//! `->` and `->>` (a key or an index), `#>` and `#>>` (a `text[]` path), `@>` and `<@`
//! (containment), `?`, `?|` and `?&` (keys), `||` (concatenation of two jsonb values) and `-` (a
//! key, an index or a `text[]` of keys). Functions: `jsonb_set`, `jsonb_typeof`,
//! `jsonb_array_length`, `json[b]_extract_path[_text]`, `to_json[b]`, and as lists (which the
//! select-list rewrite unnests into rows) `jsonb_array_elements[_text]` and `jsonb_object_keys`.
//!
//! A path that does not exist gives NULL, as in PostgreSQL. Text that is not JSON is an error
//! (22P02) for a `json`/`jsonb` value; for a plain text column it gives NULL, so that one malformed
//! row does not fail a scan over text that merely holds JSON.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DFSchema, ExprSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use serde_json::Value;

use crate::documents::{self, TextType};

/// What a function does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `uuid`/`json`/`jsonb` input (a cast).
    Input(TextType),
    /// A cast to text: the value as text, no longer marked with its type.
    Text,
    /// A cast to `varchar(n)`: cut to `n` characters (a cast does not fail as an assignment does).
    Varchar,
    /// `regexp_split_to_array(text, pattern)` (and, unnested, `regexp_split_to_table`).
    RegexpSplit,
    /// `->` and `json_extract_path` (variadic keys): jsonb.
    Get,
    /// `->>` and `json_extract_path_text`: text.
    GetText,
    /// `#>`: jsonb at a `text[]` path.
    PathGet,
    /// `#>>`: text at a `text[]` path.
    PathGetText,
    Contains,
    ContainedIn,
    /// `jsonb = jsonb` (and `<>`): equal values, numbers by value (`1.0` equals `1`).
    Equal,
    NotEqual,
    HasKey,
    HasAny,
    HasAll,
    Concat,
    Remove,
    Set,
    TypeOf,
    ArrayLength,
    /// `to_jsonb`/`to_json`.
    ToJson(TextType),
    /// `jsonb_array_elements` as a list.
    Elements,
    /// `jsonb_array_elements_text` as a list.
    ElementsText,
    /// `jsonb_object_keys` as a list.
    ObjectKeys,
    /// `jsonb_strip_nulls`: object fields that are null removed, at every depth.
    StripNulls,
    /// `jsonb_pretty`: indented text.
    Pretty,
    /// The values of an object, in the order of `ObjectKeys` (`jsonb_each`'s second column).
    EachValues,
    /// The values of an object as text (`jsonb_each_text`'s second column).
    EachValuesText,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFunction {
    name: &'static str,
    aliases: Vec<String>,
    op: Op,
    signature: Signature,
}

/// The function for an operation, under its name.
pub fn udf(name: &'static str, aliases: &[&str], op: Op) -> ScalarUDF {
    let signature = match op {
        Op::Input(_)
        | Op::TypeOf
        | Op::StripNulls
        | Op::Pretty
        | Op::ArrayLength
        | Op::ToJson(_)
        | Op::Elements
        | Op::ElementsText
        | Op::ObjectKeys
        | Op::EachValues
        | Op::EachValuesText => Signature::any(1, Volatility::Immutable),
        _ => Signature::variadic_any(Volatility::Immutable),
    };
    ScalarUDF::from(JsonFunction { name, aliases: aliases.iter().map(|a| a.to_string()).collect(), op, signature })
}

fn list_of_text() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
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
        Ok(match self.op {
            Op::Contains | Op::ContainedIn | Op::Equal | Op::NotEqual | Op::HasKey | Op::HasAny | Op::HasAll => {
                DataType::Boolean
            }
            Op::ArrayLength => DataType::Int32,
            Op::Elements
            | Op::ElementsText
            | Op::ObjectKeys
            | Op::EachValues
            | Op::EachValuesText
            | Op::RegexpSplit => list_of_text(),
            _ => DataType::Utf8,
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let data_type = self.return_type(&[])?;
        let typed = match self.op {
            Op::Input(t) | Op::ToJson(t) => Some(t),
            Op::Varchar => {
                let length = args.scalar_arguments.get(1).copied().flatten().map(|n| n.to_string());
                let declared = length.map_or_else(|| "varchar".to_string(), |n| format!("varchar({n})"));
                let metadata =
                    std::collections::HashMap::from([(crate::types::DECLARED_TYPE_KEY.to_string(), declared)]);
                return Ok(Arc::new(Field::new(self.name, DataType::Utf8, true).with_metadata(metadata)));
            }
            // `->` and `#>` on json give json (as written), on anything else jsonb.
            Op::Get | Op::PathGet => Some(match args.arg_fields.first().and_then(|f| TextType::of_field(f)) {
                Some(TextType::Json) => TextType::Json,
                _ => TextType::Jsonb,
            }),
            Op::Concat | Op::Remove | Op::Set | Op::StripNulls => Some(TextType::Jsonb),
            Op::Elements => {
                let element = TextType::Jsonb.field("item", true);
                return Ok(Arc::new(Field::new(self.name, DataType::List(Arc::new(element)), true)));
            }
            _ => None,
        };
        Ok(Arc::new(match typed {
            Some(t) => t.field(self.name, true),
            None => Field::new(self.name, data_type, true),
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if self.op == Op::Text {
            return match args.args.first() {
                // A time as PostgreSQL prints it (Arrow's text keeps trailing zeros), an interval
                // too (Arrow's is `1 hours 30 mins`).
                Some(value)
                    if matches!(
                        value.data_type(),
                        DataType::Time32(_)
                            | DataType::Time64(_)
                            | DataType::Interval(_)
                            | DataType::List(_)
                            | DataType::LargeList(_)
                    ) =>
                {
                    let rows = args.number_rows;
                    let array = value.clone().into_array(rows)?;
                    let text = match value.data_type() {
                        DataType::Interval(_) => crate::datetime::interval_column_text(&array)?,
                        DataType::List(_) => crate::types::array_column_text(&array)?,
                        DataType::LargeList(f) => {
                            crate::types::array_column_text(&arrow::compute::cast(&array, &DataType::List(f.clone()))?)?
                        }
                        _ => crate::time_of_day::time_column_text(&array)?,
                    };
                    Ok(match value {
                        ColumnarValue::Scalar(_) => ColumnarValue::Scalar(ScalarValue::try_from_array(&text, 0)?),
                        ColumnarValue::Array(_) => ColumnarValue::Array(text),
                    })
                }
                Some(value) => value.cast_to(&DataType::Utf8, None),
                None => Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None))),
            };
        }
        let rows = args.number_rows;
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        if let (Op::ToJson(output), Some(value), Some(field)) = (self.op, args.args.first(), args.arg_fields.first()) {
            let array = to_json_column(&value.clone().into_array(rows)?, field, output)?;
            return Ok(if scalar && rows == 1 {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
            } else {
                ColumnarValue::Array(array)
            });
        }
        let arrays: Vec<ArrayRef> = args.args.iter().map(|a| a.clone().into_array(rows)).collect::<DfResult<_>>()?;
        let typed: Vec<Option<TextType>> = args.arg_fields.iter().map(|f| TextType::of_field(f)).collect();
        let array = self.evaluate(&arrays, &typed, rows).map_err(datafusion::error::DataFusionError::from)?;
        // Lists stay arrays: a scalar list would lose its element field's type.
        let list = matches!(array.data_type(), DataType::List(_));
        Ok(if scalar && rows == 1 && !list {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}

/// One argument's values, row by row.
enum Argument {
    Text(StringArray),
    Integer(Int64Array),
    Paths(Vec<Option<Vec<String>>>),
    Boolean(BooleanArray),
}

impl Argument {
    fn of(array: &ArrayRef) -> crate::error::Result<Self> {
        Ok(match array.data_type() {
            t if t.is_integer() => {
                Argument::Integer(arrow::compute::cast(array, &DataType::Int64)?.as_primitive().clone())
            }
            DataType::Boolean => Argument::Boolean(array.as_boolean().clone()),
            DataType::List(_) | DataType::LargeList(_) => {
                let list = arrow::compute::cast(array, &list_of_text())?;
                let list = list.as_list::<i32>();
                Argument::Paths(
                    (0..list.len())
                        .map(|i| {
                            (!list.is_null(i)).then(|| {
                                let items = list.value(i);
                                let items = items.as_string::<i32>();
                                items.iter().map(|s| s.unwrap_or_default().to_string()).collect()
                            })
                        })
                        .collect(),
                )
            }
            _ => Argument::Text(arrow::compute::cast(array, &DataType::Utf8)?.as_string::<i32>().clone()),
        })
    }

    fn text(&self, row: usize) -> Option<String> {
        match self {
            Argument::Text(a) => a.is_valid(row).then(|| a.value(row).to_string()),
            Argument::Integer(a) => a.is_valid(row).then(|| a.value(row).to_string()),
            Argument::Boolean(a) => a.is_valid(row).then(|| a.value(row).to_string()),
            Argument::Paths(p) => p.get(row).cloned().flatten().map(|p| format!("{{{}}}", p.join(","))),
        }
    }

    fn path(&self, row: usize) -> Option<Vec<String>> {
        match self {
            Argument::Paths(p) => p.get(row).cloned().flatten(),
            other => other.text(row).map(|t| vec![t]),
        }
    }

    /// A `text[]` argument, also given as array text (`'{a,0}'`, which PostgreSQL reads as
    /// `text[]` where the operator or function takes one).
    fn text_array(&self, row: usize) -> crate::error::Result<Option<Vec<String>>> {
        match self {
            Argument::Text(_) => match self.text(row) {
                Some(text) => Ok(Some(crate::types::array_from_text(&text)?.into_iter().flatten().collect())),
                None => Ok(None),
            },
            other => Ok(other.path(row)),
        }
    }
}

/// Reads a document argument: an error for a `json`/`jsonb` value that is not JSON, NULL for text.
fn document(arg: &Argument, typed: Option<TextType>, row: usize) -> crate::error::Result<Option<Value>> {
    let Some(text) = arg.text(row) else { return Ok(None) };
    match typed {
        Some(TextType::Json | TextType::Jsonb) => documents::json_in(&text).map(Some),
        _ => Ok(serde_json::from_str(&text).ok()),
    }
}

/// Reads an argument that `jsonb` operators take as a document: typed json, or text read as JSON.
fn operand(arg: &Argument, row: usize) -> crate::error::Result<Option<Value>> {
    document(arg, Some(TextType::Jsonb), row)
}

enum Output {
    Text(Vec<Option<String>>),
    Bool(Vec<Option<bool>>),
    Int(Vec<Option<i32>>),
    Lists(Vec<Option<Vec<Option<String>>>>),
}

impl JsonFunction {
    fn evaluate(&self, arrays: &[ArrayRef], typed: &[Option<TextType>], rows: usize) -> crate::error::Result<ArrayRef> {
        let args: Vec<Argument> = arrays.iter().map(Argument::of).collect::<crate::error::Result<_>>()?;
        let Some(first) = args.first() else { return Ok(Arc::new(StringArray::new_null(rows))) };
        let first_type = typed.first().copied().flatten();
        let mut out = match self.op {
            Op::Contains | Op::ContainedIn | Op::Equal | Op::NotEqual | Op::HasKey | Op::HasAny | Op::HasAll => {
                Output::Bool(vec![])
            }
            Op::ArrayLength => Output::Int(vec![]),
            Op::Elements
            | Op::ElementsText
            | Op::ObjectKeys
            | Op::EachValues
            | Op::EachValuesText
            | Op::RegexpSplit => Output::Lists(vec![]),
            _ => Output::Text(vec![]),
        };
        let mut compiled: Option<(String, regex::Regex)> = None;
        for row in 0..rows {
            match (&mut out, self.op) {
                (Output::Text(values), Op::Input(t)) => values.push(first.text(row).map(|v| t.input(&v)).transpose()?),
                (Output::Text(values), Op::Varchar) => {
                    let length = args.get(1).and_then(|n| n.text(row)).and_then(|n| n.parse::<usize>().ok());
                    values.push(first.text(row).map(|v| match length {
                        Some(n) => v.chars().take(n).collect(),
                        None => v,
                    }))
                }
                (Output::Lists(values), Op::RegexpSplit) => {
                    let pattern = args.get(1).and_then(|p| p.text(row));
                    values.push(match (first.text(row), pattern) {
                        (Some(text), Some(pattern)) => {
                            // Compiled once for the rows that share a pattern (most often all).
                            if compiled.as_ref().is_none_or(|(p, _)| *p != pattern) {
                                let regex = regex::Regex::new(&pattern).map_err(|e| {
                                    crate::error::Error::data("2201B", format!("invalid regular expression: {e}"))
                                })?;
                                compiled = Some((pattern, regex));
                            }
                            compiled
                                .as_ref()
                                .map(|(_, regex)| regex.split(&text).map(|part| Some(part.to_string())).collect())
                        }
                        _ => None,
                    });
                }
                (Output::Text(values), Op::Get | Op::GetText | Op::PathGet | Op::PathGetText) => {
                    let doc = document(first, first_type, row)?;
                    let mut path: Vec<String> = Vec::new();
                    let mut missing = false;
                    for arg in args.iter().skip(1) {
                        let step = match self.op {
                            Op::PathGet | Op::PathGetText => arg.text_array(row)?,
                            _ => arg.path(row),
                        };
                        match step {
                            Some(p) => path.extend(p),
                            None => missing = true,
                        }
                    }
                    let found = if missing { None } else { doc.as_ref().and_then(|d| documents::at_path(d, &path)) };
                    values.push(match self.op {
                        Op::Get | Op::PathGet => found.map(documents::jsonb_text),
                        _ => found.and_then(documents::as_text),
                    });
                }
                (Output::Bool(values), op) => {
                    let doc = operand(first, row)?;
                    let other = args.get(1);
                    let result = match (doc, op) {
                        (None, _) => None,
                        (Some(doc), Op::Contains | Op::ContainedIn) => {
                            match other.map(|o| operand(o, row)).transpose()?.flatten() {
                                Some(b) if op == Op::Contains => Some(documents::contains(&doc, &b)),
                                Some(b) => Some(documents::contains(&b, &doc)),
                                None => None,
                            }
                        }
                        (Some(doc), Op::Equal | Op::NotEqual) => other
                            .map(|o| operand(o, row))
                            .transpose()?
                            .flatten()
                            .map(|b| documents::equal(&doc, &b) == (op == Op::Equal)),
                        (Some(doc), Op::HasKey) => {
                            other.and_then(|o| o.text(row)).map(|k| documents::has_key(&doc, &k))
                        }
                        (Some(doc), _) => other.map(|o| o.text_array(row)).transpose()?.flatten().map(|keys| {
                            if op == Op::HasAny {
                                keys.iter().any(|k| documents::has_key(&doc, k))
                            } else {
                                keys.iter().all(|k| documents::has_key(&doc, k))
                            }
                        }),
                    };
                    values.push(result);
                }
                (Output::Int(values), _) => {
                    let doc = document(first, first_type, row)?;
                    values.push(match doc {
                        Some(Value::Array(items)) => Some(i32::try_from(items.len()).unwrap_or(i32::MAX)),
                        Some(_) => {
                            return Err(crate::error::Error::data("22023", "cannot get array length of a non-array"))
                        }
                        None => None,
                    });
                }
                (Output::Text(values), Op::StripNulls) => values
                    .push(document(first, first_type, row)?.map(|d| documents::jsonb_text(&documents::strip_nulls(d)))),
                (Output::Text(values), Op::Pretty) => {
                    values.push(document(first, first_type, row)?.map(|d| documents::pretty(&d)))
                }
                (Output::Text(values), Op::TypeOf) => {
                    values.push(document(first, first_type, row)?.map(|d| documents::type_name(&d).to_string()))
                }
                (Output::Text(values), Op::Concat) => {
                    let (a, b) = (operand(first, row)?, args.get(1).map(|o| operand(o, row)).transpose()?.flatten());
                    values.push(a.zip(b).map(|(a, b)| documents::jsonb_text(&documents::concat(a, b))));
                }
                (Output::Text(values), Op::Remove) => {
                    let doc = operand(first, row)?;
                    let result = match (doc, args.get(1)) {
                        (Some(doc), Some(Argument::Integer(i))) if i.is_valid(row) => {
                            Some(documents::remove_index(doc, i.value(row))?)
                        }
                        (Some(doc), Some(Argument::Paths(p))) => match p.get(row).cloned().flatten() {
                            Some(keys) => Some(keys.iter().try_fold(doc, |d, k| documents::remove_key(d, k))?),
                            None => None,
                        },
                        (Some(doc), Some(key)) => match key.text(row) {
                            Some(k) => Some(documents::remove_key(doc, &k)?),
                            None => None,
                        },
                        _ => None,
                    };
                    values.push(result.map(|d| documents::jsonb_text(&d)));
                }
                (Output::Text(values), Op::Set) => {
                    let doc = operand(first, row)?;
                    let path = args.get(1).map(|p| p.text_array(row)).transpose()?.flatten();
                    let new = args.get(2).map(|n| operand(n, row)).transpose()?.flatten();
                    let create = match args.get(3) {
                        Some(Argument::Boolean(b)) => b.is_valid(row).then(|| b.value(row)),
                        Some(other) => other.text(row).map(|t| t == "true"),
                        None => Some(true),
                    };
                    values.push(match (doc, path, new, create) {
                        (Some(doc), Some(path), Some(new), Some(create)) => {
                            Some(documents::jsonb_text(&documents::set_path(doc, &path, new, create)?))
                        }
                        _ => None,
                    });
                }
                (Output::Lists(values), op) => {
                    let doc = document(first, first_type, row)?;
                    values.push(match (doc, op) {
                        (None, _) => None,
                        (Some(Value::Array(items)), Op::Elements) => {
                            Some(items.iter().map(|i| Some(documents::jsonb_text(i))).collect())
                        }
                        (Some(Value::Array(items)), Op::ElementsText) => {
                            Some(items.iter().map(documents::as_text).collect())
                        }
                        (Some(Value::Object(map)), Op::ObjectKeys) => {
                            Some(documents::ordered(&map).into_iter().map(|(k, _)| Some(k.clone())).collect())
                        }
                        (Some(Value::Object(map)), Op::EachValues) => Some(
                            documents::ordered(&map).into_iter().map(|(_, v)| Some(documents::jsonb_text(v))).collect(),
                        ),
                        (Some(Value::Object(map)), Op::EachValuesText) => {
                            Some(documents::ordered(&map).into_iter().map(|(_, v)| documents::as_text(v)).collect())
                        }
                        (Some(_), Op::ObjectKeys) => {
                            return Err(crate::error::Error::data(
                                "22023",
                                "cannot call jsonb_object_keys on a non-object",
                            ))
                        }
                        (Some(_), Op::EachValues | Op::EachValuesText) => {
                            return Err(crate::error::Error::data("22023", "cannot deconstruct a scalar"))
                        }
                        (Some(_), _) => {
                            return Err(crate::error::Error::data("22023", "cannot extract elements from a non-array"))
                        }
                    });
                }
                (_, _) => {}
            }
        }
        Ok(match out {
            Output::Text(values) => Arc::new(StringArray::from(values)),
            Output::Bool(values) => Arc::new(BooleanArray::from(values)),
            Output::Int(values) => Arc::new(arrow::array::Int32Array::from(values)),
            Output::Lists(values) => {
                let mut builder = ListBuilder::new(StringBuilder::new());
                if self.op == Op::Elements {
                    builder = builder.with_field(Arc::new(TextType::Jsonb.field("item", true)));
                }
                for value in values {
                    match value {
                        Some(items) => {
                            for item in items {
                                builder.values().append_option(item);
                            }
                            builder.append(true);
                        }
                        None => builder.append(false),
                    }
                }
                Arc::new(builder.finish())
            }
        })
    }
}

/// `to_json(value)` and `to_jsonb(value)`: each value's JSON (a json/jsonb value as itself, text
/// as a JSON string, a row as an object). `json` prints as PostgreSQL's `to_json` does (a row's
/// columns in order, no spaces, see [`super::rows`]), `jsonb` canonically.
fn to_json_column(array: &ArrayRef, field: &Field, output: TextType) -> DfResult<ArrayRef> {
    if output != TextType::Jsonb {
        return Ok(Arc::new(StringArray::from(super::rows::json_texts(array, field)?)));
    }
    let values = super::json_build::typed_values(array, field)?;
    let texts: StringArray =
        values.iter().enumerate().map(|(i, v)| (!array.is_null(i)).then(|| documents::jsonb_text(v))).collect();
    Ok(Arc::new(texts))
}

/// The JSON functions.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        udf("__pg_uuid", &[], Op::Input(TextType::Uuid)),
        udf("__pg_json", &[], Op::Input(TextType::Json)),
        udf("__pg_jsonb", &[], Op::Input(TextType::Jsonb)),
        udf("__pg_text", &[], Op::Text),
        udf("__pg_varchar", &[], Op::Varchar),
        udf("regexp_split_to_array", &[], Op::RegexpSplit),
        udf("json_get", &["json_extract_path", "jsonb_extract_path"], Op::Get),
        udf("json_get_text", &["json_extract_path_text", "jsonb_extract_path_text"], Op::GetText),
        udf("json_array_length", &["jsonb_array_length"], Op::ArrayLength),
        udf("json_typeof", &["jsonb_typeof"], Op::TypeOf),
        udf("jsonb_strip_nulls", &["json_strip_nulls"], Op::StripNulls),
        udf("jsonb_pretty", &[], Op::Pretty),
        udf("jsonb_set", &[], Op::Set),
        udf("to_jsonb", &[], Op::ToJson(TextType::Jsonb)),
        udf("to_json", &["row_to_json"], Op::ToJson(TextType::Json)),
        udf("jsonb_array_elements", &["json_array_elements"], Op::Elements),
        udf("jsonb_array_elements_text", &["json_array_elements_text"], Op::ElementsText),
        udf("jsonb_object_keys", &["json_object_keys"], Op::ObjectKeys),
        udf("__pg_jsonb_each_values", &[], Op::EachValues),
        udf("__pg_jsonb_each_text_values", &[], Op::EachValuesText),
    ]
}

/// The functions that return a set of rows in PostgreSQL and a list here: in a select list they
/// are unnested into rows.
pub const SET_RETURNING: &[&str] = &[
    "jsonb_array_elements",
    "json_array_elements",
    "jsonb_array_elements_text",
    "json_array_elements_text",
    "jsonb_object_keys",
    "json_object_keys",
    "generate_series",
    "regexp_split_to_table",
];

/// What a set-returning function of [`SET_RETURNING`] is the list of, when it has another name.
pub fn list_function(name: &str) -> Option<&'static str> {
    (name == "regexp_split_to_table").then_some("regexp_split_to_array")
}

/// Plans the JSON operators: `->` and `->>` on any text; the others when an operand is `json` or
/// `jsonb` (`||` and `-` keep their text and number meanings otherwise).
#[derive(Debug)]
pub struct JsonOperators;

impl ExprPlanner for JsonOperators {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let typed = |e: &Expr| {
            e.to_field(schema).ok().and_then(|(_, f)| TextType::of_field(&f)).filter(|t| *t != TextType::Uuid)
        };
        let is_path =
            |e: &Expr| matches!(e.get_type(schema as &dyn ExprSchema), Ok(DataType::List(_) | DataType::LargeList(_)));
        let json = typed(&expr.left).is_some() || typed(&expr.right).is_some();
        let jsonb = typed(&expr.left) == Some(TextType::Jsonb) || typed(&expr.right) == Some(TextType::Jsonb);
        let (name, op) = match &expr.op {
            BinaryOperator::Arrow => ("json_get", Op::Get),
            BinaryOperator::LongArrow => ("json_get_text", Op::GetText),
            BinaryOperator::HashArrow => ("jsonb_path", Op::PathGet),
            BinaryOperator::HashLongArrow => ("jsonb_path_text", Op::PathGetText),
            BinaryOperator::AtArrow if json => ("jsonb_contains", Op::Contains),
            BinaryOperator::ArrowAt if json => ("jsonb_contained", Op::ContainedIn),
            BinaryOperator::Eq if jsonb => ("jsonb_eq", Op::Equal),
            BinaryOperator::NotEq if jsonb => ("jsonb_ne", Op::NotEqual),
            BinaryOperator::Question => ("jsonb_exists", Op::HasKey),
            BinaryOperator::QuestionPipe => ("jsonb_exists_any", Op::HasAny),
            BinaryOperator::QuestionAnd => ("jsonb_exists_all", Op::HasAll),
            BinaryOperator::StringConcat if typed(&expr.left).is_some() && typed(&expr.right).is_some() => {
                ("jsonb_concat", Op::Concat)
            }
            BinaryOperator::Minus if typed(&expr.left).is_some() || (json && is_path(&expr.right)) => {
                ("jsonb_delete", Op::Remove)
            }
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let udf = Arc::new(udf(name, &[], op));
        Ok(PlannerResult::Planned(Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
            udf,
            vec![expr.left, expr.right],
        ))))
    }
}
