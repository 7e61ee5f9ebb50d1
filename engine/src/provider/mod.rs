//! `SluiceTable`: a DataFusion `TableProvider` over one snapshot of a Sluice table.
//!
//! A scan prunes files with the filters (partition values and `add.stats` through DataFusion's
//! `PruningPredicate`), then reads the survivors with DataFusion's Parquet scan: projection and
//! filter pushdown, row-group and page pruning from Parquet statistics, parallel reading, and
//! deletion vectors applied as per-row-group row selections (`ParquetAccessPlan`), so deleted rows
//! are never decoded. Scans that need the hidden DML columns (`__sluice_file`, `__sluice_row`) or
//! column mapping go through [`storage_scan::StorageScanExec`] instead.
//!
//! The snapshot is fixed when the provider is made, so every scan in one statement sees the same
//! version of the table.

pub mod history;
pub mod pruning;
pub mod storage_scan;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue, Statistics};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{ParquetAccessPlan, RowGroupAccess};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use object_store::ObjectMeta;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::arrow::async_reader::AsyncFileReader;
use roaring::RoaringTreemap;
use sluice_storage::actions::Add;
use sluice_storage::partition::partition_column;
use sluice_storage::scan::{ScanOptions, TableLayout};
use sluice_storage::schema::ColumnMappingMode;
use sluice_storage::snapshot::Snapshot;
use sluice_storage::table::Table;

use self::pruning::FileStatistics;
use self::storage_scan::{StorageScan, StorageScanExec, FILE_COLUMN, ROW_COLUMN};

/// Finds the rows that equality filters can match without reading the files (a key index).
#[async_trait]
pub trait RowLocator: Send + Sync + std::fmt::Debug {
    /// The rows that may match `filters` at `snapshot`; `None` if it cannot tell (the scan
    /// reads the files).
    async fn locate(&self, snapshot: &Snapshot, filters: &[Expr]) -> Option<Located>;
}

/// A [`RowLocator`] that found its rows before the scan (whatever its filters).
#[derive(Debug)]
pub struct FoundRows(pub Located);

#[async_trait]
impl RowLocator for FoundRows {
    async fn locate(&self, _snapshot: &Snapshot, _filters: &[Expr]) -> Option<Located> {
        Some(self.0.clone())
    }
}

/// Rows a [`RowLocator`] found, with the values of the key columns it found them by.
#[derive(Debug, Default, Clone)]
pub struct Located {
    /// Row positions by file path (as logged).
    pub rows: HashMap<String, RoaringTreemap>,
    /// The key columns (table column names).
    pub columns: Vec<String>,
    /// Per found row: its path, its position, and (one array per key column) its key.
    pub paths: Vec<String>,
    pub row_numbers: Vec<u64>,
    pub keys: Vec<arrow::array::ArrayRef>,
}

impl Located {
    /// The found rows as a batch of `schema` (projected table columns, then the hidden ones),
    /// if it asks for key columns and hidden columns only: then no file needs reading.
    fn as_batch(&self, schema: &SchemaRef) -> Option<arrow::array::RecordBatch> {
        let mut columns: Vec<arrow::array::ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let column: arrow::array::ArrayRef = match field.name().as_str() {
                FILE_COLUMN => Arc::new(arrow::array::StringArray::from_iter_values(&self.paths)),
                ROW_COLUMN => Arc::new(arrow::array::UInt64Array::from(self.row_numbers.clone())),
                name => {
                    let at = self.columns.iter().position(|c| c == name)?;
                    let keys = self.keys.get(at)?;
                    if keys.data_type() != field.data_type() {
                        return None;
                    }
                    keys.clone()
                }
            };
            columns.push(column);
        }
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(self.paths.len()));
        arrow::array::RecordBatch::try_new_with_options(schema.clone(), columns, &options).ok()
    }
}

/// A table (at one snapshot) as DataFusion sees it.
#[derive(Debug)]
pub struct SluiceTable {
    table: Arc<Table>,
    snapshot: Arc<Snapshot>,
    schema: SchemaRef,
    /// Whether the hidden DML columns are part of the schema.
    hidden_columns: bool,
    options: ScanOptions,
    locator: Option<Arc<dyn RowLocator>>,
}

impl SluiceTable {
    pub fn new(table: Arc<Table>, snapshot: Arc<Snapshot>, options: ScanOptions) -> Self {
        let schema = snapshot.arrow_schema();
        Self { table, snapshot, schema, hidden_columns: false, options, locator: None }
    }

