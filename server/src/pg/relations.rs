//! What `pg_catalog` says about Sluice's tables beyond their Arrow schemas: keys, indexes and
//! constraints (`pg_index`, `pg_constraint` with CHECK and FOREIGN KEY constraints, `pg_indexes`,
//! and each index's own `pg_class` row), column defaults and identity (`pg_attrdef`,
//! `pg_attribute.atthasdef` and `attidentity`), and the functions that print them
//! (`pg_get_indexdef`, `pg_get_constraintdef`, `pg_get_expr`, a `regclass`'s name). This is what
//! psql's `\d t` and `\di`, and the drivers' reflection of keys, read.
//!
//! It also fills in what datafusion-pg-catalog's own catalogs lack where clients look: the
//! sequences, standalone and of serial and identity columns (`pg_class` rows of relkind `S`,
//! `pg_sequence` and `pg_sequences`, see sequences.rs), each table's and view's row type
//! (`pg_type`, `pg_class.reltype`), `information_schema` in `pg_namespace`, PostgreSQL's
//! `relkind` for the catalogs themselves, and the session's settings in `pg_settings` (pgjdbc's
//! `DatabaseMetaData` reads all of them).
//!
//! Tables keep the OIDs datafusion-pg-catalog gives them (read from its own `pg_class` and
//! `pg_namespace` in the same query); indexes, constraints, defaults, sequences and row types get
//! OIDs of their own, stable for the session, counted from [`OBJECT_OID_FIRST`] so that they
//! never meet the crate's (which counts up from 16384).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, Int16Array, Int32Array, ListArray, RecordBatch,
    StringArray, StringViewArray,
};
use arrow::datatypes::{DataType, Field, Int16Type, Int32Type, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session as CatalogSession, TableProvider};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::datasource::{MemTable, TableType};
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;
use sluice::keys::{IndexInfo, KeyDef};
use sluice::system::{ForeignKeyInfo, RelationInfo};

use super::settings::Settings;
use super::ServerState;

/// The first OID given to an index, a constraint or a default (2^30).
const OBJECT_OID_FIRST: i32 = 1 << 30;

/// The types that have a collation (text, varchar, char), and the default collation's OID.
const TEXT_OID: i32 = 25;
const VARCHAR_OID: i32 = 1043;
const BPCHAR_OID: i32 = 1042;
const DEFAULT_COLLATION_OID: i32 = 100;

/// The OID of the btree access method (`pg_am`), which every Sluice index reports.
const BTREE_AM_OID: i32 = 403;

/// The catalogs this module answers.
const PG_CLASS: &str = "pg_class";
const PG_ATTRIBUTE: &str = "pg_attribute";
const PG_ATTRDEF: &str = "pg_attrdef";
const PG_INDEX: &str = "pg_index";
const PG_CONSTRAINT: &str = "pg_constraint";
const PG_INDEXES: &str = "pg_indexes";
const PG_VIEWS: &str = "pg_views";
const PG_SEQUENCE: &str = "pg_sequence";
const PG_SEQUENCES: &str = "pg_sequences";
const PG_TABLES: &str = "pg_tables";
const PG_SETTINGS: &str = "pg_settings";
const PG_NAMESPACE: &str = "pg_namespace";
const PG_TYPE: &str = "pg_type";
const PG_PROC: &str = "pg_proc";
const PG_STAT_ACTIVITY: &str = "pg_stat_activity";
const PG_DESCRIPTION: &str = "pg_description";
const PG_ENUM: &str = "pg_enum";

/// `pg_catalog`'s OID, PostgreSQL's and datafusion-pg-catalog's.
const PG_CATALOG_OID: i32 = 11;

/// `information_schema`'s OID in the PostgreSQL catalog data datafusion-pg-catalog ships (its
/// `pg_type` and `pg_proc` rows name it), which its own `pg_namespace` leaves out.
const INFORMATION_SCHEMA_OID: i32 = 13283;

/// The relations of PostgreSQL 15's `pg_catalog` that are views (`relkind` `v`), beside the
/// statistics views (`pg_stat_*`, `pg_statio_*`); the others are tables. datafusion-pg-catalog
/// makes a view of every catalog it computes, and a table of every one it stores.
const PG_CATALOG_VIEWS: &[&str] = &[
    "pg_available_extension_versions",
    "pg_available_extensions",
    "pg_backend_memory_contexts",
    "pg_config",
    "pg_cursors",
    "pg_file_settings",
    "pg_group",
    "pg_hba_file_rules",
    "pg_ident_file_mappings",
    "pg_indexes",
    "pg_locks",
    "pg_matviews",
    "pg_policies",
    "pg_prepared_statements",
    "pg_prepared_xacts",
    "pg_publication_tables",
    "pg_replication_origin_status",
    "pg_replication_slots",
    "pg_roles",
    "pg_rules",
    "pg_seclabels",
    "pg_sequences",
    "pg_settings",
    "pg_shadow",
    "pg_shmem_allocations",
    "pg_tables",
    "pg_timezone_abbrevs",
    "pg_timezone_names",
    "pg_user",
    "pg_user_mappings",
    "pg_views",
];

/// PostgreSQL's `relkind` of a relation of `pg_catalog`.
fn catalog_relkind(name: &str) -> &'static str {
    let statistics = (name.starts_with("pg_stat_") || name.starts_with("pg_statio_") || name.starts_with("pg_stats"))
        && !name.starts_with("pg_statistic");
    if statistics || PG_CATALOG_VIEWS.contains(&name) {
        "v"
    } else {
        "r"
    }
}

/// Settings PostgreSQL fixes when it is built, which `pg_settings` lists beside the session's
/// own: pgjdbc reads `max_index_keys` to number the columns of foreign keys. (Sluice's keys have
/// no such limit; these are PostgreSQL's values, which clients size their queries by.)
const BUILT_IN_SETTINGS: &[(&str, &str)] = &[("max_index_keys", "32"), ("max_function_args", "100")];

/// What kind of object an OID of this module stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ObjectKind {
    Index,
    /// A key's or CHECK's constraint (a key's has its index's name).
    Constraint,
    /// A FOREIGN KEY constraint (OIDs of their own: its name may be a key's of the parent too).
    ForeignKey,
    Default,
    /// The sequence of a serial or identity column.
    Sequence,
    /// A standalone sequence (`CREATE SEQUENCE`).
    StandaloneSequence,
    /// The composite type of a table's or view's rows, and the array type of it.
    RowType,
    RowArrayType,
}

/// An index's definition, for `pg_get_indexdef`.
#[derive(Debug, Clone)]
struct IndexText {
    definition: String,
    /// With `pretty`: the table named without its schema where the search path finds it.
    pretty: String,
    columns: Vec<String>,
}

/// The session's OIDs of indexes, constraints and defaults, and what they define.
#[derive(Debug, Default)]
pub struct Objects {
    state: Mutex<ObjectsState>,
}

#[derive(Debug, Default)]
struct ObjectsState {
    next: i32,
    oids: HashMap<(ObjectKind, String, String, String), i32>,
    indexes: HashMap<i32, IndexText>,
    constraints: HashMap<i32, String>,
    /// `pg_get_constraintdef(oid, true)` where it differs from the above (CHECK constraints: as
    /// written, not with every operator parenthesized).
    pretty_constraints: HashMap<i32, String>,
    /// Column defaults by table OID and `attnum`.
    defaults: HashMap<(i32, i64), String>,
    /// Their pretty forms where they differ (generation expressions, as written).
    pretty_defaults: HashMap<(i32, i64), String>,
    /// View definitions (`pg_get_viewdef`'s text) by OID, and by name (`name` in `public`,
    /// `schema.name` everywhere).
    views: HashMap<i32, String>,
    view_names: HashMap<String, String>,
    /// Schema names by OID, as the last `pg_namespace` scan gave them.
    namespaces: HashMap<i32, String>,
    /// Table sizes in bytes by OID, as the last `pg_class` scan found them.
    sizes: HashMap<i32, i64>,
    /// Relation names as a `regclass` prints them, by OID, as the last `pg_class` scan found them.
    relation_names: HashMap<i32, String>,
    /// The schema of each relation of Sluice's (tables, views, indexes, sequences), by OID, as
    /// the last `pg_class` scan found them (for `pg_table_is_visible`).
    relation_schemas: HashMap<i32, String>,
    /// The column names of Sluice's tables (`attnum` 1 first), by OID, as the last scan found them.
    attribute_names: HashMap<i32, Vec<String>>,
    /// Each relation's OID by schema and name (what `sluice_regclass_oid` looks up), as the last
    /// `pg_class` scan found them.
    relation_oids: HashMap<(String, String), i32>,
    /// The sequence of each SERIAL or identity column by schema, table and column, as
    /// `pg_get_serial_sequence` prints it, as the last scan found them.
    serial_sequences: HashMap<(String, String, String), String>,
    /// The comments on Sluice's tables, columns and constraints, as the last scan found them.
    comments: super::descriptions::Comments,
}

impl Objects {
    /// The OID of an object of `table` (in `schema`) named `name`, the same every time it is asked.
    fn oid(&self, kind: ObjectKind, schema: &str, table: &str, name: &str) -> i32 {
        let mut state = self.state.lock();
        let key = (kind, schema.to_string(), table.to_string(), name.to_string());
        if let Some(oid) = state.oids.get(&key) {
            return *oid;
        }
        let oid = OBJECT_OID_FIRST.saturating_add(state.next);
        state.next = state.next.saturating_add(1);
        state.oids.insert(key, oid);
        oid
    }

    /// The comments the session's last catalog scan found (see descriptions.rs).
    pub(super) fn comments(&self) -> super::descriptions::Comments {
        self.state.lock().comments.clone()
    }

    fn remember_check(&self, oid: i32, expression: &str) {
        self.remember_constraint(oid, format!("CHECK ({})", super::deparse::check_expression(expression)));
        let pretty = format!("CHECK ({})", super::deparse::pretty_check_expression(expression));
        self.state.lock().pretty_constraints.insert(oid, pretty);
    }

    /// What `pg_get_constraintdef` answers for the constraint `oid`.
    fn remember_constraint(&self, oid: i32, definition: String) {
        self.state.lock().constraints.insert(oid, definition);
    }

    fn remember_namespaces(&self, namespaces: &HashMap<i32, String>) {
        self.state.lock().namespaces.clone_from(namespaces);
    }

    fn remember_view(&self, oid: i32, schema: &str, name: &str, definition: String) {
        let mut state = self.state.lock();
        if schema == "public" {
            state.view_names.insert(name.to_string(), definition.clone());
        }
        state.view_names.insert(format!("{schema}.{name}"), definition.clone());
        state.views.insert(oid, definition);
    }

    fn remember_default(&self, relation: i32, number: i16, default: &str) {
        self.state.lock().defaults.insert((relation, i64::from(number)), default.to_string());
    }

    fn remember(&self, index: &IndexInfo, index_oid: i32, constraint_oid: Option<i32>) {
        let mut state = self.state.lock();
        let definition = index.definition();
        let pretty = match index.schema.as_str() {
            "public" => {
                let qualified = format!(" ON public.{} USING ", sluice::names::quoted_if_needed(&index.table));
                definition.replacen(
                    &qualified,
                    &format!(" ON {} USING ", sluice::names::quoted_if_needed(&index.table)),
                    1,
                )
            }
            _ => definition.clone(),
        };
        let columns = index.def.columns.iter().chain(&index.def.include).cloned().collect();
        let text = IndexText { definition, pretty, columns };
        state.indexes.insert(index_oid, text);
        if let (Some(oid), Some(definition)) = (constraint_oid, index.constraint_definition()) {
            state.constraints.insert(oid, definition);
        }
    }
}

/// `pg_catalog` with this module's catalogs in place of datafusion-pg-catalog's (which has no
/// keys, indexes or defaults), and `pg_indexes`, which it lacks.
pub struct PgCatalogOverlay {
    inner: Arc<dyn SchemaProvider>,
    server: Arc<ServerState>,
    /// The warehouse's tables and views as the session sees them (with its block's own).
    view: sluice::CatalogView,
    /// The session's connection in `pg_stat_activity`.
    connection: u64,
    objects: Arc<Objects>,
    settings: Arc<Mutex<Settings>>,
}

