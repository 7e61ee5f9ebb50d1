//! `PUSH INTO t ... EXPAND JSON column`: a route's JSON text column becomes typed columns of its
//! target, with the schema inferred from the data and evolved as new fields appear.
//!
//! Each run parses the column's values (top-level object fields become columns). A field the
//! target lacks becomes a new nullable column, added in its own metadata commit (`ADD COLUMNS` in
//! the table's history) before the rows are written; its type comes from the run's values: JSON
//! booleans -> boolean, integers -> bigint, numbers with a fraction (or integers mixed with them)
//! -> double, strings -> text, objects and arrays -> text holding their JSON. A value that does
//! not fit its column's type (a string where the column is a number, say), a field whose name
//! cannot be a column (it clashes with another column, ignoring case, or holds one of ` ,;{}()=`
//! or control characters), and a value that is not a JSON object go to the `_rescued_data` column
//! as one JSON object per row, so nothing is lost.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch, StringArray, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::Statement;
use serde_json::{Map, Value};
use sluice_storage::schema::{DataType as DeltaType, PrimitiveType, StructField, StructType};

use super::query::unstream;
use crate::catalog::FlowEntry;
use crate::change::Operation;
use crate::error::{Error, Result};
use crate::names::quoted;
use crate::sql::context::QueryContext;
use crate::syntax::parser::{parse_statement_text, SluiceStatement};

use crate::files::rows::usable_column_name;
pub use crate::files::rows::RESCUED_COLUMN;

/// The JSON family of a value, for type inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Boolean,
    Integer,
    Number,
    Text,
    /// Objects and arrays (kept as JSON text).
    Nested,
}

fn family(value: &Value) -> Option<Family> {
    match value {
        Value::Null => None,
        Value::Bool(_) => Some(Family::Boolean),
        Value::Number(n) if n.is_i64() => Some(Family::Integer),
        Value::Number(_) => Some(Family::Number),
        Value::String(_) => Some(Family::Text),
        Value::Array(_) | Value::Object(_) => Some(Family::Nested),
    }
}

fn delta_type(family: Family) -> PrimitiveType {
    match family {
        Family::Boolean => PrimitiveType::Boolean,
        Family::Integer => PrimitiveType::Long,
        Family::Number => PrimitiveType::Double,
        Family::Text | Family::Nested => PrimitiveType::String,
    }
}

/// The SQL of a route's output shape once `column` is expanded: its other columns and
/// `_rescued_data` (the JSON fields are added as they appear). Fails when the output has no
/// such column.
pub(crate) async fn expanded_shape(cx: &QueryContext, query_text: &str, column: &str) -> Result<String> {
    let SluiceStatement::Standard(statement) = parse_statement_text(query_text)? else {
        return Err(Error::Plan("a route needs a query".into()));
    };
    let Statement::Query(mut query) = *statement else { return Err(Error::Plan("a route needs a query".into())) };
    unstream(&mut query);
    let schema = cx.plan_statement(Statement::Query(query)).await?.schema().as_arrow().clone();
    if schema.field_with_name(column).is_err() {
        return Err(Error::UndefinedColumn(format!(
            "{column} (EXPAND JSON {column}: the route's output has no such column)"
        )));
    }
    let mut columns: Vec<String> =
        schema.fields().iter().filter(|f| f.name() != column).map(|f| quoted(f.name())).collect();
    columns.push(format!("CAST(NULL AS TEXT) AS {RESCUED_COLUMN}"));
    Ok(format!("SELECT {} FROM ({query_text}) AS __expanded", columns.join(", ")))
}

/// Adds to an existing target the columns of an expanding route's shape it lacks (as nullable
/// columns, in one `ADD COLUMNS` commit), so that a target declared with just the JSON fields a
/// user cares about also takes the route's other columns and `_rescued_data`.
pub(crate) async fn add_missing_columns(cx: &QueryContext, target_key: &str, shape: &str) -> Result<()> {
    let SluiceStatement::Standard(statement) = parse_statement_text(shape)? else {
        return Err(Error::Internal("not a query".into()));
    };
    let Statement::Query(mut query) = *statement else { return Err(Error::Internal("not a query".into())) };
    unstream(&mut query);
    let output = cx.plan_statement(Statement::Query(query)).await?.schema().as_arrow().clone();
    cx.clear_statement_state();
    crate::sql::evolve::add_columns(cx, target_key, output.fields()).await
}

