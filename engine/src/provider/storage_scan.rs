//! `StorageScanExec`: a scan through sluice-storage's own reader.
//!
//! It serves what DataFusion's Parquet scan cannot: the hidden columns DML needs (each row's file
//! and row index, to build deletion vectors), and tables whose columns are matched by column
//! mapping ids or nested physical names. Files are dealt round-robin to `partitions` streams.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, ReplaceChildrenOptions};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, Statistics, StatisticsArgs,
};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;
use sluice_storage::actions::Add;
use sluice_storage::scan::{read_file, FileToRead, RowMask, ScanOptions, TableLayout, ROW_INDEX_COLUMN};
use sluice_storage::schema::StructField;
use sluice_storage::store::TableStore;

/// The hidden column with each row's file (as logged).
pub const FILE_COLUMN: &str = "__sluice_file";
/// The hidden column with each row's physical index in its file.
pub const ROW_COLUMN: &str = "__sluice_row";

/// What a storage scan reads.
#[derive(Debug, Clone)]
pub struct StorageScan {
    pub store: TableStore,
    pub layout: TableLayout,
    /// Table columns to read, in output order (before the hidden columns).
    pub fields: Vec<StructField>,
    pub with_file: bool,
    pub with_row: bool,
    pub files: Vec<Arc<Add>>,
    /// Only these rows of files (by path as logged), which a key index found; the others of
    /// `files` are read whole.
    pub only: Option<HashMap<String, Arc<RoaringTreemap>>>,
    pub options: ScanOptions,
    /// The output schema (table columns then the hidden ones requested).
    pub schema: SchemaRef,
}

#[derive(Debug)]
pub struct StorageScanExec {
    scan: Arc<StorageScan>,
    partitions: usize,
    properties: Arc<PlanProperties>,
}

impl StorageScanExec {
    pub fn new(scan: StorageScan, partitions: usize) -> Self {
        let partitions = partitions.clamp(1, scan.files.len().max(1));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(scan.schema.clone()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self { scan: Arc::new(scan), partitions, properties: Arc::new(properties) }
    }

    /// The files one partition reads (dealt round-robin), or all of them.
    fn files_of(&self, partition: Option<usize>) -> impl Iterator<Item = &Arc<Add>> {
        let step = if partition.is_some() { self.partitions } else { 1 };
        self.scan.files.iter().skip(partition.unwrap_or(0)).step_by(step)
    }
}

impl DisplayAs for StorageScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "StorageScanExec: table={}, files={}, partitions={}",
            self.scan.store.location(),
            self.scan.files.len(),
            self.partitions
        )?;
        if let Some(only) = &self.scan.only {
            write!(f, ", rows_by_key={}", only.values().map(|rows| rows.len()).sum::<u64>())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for StorageScanExec {
    fn name(&self) -> &str {
        "StorageScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    /// The number of rows, when a key index found every row read (a key lookup): exact, so that
    /// the planner does not spread one row over partitions (a repartition of a point lookup costs
    /// more than the lookup). Unknown otherwise.
    fn statistics_from_inputs(&self, _inputs: &[Arc<Statistics>], args: &StatisticsArgs) -> DfResult<Arc<Statistics>> {
        let unknown = Statistics::new_unknown(&self.scan.schema);
        let Some(only) = &self.scan.only else { return Ok(Arc::new(unknown)) };
        let mut rows = 0u64;
        for add in self.files_of(args.partition()) {
            match only.get(&add.path) {
                Some(located) => rows += located.len(),
                None => return Ok(Arc::new(unknown)),
            }
        }
        let rows = usize::try_from(rows).map_or(Precision::Absent, Precision::Exact);
        Ok(Arc::new(unknown.with_num_rows(rows)))
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        let scan = self.scan.clone();
        let files: Vec<Arc<Add>> = self.files_of(Some(partition)).cloned().collect();
        let schema = scan.schema.clone();
        let stream = futures::stream::iter(files)
            .then(move |add| {
                let scan = scan.clone();
                async move { read_one(scan, add).await }
            })
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

async fn read_one(
    scan: Arc<StorageScan>,
    add: Arc<Add>,
) -> DfResult<futures::stream::BoxStream<'static, DfResult<RecordBatch>>> {
    let external = |e: sluice_storage::Error| DataFusionError::External(Box::new(e));
    let only = scan.only.as_ref().and_then(|only| only.get(&add.path));
    let file = match only {
        // The index holds live rows only: the deletion vector has nothing to add.
        Some(rows) => FileToRead {
            path: add.path.clone(),
            size: u64::try_from(add.size).ok().filter(|s| *s > 0),
            partition_values: add.partition_values.clone(),
            mask: RowMask::Only(rows.clone()),
        },
        None => FileToRead::from_add(&scan.store, &add).await.map_err(external)?,
    };
    let options = ScanOptions { row_index: scan.with_row, ..scan.options.clone() };
    let stream = read_file(&scan.store, &scan.layout, &scan.fields, &file, &options).await.map_err(external)?;
    let path = add.path.clone();
    let schema = scan.schema.clone();
    let with_file = scan.with_file;
    Ok(stream
        .map(move |batch| {
            let batch = batch.map_err(external)?;
            let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
            let row_index = if batch.schema().fields().last().is_some_and(|f| f.name() == ROW_INDEX_COLUMN) {
                columns.pop()
            } else {
                None
            };
            if with_file {
                columns.push(Arc::new(StringArray::from(vec![path.as_str(); batch.num_rows()])));
            }
            columns.extend(row_index);
            let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
        })
        .boxed())
}
