//! Functions Sluice adds to SQL: JSON on text `table_changes` and `table_history`.

pub mod arithmetic;
pub mod format;
pub mod interval;
pub mod json;
pub mod json_build;
pub mod math;
pub mod table_changes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::execution::context::SessionContext;
use sluice_storage::snapshot::Snapshot;

use crate::warehouse::Warehouse;

/// DataFusion's `generate_series` table function, by the name FROM's rewrite calls it
/// (`crate::sql::lateral`).
pub const SERIES: &str = "__pg_generate_series";

/// Registers Sluice's functions in a session context.
pub fn register(ctx: &SessionContext, db: Arc<Warehouse>, snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>) {
    for function in json::functions() {
        ctx.register_udf(function);
    }
    for function in json_build::functions() {
        ctx.register_udf(function);
    }
    ctx.register_udf(format::function());
    // DataFusion's streaming generate_series under a second name, which FROM's rewrite calls
    // (see crate::sql::lateral).
    let series = ctx.state().table_functions().get("generate_series").map(|f| f.function().clone());
    if let Some(series) = series {
        ctx.register_udtf(SERIES, series);
    }
    // One process, never a standby.
    ctx.register_udf(datafusion::logical_expr::create_udf(
        "pg_is_in_recovery",
        vec![],
        arrow::datatypes::DataType::Boolean,
        datafusion::logical_expr::Volatility::Stable,
        Arc::new(|_| {
            Ok(datafusion::logical_expr::ColumnarValue::Scalar(datafusion::common::ScalarValue::Boolean(Some(false))))
        }),
    ));
    // Upper-cased month and day names of `to_char` (see `sql::postgres_forms`).
    ctx.register_udf(datafusion::functions::string::upper().as_ref().clone().with_aliases(["__pg_upper"]));
    for function in interval::functions() {
        ctx.register_udf(function);
    }
    for function in math::functions() {
        ctx.register_udf(function);
    }
    // PostgreSQL's name for a random (version 4) UUID.
    ctx.register_udf(datafusion::functions::string::uuid().as_ref().clone().with_aliases(["gen_random_uuid"]));
    ctx.register_udtf("table_changes", Arc::new(table_changes::TableChanges { db: db.clone(), snapshots }));
    ctx.register_udtf("table_history", Arc::new(table_changes::TableHistory { db }));
}