impl PgCatalogOverlay {
    pub fn new(
        inner: Arc<dyn SchemaProvider>,
        server: Arc<ServerState>,
        view: sluice::CatalogView,
        connection: u64,
        objects: Arc<Objects>,
        settings: Arc<Mutex<Settings>>,
    ) -> Self {
        Self { inner, server, view, connection, objects, settings }
    }
}

impl std::fmt::Debug for PgCatalogOverlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgCatalogOverlay")
    }
}

#[async_trait]
impl SchemaProvider for PgCatalogOverlay {
    fn table_names(&self) -> Vec<String> {
        let mut names = self.inner.table_names();
        for own in [PG_INDEXES, PG_VIEWS, PG_STAT_ACTIVITY, PG_SEQUENCES] {
            if !names.iter().any(|n| n == own) {
                names.push(own.into());
            }
        }
        names
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let name = name.to_ascii_lowercase();
        let catalog = match name.as_str() {
            PG_CLASS | PG_ATTRIBUTE => match self.inner.table(&name).await? {
                Some(table) => Catalog::Extended(table),
                None => return Ok(None),
            },
            PG_ATTRDEF => Catalog::Attrdef,
            PG_INDEX => Catalog::Index,
            PG_CONSTRAINT => Catalog::Constraint,
            PG_INDEXES => Catalog::Indexes,
            PG_STAT_ACTIVITY => Catalog::Activity,
            PG_VIEWS => Catalog::Views,
            PG_SEQUENCE => Catalog::Sequence,
            PG_SEQUENCES => Catalog::Sequences,
            PG_TABLES => match self.inner.table(&name).await? {
                Some(table) => Catalog::Tables(table),
                None => return Ok(None),
            },
            PG_SETTINGS => match self.inner.table(&name).await? {
                Some(table) => Catalog::Settings(table.schema()),
                None => return Ok(None),
            },
            PG_NAMESPACE => match self.inner.table(&name).await? {
                Some(table) => Catalog::Namespaces(table),
                None => return Ok(None),
            },
            PG_TYPE => match self.inner.table(&name).await? {
                Some(table) => Catalog::Types(table),
                None => return Ok(None),
            },
            PG_PROC => match self.inner.table(&name).await? {
                Some(table) => Catalog::Procs(table),
                None => return Ok(None),
            },
            PG_DESCRIPTION => match self.inner.table(&name).await? {
                Some(table) => Catalog::Descriptions(table),
                None => return Ok(None),
            },
            PG_ENUM => match self.inner.table(&name).await? {
                Some(table) => Catalog::Enums(table.schema()),
                None => return Ok(None),
            },
            _ => return self.inner.table(&name).await,
        };
        let schema = match &catalog {
            Catalog::Extended(table) if name == PG_CLASS => with_class_options(&table.schema()),
            Catalog::Extended(table) => table.schema(),
            Catalog::Attrdef => attrdef_schema(),
            Catalog::Index => index_schema(),
            Catalog::Constraint => constraint_schema(),
            Catalog::Indexes => indexes_schema(),
            Catalog::Views => views_schema(),
            Catalog::Sequence => super::sequences::pg_sequence_schema(),
            Catalog::Sequences => super::sequences::pg_sequences_schema(),
            Catalog::Tables(table)
            | Catalog::Namespaces(table)
            | Catalog::Types(table)
            | Catalog::Descriptions(table) => table.schema(),
            Catalog::Settings(schema) | Catalog::Enums(schema) => schema.clone(),
            Catalog::Procs(table) => super::procs::schema(&table.schema()),
            Catalog::Activity => super::activity::schema(),
        };
        Ok(Some(Arc::new(Described {
            name,
            catalog,
            schema,
            pg_catalog: self.inner.clone(),
            server: self.server.clone(),
            view: self.view.clone(),
            connection: self.connection,
            objects: self.objects.clone(),
            settings: self.settings.clone(),
        })))
    }

    fn table_exist(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case(PG_INDEXES)
            || name.eq_ignore_ascii_case(PG_VIEWS)
            || name.eq_ignore_ascii_case(PG_STAT_ACTIVITY)
            || name.eq_ignore_ascii_case(PG_SEQUENCES)
            || self.inner.table_exist(name)
    }

    async fn table_type(&self, name: &str) -> DfResult<Option<TableType>> {
        if name.eq_ignore_ascii_case(PG_INDEXES)
            || name.eq_ignore_ascii_case(PG_VIEWS)
            || name.eq_ignore_ascii_case(PG_STAT_ACTIVITY)
            || name.eq_ignore_ascii_case(PG_SEQUENCES)
        {
            return Ok(Some(TableType::View));
        }
        self.inner.table_type(name).await
    }
}

enum Catalog {
    /// datafusion-pg-catalog's table with this module's rows or columns added (pg_class,
    /// pg_attribute).
    Extended(Arc<dyn TableProvider>),
    Attrdef,
    Index,
    Constraint,
    Indexes,
    /// `pg_views`: the warehouse's views with their definitions.
    Views,
    /// `pg_sequence` and `pg_sequences` (see sequences.rs).
    Sequence,
    Sequences,
    /// datafusion-pg-catalog's `pg_tables` without the views (which it lists as tables).
    Tables(Arc<dyn TableProvider>),
    /// `pg_settings` (datafusion-pg-catalog's columns): the session's settings.
    Settings(SchemaRef),
    /// datafusion-pg-catalog's `pg_namespace` with `information_schema`.
    Namespaces(Arc<dyn TableProvider>),
    /// datafusion-pg-catalog's `pg_type` with the row types of the warehouse's tables and views.
    Types(Arc<dyn TableProvider>),
    /// datafusion-pg-catalog's `pg_proc` with its array columns as arrays (see procs.rs).
    Procs(Arc<dyn TableProvider>),
    /// `pg_stat_activity`: this server's connections (see activity.rs).
    Activity,
    /// `pg_enum` (datafusion-pg-catalog's columns): the labels of the enum types (see enums.rs).
    Enums(SchemaRef),
    /// datafusion-pg-catalog's `pg_description` (the built-in objects') with the comments of
    /// Sluice's tables, columns and constraints (see descriptions.rs).
    Descriptions(Arc<dyn TableProvider>),
}

/// One of this module's catalogs: its rows are made when it is scanned.
struct Described {
    name: String,
    catalog: Catalog,
    schema: SchemaRef,
    pg_catalog: Arc<dyn SchemaProvider>,
    server: Arc<ServerState>,
    view: sluice::CatalogView,
    connection: u64,
    objects: Arc<Objects>,
    settings: Arc<Mutex<Settings>>,
}

impl std::fmt::Debug for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Described({})", self.name)
    }
}

#[async_trait]
impl TableProvider for Described {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn CatalogSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let catalog_table = |name: &'static str| async move {
            let table = self.pg_catalog.table(name).await?;
            table.ok_or_else(|| DataFusionError::Internal(format!("pg_catalog lacks {name}")))
        };
        // The catalogs that need neither the warehouse's tables nor pg_class.
        let own = match &self.catalog {
            Catalog::Settings(_) => Some(vec![settings_rows(&self.schema, &self.settings.lock())?]),
            Catalog::Enums(_) => Some(vec![super::enums::pg_enum_rows(&self.schema, &self.view.enums())?]),
            Catalog::Namespaces(inner) => {
                let mut batches = rows(state, inner).await?;
                batches.push(information_schema_namespace(&self.schema, &batches)?);
                Some(batches)
            }
            Catalog::Procs(inner) => Some(super::procs::rows(&self.schema, &rows(state, inner).await?)?),
            Catalog::Activity => {
                Some(vec![super::activity::rows(&self.schema, &self.server.activity, self.connection)?])
            }
            _ => None,
        };
        if let Some(batches) = own {
            return MemTable::try_new(self.schema.clone(), vec![batches])?
                .scan(state, projection, filters, limit)
                .await;
        }
        // pg_namespace first: reading pg_class gives OIDs to the schemas it names. A scan of
        // pg_class reads the crate's rows once, for the OIDs and for its own rows.
        let namespaces = rows(state, &catalog_table(PG_NAMESPACE).await?).await?;
        let classes = match &self.catalog {
            Catalog::Extended(inner) if self.name == PG_CLASS => rows(state, inner).await?,
            _ => rows(state, &catalog_table(PG_CLASS).await?).await?,
        };
        if let Catalog::Types(inner) = &self.catalog {
            let mut batches = rows(state, inner).await?;
            batches.push(row_types(&self.schema, &namespaces, &classes, &self.objects)?);
            let schemas = namespace_names(&namespaces)?.into_iter().map(|(oid, name)| (name, oid)).collect();
            batches.push(super::enums::pg_type_rows(&self.schema, &schemas, &self.view.enums())?);
            return MemTable::try_new(self.schema.clone(), vec![batches])?
                .scan(state, projection, filters, limit)
                .await;
        }
        let tables = Tables::read(&namespaces, &classes, &self.view, &self.objects).await?;
        let batches = match &self.catalog {
            Catalog::Extended(_) if self.name == PG_CLASS => {
                let mut batches = Vec::with_capacity(classes.len() + 1);
                for batch in &classes {
                    let batch = tables.mark_kinds_and_row_types(&tables.mark_indexed(batch)?, &self.objects)?;
                    batches.push(with_null_columns(&self.schema, &batch)?);
                }
                batches.push(tables.index_classes(&self.schema, &self.objects)?);
                batches.push(tables.sequence_classes(&self.schema)?);
                batches
            }
            Catalog::Extended(inner) => {
                let mut batches = rows(state, inner).await?;
                for batch in &mut batches {
                    *batch = tables.mark_defaults(batch)?;
                }
                batches
            }
            Catalog::Attrdef => vec![tables.attrdef(&self.schema, &self.objects)?],
            Catalog::Index => vec![tables.index(&self.schema, &self.objects)?],
            Catalog::Constraint => vec![tables.constraint(&self.schema, &self.objects)?],
            Catalog::Indexes => vec![tables.indexes(&self.schema)?],
            Catalog::Views => vec![views(&self.schema, &self.view)?],
            Catalog::Sequence => vec![super::sequences::pg_sequence_rows(&self.schema, &tables.sequences)?],
            Catalog::Sequences => {
                vec![super::sequences::pg_sequences_rows(&self.schema, &tables.sequences, "sluice")?]
            }
            Catalog::Descriptions(inner) => {
                let mut batches = rows(state, inner).await?;
                batches.push(super::descriptions::rows(&self.schema, &self.objects.comments())?);
                batches
            }
            Catalog::Settings(_)
            | Catalog::Enums(_)
            | Catalog::Namespaces(_)
            | Catalog::Types(_)
            | Catalog::Procs(_)
            | Catalog::Activity => vec![],
            Catalog::Tables(inner) => {
                let views: HashSet<(String, String)> =
                    self.view.views().into_iter().map(|v| (v.schema, v.name)).collect();
                let mut batches = rows(state, inner).await?;
                for batch in &mut batches {
                    *batch = without_views(batch, &views)?;
                }
                batches
            }
        };
        MemTable::try_new(self.schema.clone(), vec![batches])?.scan(state, projection, filters, limit).await
    }
}

/// Schema names by OID, from `pg_namespace`'s rows.
fn namespace_names(namespaces: &[RecordBatch]) -> DfResult<HashMap<i32, String>> {
    let mut names = HashMap::new();
    for batch in namespaces {
        let (oids, nspnames) = (int32_column(batch, "oid")?, text_column(batch, "nspname")?);
        for row in 0..batch.num_rows() {
            names.insert(oids.value(row), nspnames.value(row).to_string());
        }
    }
    Ok(names)
}

/// `information_schema`'s `pg_namespace` row, unless `batches` have it.
fn information_schema_namespace(schema: &SchemaRef, batches: &[RecordBatch]) -> DfResult<RecordBatch> {
    let names = namespace_names(batches)?;
    if names.values().any(|n| n == "information_schema") {
        return Ok(RecordBatch::new_empty(schema.clone()));
    }
    let values: Vec<(&str, ArrayRef)> = vec![
        ("oid", Arc::new(Int32Array::from(vec![INFORMATION_SCHEMA_OID]))),
        ("nspname", Arc::new(StringArray::from(vec!["information_schema"]))),
        ("nspowner", Arc::new(Int32Array::from(vec![10]))),
    ];
    batch_by_name(schema, 1, values)
}