    /// The same table, whose scans read only the rows `locator` finds when it can.
    pub fn with_locator(mut self, locator: Arc<dyn RowLocator>) -> Self {
        self.locator = Some(locator);
        self
    }

    /// The same table with the hidden `__sluice_file` and `__sluice_row` columns (for DML).
    pub fn with_hidden_columns(mut self) -> Self {
        let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(FILE_COLUMN, ArrowType::Utf8, false));
        fields.push(Field::new(ROW_COLUMN, ArrowType::UInt64, false));
        self.schema = Arc::new(Schema::new(fields));
        self.hidden_columns = true;
        self
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The files that may hold rows matching `filters`.
    fn select_files(&self, state: &dyn Session, filters: &[Expr], limit: Option<usize>) -> DfResult<Vec<Arc<Add>>> {
        let files = self.snapshot.files_sorted();
        let table_schema = self.snapshot.arrow_schema();
        let usable: Vec<Expr> = filters.iter().filter(|f| !references_hidden(f)).cloned().collect();
        let mut selected = match conjunction(usable) {
            Some(predicate) if !files.is_empty() => {
                let df_schema = DFSchema::try_from(table_schema.as_ref().clone())?;
                let physical = state.create_physical_expr(predicate, &df_schema)?;
                match PruningPredicateBuilder::new().with_file_schema(table_schema.clone()).build(physical) {
                    Some(pruning) => {
                        let statistics = FileStatistics::new(
                            &files,
                            self.snapshot.schema(),
                            table_schema,
                            self.snapshot.partition_columns(),
                        );
                        let keep = pruning.prune(&statistics)?;
                        files.into_iter().zip(keep).filter_map(|(f, k)| k.then_some(f)).collect()
                    }
                    None => files,
                }
            }
            _ => files,
        };
        // Without filters, a limit needs only enough files to cover it.
        if let (Some(limit), true) = (limit, filters.is_empty()) {
            let mut rows = 0usize;
            let mut needed = 0;
            for file in &selected {
                needed += 1;
                match file.num_records() {
                    Some(n) => {
                        rows += n.max(0) as usize
                            - file.deletion_vector.as_ref().map_or(0, |d| d.cardinality.max(0) as usize)
                    }
                    None => {
                        needed = selected.len();
                        break;
                    }
                }
                if rows >= limit {
                    break;
                }
            }
            selected.truncate(needed);
        }
        Ok(selected)
    }