/// Expands `column` of a flow's output into the target's columns, adding new ones first.
pub(crate) async fn expand_flow_output(
    cx: &QueryContext,
    flow: &FlowEntry,
    column: &str,
    output: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    cx.clear_statement_state();
    let name = crate::names::parse_table_name(&flow.target)?;
    let object = crate::names::object_name(&name.schema, &name.name);
    let target = cx.target(&object).await;
    cx.clear_statement_state();
    let target = target?;
    let mut parsed = Vec::with_capacity(output.len());
    for batch in &output {
        parsed.push(ParsedBatch::parse(batch, column)?);
    }
    let schema = target.snapshot.schema();
    let others: HashSet<String> = output
        .first()
        .map(|b| b.schema().fields().iter().filter(|f| f.name() != column).map(|f| f.name().to_lowercase()).collect())
        .unwrap_or_default();
    let mut taken: HashSet<String> = schema.fields.iter().map(|f| f.name.to_lowercase()).collect();
    taken.insert(column.to_lowercase());
    taken.insert(RESCUED_COLUMN.to_string());
    let new_fields = new_fields(schema, taken, &parsed);
    let target = if new_fields.is_empty() {
        target
    } else {
        let mut evolved = schema.clone();
        for (key, found) in &new_fields {
            evolved.fields.push(StructField::new(key.clone(), DeltaType::Primitive(delta_type(*found)), true));
        }
        let outcome = target.table.set_schema(&target.snapshot, evolved, "ADD COLUMNS").await?;
        cx.db.writer.commit(&target.entry.qualified_name(), Operation::Metadata, None, outcome).await?;
        let refreshed = cx.target(&object).await;
        cx.clear_statement_state();
        refreshed?
    };
    // The target's expanded fields: every column but the route's own ones and the rescue column.
    let arrow_schema = target.snapshot.arrow_schema();
    let fields: Vec<Field> = arrow_schema
        .fields()
        .iter()
        .filter(|f| f.name() != RESCUED_COLUMN && !others.contains(&f.name().to_lowercase()))
        .map(|f| f.as_ref().clone())
        .collect();
    let mut out = Vec::with_capacity(parsed.len());
    for (batch, parsed) in output.iter().zip(parsed) {
        out.push(parsed.build(batch, column, &fields)?);
    }
    Ok(out)
}

/// The fields of `parsed` that `schema` lacks and that can be columns (`taken`: the names, in
/// lower case, that they must not clash with), with the families of their values. They come in
/// the order they first appear in the data: those of the first row that has any first, in the
/// order that row's object names them (not the map's, which is alphabetical).
fn new_fields(schema: &StructType, mut taken: HashSet<String>, parsed: &[ParsedBatch]) -> Vec<(String, Family)> {
    let mut fields: Vec<(String, Family)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for batch in parsed {
        for (row, object) in batch.objects.iter().enumerate() {
            let Some(object) = object else { continue };
            let known = |key: &String| schema.field(key).is_some() || index.contains_key(key);
            // Only a row with a field not met before is read again for its order.
            let keys: Vec<String> =
                if object.keys().all(known) { object.keys().cloned().collect() } else { batch.keys_in_order(row) };
            for key in keys {
                let Some(found) = object.get(&key).and_then(family) else { continue };
                if schema.field(&key).is_some() {
                    continue;
                }
                match index.get(&key) {
                    Some(&i) => {
                        if let Some(field) = fields.get_mut(i) {
                            if field.1 == Family::Integer && found == Family::Number {
                                field.1 = Family::Number;
                            }
                        }
                    }
                    None => {
                        let lower = key.to_lowercase();
                        if taken.contains(&lower) || !usable_column_name(&key) {
                            continue;
                        }
                        taken.insert(lower);
                        index.insert(key.clone(), fields.len());
                        fields.push((key, found));
                    }
                }
            }
        }
    }
    fields
}