/// `pg_type`'s rows for the composite type of each table's and view's rows (`typtype` `c`,
/// named as the relation, `typrelid` its `pg_class` row) and for the array type of it, as
/// PostgreSQL makes them with every relation (pgjdbc's `getUDTs` lists them as STRUCTs).
/// The catalogs' own are among datafusion-pg-catalog's rows already.
fn row_types(
    schema: &SchemaRef,
    namespaces: &[RecordBatch],
    classes: &[RecordBatch],
    objects: &Objects,
) -> DfResult<RecordBatch> {
    let names = namespace_names(namespaces)?;
    let mut types: Vec<TypeRow> = Vec::new();
    for batch in classes {
        let (oids, relnames) = (int32_column(batch, "oid")?, text_column(batch, "relname")?);
        let (spaces, kinds) = (int32_column(batch, "relnamespace")?, text_column(batch, "relkind")?);
        for row in 0..batch.num_rows() {
            let Some(space) = names.get(&spaces.value(row)) else { continue };
            let own = spaces.value(row) != PG_CATALOG_OID && space != "information_schema";
            if !own || !matches!(kinds.value(row), "r" | "v" | "m" | "p" | "f") {
                continue;
            }
            let name = relnames.value(row);
            let composite = objects.oid(ObjectKind::RowType, space, name, "");
            let array = objects.oid(ObjectKind::RowArrayType, space, name, "");
            types.push(TypeRow::composite(composite, name, spaces.value(row), oids.value(row), array));
            types.push(TypeRow::array(array, name, spaces.value(row), composite));
        }
    }
    let ints =
        |f: fn(&TypeRow) -> i32| -> ArrayRef { Arc::new(types.iter().map(|t| Some(f(t))).collect::<Int32Array>()) };
    let texts = |f: fn(&TypeRow) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(types.iter().map(f))) };
    let flags = |value: bool| -> ArrayRef { Arc::new(BooleanArray::from(vec![value; types.len()])) };
    let values: Vec<(&str, ArrayRef)> = vec![
        ("oid", ints(|t| t.oid)),
        ("typname", texts(|t| &t.name)),
        ("typnamespace", ints(|t| t.namespace)),
        ("typowner", ints(|_| 10)),
        ("typlen", ints(|_| -1)),
        ("typbyval", flags(false)),
        ("typtype", texts(|t| if t.relation == 0 { "b" } else { "c" })),
        ("typcategory", texts(|t| if t.relation == 0 { "A" } else { "C" })),
        ("typispreferred", flags(false)),
        ("typisdefined", flags(true)),
        ("typdelim", texts(|_| ",")),
        ("typrelid", ints(|t| t.relation)),
        ("typsubscript", texts(|t| if t.relation == 0 { "array_subscript_handler" } else { "-" })),
        ("typelem", ints(|t| t.element)),
        ("typarray", ints(|t| t.array)),
        ("typinput", texts(|t| if t.relation == 0 { "array_in" } else { "record_in" })),
        ("typoutput", texts(|t| if t.relation == 0 { "array_out" } else { "record_out" })),
        ("typreceive", texts(|t| if t.relation == 0 { "array_recv" } else { "record_recv" })),
        ("typsend", texts(|t| if t.relation == 0 { "array_send" } else { "record_send" })),
        ("typmodin", texts(|_| "-")),
        ("typmodout", texts(|_| "-")),
        ("typanalyze", texts(|t| if t.relation == 0 { "array_typanalyze" } else { "-" })),
        ("typalign", texts(|_| "d")),
        ("typstorage", texts(|_| "x")),
        ("typnotnull", flags(false)),
        ("typtypmod", ints(|_| -1)),
    ];
    batch_by_name(schema, types.len(), values)
}

/// A `pg_type` row of [`row_types`]: a relation's composite type (`relation` its OID) or the
/// array type of one (`relation` 0).
struct TypeRow {
    oid: i32,
    name: String,
    namespace: i32,
    relation: i32,
    element: i32,
    array: i32,
}

impl TypeRow {
    fn composite(oid: i32, name: &str, namespace: i32, relation: i32, array: i32) -> Self {
        Self { oid, name: name.to_string(), namespace, relation, element: 0, array }
    }

    fn array(oid: i32, name: &str, namespace: i32, element: i32) -> Self {
        Self { oid, name: format!("_{name}"), namespace, relation: 0, element, array: 0 }
    }
}

/// `pg_settings`' rows: the session's settings (`user` context), then [`BUILT_IN_SETTINGS`]
/// (`internal`, as PostgreSQL lists what it was built with).
fn settings_rows(schema: &SchemaRef, session: &Settings) -> DfResult<RecordBatch> {
    let mut rows: Vec<(String, String, &str)> =
        session.all().into_iter().map(|(name, value)| (name, value, "user")).collect();
    for (name, value) in BUILT_IN_SETTINGS {
        if !rows.iter().any(|(n, _, _)| n.eq_ignore_ascii_case(name)) {
            rows.push((name.to_string(), value.to_string(), "internal"));
        }
    }
    let values: Vec<(&str, ArrayRef)> = vec![
        ("name", Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.clone())))),
        ("setting", Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.clone())))),
        ("context", Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2)))),
    ];
    batch_by_name(schema, rows.len(), values)
}

/// `pg_tables`' rows that are not views.
fn without_views(batch: &RecordBatch, views: &HashSet<(String, String)>) -> DfResult<RecordBatch> {
    let (schemas, names) = (text_column(batch, "schemaname")?, text_column(batch, "tablename")?);
    let keep: BooleanArray = (0..batch.num_rows())
        .map(|row| Some(!views.contains(&(schemas.value(row).to_string(), names.value(row).to_string()))))
        .collect();
    Ok(arrow::compute::filter_record_batch(batch, &keep)?)
}

/// `pg_class` with the columns datafusion-pg-catalog leaves out that clients read
/// (SQLAlchemy's index reflection reads `reloptions`); they are NULL, as PostgreSQL has them for
/// a table without storage options.
fn with_class_options(schema: &SchemaRef) -> SchemaRef {
    let text_array = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for name in ["reloptions", "relacl"] {
        if schema.field_with_name(name).is_err() {
            fields.push(nullable(name, text_array.clone()));
        }
    }
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `batch` with NULL columns for the fields of `schema` that it lacks (at the end).
fn with_null_columns(schema: &SchemaRef, batch: &RecordBatch) -> DfResult<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    for field in schema.fields().iter().skip(columns.len()) {
        columns.push(new_null_array(field.data_type(), batch.num_rows()));
    }
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// Every row of a table provider.
async fn rows(state: &dyn CatalogSession, table: &Arc<dyn TableProvider>) -> DfResult<Vec<RecordBatch>> {
    let plan = table.scan(state, None, &[], None).await?;
    datafusion::physical_plan::collect(plan, state.task_ctx()).await
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> DfResult<&'a ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| DataFusionError::Internal(format!("pg_catalog lacks the column {name}")))
}

fn int32_column<'a>(batch: &'a RecordBatch, name: &str) -> DfResult<&'a Int32Array> {
    column(batch, name)?
        .as_primitive_opt::<Int32Type>()
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog's {name} is not an int4")))
}

fn text_column<'a>(batch: &'a RecordBatch, name: &str) -> DfResult<&'a StringArray> {
    column(batch, name)?
        .as_string_opt::<i32>()
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog's {name} is not text")))
}

/// Sluice's tables with the OIDs this session's catalog gives them.
struct Tables {
    /// Each table's description, its OID and its schema's OID.
    described: Vec<(RelationInfo, i32, i32)>,
    /// Table OID to its place in `described`.
    by_oid: HashMap<i32, usize>,
    /// Schema names by OID.
    schema_names: HashMap<i32, String>,
    /// The OIDs of views (whose columns PostgreSQL never marks NOT NULL).
    views: HashSet<i32>,
    /// Schema and table name to the table's place in `described`.
    by_name: HashMap<(String, String), usize>,
    /// The sequences (standalone and columns'), with their OIDs.
    sequences: Vec<super::sequences::Listed>,
    /// The OIDs of materialized views (`relkind` `m`).
    materialized: HashSet<i32>,
    /// The `pg_type` OIDs of the enum types, by the name their columns carry (see enums.rs).
    enum_oids: HashMap<String, i32>,
}

/// A FOREIGN KEY of a table of [`Tables`] with the table it references (both in `described`).
struct ForeignKeyRow<'a> {
    child: &'a RelationInfo,
    child_oid: i32,
    namespace: i32,
    key: &'a ForeignKeyInfo,
    parent: &'a RelationInfo,
    parent_oid: i32,
}

impl Tables {
    /// Sluice's tables, matched by schema and name to the rows of datafusion-pg-catalog's
    /// `pg_namespace` and `pg_class`.
    async fn read(
        namespaces: &[RecordBatch],
        classes: &[RecordBatch],
        view: &sluice::CatalogView,
        objects: &Objects,
    ) -> DfResult<Self> {
        let schema_oids = namespace_names(namespaces)?;
        objects.remember_namespaces(&schema_oids);
        let mut table_oids = HashMap::new();
        for batch in classes {
            let oids = int32_column(batch, "oid")?;
            let (names, namespaces) = (text_column(batch, "relname")?, int32_column(batch, "relnamespace")?);
            for row in 0..batch.num_rows() {
                if let Some(schema) = schema_oids.get(&namespaces.value(row)) {
                    let key = (schema.clone(), names.value(row).to_string());
                    table_oids.insert(key, (oids.value(row), namespaces.value(row)));
                }
            }
        }
        let mut described = Vec::new();
        for relation in view.relations().await {
            if let Some((oid, namespace)) = table_oids.get(&(relation.schema.clone(), relation.table.clone())) {
                described.push((relation, *oid, *namespace));
            }
        }
        // What `pg_get_viewdef` answers (views have the OIDs of their `pg_class` rows).
        let mut views = HashSet::new();
        let mut view_comments = Vec::new();
        for view in view.views() {
            if let Some((oid, _)) = table_oids.get(&(view.schema.clone(), view.name.clone())) {
                objects.remember_view(*oid, &view.schema, &view.name, view_definition(&view));
                views.insert(*oid);
                if let Some(comment) = &view.comment {
                    view_comments.push((*oid, comment.clone()));
                }
            }
        }
        // Materialized views are tables to DataFusion: `relkind` `m` is set by OID.
        let mut materialized = HashSet::new();
        for (schema, name, query) in view.materialized_views() {
            if let Some((oid, _)) = table_oids.get(&(schema.clone(), name.clone())) {
                objects.remember_view(*oid, &schema, &name, format!(" {query};"));
                materialized.insert(*oid);
            }
        }
        let by_oid = described.iter().enumerate().map(|(i, (_, oid, _))| (*oid, i)).collect();
        let by_name =
            described.iter().enumerate().map(|(i, (r, _, _))| ((r.schema.clone(), r.table.clone()), i)).collect();
        objects.state.lock().sizes = described.iter().map(|(relation, oid, _)| (*oid, relation.size_bytes)).collect();
        let sequences = listed_sequences(view.sequences().await, &schema_oids, objects);
        remember_names(&table_oids, &described, &sequences, objects);
        let mut comments = comments(&described, objects);
        for (oid, text) in view_comments {
            let on_view = super::descriptions::Described {
                objoid: oid,
                classoid: super::descriptions::PG_CLASS_OID,
                objsubid: 0,
            };
            comments.insert(on_view, text);
        }
        objects.state.lock().comments = comments;
        // What `sluice_attribute_default` answers in this query (see compat.rs): a default
        // dropped since the last scan is no longer there.
        objects.state.lock().defaults.clear();
        for (relation, oid, _) in &described {
            for (position, column) in relation.columns.iter().enumerate() {
                match &column.default {
                    // PostgreSQL prints a generation expression with its operators parenthesized.
                    Some(expression) if column.generated => {
                        let number = attribute_number(position);
                        objects.remember_default(*oid, number, &super::deparse::check_expression(expression));
                        objects.state.lock().pretty_defaults.insert((*oid, i64::from(number)), expression.clone());
                    }
                    Some(default) => objects.remember_default(
                        *oid,
                        attribute_number(position),
                        &shown_default(relation, column, default),
                    ),
                    None => {}
                }
            }
        }
        let enum_oids = super::enums::oids_by_name(&view.enums());
        Ok(Self { described, by_oid, schema_names: schema_oids, views, by_name, sequences, materialized, enum_oids })
    }

