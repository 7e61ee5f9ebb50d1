//! The Postgres catalog surface of a session: `pg_catalog` and its functions (from
//! datafusion-pg-catalog, built from Sluice's catalog), plus `version()`, `current_setting()` and
//! `set_config()` over the session's settings.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion_pg_catalog::pg_catalog::context::PgCatalogContextProvider;
use parking_lot::Mutex;
use sluice::{Database, Session};

use super::settings::{version_string, Settings};

/// Roles for `pg_roles` come from the warehouse catalog.
#[derive(Debug, Clone)]
pub struct RolesProvider {
    db: Database,
}

#[async_trait]
impl PgCatalogContextProvider for RolesProvider {
    async fn roles(&self) -> Vec<String> {
        let mut roles: Vec<String> = self.db.inner().catalog.current().roles.keys().cloned().collect();
        roles.insert(0, "sluice".into());
        roles
    }
}

/// What a settings function does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Version,
    CurrentSetting,
    SetConfig,
}

struct SettingsFunction {
    kind: Kind,
    settings: Arc<Mutex<Settings>>,
    signature: Signature,
}

impl std::fmt::Debug for SettingsFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SettingsFunction({:?})", self.kind)
    }
}

impl PartialEq for SettingsFunction {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && Arc::ptr_eq(&self.settings, &other.settings)
    }
}

impl Eq for SettingsFunction {}

impl std::hash::Hash for SettingsFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

impl ScalarUDFImpl for SettingsFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Version => "version",
            Kind::CurrentSetting => "current_setting",
            Kind::SetConfig => "set_config",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        if self.kind == Kind::Version {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(version_string()))));
        }
        let texts: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.clone().into_array(rows).and_then(|a| Ok(arrow::compute::cast(&a, &DataType::Utf8)?)))
            .collect::<DfResult<_>>()?;
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            let arg = |i: usize| {
                texts.get(i).map(|a| a.as_string::<i32>()).filter(|a| !a.is_null(row)).map(|a| a.value(row).to_string())
            };
            let name = arg(0).unwrap_or_default();
            match self.kind {
                Kind::CurrentSetting => {
                    let missing_ok = arg(1).is_some_and(|v| v == "true" || v == "t");
                    let value = self.settings.lock().get(&name).map(str::to_string);
                    match value {
                        Some(v) => out.push(Some(v)),
                        None if missing_ok => out.push(None),
                        None => {
                            return Err(datafusion::error::DataFusionError::Execution(format!(
                                "unrecognized configuration parameter \"{name}\""
                            )))
                        }
                    }
                }
                Kind::SetConfig => {
                    let value = arg(1).unwrap_or_default();
                    self.settings.lock().set(&name, &value);
                    out.push(Some(value));
                }
                Kind::Version => {}
            }
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

/// Installs the Postgres catalog and functions into a session.
pub fn install(session: &Session, db: &Database, settings: Arc<Mutex<Settings>>) {
    let context = session.context();
    if let Err(e) = datafusion_pg_catalog::setup_pg_catalog(
        context,
        sluice::session::CATALOG_NAME,
        RolesProvider { db: db.clone() },
    ) {
        tracing::warn!("pg_catalog is unavailable in this session: {e}");
    }
    for (kind, signature) in [
        (Kind::Version, Signature::nullary(Volatility::Stable)),
        (Kind::CurrentSetting, Signature::variadic_any(Volatility::Stable)),
        (Kind::SetConfig, Signature::variadic_any(Volatility::Volatile)),
    ] {
        context.register_udf(ScalarUDF::from(SettingsFunction { kind, settings: settings.clone(), signature }));
    }
}