    /// The plan that reads only the rows the key index locates for `filters`, if it locates
    /// them (the filters apply again above): none if no row has the key, the index's own
    /// columns if they are all the projection asks for, else those rows of their files. It
    /// needs no session: a point statement runs it without planning (`crate::sql::point`).
    pub(crate) async fn located_scan(
        &self,
        projection: &[usize],
        filters: &[Expr],
        target_partitions: usize,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(locator) = &self.locator else { return Ok(None) };
        let Some(located) = locator.locate(&self.snapshot, filters).await else { return Ok(None) };
        let schema = Arc::new(self.schema.project(projection)?);
        if located.rows.is_empty() {
            return Ok(Some(Arc::new(datafusion::physical_plan::empty::EmptyExec::new(schema))));
        }
        if let Some(batch) = located.as_batch(&schema) {
            let source = datafusion::datasource::memory::MemorySourceConfig::try_new(&[vec![batch]], schema, None)?;
            return Ok(Some(DataSourceExec::from_data_source(source)));
        }
        let mut files: Vec<Arc<Add>> =
            located.rows.keys().filter_map(|path| self.snapshot.file_by_path(path)).cloned().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Some(self.storage_scan(target_partitions, projection, files, Some(located.rows))?))
    }

    fn storage_scan(
        &self,
        target_partitions: usize,
        projection: &[usize],
        files: Vec<Arc<Add>>,
        only: Option<HashMap<String, RoaringTreemap>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let layout = TableLayout::from_snapshot(&self.snapshot);
        let table_columns = self.snapshot.schema().fields.len();
        let fields = projection
            .iter()
            .filter(|&&i| i < table_columns)
            .filter_map(|&i| layout.schema.fields.get(i).cloned())
            .collect();
        let with_file = projection.iter().any(|&i| self.schema.field(i).name() == FILE_COLUMN);
        let with_row = projection.iter().any(|&i| self.schema.field(i).name() == ROW_COLUMN);
        // Output: table columns in projection order, then the hidden ones (file, row).
        let mut order: Vec<usize> = projection.iter().copied().filter(|&i| i < table_columns).collect();
        order.extend(projection.iter().copied().filter(|&i| i >= table_columns));
        if order != projection {
            return Err(DataFusionError::Plan("hidden columns must come last in a projection".into()));
        }
        let schema = Arc::new(self.schema.project(projection)?);
        let scan = StorageScan {
            store: self.table.store().clone(),
            layout,
            fields,
            with_file,
            with_row,
            files,
            only: only.map(|rows| rows.into_iter().map(|(path, rows)| (path, Arc::new(rows))).collect()),
            options: self.options.clone(),
            schema,
        };
        Ok(Arc::new(StorageScanExec::new(scan, target_partitions)))
    }

    async fn parquet_scan(
        &self,
        state: &dyn Session,
        projection: &[usize],
        filters: &[Expr],
        limit: Option<usize>,
        files: Vec<Arc<Add>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let table_schema = self.snapshot.arrow_schema();
        let partition_columns = self.snapshot.partition_columns();
        let is_partition = |name: &str| partition_columns.iter().any(|p| p.eq_ignore_ascii_case(name));
        let data_indexes: Vec<usize> =
            (0..table_schema.fields().len()).filter(|&i| !is_partition(table_schema.field(i).name())).collect();
        let partition_indexes: Vec<usize> =
            (0..table_schema.fields().len()).filter(|&i| is_partition(table_schema.field(i).name())).collect();
        let file_schema = Arc::new(table_schema.project(&data_indexes)?);
        let partition_fields: Vec<_> =
            partition_indexes.iter().filter_map(|&i| table_schema.fields().get(i).cloned()).collect();
        // DataFusion orders columns as file columns, then partition columns.
        let scan_order: Vec<usize> = data_indexes.iter().chain(&partition_indexes).copied().collect();
        let scan_projection: Vec<usize> =
            projection.iter().map(|i| scan_order.iter().position(|j| j == i).unwrap_or(0)).collect();
        let scan_schema = Arc::new(table_schema.project(&scan_order)?);

        let store = self.table.store();
        let url = object_store_url(store);
        state.runtime_env().register_object_store(url.as_ref(), store.object_store());

        let mut source = ParquetSource::new(
            TableSchema::builder(file_schema).with_table_partition_cols(partition_fields.clone()).build(),
        )
        .with_table_parquet_options(state.table_options().parquet.clone());
        if let Some(predicate) = conjunction(filters.to_vec()) {
            let df_schema = DFSchema::try_from(scan_schema.as_ref().clone())?;
            source = source.with_predicate(state.create_physical_expr(predicate, &df_schema)?);
        }

        let mut partitioned = Vec::with_capacity(files.len());
        let mut total_rows = 0usize;
        let mut total_bytes = 0usize;
        for add in &files {
            let relative = sluice_storage::store::decode_path(store, &add.path);
            let meta = ObjectMeta {
                location: store.path(&relative),
                last_modified: chrono::DateTime::from_timestamp_millis(add.modification_time).unwrap_or_default(),
                size: add.size.max(0) as u64,
                e_tag: None,
                version: None,
            };
            let mut values = Vec::with_capacity(partition_fields.len());
            for field in &partition_fields {
                let physical = self
                    .snapshot
                    .schema()
                    .field(field.name())
                    .map(|f| f.physical_name().to_string())
                    .unwrap_or_else(|| field.name().clone());
                let value = add.partition_values.get(&physical).cloned().flatten();
                let array = partition_column(value.as_deref(), field.data_type(), 1, &self.options.partition)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                values.push(ScalarValue::try_from_array(&array, 0)?);
            }
            let mut file = PartitionedFile::new_from_meta(meta).with_partition_values(values);
            if let Some(dv) = &add.deletion_vector {
                let deleted = sluice_storage::scan::read_dv(store, dv, &add.path)
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                file = file.with_extension(self.access_plan(add, &relative, &deleted).await?);
            }
            total_rows += add.num_records().unwrap_or(0).max(0) as usize;
            total_bytes += add.size.max(0) as usize;
            partitioned.push(file);
        }
        let groups = split_into_groups(partitioned, state.config().target_partitions());
        let mut statistics = Statistics::new_unknown(&scan_schema);
        statistics.num_rows = datafusion::common::stats::Precision::Inexact(total_rows);
        statistics.total_byte_size = datafusion::common::stats::Precision::Inexact(total_bytes);
        let config = FileScanConfigBuilder::new(url, Arc::new(source))
            .with_file_groups(groups)
            .with_projection_indices(Some(scan_projection))?
            .with_limit(limit)
            .with_statistics(statistics)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }

    /// Row selections that skip a file's deleted rows, row group by row group.
    async fn access_plan(
        &self,
        add: &Add,
        relative: &str,
        deleted: &roaring::RoaringTreemap,
    ) -> DfResult<ParquetAccessPlan> {
        let store = self.table.store();
        let mut reader =
            sluice_storage::store::ParquetFile::new(store, store.path(relative), u64::try_from(add.size).ok());
        let metadata = reader.get_metadata(None).await?;
        let mut plan = Vec::with_capacity(metadata.num_row_groups());
        let mut start = 0u64;
        let mut deleted_rows = deleted.iter().peekable();
        for row_group in metadata.row_groups() {
            let rows = row_group.num_rows().max(0) as u64;
            let end = start + rows;
            let mut in_group: Vec<u64> = Vec::new();
            while let Some(row) = deleted_rows.next_if(|r| *r < end) {
                if row >= start {
                    in_group.push(row);
                }
            }
            let access = if in_group.is_empty() {
                RowGroupAccess::Scan
            } else if in_group.len() as u64 == rows {
                RowGroupAccess::Skip
            } else {
                let mut selectors = Vec::new();
                let mut next = start;
                for row in in_group {
                    if row > next {
                        selectors.push(RowSelector::select((row - next) as usize));
                    }
                    selectors.push(RowSelector::skip(1));
                    next = row + 1;
                }
                if next < end {
                    selectors.push(RowSelector::select((end - next) as usize));
                }
                RowGroupAccess::Selection(RowSelection::from(selectors))
            };
            plan.push(access);
            start = end;
        }
        Ok(ParquetAccessPlan::new(plan))
    }
}