    /// Each foreign key whose table and referenced table both have a `pg_class` row.
    fn foreign_keys(&self) -> Vec<ForeignKeyRow<'_>> {
        let mut out = Vec::new();
        for (child, child_oid, namespace) in &self.described {
            for key in &child.foreign_keys {
                let parent = (key.parent_schema.clone(), key.parent_table.clone());
                let Some((parent, parent_oid, _)) = self.by_name.get(&parent).and_then(|i| self.described.get(*i))
                else {
                    continue;
                };
                out.push(ForeignKeyRow {
                    child,
                    child_oid: *child_oid,
                    namespace: *namespace,
                    key,
                    parent,
                    parent_oid: *parent_oid,
                });
            }
        }
        out
    }

    fn indexes_of(&self) -> impl Iterator<Item = (&RelationInfo, i32, i32, IndexInfo)> {
        self.described.iter().flat_map(|(relation, oid, namespace)| {
            relation.indexes.iter().map(move |def| (relation, *oid, *namespace, index_info(relation, def)))
        })
    }

    /// `relhasindex` set on the tables that have keys or indexes, `relhastriggers` on both ends of
    /// a foreign key (PostgreSQL enforces one with triggers on each table, and psql's `\d` shows
    /// foreign keys only of a table that has triggers), `relchecks` counted.
    fn mark_indexed(&self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let batch = self.count_checks(batch)?;
        let indexed: HashSet<i32> = self
            .described
            .iter()
            .filter(|(relation, _, _)| !relation.indexes.is_empty())
            .map(|(_, oid, _)| *oid)
            .collect();
        let batch = set_flag(&batch, "relhasindex", &indexed)?;
        let triggered: HashSet<i32> =
            self.foreign_keys().iter().flat_map(|key| [key.child_oid, key.parent_oid]).collect();
        set_flag(&batch, "relhastriggers", &triggered)
    }

    /// `relchecks`: the table's CHECK constraints.
    fn count_checks(&self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let oids = int32_column(batch, "oid")?;
        let before = column(batch, "relchecks")?.as_primitive_opt::<Int16Type>().cloned();
        let counts: Int16Array = (0..batch.num_rows())
            .map(|row| {
                let ours = self.by_oid.get(&oids.value(row)).and_then(|i| self.described.get(*i));
                Some(match ours {
                    Some((relation, _, _)) => i16::try_from(relation.checks.len()).unwrap_or(i16::MAX),
                    None => before.as_ref().map_or(0, |b| b.value(row)),
                })
            })
            .collect();
        replace_column(batch, "relchecks", Arc::new(counts))
    }

    /// `atthasdef` and `attidentity` from the columns' defaults and identities.
    /// Also `attnotnull` false for the columns of views, as PostgreSQL has them.
    fn mark_defaults(&self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let (relids, names) = (int32_column(batch, "attrelid")?, text_column(batch, "attname")?);
        let column_of = |row: usize| {
            let (relation, _, _) = self.described.get(*self.by_oid.get(&relids.value(row))?)?;
            relation.columns.iter().find(|c| c.name == names.value(row))
        };
        let has_default: BooleanArray =
            (0..batch.num_rows()).map(|row| Some(column_of(row).is_some_and(|c| c.default.is_some()))).collect();
        let identity: StringArray = (0..batch.num_rows())
            .map(|row| Some(column_of(row).and_then(|c| c.identity).map(String::from).unwrap_or_default()))
            .collect();
        let generated: StringArray = (0..batch.num_rows())
            .map(|row| Some(if column_of(row).is_some_and(|c| c.generated) { "s" } else { "" }))
            .collect();
        let declared: Vec<Option<(i32, i32)>> = (0..batch.num_rows())
            .map(|row| {
                let column = column_of(row)?;
                super::wire_types::declared_oid(&column.type_name)
                    .or_else(|| self.enum_oids.get(&column.type_name).map(|oid| (*oid, -1)))
            })
            .collect();
        let mut batch = replace_column(batch, "atthasdef", Arc::new(has_default))?;
        if declared.iter().any(Option::is_some) {
            let (types, modifiers) = (int32_column(&batch, "atttypid")?, int32_column(&batch, "atttypmod")?);
            let types: Int32Array =
                declared.iter().enumerate().map(|(row, d)| Some(d.map_or(types.value(row), |d| d.0))).collect();
            let modifiers: Int32Array =
                declared.iter().enumerate().map(|(row, d)| Some(d.map_or(modifiers.value(row), |d| d.1))).collect();
            batch = replace_column(&batch, "atttypid", Arc::new(types))?;
            batch = replace_column(&batch, "atttypmod", Arc::new(modifiers))?;
        }
        if !self.views.is_empty() {
            let relids = int32_column(&batch, "attrelid")?;
            let before = column(&batch, "attnotnull")?
                .as_boolean_opt()
                .ok_or_else(|| DataFusionError::Internal("pg_catalog's attnotnull is not a bool".into()))?;
            let not_null: BooleanArray = (0..batch.num_rows())
                .map(|row| Some(!self.views.contains(&relids.value(row)) && before.value(row)))
                .collect();
            batch = replace_column(&batch, "attnotnull", Arc::new(not_null))?;
        }
        let batch = replace_column(&batch, "attgenerated", Arc::new(generated))?;
        let batch = self.mark_collations(&batch)?;
        replace_column(&batch, "attidentity", Arc::new(identity))
    }

    /// `attcollation`: a text column's collation (`COLLATE "C"` is 950), the default (100) for
    /// the other text columns of Sluice's tables, none (0) for the other types.
    fn mark_collations(&self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let (relids, names) = (int32_column(batch, "attrelid")?, text_column(batch, "attname")?);
        let (types, before) = (int32_column(batch, "atttypid")?, int32_column(batch, "attcollation")?);
        let collations: Int32Array = (0..batch.num_rows())
            .map(|row| {
                let ours = self.by_oid.get(&relids.value(row)).and_then(|i| self.described.get(*i));
                let Some((relation, _, _)) = ours else { return Some(before.value(row)) };
                let collatable = matches!(types.value(row), TEXT_OID | VARCHAR_OID | BPCHAR_OID);
                let column = relation.columns.iter().find(|c| c.name == names.value(row));
                let named = column.and_then(|c| c.collation.as_deref()).and_then(sluice::sql::collations::oid);
                Some(if collatable { named.unwrap_or(DEFAULT_COLLATION_OID) } else { 0 })
            })
            .collect();
        replace_column(batch, "attcollation", Arc::new(collations))
    }

    /// One `pg_class` row per index (relkind `i`), named as the index.
    fn index_classes(&self, schema: &SchemaRef, objects: &Objects) -> DfResult<RecordBatch> {
        let indexes: Vec<_> = self.indexes_of().collect();
        let oid = |(r, _, _, i): &(&RelationInfo, i32, i32, IndexInfo)| {
            objects.oid(ObjectKind::Index, &r.schema, &r.table, &i.def.name)
        };
        let values: Vec<(&str, ArrayRef)> = vec![
            ("oid", Arc::new(indexes.iter().map(|i| Some(oid(i))).collect::<Int32Array>())),
            ("relname", Arc::new(StringArray::from_iter_values(indexes.iter().map(|i| i.3.def.name.clone())))),
            ("relnamespace", Arc::new(indexes.iter().map(|i| Some(i.2)).collect::<Int32Array>())),
            ("relam", Arc::new(Int32Array::from(vec![BTREE_AM_OID; indexes.len()]))),
            ("relkind", Arc::new(StringArray::from(vec!["i"; indexes.len()]))),
            ("relpersistence", Arc::new(StringArray::from(vec!["p"; indexes.len()]))),
            ("relreplident", Arc::new(StringArray::from(vec!["n"; indexes.len()]))),
            ("relispopulated", Arc::new(BooleanArray::from(vec![true; indexes.len()]))),
            (
                "relnatts",
                Arc::new(
                    indexes
                        .iter()
                        .map(|i| Some((i.3.def.columns.len() + i.3.def.include.len()) as i16))
                        .collect::<Int16Array>(),
                ),
            ),
        ];
        batch_by_name(schema, indexes.len(), values)
    }

    /// `relkind` as PostgreSQL has it for the catalogs (`r` for its tables, which
    /// datafusion-pg-catalog lists as views when it computes them), and `reltype`, the row type
    /// of each table and view (see [`row_types`]).
    fn mark_kinds_and_row_types(&self, batch: &RecordBatch, objects: &Objects) -> DfResult<RecordBatch> {
        let (names, oids) = (text_column(batch, "relname")?, int32_column(batch, "oid")?);
        let (spaces, kinds) = (int32_column(batch, "relnamespace")?, text_column(batch, "relkind")?);
        let before = column(batch, "reltype")?.as_primitive_opt::<Int32Type>().cloned();
        let mut relkinds = Vec::with_capacity(batch.num_rows());
        let mut reltypes = Vec::with_capacity(batch.num_rows());
        let mut persistences = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            let (name, kind) = (names.value(row), kinds.value(row));
            let space = self.schema_names.get(&spaces.value(row)).map(String::as_str);
            // A temporary table or view (in a `pg_temp_<n>` schema) is `t`, as SQLAlchemy's and
            // psql's scopes read it.
            persistences.push(if space.is_some_and(sluice::catalog::is_temporary_schema) { "t" } else { "p" });
            relkinds.push(if spaces.value(row) == PG_CATALOG_OID {
                catalog_relkind(name)
            } else if self.materialized.contains(&oids.value(row)) {
                "m"
            } else {
                kind
            });
            let own = spaces.value(row) != PG_CATALOG_OID && space != Some("information_schema");
            reltypes.push(match space {
                Some(space) if own && matches!(kind, "r" | "v" | "m" | "p" | "f") => {
                    objects.oid(ObjectKind::RowType, space, name, "")
                }
                _ => before.as_ref().map_or(0, |b| b.value(row)),
            });
        }
        let batch = replace_column(batch, "relkind", Arc::new(StringArray::from(relkinds)))?;
        let batch = replace_column(&batch, "relpersistence", Arc::new(StringArray::from(persistences)))?;
        replace_column(&batch, "reltype", Arc::new(Int32Array::from(reltypes)))
    }

    /// One `pg_class` row per sequence (relkind `S`): the standalone ones, and those of serial
    /// and identity columns, named as PostgreSQL names them.
    fn sequence_classes(&self, schema: &SchemaRef) -> DfResult<RecordBatch> {
        let sequences: Vec<(i32, String, i32)> =
            self.sequences.iter().map(|s| (s.oid, s.info.name.clone(), s.namespace)).collect();
        let len = sequences.len();
        let values: Vec<(&str, ArrayRef)> = vec![
            ("oid", Arc::new(sequences.iter().map(|s| Some(s.0)).collect::<Int32Array>())),
            ("relname", Arc::new(StringArray::from_iter_values(sequences.iter().map(|s| s.1.clone())))),
            ("relnamespace", Arc::new(sequences.iter().map(|s| Some(s.2)).collect::<Int32Array>())),
            ("relkind", Arc::new(StringArray::from(vec!["S"; len]))),
            ("relpersistence", Arc::new(StringArray::from(vec!["p"; len]))),
            ("relreplident", Arc::new(StringArray::from(vec!["n"; len]))),
            ("relispopulated", Arc::new(BooleanArray::from(vec![true; len]))),
            ("relnatts", Arc::new(Int16Array::from(vec![3; len]))),
        ];
        batch_by_name(schema, len, values)
    }

    /// `pg_attrdef`: one row per column default (a SERIAL's `nextval(...)` among them).
    fn attrdef(&self, schema: &SchemaRef, objects: &Objects) -> DfResult<RecordBatch> {
        let mut oids = Vec::new();
        let mut relids = Vec::new();
        let mut numbers = Vec::new();
        let mut expressions = Vec::new();
        for (relation, oid, _) in &self.described {
            for (position, column) in relation.columns.iter().enumerate() {
                let Some(default) = &column.default else { continue };
                oids.push(objects.oid(ObjectKind::Default, &relation.schema, &relation.table, &column.name));
                relids.push(*oid);
                numbers.push(attribute_number(position));
                expressions.push(if column.generated {
                    super::deparse::check_expression(default)
                } else {
                    shown_default(relation, column, default)
                });
            }
        }
        let values: Vec<(&str, ArrayRef)> = vec![
            ("oid", Arc::new(Int32Array::from(oids))),
            ("adrelid", Arc::new(Int32Array::from(relids))),
            ("adnum", Arc::new(Int16Array::from(numbers))),
            ("adbin", Arc::new(StringArray::from(expressions))),
        ];
        let len = values.first().map_or(0, |(_, array)| array.len());
        batch_by_name(schema, len, values)
    }

    /// `pg_index`: one row per key or index.
    fn index(&self, schema: &SchemaRef, objects: &Objects) -> DfResult<RecordBatch> {
        let indexes: Vec<_> = self.indexes_of().collect();
        let mut index_oids = Vec::new();
        for (relation, _, _, info) in &indexes {
            let oid = objects.oid(ObjectKind::Index, &relation.schema, &relation.table, &info.def.name);
            let constraint = (!info.def.index)
                .then(|| objects.oid(ObjectKind::Constraint, &relation.schema, &relation.table, &info.def.name));
            objects.remember(info, oid, constraint);
            index_oids.push(oid);
        }
        let flag = |f: &dyn Fn(&KeyDef) -> bool| -> ArrayRef {
            Arc::new(indexes.iter().map(|i| Some(f(&i.3.def))).collect::<BooleanArray>())
        };
        let count = |include: bool| -> ArrayRef {
            let count = |d: &KeyDef| d.columns.len() + if include { d.include.len() } else { 0 };
            Arc::new(
                indexes
                    .iter()
                    .map(|i| Some(i16::try_from(count(&i.3.def)).unwrap_or(i16::MAX)))
                    .collect::<Int16Array>(),
            )
        };
        let values: Vec<(&str, ArrayRef)> = vec![
            ("indexrelid", Arc::new(Int32Array::from(index_oids))),
            ("indrelid", Arc::new(indexes.iter().map(|i| Some(i.1)).collect::<Int32Array>())),
            // INCLUDE columns count in indnatts and indkey, not in indnkeyatts (nor indclass).
            ("indnatts", count(true)),
            ("indnkeyatts", count(false)),
            ("indisunique", flag(&|d| d.unique)),
            ("indnullsnotdistinct", flag(&|d| !d.nulls_distinct)),
            ("indisprimary", flag(&|d| d.primary)),
            ("indisexclusion", flag(&|_| false)),
            ("indimmediate", flag(&|_| true)),
            ("indisclustered", flag(&|_| false)),
            ("indisvalid", flag(&|_| true)),
            ("indcheckxmin", flag(&|_| false)),
            ("indisready", flag(&|_| true)),
            ("indislive", flag(&|_| true)),
            ("indisreplident", flag(&|_| false)),
            ("indkey", attribute_numbers(indexes.iter().map(|i| (i.0, &i.3.def)))),
            // No collations, operator classes or options (ASC, NULLS LAST) of their own: zeros.
            ("indcollation", zeros::<Int32Type>(indexes.iter().map(|i| i.3.def.columns.len()))),
            ("indclass", zeros::<Int32Type>(indexes.iter().map(|i| i.3.def.columns.len()))),
            // int2vector's text form, which SQLAlchemy splits.
            (
                "indoption",
                Arc::new(StringArray::from_iter_values(
                    indexes.iter().map(|i| vec!["0"; i.3.def.columns.len()].join(" ")),
                )),
            ),
        ];
        batch_by_name(schema, indexes.len(), values)
    }

    /// `pg_constraint`: one row per PRIMARY KEY, UNIQUE, CHECK or FOREIGN KEY constraint.
    fn constraint(&self, schema: &SchemaRef, objects: &Objects) -> DfResult<RecordBatch> {
        let mut rows = self.key_and_check_constraints(objects);
        rows.extend(self.foreign_key_constraints(objects));
        let flag = |value: bool| -> ArrayRef { Arc::new(BooleanArray::from(vec![value; rows.len()])) };
        let ints = |f: fn(&ConstraintRow) -> i32| -> ArrayRef {
            Arc::new(rows.iter().map(|r| Some(f(r))).collect::<Int32Array>())
        };
        let texts =
            |f: fn(&ConstraintRow) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(rows.iter().map(f))) };
        let numbers = |f: fn(&ConstraintRow) -> &Option<Vec<Option<i16>>>| -> ArrayRef {
            Arc::new(ListArray::from_iter_primitive::<Int16Type, _, _>(rows.iter().map(|r| f(r).clone())))
        };
        let values: Vec<(&str, ArrayRef)> = vec![
            ("oid", ints(|r| r.oid)),
            ("conname", texts(|r| &r.name)),
            ("connamespace", ints(|r| r.namespace)),
            ("contype", texts(|r| r.kind)),
            ("condeferrable", flag(false)),
            ("condeferred", flag(false)),
            ("convalidated", Arc::new(rows.iter().map(|r| Some(r.validated)).collect::<BooleanArray>())),
            ("conrelid", ints(|r| r.relation)),
            ("conindid", ints(|r| r.index)),
            ("confrelid", ints(|r| r.referenced)),
            ("conislocal", flag(true)),
            // PostgreSQL's CHECK constraints are inherited by a table's children, its keys not.
            ("connoinherit", Arc::new(rows.iter().map(|r| Some(r.kind != "c")).collect::<BooleanArray>())),
            ("confupdtype", texts(|r| r.on_update)),
            ("confdeltype", texts(|r| r.on_delete)),
            ("confmatchtype", texts(|r| r.match_type)),
            ("conkey", numbers(|r| &r.key)),
            ("confkey", numbers(|r| &r.referenced_key)),
            ("conbin", Arc::new(rows.iter().map(|r| r.expression.clone()).collect::<StringArray>())),
        ];
        batch_by_name(schema, rows.len(), values)
    }

    /// The PRIMARY KEY, UNIQUE and CHECK constraints' rows of `pg_constraint`.
    fn key_and_check_constraints(&self, objects: &Objects) -> Vec<ConstraintRow> {
        let mut rows = Vec::new();
        for (relation, oid, namespace) in &self.described {
            for def in relation.indexes.iter().filter(|d| !d.index) {
                let info = index_info(relation, def);
                let own = objects.oid(ObjectKind::Constraint, &relation.schema, &relation.table, &def.name);
                let index = objects.oid(ObjectKind::Index, &relation.schema, &relation.table, &def.name);
                objects.remember(&info, index, Some(own));
                let kind = if def.primary { "p" } else { "u" };
                let mut row = ConstraintRow::new(own, &def.name, *namespace, kind, *oid);
                row.index = index;
                row.key = Some(column_numbers(relation, &def.columns));
                rows.push(row);
            }
            for (name, expression) in &relation.checks {
                let own = objects.oid(ObjectKind::Constraint, &relation.schema, &relation.table, name);
                objects.remember_check(own, expression);
                let mut row = ConstraintRow::new(own, name, *namespace, "c", *oid);
                row.key = check_columns(relation, expression);
                row.expression = Some(expression.clone());
                rows.push(row);
            }
        }
        rows
    }

    /// The FOREIGN KEY constraints' rows of `pg_constraint`: `conindid` is the referenced key's
    /// index, `conkey` and `confkey` the columns of both ends in the constraint's order.
    fn foreign_key_constraints(&self, objects: &Objects) -> Vec<ConstraintRow> {
        let mut rows = Vec::new();
        for ForeignKeyRow { child, child_oid, namespace, key, parent, parent_oid } in self.foreign_keys() {
            let own = objects.oid(ObjectKind::ForeignKey, &child.schema, &child.table, &key.name);
            objects.remember_constraint(own, key.definition());
            let index =
                key.parent_key.as_ref().map(|k| objects.oid(ObjectKind::Index, &parent.schema, &parent.table, k));
            let mut row = ConstraintRow::new(own, &key.name, namespace, "f", child_oid);
            row.index = index.unwrap_or(0);
            row.key = Some(column_numbers(child, &key.columns));
            row.referenced = parent_oid;
            row.referenced_key = Some(column_numbers(parent, &key.parent_columns));
            row.on_update = key.on_update.code();
            row.on_delete = key.on_delete.code();
            row.match_type = if key.match_full { "f" } else { "s" };
            row.validated = !key.not_valid;
            rows.push(row);
        }
        rows
    }

    /// `pg_indexes`: schema, table, index name and `CREATE INDEX` text.
    fn indexes(&self, schema: &SchemaRef) -> DfResult<RecordBatch> {
        let mut indexes: Vec<IndexInfo> = self.indexes_of().map(|i| i.3).collect();
        indexes.sort_by(|a, b| (&a.schema, &a.table, &a.def.name).cmp(&(&b.schema, &b.table, &b.def.name)));
        let values: Vec<(&str, ArrayRef)> = vec![
            ("schemaname", Arc::new(StringArray::from_iter_values(indexes.iter().map(|i| i.schema.clone())))),
            ("tablename", Arc::new(StringArray::from_iter_values(indexes.iter().map(|i| i.table.clone())))),
            ("indexname", Arc::new(StringArray::from_iter_values(indexes.iter().map(|i| i.def.name.clone())))),
            ("indexdef", Arc::new(StringArray::from_iter_values(indexes.iter().map(IndexInfo::definition)))),
        ];
        batch_by_name(schema, indexes.len(), values)
    }
}