/// One batch's JSON column, parsed.
struct ParsedBatch {
    /// The column's values as text.
    text: StringArray,
    /// The object of each row (None: NULL, or not an object).
    objects: Vec<Option<Map<String, Value>>>,
    /// What each row keeps in `_rescued_data` so far.
    rescued: Vec<Option<Map<String, Value>>>,
}

impl ParsedBatch {
    fn parse(batch: &RecordBatch, column: &str) -> Result<Self> {
        let values = batch
            .column_by_name(column)
            .ok_or_else(|| Error::UndefinedColumn(format!("{column} (EXPAND JSON: the flow's output lacks it)")))?;
        let text = arrow::compute::cast(values, &DataType::Utf8)?.as_string::<i32>().clone();
        let mut objects = Vec::with_capacity(text.len());
        let mut rescued = Vec::with_capacity(text.len());
        for i in 0..text.len() {
            if text.is_null(i) {
                objects.push(None);
                rescued.push(None);
                continue;
            }
            let raw = text.value(i);
            match serde_json::from_str::<Value>(raw) {
                Ok(Value::Object(map)) => {
                    objects.push(Some(map));
                    rescued.push(None);
                }
                Ok(Value::Null) => {
                    objects.push(None);
                    rescued.push(None);
                }
                Ok(other) => {
                    objects.push(None);
                    rescued.push(Some(Map::from_iter([(column.to_string(), other)])));
                }
                Err(_) => {
                    objects.push(None);
                    rescued.push(Some(Map::from_iter([(column.to_string(), Value::String(raw.to_string()))])));
                }
            }
        }
        Ok(Self { text, objects, rescued })
    }

    /// The field names of a row's object in the order its text has them (a name given twice
    /// counts where it first comes); none for a row that is not an object.
    fn keys_in_order(&self, row: usize) -> Vec<String> {
        if row >= self.text.len() || self.text.is_null(row) {
            return Vec::new();
        }
        serde_json::from_str::<KeysInOrder>(self.text.value(row)).map(|k| k.0).unwrap_or_default()
    }

    /// The output rows: the batch's other columns, the expanded `fields`, and `_rescued_data`.
    fn build(mut self, batch: &RecordBatch, column: &str, fields: &[Field]) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let index: HashMap<&str, usize> = fields.iter().enumerate().map(|(i, f)| (f.name().as_str(), i)).collect();
        // Per field, per row: the value (borrowed from the parsed objects).
        let mut cells: Vec<Vec<Option<&Value>>> = vec![vec![None; rows]; fields.len()];
        let mut unplaced: Vec<(usize, String)> = Vec::new();
        for (row, object) in self.objects.iter().enumerate() {
            let Some(object) = object else { continue };
            for (key, value) in object {
                match index.get(key.as_str()) {
                    Some(&f) => {
                        if let Some(cell) = cells.get_mut(f).and_then(|column| column.get_mut(row)) {
                            *cell = Some(value);
                        }
                    }
                    None if value.is_null() => {}
                    None => unplaced.push((row, key.clone())),
                }
            }
        }
        let mut columns: Vec<(Field, ArrayRef)> = batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .filter(|(f, _)| f.name() != column)
            .map(|(f, c)| (f.as_ref().clone(), c.clone()))
            .collect();
        let mut misfits: Vec<(usize, String, Value)> = Vec::new();
        for (field, column_cells) in fields.iter().zip(&cells) {
            let array = build_column(field, column_cells, |row| {
                if let Some(Some(value)) = column_cells.get(row) {
                    misfits.push((row, field.name().clone(), (*value).clone()));
                }
            })?;
            columns.push((Field::new(field.name(), array.data_type().clone(), true), array));
        }
        for (row, key) in unplaced {
            if let Some(value) = self.objects.get(row).and_then(|o| o.as_ref()).and_then(|o| o.get(&key)) {
                misfits.push((row, key, value.clone()));
            }
        }
        for (row, key, value) in misfits {
            if let Some(rescued) = self.rescued.get_mut(row) {
                rescued.get_or_insert_with(Map::new).insert(key, value);
            }
        }
        let rescued: StringArray =
            self.rescued.iter().map(|r| r.as_ref().map(|m| serde_json::to_string(m).unwrap_or_default())).collect();
        columns.push((Field::new(RESCUED_COLUMN, DataType::Utf8, true), Arc::new(rescued)));
        let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns.into_iter().unzip();
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?)
    }
}