fn references_hidden(expr: &Expr) -> bool {
    expr.column_refs().iter().any(|c| c.name == FILE_COLUMN || c.name == ROW_COLUMN)
}

/// A URL naming a table's object store inside DataFusion's registry (one per store).
fn object_store_url(store: &sluice_storage::store::TableStore) -> ObjectStoreUrl {
    let address = Arc::as_ptr(&store.object_store()) as *const () as usize;
    ObjectStoreUrl::parse(format!("sluice://store-{address:x}")).unwrap_or_else(|_| ObjectStoreUrl::local_filesystem())
}

/// Deals files into `groups` groups of about equal size (largest first).
fn split_into_groups(mut files: Vec<PartitionedFile>, groups: usize) -> Vec<FileGroup> {
    let groups = groups.clamp(1, files.len().max(1));
    files.sort_by_key(|f| std::cmp::Reverse(f.object_meta.size));
    let mut buckets: Vec<(u64, Vec<PartitionedFile>)> = (0..groups).map(|_| (0, Vec::new())).collect();
    for file in files {
        if let Some(bucket) = buckets.iter_mut().min_by_key(|b| b.0) {
            bucket.0 += file.object_meta.size;
            bucket.1.push(file);
        }
    }
    buckets.into_iter().filter(|b| !b.1.is_empty()).map(|b| FileGroup::new(b.1)).collect()
}

#[async_trait]
impl TableProvider for SluiceTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters.iter().map(|_| TableProviderFilterPushDown::Inexact).collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let usable: Vec<Expr> = filters.iter().filter(|f| !references_hidden(f)).cloned().collect();
        if let Some(plan) = self.located_scan(&projection, &usable, state.config().target_partitions()).await? {
            return Ok(plan);
        }
        // A transaction block's read that depends on more rows than keys name: its commit
        // must not be moved past other writers' (see sluice_storage::stage::Rebase).
        self.table.note_whole_read();
        let files = self.select_files(state, filters, limit)?;
        if files.is_empty() {
            // No file to read: an empty plan with one partition (a file scan of no files has
            // none, which operators that need a single partition, e.g. ORDER BY ... LIMIT, refuse).
            let schema = Arc::new(self.schema.project(&projection)?);
            return Ok(Arc::new(datafusion::physical_plan::empty::EmptyExec::new(schema)));
        }
        let table_columns = self.snapshot.schema().fields.len();
        let needs_hidden = projection.iter().any(|&i| i >= table_columns);
        let mapped = self.snapshot.column_mapping_mode() != ColumnMappingMode::None;
        if needs_hidden || mapped || self.hidden_columns {
            return self.storage_scan(state.config().target_partitions(), &projection, files, None);
        }
        self.parquet_scan(state, &projection, &usable, limit, files).await
    }
}