/// The comments on Sluice's tables, columns and constraints, by the OIDs of their `pg_class` and
/// `pg_constraint` rows (a comment on a constraint that is not there is left out).
fn comments(described: &[(RelationInfo, i32, i32)], objects: &Objects) -> super::descriptions::Comments {
    use super::descriptions::{Described, PG_CLASS_OID, PG_CONSTRAINT_OID};
    let mut comments = super::descriptions::Comments::new();
    for (relation, oid, _) in described {
        let on_class = |objsubid: i32| Described { objoid: *oid, classoid: PG_CLASS_OID, objsubid };
        if let Some(text) = &relation.description {
            comments.insert(on_class(0), text.clone());
        }
        for (position, column) in relation.columns.iter().enumerate() {
            if let Some(text) = &column.comment {
                comments.insert(on_class(i32::from(attribute_number(position))), text.clone());
            }
        }
        for (name, text) in &relation.constraint_comments {
            let kind = if relation.foreign_keys.iter().any(|k| &k.name == name) {
                ObjectKind::ForeignKey
            } else if relation.indexes.iter().any(|k| !k.index && &k.name == name)
                || relation.checks.iter().any(|(check, _)| check == name)
            {
                ObjectKind::Constraint
            } else {
                continue;
            };
            let objoid = objects.oid(kind, &relation.schema, &relation.table, name);
            comments.insert(Described { objoid, classoid: PG_CONSTRAINT_OID, objsubid: 0 }, text.clone());
        }
    }
    comments
}

