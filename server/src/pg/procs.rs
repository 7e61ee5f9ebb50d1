//! `pg_proc` with its array columns as arrays. datafusion-pg-catalog keeps `proargnames`,
//! `proargmodes`, `proallargtypes`, `protrftypes`, `proconfig` and `proacl` as the text of a
//! list (`['a', 'b']`, `[23, 25]`), which `unnest(proargnames)` (pgcli's completion),
//! `proallargtypes::regtype[]` and subscripts cannot read; here they are `text[]` and `oid[]`
//! values, as PostgreSQL's are. The other columns are the crate's.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Builder, ListBuilder, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::Result as DfResult;

/// The columns that hold arrays, with their element type.
const ARRAY_COLUMNS: &[(&str, Element)] = &[
    ("proargnames", Element::Text),
    ("proargmodes", Element::Text),
    ("proallargtypes", Element::Oid),
    ("protrftypes", Element::Oid),
    ("proconfig", Element::Text),
    ("proacl", Element::Text),
];

#[derive(Clone, Copy)]
enum Element {
    Text,
    Oid,
}

impl Element {
    fn data_type(self) -> DataType {
        let item = match self {
            Element::Text => DataType::Utf8,
            Element::Oid => DataType::Int32,
        };
        DataType::List(Arc::new(Field::new("item", item, true)))
    }
}

fn element_of(name: &str) -> Option<Element> {
    ARRAY_COLUMNS.iter().find(|(column, _)| *column == name).map(|(_, element)| *element)
}

/// pg_proc's schema with the array columns as arrays.
pub fn schema(inner: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = inner
        .fields()
        .iter()
        .map(|field| match element_of(field.name()) {
            Some(element) if is_text(field.data_type()) => {
                Field::new(field.name(), element.data_type(), true).with_metadata(field.metadata().clone())
            }
            _ => field.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, inner.metadata().clone()))
}

fn is_text(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// The crate's rows in `schema` (from [`schema`]).
pub fn rows(schema: &SchemaRef, batches: &[RecordBatch]) -> DfResult<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|batch| {
            let columns = schema
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(field, column)| match (element_of(field.name()), is_text(column.data_type())) {
                    (Some(element), true) => arrays(column, element),
                    _ => Ok(column.clone()),
                })
                .collect::<DfResult<Vec<_>>>()?;
            Ok(RecordBatch::try_new(schema.clone(), columns)?)
        })
        .collect()
}

/// A column of list texts as a list column.
fn arrays(column: &ArrayRef, element: Element) -> DfResult<ArrayRef> {
    let text = arrow::compute::cast(column, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    Ok(match element {
        Element::Text => super::catalog::text_lists(
            text.iter().map(|value| value.and_then(items).map(|items| items.into_iter().map(Some).collect())),
        ),
        Element::Oid => {
            let mut builder = ListBuilder::new(Int32Builder::new());
            for value in text.iter() {
                match value.and_then(items) {
                    Some(items) => {
                        for item in items {
                            builder.values().append_option(item.trim().parse::<i32>().ok());
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

/// The items of a list's text: `['a', 'b']`, `[23, 25]`, or PostgreSQL's `{a,b}`; None for an
/// empty text (no array).
fn items(text: &str) -> Option<Vec<String>> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .or_else(|| text.strip_prefix('{').and_then(|t| t.strip_suffix('}')))
        .unwrap_or(text);
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), '\\') => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, ',') => out.push(std::mem::take(&mut current).trim().to_string()),
            (None, c) => current.push(c),
        }
    }
    if !current.trim().is_empty() || !out.is_empty() {
        out.push(current.trim().to_string());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::items;

    #[test]
    fn list_texts_split_into_items() {
        assert_eq!(items("['acl', 'grantor']"), Some(vec!["acl".to_string(), "grantor".to_string()]));
        assert_eq!(items("[1034, 26]"), Some(vec!["1034".to_string(), "26".to_string()]));
        assert_eq!(items("{i,o}"), Some(vec!["i".to_string(), "o".to_string()]));
        assert_eq!(items("['a, b', 'it\\'s']"), Some(vec!["a, b".to_string(), "it's".to_string()]));
        assert_eq!(items("[]"), Some(vec![]));
        assert_eq!(items(""), None);
    }
}