/// A JSON object's field names in the order of its text (serde_json's `Map` sorts them); the
/// values are skipped unread.
struct KeysInOrder(Vec<String>);

impl<'de> serde::Deserialize<'de> for KeysInOrder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KeysInOrder;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<KeysInOrder, A::Error> {
                let mut keys: Vec<String> = Vec::new();
                let mut seen: HashSet<String> = HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    if seen.insert(key.clone()) {
                        keys.push(key);
                    }
                }
                Ok(KeysInOrder(keys))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// Builds one expanded column of `field`'s type; `misfit(row)` is called for each value that
/// does not fit (it becomes NULL here and goes to `_rescued_data`).
fn build_column(field: &Field, cells: &[Option<&Value>], mut misfit: impl FnMut(usize)) -> Result<ArrayRef> {
    let rows = cells.len();
    Ok(match field.data_type() {
        DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 => {
            let (min, max) = match field.data_type() {
                DataType::Int32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
                DataType::Int16 => (i64::from(i16::MIN), i64::from(i16::MAX)),
                DataType::Int8 => (i64::from(i8::MIN), i64::from(i8::MAX)),
                _ => (i64::MIN, i64::MAX),
            };
            let mut b = Int64Builder::with_capacity(rows);
            for (row, cell) in cells.iter().enumerate() {
                match cell.map(|v| (v, v.as_i64())) {
                    None => b.append_null(),
                    Some((v, _)) if v.is_null() => b.append_null(),
                    Some((_, Some(n))) if n >= min && n <= max => b.append_value(n),
                    Some(_) => {
                        misfit(row);
                        b.append_null()
                    }
                }
            }
            arrow::compute::cast(&b.finish(), field.data_type())?
        }
        DataType::Float64 | DataType::Float32 => {
            let mut b = Float64Builder::with_capacity(rows);
            for (row, cell) in cells.iter().enumerate() {
                match cell {
                    None => b.append_null(),
                    Some(v) if v.is_null() => b.append_null(),
                    Some(Value::Number(n)) => b.append_option(n.as_f64()),
                    Some(_) => {
                        misfit(row);
                        b.append_null()
                    }
                }
            }
            arrow::compute::cast(&b.finish(), field.data_type())?
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(rows);
            for (row, cell) in cells.iter().enumerate() {
                match cell {
                    None => b.append_null(),
                    Some(v) if v.is_null() => b.append_null(),
                    Some(Value::Bool(x)) => b.append_value(*x),
                    Some(_) => {
                        misfit(row);
                        b.append_null()
                    }
                }
            }
            Arc::new(b.finish())
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let mut b = StringBuilder::with_capacity(rows, rows * 16);
            for (row, cell) in cells.iter().enumerate() {
                match cell {
                    None => b.append_null(),
                    Some(v) if v.is_null() => b.append_null(),
                    Some(Value::String(s)) => b.append_value(s),
                    Some(v @ (Value::Object(_) | Value::Array(_))) => b.append_value(v.to_string()),
                    Some(_) => {
                        misfit(row);
                        b.append_null()
                    }
                }
            }
            arrow::compute::cast(&b.finish(), field.data_type())?
        }
        // Dates, timestamps, decimals, ...: through their text, as a cast from text reads it.
        other => {
            let texts: StringArray = cells
                .iter()
                .map(|cell| match cell {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    Some(Value::Bool(b)) => Some(b.to_string()),
                    Some(v @ (Value::Object(_) | Value::Array(_))) => Some(v.to_string()),
                    _ => None,
                })
                .collect();
            let cast = arrow::compute::cast(&texts, other)?;
            for row in 0..rows {
                if !texts.is_null(row) && cast.is_null(row) {
                    misfit(row);
                }
            }
            cast
        }
    })
}

