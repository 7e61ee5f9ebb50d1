//! What the layers above planning plug into a database when it opens, so that planning does not
//! depend on them: the extra schemas every query context shows (the `sluice` system schema), the
//! reader of a materialized view's rows (the views' runtime), and what a DROP TABLE that drops
//! flows tells the flows' runtime.

use std::sync::{Arc, RwLock};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::catalog::SchemaProvider;
use futures::future::BoxFuture;

use crate::catalog::TableEntry;
use crate::error::{Error, Result};

/// Makes a schema for a new query context.
pub type SchemaFactory = Arc<dyn Fn() -> Arc<dyn SchemaProvider> + Send + Sync>;

/// A materialized view's rows, caught up with its inputs.
pub type ViewRows = (SchemaRef, Arc<Vec<RecordBatch>>);

/// Reads a materialized view's rows.
pub type ViewReader = Arc<dyn Fn(TableEntry) -> BoxFuture<'static, Result<ViewRows>> + Send + Sync>;

/// The hooks of one database.
#[derive(Default)]
pub struct Hooks {
    schemas: RwLock<Vec<(String, SchemaFactory)>>,
    view_reader: RwLock<Option<ViewReader>>,
    flow_dropped: RwLock<Option<FlowDropped>>,
}

/// Told the name of each flow a statement dropped.
pub type FlowDropped = Arc<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

impl Hooks {
    /// Adds a schema every later query context shows.
    pub fn add_schema(&self, name: &str, factory: SchemaFactory) {
        self.schemas.write().unwrap_or_else(|p| p.into_inner()).push((name.to_string(), factory));
    }

    /// The extra schemas, made for a new query context.
    pub fn schemas(&self) -> Vec<(String, Arc<dyn SchemaProvider>)> {
        let schemas = self.schemas.read().unwrap_or_else(|p| p.into_inner());
        schemas.iter().map(|(name, factory)| (name.clone(), factory())).collect()
    }

    /// Sets the reader of materialized views' rows.
    pub fn set_view_reader(&self, reader: ViewReader) {
        *self.view_reader.write().unwrap_or_else(|p| p.into_inner()) = Some(reader);
    }

    /// A materialized view's rows.
    pub async fn view_rows(&self, entry: &TableEntry) -> Result<ViewRows> {
        let reader = self.view_reader.read().unwrap_or_else(|p| p.into_inner()).clone();
        match reader {
            Some(reader) => reader(entry.clone()).await,
            None => Err(Error::Internal(format!("no runtime maintains the materialized view {}", entry.name))),
        }
    }

    /// Sets what is told of dropped flows.
    pub fn set_flow_dropped(&self, hook: FlowDropped) {
        *self.flow_dropped.write().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    /// Tells the flows' runtime that a flow was dropped (its state is forgotten, so a new flow of
    /// the same name starts afresh).
    pub fn flow_dropped(&self, name: &str) {
        let hook = self.flow_dropped.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hook) = hook {
            hook(name);
        }
    }
}
