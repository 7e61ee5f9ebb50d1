//! `SELECT * FROM read_files('landing/orders/*.csv', format => 'csv', header => 'true')`: the
//! files of a folder (or one file) as a relation, read with a file source's options and rules (the same columns,
//! types, `_rescued_data` and `_metadata` as the table a source with those options fills; rows that
//! cannot be read are left out). The path is checked against the caller's rights as COPY's are.
//!
//! The call is taken out of the statement before planning (DataFusion hands table functions their
//! arguments without the names of named ones) and replaced by a temporary relation of the rows.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Statement, TableFactor, Value, VisitMut, VisitorMut,
};

use super::listing::Folder;
use super::options::FileOptions;
use crate::error::{Error, Result};
use crate::names::object_name;
use crate::privileges::Privileges;
use crate::warehouse::Warehouse;

/// How many bytes one `read_files` call may read (a folder larger than this is a source's job).
pub const READ_BYTES_MAX: u64 = 2 * 1024 * 1024 * 1024;

/// A `read_files` call taken out of a statement: the temporary relation standing in for it and
/// its arguments.
pub(crate) struct ReadFilesCall {
    pub temp: String,
    pub args: Vec<FunctionArg>,
}

struct Collector<'a> {
    temp_name: &'a dyn Fn() -> String,
    schema: &'a str,
    found: Vec<ReadFilesCall>,
}

impl VisitorMut for Collector<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = factor {
            let called = name.0.last().map(|p| p.to_string().trim_matches('"').to_lowercase());
            if args.is_some() && name.0.len() == 1 && called.as_deref() == Some("read_files") {
                let temp = (self.temp_name)();
                let taken = args.take().map(|a| a.args).unwrap_or_default();
                *name = object_name(self.schema, &temp);
                self.found.push(ReadFilesCall { temp, args: taken });
            }
        }
        ControlFlow::Continue(())
    }
}

/// Takes the `read_files(...)` calls out of a statement, naming a temporary relation (in
/// `schema`) for each.
pub(crate) fn collect(statement: &mut Statement, schema: &str, temp_name: &dyn Fn() -> String) -> Vec<ReadFilesCall> {
    let mut collector = Collector { temp_name, schema, found: vec![] };
    let _ = statement.visit(&mut collector);
    collector.found
}

fn text_argument(expr: &FunctionArgExpr) -> Result<String> {
    let FunctionArgExpr::Expr(expr) = expr else {
        return Err(Error::Plan("read_files takes text literals".into()));
    };
    match expr {
        Expr::Value(value) => match &value.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Ok(s.clone()),
            Value::Number(n, _) => Ok(n.clone()),
            Value::Boolean(b) => Ok(b.to_string()),
            other => Err(Error::Plan(format!("read_files takes text literals, not {other}"))),
        },
        Expr::Identifier(ident) => Ok(ident.value.clone()),
        other => Err(Error::Plan(format!("read_files takes text literals, not {other}"))),
    }
}

/// The options of a call: the path first, then `name => 'value'` pairs.
fn options(args: &[FunctionArg]) -> Result<BTreeMap<String, String>> {
    let mut options = BTreeMap::new();
    for (i, arg) in args.iter().enumerate() {
        match arg {
            FunctionArg::Unnamed(value) if i == 0 => {
                options.insert("path".to_string(), text_argument(value)?);
            }
            FunctionArg::Named { name, arg, .. } | FunctionArg::ExprNamed { name: Expr::Identifier(name), arg, .. } => {
                let key = name.value.to_lowercase();
                if options.insert(key.clone(), text_argument(arg)?).is_some() {
                    return Err(Error::Plan(format!("read_files: option {key} is given twice")));
                }
            }
            _ => {
                return Err(Error::Plan(
                    "read_files takes a path, then options by name: read_files('folder/*.csv', format => 'csv')".into(),
                ))
            }
        }
    }
    if !options.contains_key("path") {
        return Err(Error::Plan("read_files needs a path as its first argument".into()));
    }
    Ok(options)
}

/// The rows of a `read_files` call, read now.
pub(crate) async fn relation(
    db: &Warehouse,
    privileges: Privileges,
    args: &[FunctionArg],
) -> Result<Arc<dyn TableProvider>> {
    let options = FileOptions::parse(&options(args)?)?;
    let single = match options.pattern {
        None => Folder::single_file(db, &options.path, privileges)?,
        Some(_) => None,
    };
    let (folder, found) = match single {
        Some((folder, file)) => (folder, vec![file]),
        None => {
            let folder = Folder::open(db, &options.path, privileges)?;
            let found = folder.list(&options.matcher()).await?;
            (folder, found)
        }
    };
    let bytes: u64 = found.iter().map(|f| f.size).sum();
    if bytes > READ_BYTES_MAX {
        return Err(Error::data(
            "54000",
            format!(
                "read_files would read {bytes} bytes, more than {READ_BYTES_MAX}: ingest the folder with CREATE SOURCE ... FROM FILES"
            ),
        ));
    }
    let files = super::read_files(&folder, found, &options).await;
    let schema = Arc::new(arrow::datatypes::Schema::new(super::rows::missing_fields(
        &arrow::datatypes::Schema::empty(),
        &files,
    )));
    let refs: Vec<&super::decode::FileRows> = files.iter().collect();
    let rows = super::rows::table_rows(&schema, &refs)?;
    Ok(Arc::new(MemTable::try_new(schema, vec![rows])?))
}