/// What `sluice_regclass_name` prints for each relation of `pg_class` (tables, views, catalogs)
/// and for Sluice's indexes and sequences, by OID; what `sluice_attribute_names` knows of the
/// columns of Sluice's tables.
fn remember_names(
    table_oids: &HashMap<(String, String), (i32, i32)>,
    described: &[(RelationInfo, i32, i32)],
    sequences: &[super::sequences::Listed],
    objects: &Objects,
) {
    let mut names: HashMap<i32, String> =
        table_oids.iter().map(|((schema, name), (oid, _))| (*oid, regclass_text(schema, name))).collect();
    let mut oids: HashMap<(String, String), i32> =
        table_oids.iter().map(|(key, (oid, _))| (key.clone(), *oid)).collect();
    let mut serials = HashMap::new();
    let mut schemas: HashMap<i32, String> =
        table_oids.iter().map(|((schema, _), (oid, _))| (*oid, schema.clone())).collect();
    let columns: HashMap<i32, Vec<String>> = described
        .iter()
        .map(|(relation, oid, _)| (*oid, relation.columns.iter().map(|c| c.name.clone()).collect()))
        .collect();
    for (relation, _, _) in described {
        for def in &relation.indexes {
            let oid = objects.oid(ObjectKind::Index, &relation.schema, &relation.table, &def.name);
            names.insert(oid, regclass_text(&relation.schema, &def.name));
            schemas.insert(oid, relation.schema.clone());
            oids.insert((relation.schema.clone(), def.name.clone()), oid);
        }
    }
    for sequence in sequences {
        let info = &sequence.info;
        names.insert(sequence.oid, regclass_text(&info.schema, &info.name));
        schemas.insert(sequence.oid, info.schema.clone());
        oids.insert((info.schema.clone(), info.name.clone()), sequence.oid);
        if let Some((table, column)) = &info.column {
            let printed = format!(
                "{}.{}",
                sluice::names::quoted_if_needed(&info.schema),
                sluice::names::quoted_if_needed(&info.name)
            );
            serials.insert((info.schema.clone(), table.clone(), column.clone()), printed);
        }
    }
    let mut state = objects.state.lock();
    state.relation_names = names;
    state.relation_schemas = schemas;
    state.attribute_names = columns;
    state.relation_oids = oids;
    state.serial_sequences = serials;
}

/// The sequences the engine lists with OIDs: a column's by its table and column (as the OIDs
/// of its table's other objects), a standalone one's by its name; those in a schema
/// `pg_namespace` does not list are left out.
fn listed_sequences(
    sequences: Vec<sluice::sequence::SequenceInfo>,
    schema_oids: &HashMap<i32, String>,
    objects: &Objects,
) -> Vec<super::sequences::Listed> {
    let namespaces: HashMap<&str, i32> = schema_oids.iter().map(|(oid, name)| (name.as_str(), *oid)).collect();
    sequences
        .into_iter()
        .filter_map(|info| {
            let namespace = *namespaces.get(info.schema.as_str())?;
            let oid = match &info.column {
                Some((table, column)) => objects.oid(ObjectKind::Sequence, &info.schema, table, column),
                None => objects.oid(ObjectKind::StandaloneSequence, &info.schema, &info.name, ""),
            };
            Some(super::sequences::Listed { oid, namespace, info })
        })
        .collect()
}

/// A relation's name as a `regclass` prints it: without its schema where the default search path
/// finds it (`public`, `pg_catalog`, the session's temporary schema; as `pg_get_constraintdef`
/// names a referenced table), quoted where it must be.
fn regclass_text(schema: &str, name: &str) -> String {
    let unqualified = schema == "public" || schema == "pg_catalog" || sluice::catalog::is_temporary_schema(schema);
    if unqualified {
        sluice::names::quoted_if_needed(name)
    } else {
        format!("{}.{}", sluice::names::quoted_if_needed(schema), sluice::names::quoted_if_needed(name))
    }
}

/// The boolean column `name` of `pg_class` rows, set for the OIDs in `oids` (and left as it was
/// for the others).
fn set_flag(batch: &RecordBatch, name: &str, oids: &HashSet<i32>) -> DfResult<RecordBatch> {
    let relations = int32_column(batch, "oid")?;
    let before = column(batch, name)?.as_boolean_opt().cloned();
    let after: BooleanArray = (0..batch.num_rows())
        .map(|row| Some(oids.contains(&relations.value(row)) || before.as_ref().is_some_and(|b| b.value(row))))
        .collect();
    replace_column(batch, name, Arc::new(after))
}

/// One row of `pg_constraint`.
struct ConstraintRow {
    oid: i32,
    name: String,
    namespace: i32,
    /// `contype`: `p`, `u`, `c` or `f`.
    kind: &'static str,
    relation: i32,
    /// A key's own index, a foreign key's referenced one; 0 for a CHECK.
    index: i32,
    /// `conkey`: the `attnum`s of its columns (of a CHECK, those its expression reads).
    key: Option<Vec<Option<i16>>>,
    /// A foreign key's referenced table (`confrelid`) and columns (`confkey`).
    referenced: i32,
    referenced_key: Option<Vec<Option<i16>>>,
    /// A foreign key's actions and match type as `pg_constraint` codes them; a space for another.
    on_update: &'static str,
    on_delete: &'static str,
    match_type: &'static str,
    /// A CHECK's expression (`conbin`).
    expression: Option<String>,
    /// `convalidated`: false for a foreign key added NOT VALID and not validated since.
    validated: bool,
}

impl ConstraintRow {
    fn new(oid: i32, name: &str, namespace: i32, kind: &'static str, relation: i32) -> Self {
        Self {
            oid,
            name: name.to_string(),
            namespace,
            kind,
            relation,
            index: 0,
            key: None,
            referenced: 0,
            referenced_key: None,
            on_update: " ",
            on_delete: " ",
            match_type: " ",
            expression: None,
            validated: true,
        }
    }
}

/// The `attnum`s of `columns` of `relation`, in their order.
fn column_numbers(relation: &RelationInfo, columns: &[String]) -> Vec<Option<i16>> {
    columns.iter().map(|c| column_number(relation, c)).collect()
}

/// The `attnum`s of the columns a CHECK expression reads, each once, in the order they first
/// appear (as PostgreSQL fills a CHECK's `conkey`); None when it reads none or does not parse.
fn check_columns(relation: &RelationInfo, expression: &str) -> Option<Vec<Option<i16>>> {
    use datafusion::sql::sqlparser::ast::Expr as SqlExpr;
    let parsed = super::compat::parse_expr(expression).ok()?;
    let mut numbers: Vec<Option<i16>> = Vec::new();
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(&parsed, |expr| {
        let ident = match expr {
            SqlExpr::Identifier(ident) => Some(ident),
            SqlExpr::CompoundIdentifier(parts) => parts.last(),
            _ => None,
        };
        if let Some(ident) = ident {
            let name = if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() };
            let number = column_number(relation, &name);
            if number.is_some() && !numbers.contains(&number) {
                numbers.push(number);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    (!numbers.is_empty()).then_some(numbers)
}

fn index_info(relation: &RelationInfo, def: &KeyDef) -> IndexInfo {
    IndexInfo { schema: relation.schema.clone(), table: relation.table.clone(), def: def.clone() }
}

/// A column's default as PostgreSQL prints it: the sequence of a serial in another schema than
/// `public` named with its schema (`nextval('shop.t_id_seq'::regclass)`), as PostgreSQL names
/// a sequence its default search path does not find; any other as `deparse::default_expression`
/// prints it (`'x'::text`).
fn shown_default(relation: &RelationInfo, column: &sluice::system::ColumnInfo, default: &str) -> String {
    if !default.starts_with("nextval(") {
        return super::deparse::default_expression(default, &column.type_name);
    }
    // `nextval('s')` as given is kept as PostgreSQL keeps it: with the name cast to regclass.
    let cast;
    let default = match default.strip_prefix("nextval('").and_then(|rest| rest.strip_suffix("')")) {
        Some(name) if !name.contains('\'') => {
            cast = format!("nextval('{name}'::regclass)");
            cast.as_str()
        }
        _ => default,
    };
    match default.strip_prefix("nextval('") {
        Some(rest) if relation.schema != "public" && !rest.starts_with(&format!("{}.", relation.schema)) => {
            format!("nextval('{}.{rest}", sluice::names::quoted_if_needed(&relation.schema))
        }
        _ => default.to_string(),
    }
}

/// PostgreSQL's `attnum` of the column at `position` (from 1).
fn attribute_number(position: usize) -> i16 {
    i16::try_from(position + 1).unwrap_or(i16::MAX)
}

/// The `attnum` of a column of `relation`.
fn column_number(relation: &RelationInfo, column: &str) -> Option<i16> {
    relation.columns.iter().position(|c| c.name == column).map(attribute_number)
}

/// The `attnum`s of each key's columns (`indkey`), as `int2[]`.
fn attribute_numbers<'a>(keys: impl Iterator<Item = (&'a RelationInfo, &'a KeyDef)>) -> ArrayRef {
    let lists = keys.map(|(relation, def)| {
        Some(def.columns.iter().chain(&def.include).map(|c| column_number(relation, c)).collect::<Vec<_>>())
    });
    Arc::new(ListArray::from_iter_primitive::<Int16Type, _, _>(lists))
}

/// Lists of `len` zeros, one per length.
fn zeros<T: arrow::datatypes::ArrowPrimitiveType>(lengths: impl Iterator<Item = usize>) -> ArrayRef {
    let lists = lengths.map(|len| Some(vec![Some(T::Native::default()); len]));
    Arc::new(ListArray::from_iter_primitive::<T, _, _>(lists))
}

/// A batch of `schema` with `values` in the columns they name, every other column NULL where
/// it is nullable, else at its type's default (zero, false, empty).
pub(super) fn batch_by_name(schema: &SchemaRef, len: usize, values: Vec<(&str, ArrayRef)>) -> DfResult<RecordBatch> {
    let values: HashMap<&str, ArrayRef> = values.into_iter().collect();
    let columns = schema
        .fields()
        .iter()
        .map(|field| match values.get(field.name().as_str()) {
            Some(array) if array.data_type() == field.data_type() => Ok(array.clone()),
            Some(array) => Ok(arrow::compute::cast(array, field.data_type())?),
            None if field.is_nullable() => Ok(new_null_array(field.data_type(), len)),
            None => ScalarValue::new_default(field.data_type())?.to_array_of_size(len),
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn replace_column(batch: &RecordBatch, name: &str, array: ArrayRef) -> DfResult<RecordBatch> {
    let schema = batch.schema();
    let index = schema.index_of(name)?;
    let mut columns = batch.columns().to_vec();
    let array = if array.data_type() == schema.field(index).data_type() {
        array
    } else {
        arrow::compute::cast(&array, schema.field(index).data_type())?
    };
    if let Some(slot) = columns.get_mut(index) {
        *slot = array;
    }
    Ok(RecordBatch::try_new(schema, columns)?)
}

fn nullable(name: &str, data_type: DataType) -> Field {
    Field::new(name, data_type, true)
}

fn required(name: &str, data_type: DataType) -> Field {
    Field::new(name, data_type, false)
}

fn int2_list(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Int16, true))), nullable)
}

/// PostgreSQL 15's `pg_attrdef`.
fn attrdef_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        required("oid", DataType::Int32),
        required("adrelid", DataType::Int32),
        required("adnum", DataType::Int16),
        required("adbin", DataType::Utf8),
    ]))
}

/// PostgreSQL 15's `pg_index` (`indexprs` and `indpred` as text; `indkey`, `indclass` and
/// `indcollation` as arrays, which clients unnest; `indoption` in int2vector's text form, which
/// clients split).
fn index_schema() -> SchemaRef {
    let mut fields = vec![
        required("indexrelid", DataType::Int32),
        required("indrelid", DataType::Int32),
        required("indnatts", DataType::Int16),
        required("indnkeyatts", DataType::Int16),
    ];
    for flag in [
        "indisunique",
        "indnullsnotdistinct",
        "indisprimary",
        "indisexclusion",
        "indimmediate",
        "indisclustered",
        "indisvalid",
        "indcheckxmin",
        "indisready",
        "indislive",
        "indisreplident",
    ] {
        fields.push(required(flag, DataType::Boolean));
    }
    fields.extend([
        int2_list("indkey", false),
        nullable("indcollation", DataType::List(Arc::new(Field::new("item", DataType::Int32, true)))),
        nullable("indclass", DataType::List(Arc::new(Field::new("item", DataType::Int32, true)))),
        nullable("indoption", DataType::Utf8),
        nullable("indexprs", DataType::Utf8),
        nullable("indpred", DataType::Utf8),
    ]);
    Arc::new(Schema::new(fields))
}

