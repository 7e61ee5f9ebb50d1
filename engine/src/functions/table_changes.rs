//! `table_changes('table', from_version [, to_version])`: the change data feed of a table as a
//! relation, with `_change_type`, `_commit_version` and `_commit_timestamp`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session as DfSession, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::datasource::{MemTable, TableType};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use sluice_storage::snapshot::Snapshot;

use crate::names::parse_table_name;
use crate::warehouse::Warehouse;

#[derive(Debug)]
pub struct TableChanges {
    pub db: Arc<Warehouse>,
    pub snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
}

fn literal(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Some(value.clone()),
        Expr::Cast(cast) => literal(&cast.expr),
        _ => None,
    }
}

fn version(expr: &Expr) -> DfResult<u64> {
    let value = literal(expr).and_then(|v| v.cast_to(&arrow::datatypes::DataType::Int64).ok());
    match value {
        Some(ScalarValue::Int64(Some(v))) if v >= 0 => Ok(v as u64),
        _ => plan_err!("table_changes versions must be non-negative integer literals, found {expr}"),
    }
}

impl TableFunctionImpl for TableChanges {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        let (name, start, end) = match args {
            [name, start] => (name, version(start)?, None),
            [name, start, end] => (name, version(start)?, Some(version(end)?)),
            _ => return plan_err!("table_changes takes ('table', from_version [, to_version])"),
        };
        let Some(
            ScalarValue::Utf8(Some(name)) | ScalarValue::LargeUtf8(Some(name)) | ScalarValue::Utf8View(Some(name)),
        ) = literal(name)
        else {
            return plan_err!("the first argument of table_changes must be a table name in quotes");
        };
        let name = parse_table_name(&name).map_err(DataFusionError::from)?;
        let state = self.db.catalog.current();
        let entry = state
            .table(&name.schema, &name.name)
            .cloned()
            .ok_or_else(|| DataFusionError::from(crate::error::Error::UndefinedTable(name.to_string())))?;
        // The schema comes from the table as this session last saw it; rows are read at scan time.
        let table = futures::executor::block_on(self.db.open_table(&entry)).map_err(DataFusionError::from)?;
        let schema = Arc::new(sluice_storage::write::change_data_schema(table.cached_snapshot().schema()).to_arrow());
        Ok(Arc::new(ChangesProvider { table, start, end, schema }))
    }
}

#[derive(Debug)]
struct ChangesProvider {
    table: Arc<sluice_storage::table::Table>,
    start: u64,
    end: Option<u64>,
    schema: SchemaRef,
}

#[async_trait]
impl TableProvider for ChangesProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn DfSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let changes =
            self.table.changes(self.start, self.end).await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        let batches = sluice_storage::cdf::flatten(changes)
            .into_iter()
            .map(|b| b.with_schema(self.schema.clone()).map_err(DataFusionError::from))
            .collect::<DfResult<Vec<_>>>()?;
        let memory = MemTable::try_new(self.schema.clone(), vec![batches])?;
        memory.scan(state, projection, filters, limit).await
    }
}

/// `table_history('table')`: the commits of a table as a relation (DESCRIBE HISTORY's rows).
#[derive(Debug)]
pub struct TableHistory {
    pub db: Arc<Warehouse>,
}

impl TableFunctionImpl for TableHistory {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        let [name] = args else { return plan_err!("table_history takes ('table')") };
        let Some(
            ScalarValue::Utf8(Some(name)) | ScalarValue::LargeUtf8(Some(name)) | ScalarValue::Utf8View(Some(name)),
        ) = literal(name)
        else {
            return plan_err!("the argument of table_history must be a table name in quotes");
        };
        let name = parse_table_name(&name).map_err(DataFusionError::from)?;
        let state = self.db.catalog.current();
        let entry = state
            .table(&name.schema, &name.name)
            .cloned()
            .ok_or_else(|| DataFusionError::from(crate::error::Error::UndefinedTable(name.to_string())))?;
        let table = futures::executor::block_on(self.db.open_table(&entry)).map_err(DataFusionError::from)?;
        Ok(Arc::new(HistoryProvider { table, schema: crate::provider::history::history_schema() }))
    }
}

#[derive(Debug)]
struct HistoryProvider {
    table: Arc<sluice_storage::table::Table>,
    schema: SchemaRef,
}

#[async_trait]
impl TableProvider for HistoryProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn DfSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let history = self.table.history(None).await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        let batch = crate::provider::history::history_batch(&history).map_err(DataFusionError::from)?;
        let memory = MemTable::try_new(self.schema.clone(), vec![vec![batch]])?;
        memory.scan(state, projection, filters, limit).await
    }
}