/// For `sluice.flows` and EXPLAIN FLOW: how a route's rows are shaped.
pub fn describe(flow: &FlowEntry) -> Option<String> {
    flow.expand_json.as_ref().map(|c| format!("EXPAND JSON {c}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(values: &[Option<&str>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("topic", DataType::Utf8, true),
            Field::new("value", DataType::Utf8, true),
        ]));
        let topics: StringArray = values.iter().map(|_| Some("t")).collect();
        let values: StringArray = values.iter().copied().collect();
        RecordBatch::try_new(schema, vec![Arc::new(topics), Arc::new(values)]).unwrap()
    }

    #[test]
    fn values_that_do_not_fit_are_rescued() {
        let input = batch(&[
            Some(r#"{"id": 1, "amount": 2.5, "note": "a", "tags": [1], "topic": "x"}"#),
            Some(r#"{"id": "two", "amount": 3, "flag": true}"#),
            Some("[1, 2]"),
            Some("{oops"),
            None,
        ]);
        let parsed = ParsedBatch::parse(&input, "value").unwrap();
        let fields = vec![
            Field::new("id", DataType::Int64, true),
            Field::new("amount", DataType::Float64, true),
            Field::new("note", DataType::Utf8, true),
            Field::new("tags", DataType::Utf8, true),
        ];
        let out = parsed.build(&input, "value", &fields).unwrap();
        let schema = out.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["topic", "id", "amount", "note", "tags", RESCUED_COLUMN]);
        let ids = out.column(1).as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!((ids.value(0), ids.is_null(1)), (1, true));
        let amounts = out.column(2).as_primitive::<arrow::datatypes::Float64Type>();
        assert_eq!((amounts.value(0), amounts.value(1)), (2.5, 3.0));
        assert_eq!(out.column(4).as_string::<i32>().value(0), "[1]");
        let rescued = out.column(5).as_string::<i32>();
        // "topic" clashes with the route's own column; "flag" has no column in `fields`.
        assert_eq!(rescued.value(0), r#"{"topic":"x"}"#);
        assert_eq!(rescued.value(1), r#"{"flag":true,"id":"two"}"#);
        assert_eq!(rescued.value(2), r#"{"value":[1,2]}"#);
        assert_eq!(rescued.value(3), r#"{"value":"{oops"}"#);
        assert!(rescued.is_null(4));
    }

    #[test]
    fn new_fields_come_in_the_order_they_first_appear() {
        let input = batch(&[
            Some(r#"{"zeta": 1, "topic": "x", "alpha": "a", "zeta": 2}"#),
            Some("not json"),
            Some(r#"{"beta": 2.5, "alpha": "b", "zeta": 1.5, "mid": null}"#),
            Some(r#"{"mid": true, "Alpha": 1}"#),
        ]);
        let parsed = vec![ParsedBatch::parse(&input, "value").unwrap()];
        let schema =
            StructType::new(vec![StructField::new("topic", DeltaType::Primitive(PrimitiveType::String), true)]);
        let taken = HashSet::from(["topic".to_string(), "value".to_string(), RESCUED_COLUMN.to_string()]);
        let fields = new_fields(&schema, taken, &parsed);
        let expected =
            [("zeta", Family::Number), ("alpha", Family::Text), ("beta", Family::Number), ("mid", Family::Boolean)];
        assert_eq!(fields, expected.map(|(name, family)| (name.to_string(), family)));
    }

    #[test]
    fn families_map_to_column_types() {
        assert_eq!(family(&serde_json::json!(1)), Some(Family::Integer));
        assert_eq!(family(&serde_json::json!(1.5)), Some(Family::Number));
        assert_eq!(family(&serde_json::json!({"a": 1})), Some(Family::Nested));
        assert_eq!(family(&Value::Null), None);
        assert_eq!(delta_type(Family::Nested), PrimitiveType::String);
    }
}