/// PostgreSQL 15's `pg_constraint` (`conbin` as text).
fn constraint_schema() -> SchemaRef {
    let oid_list = |name: &str| nullable(name, DataType::List(Arc::new(Field::new("item", DataType::Int32, true))));
    Arc::new(Schema::new(vec![
        required("oid", DataType::Int32),
        required("conname", DataType::Utf8),
        required("connamespace", DataType::Int32),
        required("contype", DataType::Utf8),
        required("condeferrable", DataType::Boolean),
        required("condeferred", DataType::Boolean),
        required("convalidated", DataType::Boolean),
        required("conrelid", DataType::Int32),
        required("contypid", DataType::Int32),
        required("conindid", DataType::Int32),
        required("conparentid", DataType::Int32),
        required("confrelid", DataType::Int32),
        required("confupdtype", DataType::Utf8),
        required("confdeltype", DataType::Utf8),
        required("confmatchtype", DataType::Utf8),
        required("conislocal", DataType::Boolean),
        required("coninhcount", DataType::Int16),
        required("connoinherit", DataType::Boolean),
        int2_list("conkey", true),
        int2_list("confkey", true),
        oid_list("conpfeqop"),
        oid_list("conppeqop"),
        oid_list("conffeqop"),
        int2_list("confdelsetcols", true),
        oid_list("conexclop"),
        nullable("conbin", DataType::Utf8),
    ]))
}

/// A view's definition as `pg_views` and `pg_get_viewdef` print it: the query after a space and
/// with a semicolon, as PostgreSQL (which also reformats the query; Sluice keeps its text).
fn view_definition(view: &sluice::catalog::ViewEntry) -> String {
    format!(" {};", view.query)
}

/// PostgreSQL's `pg_views` view.
fn views_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        required("schemaname", DataType::Utf8),
        required("viewname", DataType::Utf8),
        required("viewowner", DataType::Utf8),
        required("definition", DataType::Utf8),
    ]))
}

/// `pg_views`' rows: each view's schema, name and query (as PostgreSQL, `pg_get_viewdef`'s text
/// ends with a semicolon).
fn views(schema: &SchemaRef, view: &sluice::CatalogView) -> DfResult<RecordBatch> {
    let mut views = view.views();
    views.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
    let values: Vec<(&str, ArrayRef)> = vec![
        ("schemaname", Arc::new(StringArray::from_iter_values(views.iter().map(|v| v.schema.clone())))),
        ("viewname", Arc::new(StringArray::from_iter_values(views.iter().map(|v| v.name.clone())))),
        ("viewowner", Arc::new(StringArray::from_iter_values(views.iter().map(|_| "sluice".to_string())))),
        ("definition", Arc::new(StringArray::from_iter_values(views.iter().map(view_definition)))),
    ];
    batch_by_name(schema, views.len(), values)
}

/// PostgreSQL's `pg_indexes` view.
fn indexes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        required("schemaname", DataType::Utf8),
        required("tablename", DataType::Utf8),
        required("indexname", DataType::Utf8),
        nullable("tablespace", DataType::Utf8),
        required("indexdef", DataType::Utf8),
    ]))
}

/// Which printing function a [`DefinitionFunction`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Printer {
    /// `pg_get_indexdef(oid [, column, pretty])`: the CREATE INDEX text, or its column's name.
    IndexDef,
    /// `pg_get_constraintdef(oid [, pretty])`.
    ConstraintDef,
    /// `pg_get_expr(expression, relation [, pretty])`: Sluice keeps expressions as text.
    Expr,
    /// `sluice_attribute_default(relation, attnum)`: a column's default (what compat.rs makes
    /// of the subqueries on `pg_attrdef`).
    AttributeDefault,
    /// `pg_get_viewdef(view [, pretty])`: the view by OID, or by name as text.
    ViewDef,
}

/// The functions that print a catalog object's definition, from this session's [`Objects`].
#[derive(Debug)]
pub struct DefinitionFunction {
    printer: Printer,
    objects: Arc<Objects>,
    signature: Signature,
}

impl DefinitionFunction {
    pub fn new(printer: Printer, objects: Arc<Objects>) -> Self {
        Self { printer, objects, signature: Signature::variadic_any(Volatility::Stable) }
    }
}

impl PartialEq for DefinitionFunction {
    fn eq(&self, other: &Self) -> bool {
        self.printer == other.printer && Arc::ptr_eq(&self.objects, &other.objects)
    }
}

impl Eq for DefinitionFunction {}

impl std::hash::Hash for DefinitionFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.printer.hash(state);
    }
}

