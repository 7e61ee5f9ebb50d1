//! Printing results: aligned tables as psql prints them, and CSV.

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use sluice::StatementResult;

fn is_numeric(data_type: &DataType) -> bool {
    data_type.is_numeric()
}

/// The cells of a result as text (Arrow's display), NULL as `null` (psql shows the empty
/// string).
pub fn cells(batches: &[RecordBatch], null: &str) -> Vec<Vec<String>> {
    let options = FormatOptions::default().with_null(null);
    let mut rows = Vec::new();
    for batch in batches {
        let formatters: Vec<_> =
            batch.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &options)).collect();
        for row in 0..batch.num_rows() {
            rows.push(
                formatters
                    .iter()
                    .zip(batch.columns())
                    .map(|(f, column)| match f {
                        Ok(f) if !column.is_null(row) => f.value(row).to_string(),
                        Ok(_) => null.to_string(),
                        Err(e) => format!("<{e}>"),
                    })
                    .collect(),
            );
        }
    }
    rows
}

/// A result as psql prints it (`psql`'s aligned format), or the command tag.
pub fn aligned(result: &StatementResult) -> String {
    match result {
        StatementResult::Command { tag, .. } => format!("{tag}\n"),
        StatementResult::Rows { schema, batches } => aligned_rows(schema, batches),
        StatementResult::Returned { tag, schema, batches } => format!("{}{tag}\n", aligned_rows(schema, batches)),
    }
}

fn aligned_rows(schema: &SchemaRef, batches: &[RecordBatch]) -> String {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let numeric: Vec<bool> = schema.fields().iter().map(|f| is_numeric(f.data_type())).collect();
    let rows = cells(batches, "");
    let width = |i: usize| {
        let name = names.get(i).map_or(0, |n| n.chars().count());
        rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).chain([name]).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..names.len()).map(width).collect();
    let mut out = String::new();
    let header: Vec<String> = names
        .iter()
        .zip(&widths)
        .map(|(name, w)| {
            let pad = w - name.chars().count();
            format!("{}{}{}", " ".repeat(pad / 2), name, " ".repeat(pad - pad / 2))
        })
        .collect();
    out.push_str(&format!(" {} \n", header.join(" | ")));
    out.push_str(&widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+"));
    out.push('\n');
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(&numeric)
            .map(|((cell, w), right)| if *right { format!("{cell:>w$}") } else { format!("{cell:<w$}") })
            .collect();
        out.push_str(&format!(" {}\n", line.join(" | ").trim_end()));
    }
    let count = rows.len();
    out.push_str(&format!("({count} row{})\n", if count == 1 { "" } else { "s" }));
    out
}

/// A result as psql's expanded display (`\\x`) prints it: one block per row.
pub fn expanded(result: &StatementResult) -> String {
    let (StatementResult::Rows { schema, batches } | StatementResult::Returned { schema, batches, .. }) = result else {
        return aligned(result);
    };
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let rows = cells(batches, "");
    if rows.is_empty() {
        return "(0 rows)\n".into();
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let title = format!("-[ RECORD {} ]", i + 1);
        out.push_str(&format!("{title}{}\n", "-".repeat((width + 1).saturating_sub(title.chars().count()))));
        for (name, cell) in names.iter().zip(row) {
            out.push_str(&format!("{name:<width$} | {cell}\n"));
        }
    }
    if let StatementResult::Returned { tag, .. } = result {
        out.push_str(&format!("{tag}\n"));
    }
    out
}

/// A result as CSV: a header line, then the rows (empty for commands).
pub fn csv(result: &StatementResult) -> Result<String, arrow::error::ArrowError> {
    let (StatementResult::Rows { schema, batches } | StatementResult::Returned { schema, batches, .. }) = result else {
        return Ok(String::new());
    };
    let mut out = Vec::new();
    {
        let mut writer = arrow::csv::WriterBuilder::new().with_header(true).build(&mut out);
        if batches.is_empty() {
            writer.write(&RecordBatch::new_empty(schema.clone()))?;
        }
        for batch in batches {
            writer.write(batch)?;
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    #[test]
    fn prints_like_psql() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), Some(22)])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        )
        .unwrap();
        let text = aligned(&StatementResult::Rows { schema: schema.clone(), batches: vec![batch.clone()] });
        assert_eq!(text, " id | name \n----+------\n  1 | a\n 22 |\n(2 rows)\n");
        let expanded = expanded(&StatementResult::Rows { schema: schema.clone(), batches: vec![batch.clone()] });
        assert_eq!(expanded, "-[ RECORD 1 ]\nid   | 1\nname | a\n-[ RECORD 2 ]\nid   | 22\nname | \n");
        let csv = csv(&StatementResult::Rows { schema, batches: vec![batch] }).unwrap();
        assert_eq!(csv, "id,name\n1,a\n22,\n");
    }
}