impl ScalarUDFImpl for DefinitionFunction {
    fn name(&self) -> &str {
        match self.printer {
            Printer::IndexDef => "pg_get_indexdef",
            Printer::ConstraintDef => "pg_get_constraintdef",
            Printer::Expr => "pg_get_expr",
            Printer::AttributeDefault => "sluice_attribute_default",
            Printer::ViewDef => "pg_get_viewdef",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        // Text as DataFusion types SQL's TEXT (a CASE between this and `CAST(x AS TEXT)` must
        // have one type for array_agg, as in SQLAlchemy's index reflection).
        Ok(DataType::Utf8View)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan(format!("{} needs an argument", self.name())));
        };
        if self.printer == Printer::Expr {
            let text = arrow::compute::cast(first, &DataType::Utf8View)?;
            return Ok(ColumnarValue::Array(text));
        }
        if self.printer == Printer::ViewDef
            && matches!(first.data_type(), DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
        {
            let names = arrow::compute::cast(first, &DataType::Utf8)?;
            let names = names.as_string::<i32>();
            let state = self.objects.state.lock();
            let out: StringViewArray =
                names.iter().map(|name| name.and_then(|n| state.view_names.get(&n.to_lowercase()).cloned())).collect();
            return Ok(ColumnarValue::Array(Arc::new(out)));
        }
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let oids = oids.as_primitive::<arrow::datatypes::Int64Type>();
        let columns = match (self.printer, arrays.get(1)) {
            (Printer::IndexDef | Printer::AttributeDefault, Some(column)) => {
                Some(arrow::compute::cast(column, &DataType::Int64)?)
            }
            _ => None,
        };
        let columns = columns.as_ref().map(|c| c.as_primitive::<arrow::datatypes::Int64Type>());
        let pretty = match (self.printer, arrays.get(2), arrays.get(1)) {
            (Printer::IndexDef | Printer::AttributeDefault, Some(pretty), _)
            | (Printer::ConstraintDef, _, Some(pretty)) => Some(arrow::compute::cast(pretty, &DataType::Boolean)?),
            _ => None,
        };
        let pretty = pretty.as_ref().map(|p| p.as_boolean());
        let state = self.objects.state.lock();
        let out: StringViewArray = (0..rows.max(oids.len()).min(oids.len()))
            .map(|row| {
                if oids.is_null(row) {
                    return None;
                }
                let oid = i32::try_from(oids.value(row)).ok()?;
                match self.printer {
                    Printer::IndexDef => {
                        let index = state.indexes.get(&oid)?;
                        match columns.filter(|c| !c.is_null(row)).map(|c| c.value(row)).unwrap_or(0) {
                            0 if pretty.is_some_and(|p| !p.is_null(row) && p.value(row)) => Some(index.pretty.clone()),
                            0 => Some(index.definition.clone()),
                            n => index.columns.get(usize::try_from(n - 1).ok()?).cloned(),
                        }
                    }
                    Printer::ConstraintDef => match state.pretty_constraints.get(&oid) {
                        Some(text) if pretty.is_some_and(|p| !p.is_null(row) && p.value(row)) => Some(text.clone()),
                        _ => state.constraints.get(&oid).cloned(),
                    },
                    Printer::AttributeDefault => {
                        let number = columns.filter(|c| !c.is_null(row))?.value(row);
                        match state.pretty_defaults.get(&(oid, number)) {
                            Some(text) if pretty.is_some_and(|p| !p.is_null(row) && p.value(row)) => Some(text.clone()),
                            _ => state.defaults.get(&(oid, number)).cloned(),
                        }
                    }
                    Printer::ViewDef => state.views.get(&oid).cloned(),
                    Printer::Expr => None,
                }
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `pg_is_other_temp_schema(oid)`: whether the schema is another session's temporary schema
/// (`pg_temp_<n>` other than this session's), from the schemas a `pg_namespace` scan of this
/// query (or an earlier one) named.
#[derive(Debug)]
pub struct OtherTemporarySchema {
    objects: Arc<Objects>,
    own: String,
    signature: Signature,
}

impl OtherTemporarySchema {
    pub fn new(objects: Arc<Objects>, own: &str) -> Self {
        Self { objects, own: own.to_string(), signature: Signature::any(1, Volatility::Stable) }
    }
}

impl PartialEq for OtherTemporarySchema {
    fn eq(&self, other: &Self) -> bool {
        self.own == other.own && Arc::ptr_eq(&self.objects, &other.objects)
    }
}

impl Eq for OtherTemporarySchema {}

impl std::hash::Hash for OtherTemporarySchema {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.own.hash(state);
    }
}

impl ScalarUDFImpl for OtherTemporarySchema {
    fn name(&self) -> &str {
        "pg_is_other_temp_schema"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan("pg_is_other_temp_schema needs an argument".into()));
        };
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let oids = oids.as_primitive::<arrow::datatypes::Int64Type>();
        let state = self.objects.state.lock();
        let out: BooleanArray = oids
            .iter()
            .map(|oid| {
                let oid = i32::try_from(oid?).ok()?;
                let schema = state.namespaces.get(&oid);
                Some(schema.is_some_and(|s| sluice::catalog::is_temporary_schema(s) && *s != self.own))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `pg_table_is_visible(oid)`: whether the relation's schema is on the session's `search_path`
/// (or is `pg_catalog` or the session's temporary schema), from the schemas the session's last
/// `pg_class` scan found; a relation it did not find (a catalog's) is visible. A relation that an
/// earlier schema of the path hides by its name still counts as visible.
pub struct TableVisible {
    objects: Arc<Objects>,
    settings: Arc<Mutex<Settings>>,
    server: Arc<ServerState>,
    own: String,
    signature: Signature,
}

impl TableVisible {
    pub fn new(objects: Arc<Objects>, settings: Arc<Mutex<Settings>>, server: Arc<ServerState>, own: &str) -> Self {
        Self { objects, settings, server, own: own.to_string(), signature: Signature::any(1, Volatility::Stable) }
    }
}

impl std::fmt::Debug for TableVisible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TableVisible")
    }
}

impl PartialEq for TableVisible {
    fn eq(&self, other: &Self) -> bool {
        self.own == other.own && Arc::ptr_eq(&self.objects, &other.objects)
    }
}

impl Eq for TableVisible {}

impl std::hash::Hash for TableVisible {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.own.hash(state);
    }
}

impl ScalarUDFImpl for TableVisible {
    fn name(&self) -> &str {
        "pg_table_is_visible"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan("pg_table_is_visible needs an argument".into()));
        };
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let oids = oids.as_primitive::<arrow::datatypes::Int64Type>();
        let mut path = {
            let settings = self.settings.lock();
            let setting = settings.get("search_path").unwrap_or_default().to_string();
            let user = settings.get("session_authorization").unwrap_or_default().to_string();
            super::search_path::schemas(&setting, &user, &self.server.db.catalog_state())
        };
        path.extend(["pg_catalog".to_string(), self.own.clone()]);
        let state = self.objects.state.lock();
        let out: BooleanArray = oids
            .iter()
            .map(|oid| {
                let oid = i32::try_from(oid?).ok()?;
                Some(state.relation_schemas.get(&oid).is_none_or(|schema| path.contains(schema)))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// Equality and hashing of a function over the session's relations (`objects`), as DataFusion
/// wants of a UDF: two are equal when they read the same session's relations.
macro_rules! same_objects_identity {
    ($function:ty) => {
        impl PartialEq for $function {
            fn eq(&self, other: &Self) -> bool {
                Arc::ptr_eq(&self.objects, &other.objects)
            }
        }

        impl Eq for $function {}

        impl std::hash::Hash for $function {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.name().hash(state);
            }
        }
    };
}

/// `sluice_regclass_name(oid)`: a relation's OID as a `regclass` prints it (what compat.rs makes
/// of `x::regclass` in a select list or cast to text), from the session's last `pg_class` scan
/// (which a query over `pg_class`, `pg_constraint`, `pg_index` or `pg_attribute` makes); an OID
/// it does not know prints as its number and 0 as `-`, as in PostgreSQL.
#[derive(Debug)]
pub struct RegclassName {
    objects: Arc<Objects>,
    signature: Signature,
}

impl RegclassName {
    pub fn new(objects: Arc<Objects>) -> Self {
        Self { objects, signature: Signature::any(1, Volatility::Stable) }
    }
}

same_objects_identity!(RegclassName);

impl ScalarUDFImpl for RegclassName {
    fn name(&self) -> &str {
        "sluice_regclass_name"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan("sluice_regclass_name needs an argument".into()));
        };
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let oids = oids.as_primitive::<arrow::datatypes::Int64Type>();
        let state = self.objects.state.lock();
        let out: StringArray = oids
            .iter()
            .map(|oid| {
                let oid = oid?;
                if oid == 0 {
                    return Some("-".to_string());
                }
                let known = i32::try_from(oid).ok().and_then(|oid| state.relation_names.get(&oid));
                Some(known.cloned().unwrap_or_else(|| oid.to_string()))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// A relation's name given as text (`schema.name` or `name`, quoted as SQL quotes), as
/// (schema, name); an unqualified one has no schema.
fn parse_relation_text(text: &str) -> Option<(Option<String>, String)> {
    let name = sluice::names::parse_object_name(text).ok()?;
    let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident().map(sluice::names::normalize)).collect();
    match parts.as_slice() {
        [name] => Some((None, name.clone())),
        [schema, name] | [_, schema, name] => Some((Some(schema.clone()), name.clone())),
        _ => None,
    }
}

/// The schemas an unqualified relation name is looked for in, in order: the catalogs, the
/// session's temporary schema, `public` (PostgreSQL's default search path).
fn lookup_schemas(schema: Option<String>, state: &ObjectsState) -> Vec<String> {
    match schema {
        Some(schema) => vec![schema],
        None => {
            let mut path = vec!["pg_catalog".to_string()];
            path.extend(state.namespaces.values().filter(|s| sluice::catalog::is_temporary_schema(s)).cloned());
            path.push("public".to_string());
            path
        }
    }
}

/// `sluice_regclass_oid(text)`: the OID of the relation a text names, what compat.rs makes of
/// `e::regclass` for a computed `e` (SQLAlchemy reflects identity columns through
/// `pg_get_serial_sequence(attrelid::regclass::text, attname)::regclass`), from the session's
/// last `pg_class` scan; 42P01 for a name it does not know, as PostgreSQL's cast.
#[derive(Debug)]
pub struct RegclassOid {
    objects: Arc<Objects>,
    signature: Signature,
}

impl RegclassOid {
    pub fn new(objects: Arc<Objects>) -> Self {
        // Volatile: it must not be folded at planning, before the scan that fills its names.
        Self { objects, signature: Signature::any(1, Volatility::Volatile) }
    }
}

same_objects_identity!(RegclassOid);

impl ScalarUDFImpl for RegclassOid {
    fn name(&self) -> &str {
        "sluice_regclass_oid"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan("sluice_regclass_oid needs an argument".into()));
        };
        let texts = arrow::compute::cast(first, &DataType::Utf8)?;
        let texts = texts.as_string::<i32>();
        let state = self.objects.state.lock();
        let mut out = Vec::with_capacity(texts.len());
        for text in texts.iter() {
            let Some(text) = text else {
                out.push(None);
                continue;
            };
            let found = parse_relation_text(text).and_then(|(schema, name)| {
                lookup_schemas(schema, &state)
                    .into_iter()
                    .find_map(|schema| state.relation_oids.get(&(schema, name.clone())).copied())
            });
            match found {
                Some(oid) => out.push(Some(oid)),
                None => {
                    return Err(DataFusionError::External(Box::new(sluice::Error::data(
                        "42P01",
                        format!("relation \"{text}\" does not exist"),
                    ))))
                }
            }
        }
        Ok(ColumnarValue::Array(Arc::new(Int32Array::from(out))))
    }
}

/// `pg_get_serial_sequence(table, column)` of computed arguments (the engine answers constant
/// ones): the sequence of a SERIAL or identity column, schema-qualified and quoted as PostgreSQL
/// prints it, NULL for another column; from the session's last `pg_class` scan. The table is
/// parsed as SQL names are, the column taken as it is (as in PostgreSQL).
#[derive(Debug)]
pub struct SerialSequence {
    objects: Arc<Objects>,
    signature: Signature,
}

impl SerialSequence {
    pub fn new(objects: Arc<Objects>) -> Self {
        Self { objects, signature: Signature::any(2, Volatility::Volatile) }
    }
}

same_objects_identity!(SerialSequence);

impl ScalarUDFImpl for SerialSequence {
    fn name(&self) -> &str {
        "pg_get_serial_sequence"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (Some(tables), Some(columns)) = (arrays.first(), arrays.get(1)) else {
            return Err(DataFusionError::Plan("pg_get_serial_sequence needs a table and a column".into()));
        };
        let tables = arrow::compute::cast(tables, &DataType::Utf8)?;
        let columns = arrow::compute::cast(columns, &DataType::Utf8)?;
        let (tables, columns) = (tables.as_string::<i32>(), columns.as_string::<i32>());
        let state = self.objects.state.lock();
        let out: StringArray = tables
            .iter()
            .zip(columns.iter())
            .map(|(table, column)| {
                let (schema, table) = parse_relation_text(table?)?;
                let column = column?.to_string();
                lookup_schemas(schema, &state)
                    .into_iter()
                    .find_map(|schema| state.serial_sequences.get(&(schema, table.clone(), column.clone())).cloned())
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `sluice_attribute_names(relation, attnums)`: the names of a Sluice table's columns numbered
/// `attnums` (an `int2[]`), in that order, a number it lacks left out; NULL for none (what
/// compat.rs makes of pgcli's correlated subquery `(SELECT array_agg(attname ORDER BY i) FROM
/// (SELECT unnest(conkey) AS attnum, generate_subscripts(conkey, 1) AS i) x JOIN pg_attribute c
/// USING (attnum) WHERE c.attrelid = fk.conrelid)`), from the session's last catalog scan.
#[derive(Debug)]
pub struct AttributeNames {
    objects: Arc<Objects>,
    signature: Signature,
}

impl AttributeNames {
    pub fn new(objects: Arc<Objects>) -> Self {
        Self { objects, signature: Signature::any(2, Volatility::Stable) }
    }
}

same_objects_identity!(AttributeNames);

impl ScalarUDFImpl for AttributeNames {
    fn name(&self) -> &str {
        "sluice_attribute_names"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [relations, numbers] = arrays.as_slice() else {
            return Err(DataFusionError::Plan("sluice_attribute_names needs a relation and attnums".into()));
        };
        let relations = arrow::compute::cast(relations, &DataType::Int64)?;
        let relations = relations.as_primitive::<arrow::datatypes::Int64Type>();
        let numbers =
            arrow::compute::cast(numbers, &DataType::List(Arc::new(Field::new("item", DataType::Int64, true))))?;
        let numbers = numbers.as_list::<i32>();
        let state = self.objects.state.lock();
        let names = (0..relations.len().min(numbers.len())).map(|row| {
            if relations.is_null(row) || numbers.is_null(row) {
                return None;
            }
            let columns = i32::try_from(relations.value(row)).ok().and_then(|oid| state.attribute_names.get(&oid))?;
            let list = numbers.value(row);
            let list = list.as_primitive_opt::<arrow::datatypes::Int64Type>()?;
            let names: Vec<Option<String>> = list
                .iter()
                .filter_map(|n| {
                    let position = usize::try_from(n?).ok()?.checked_sub(1)?;
                    columns.get(position).cloned().map(Some)
                })
                .collect();
            (!names.is_empty()).then_some(names)
        });
        Ok(ColumnarValue::Array(super::catalog::text_lists(names)))
    }
}

/// `pg_table_size(oid)`, `pg_total_relation_size(oid)`, `pg_relation_size(oid)`: a Sluice table's
/// data files in bytes (its key indexes are rebuilt from them and take no space of their own), as
/// the session's last `pg_class` scan found them; 0 for other relations (views, catalogs).
#[derive(Debug)]
pub struct RelationSize {
    name: &'static str,
    objects: Arc<Objects>,
    signature: Signature,
}

impl RelationSize {
    pub fn all(objects: &Arc<Objects>) -> Vec<Self> {
        ["pg_table_size", "pg_total_relation_size", "pg_relation_size"]
            .into_iter()
            .map(|name| Self { name, objects: objects.clone(), signature: Signature::variadic_any(Volatility::Stable) })
            .collect()
    }
}

impl PartialEq for RelationSize {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.objects, &other.objects)
    }
}

impl Eq for RelationSize {}

impl std::hash::Hash for RelationSize {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for RelationSize {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan(format!("{} needs a relation", self.name)));
        };
        let oids = arrow::compute::cast(first, &DataType::Int64)?;
        let oids = oids.as_primitive::<arrow::datatypes::Int64Type>();
        let state = self.objects.state.lock();
        let sizes: arrow::array::Int64Array = oids
            .iter()
            .map(|oid| {
                oid.map(|oid| i32::try_from(oid).ok().and_then(|oid| state.sizes.get(&oid).copied()).unwrap_or(0))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(sizes)))
    }
}

/// `pg_database_size(name)`: the bytes of the warehouse's files (its one database).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DatabaseSize {
    root: std::path::PathBuf,
    signature: Signature,
}

impl DatabaseSize {
    pub fn new(root: impl Into<std::path::PathBuf>) -> Self {
        Self { root: root.into(), signature: Signature::variadic_any(Volatility::Volatile) }
    }
}

/// The bytes of the files under `dir`, at most `budget` entries deep in all (a bound on the walk).
fn directory_bytes(dir: &std::path::Path, budget: &mut usize) -> i64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut total = 0i64;
    for entry in entries.flatten() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => total += directory_bytes(&entry.path(), budget),
            Ok(kind) if kind.is_file() => {
                total += entry.metadata().map(|m| i64::try_from(m.len()).unwrap_or(i64::MAX)).unwrap_or(0)
            }
            _ => {}
        }
    }
    total
}

impl ScalarUDFImpl for DatabaseSize {
    fn name(&self) -> &str {
        "pg_database_size"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let mut budget = 1_000_000;
        let bytes = directory_bytes(&self.root, &mut budget);
        let sizes = arrow::array::Int64Array::from(vec![bytes; args.number_rows]);
        Ok(ColumnarValue::Array(Arc::new(sizes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relation(columns: &[&str]) -> RelationInfo {
        let column = |name: &&str| sluice::system::ColumnInfo {
            name: name.to_string(),
            default: None,
            identity: None,
            type_name: "integer".into(),
            nullable: true,
            comment: None,
            generated: false,
            collation: None,
        };
        RelationInfo {
            schema: "public".into(),
            table: "t".into(),
            columns: columns.iter().map(column).collect(),
            indexes: vec![],
            checks: vec![],
            size_bytes: 0,
            foreign_keys: vec![],
            description: None,
            constraint_comments: vec![],
        }
    }

    #[test]
    fn check_columns_in_the_order_they_appear() {
        let t = relation(&["x", "y", "Z"]);
        assert_eq!(check_columns(&t, "y > x AND x < 100"), Some(vec![Some(2), Some(1)]));
        assert_eq!(check_columns(&t, "\"Z\" IS NOT NULL OR t.y = 1"), Some(vec![Some(3), Some(2)]));
        assert_eq!(check_columns(&t, "Z > 0"), None, "an unquoted name is folded to lower case");
        assert_eq!(check_columns(&t, "true"), None);
        assert_eq!(check_columns(&t, "x >"), None);
    }

    #[test]
    fn regclass_names_qualified_off_the_default_path() {
        assert_eq!(regclass_text("public", "orders"), "orders");
        assert_eq!(regclass_text("pg_catalog", "pg_class"), "pg_class");
        assert_eq!(regclass_text("shop", "Order Lines"), "shop.\"Order Lines\"");
    }
}
