//! The Postgres catalog surface of a session: `pg_catalog` and its functions (from
//! datafusion-pg-catalog, built from Sluice's catalog), plus `version()`, `current_setting()` and
//! `set_config()` over the session's settings.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion_pg_catalog::pg_catalog::context::{PgCatalogContextProvider, Role};
use parking_lot::Mutex;
use sluice::Session;

use super::settings::{version_string, Settings};
use super::ServerState;

/// Roles for `pg_roles`: the built-in `sluice` superuser, the users of the users file and the
/// roles made with CREATE ROLE.
#[derive(Clone)]
pub struct RolesProvider {
    server: Arc<ServerState>,
}

impl std::fmt::Debug for RolesProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RolesProvider")
    }
}

#[async_trait]
impl PgCatalogContextProvider for RolesProvider {
    async fn roles(&self) -> Vec<String> {
        let mut roles = self.server.db.role_names();
        roles.retain(|r| r != "sluice");
        roles.insert(0, "sluice".into());
        roles
    }

    async fn role(&self, name: &str) -> Option<Role> {
        // With no users at all, every loopback client is the owner. (No catalog refresh here: a
        // pg_roles query asks once per role.)
        let privileges = match self.server.db.role_privileges(name) {
            Some(privileges) => privileges,
            None if self.server.db.role_names().is_empty() => sluice::Privileges::OWNER,
            None => sluice::Privileges::READ_ONLY,
        };
        Some(Role {
            name: name.to_string(),
            is_superuser: name == "sluice" || privileges.owner,
            can_login: true,
            can_create_db: false,
            can_create_role: privileges.owner,
            can_create_user: privileges.owner,
            can_replication: false,
            grants: vec![],
            inherited_roles: vec![],
        })
    }
}

/// What a settings function does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Version,
    CurrentSetting,
    SetConfig,
    /// `pg_function_is_visible(oid)` and its kin: everything is on the search path.
    Visible(&'static str),
    /// Describers of objects Sluice does not have (`pg_get_function_result(oid)` of a function,
    /// `shobj_description` of a database's comment): NULL, as Postgres answers when there is none.
    NoFunction(&'static str),
    /// `pg_size_pretty(bigint)`.
    SizePretty,
    /// `to_regtype(text)`: the oid of a type name, NULL when there is no such type.
    ToRegtype,
    /// `pg_encoding_to_char(int)`: an encoding's name (Sluice speaks only UTF8, number 6).
    EncodingName,
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
            Kind::Visible(name) | Kind::NoFunction(name) => name,
            Kind::SizePretty => "pg_size_pretty",
            Kind::ToRegtype => "to_regtype",
            Kind::EncodingName => "pg_encoding_to_char",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(match self.kind {
            Kind::Visible(_) => DataType::Boolean,
            Kind::ToRegtype => DataType::Int32,
            _ => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        match self.kind {
            Kind::Version => return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(version_string())))),
            Kind::Visible(_) => return Ok(ColumnarValue::Scalar(ScalarValue::Boolean(Some(true)))),
            Kind::NoFunction(_) => return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None))),
            Kind::ToRegtype => {
                let names = args.args.first().map(|a| a.clone().into_array(rows)).transpose()?;
                let names = match names {
                    Some(n) => arrow::compute::cast(&n, &DataType::Utf8)?,
                    None => return Ok(ColumnarValue::Scalar(ScalarValue::Int32(None))),
                };
                let oids: arrow::array::Int32Array =
                    names.as_string::<i32>().iter().map(|n| n.and_then(type_oid)).collect();
                return Ok(ColumnarValue::Array(Arc::new(oids)));
            }
            _ => {}
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
                    // The values SET refuses (22023), set_config refuses too, as in PostgreSQL.
                    if let Err(message) = super::settings::check(&name, &value) {
                        let error = sluice::Error::data("22023", message);
                        return Err(datafusion::error::DataFusionError::External(Box::new(error)));
                    }
                    self.settings.lock().set(&name, &value);
                    out.push(Some(value));
                }
                Kind::SizePretty => out.push(arg(0).and_then(|v| v.parse::<i64>().ok()).map(size_pretty)),
                // PostgreSQL's names of the encodings 0 and 6; '' for a number it does not know
                // (Sluice's server and client encodings are always UTF8).
                Kind::EncodingName => out.push(arg(0).map(|n| {
                    match n.trim() {
                        "0" => "SQL_ASCII",
                        "6" => "UTF8",
                        _ => "",
                    }
                    .to_string()
                })),
                Kind::Version | Kind::Visible(_) | Kind::NoFunction(_) | Kind::ToRegtype => {}
            }
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

/// Installs the Postgres catalog and functions into a session.
/// `connection` is the session's connection in [`super::activity::Activity`] (whose rights decide
/// what `pg_stat_activity` shows it of the others).
pub fn install(session: &Session, server: &Arc<ServerState>, settings: Arc<Mutex<Settings>>, connection: u64) {
    let context = session.context();
    if let Err(e) = datafusion_pg_catalog::setup_pg_catalog(
        context,
        sluice::session::CATALOG_NAME,
        RolesProvider { server: server.clone() },
    ) {
        tracing::warn!("pg_catalog is unavailable in this session: {e}");
    }
    // Keys, indexes and defaults, which datafusion-pg-catalog lacks: pg_catalog again, with them.
    let objects = Arc::new(super::relations::Objects::default());
    if let Some(catalog) = context.catalog(sluice::session::CATALOG_NAME) {
        if let Some(inner) = catalog.schema("pg_catalog") {
            let overlay = super::relations::PgCatalogOverlay::new(
                inner,
                server.clone(),
                session.catalog_view(),
                connection,
                objects.clone(),
                settings.clone(),
            );
            if let Err(e) = catalog.register_schema("pg_catalog", Arc::new(overlay)) {
                tracing::warn!("pg_catalog lacks keys and defaults in this session: {e}");
            }
        }
    }
    for printer in [
        super::relations::Printer::IndexDef,
        super::relations::Printer::ConstraintDef,
        super::relations::Printer::Expr,
        super::relations::Printer::AttributeDefault,
        super::relations::Printer::ViewDef,
    ] {
        context.register_udf(ScalarUDF::from(super::relations::DefinitionFunction::new(printer, objects.clone())));
    }
    for size in super::relations::RelationSize::all(&objects) {
        context.register_udf(ScalarUDF::from(size));
    }
    context.register_udf(ScalarUDF::from(super::relations::DatabaseSize::new(server.db.location())));
    context.register_udf(ScalarUDF::from(super::relations::RegclassName::new(objects.clone())));
    context.register_udf(ScalarUDF::from(super::relations::RegclassOid::new(objects.clone())));
    context.register_udf(ScalarUDF::from(super::relations::SerialSequence::new(objects.clone())));
    context.register_udf(ScalarUDF::from(super::relations::AttributeNames::new(objects.clone())));
    context.register_udf(ScalarUDF::from(super::descriptions::CatalogOid::default()));
    for describer in super::descriptions::DescriptionFunction::all(&objects) {
        context.register_udf(ScalarUDF::from(describer));
    }
    context.register_udf(ScalarUDF::from(super::relations::OtherTemporarySchema::new(
        objects.clone(),
        session.temporary_schema(),
    )));
    context.register_udf(ScalarUDF::from(super::relations::TableVisible::new(
        objects.clone(),
        settings.clone(),
        server.clone(),
        session.temporary_schema(),
    )));
    context.register_udf(ScalarUDF::from(ArrayToString::new()));
    context.register_udf(ScalarUDF::from(ExpandArray::new()));
    let crate_format_type = context.state().scalar_functions().get("format_type").cloned();
    if let Some(inner) = crate_format_type {
        let enums = super::enums::EnumNames(session.catalog_view());
        let format_type = Arc::new(ScalarUDF::from(FormatType { inner, enums }));
        context.register_udf(ScalarUDF::from(FormatTypes::new(format_type.clone())));
        context.register_udf(format_type.as_ref().clone());
    }
    for (kind, signature) in [
        (Kind::Version, Signature::nullary(Volatility::Stable)),
        (Kind::CurrentSetting, Signature::variadic_any(Volatility::Stable)),
        (Kind::SetConfig, Signature::variadic_any(Volatility::Volatile)),
        (Kind::Visible("pg_function_is_visible"), Signature::any(1, Volatility::Stable)),
        (Kind::Visible("pg_type_is_visible"), Signature::any(1, Volatility::Stable)),
        (Kind::Visible("pg_opclass_is_visible"), Signature::any(1, Volatility::Stable)),
        (Kind::Visible("pg_collation_is_visible"), Signature::any(1, Volatility::Stable)),
        (Kind::Visible("pg_operator_is_visible"), Signature::any(1, Volatility::Stable)),
        // Functions with an SQL body: Sluice has none.
        (Kind::NoFunction("pg_get_function_sqlbody"), Signature::any(1, Volatility::Stable)),
        // Tablespaces: only the default ones, which have no location of their own.
        (Kind::NoFunction("pg_tablespace_location"), Signature::any(1, Volatility::Stable)),
        (Kind::NoFunction("pg_get_function_result"), Signature::any(1, Volatility::Stable)),
        (Kind::NoFunction("pg_get_function_arguments"), Signature::any(1, Volatility::Stable)),
        (Kind::NoFunction("pg_get_function_identity_arguments"), Signature::any(1, Volatility::Stable)),
        // A call with constant names is answered by the engine before planning (a SERIAL's or
        // identity column's sequence name); one that reads them from rows gives NULL.
        // Advisory locks: Sluice takes none, so releasing them all does nothing.
        (Kind::NoFunction("pg_advisory_unlock_all"), Signature::nullary(Volatility::Volatile)),
        // Comments on shared objects (databases, roles, tablespaces): Sluice keeps none.
        (Kind::NoFunction("shobj_description"), Signature::any(2, Volatility::Stable)),
        (Kind::SizePretty, Signature::any(1, Volatility::Immutable)),
        (Kind::ToRegtype, Signature::any(1, Volatility::Stable)),
        (Kind::EncodingName, Signature::any(1, Volatility::Stable)),
    ] {
        context.register_udf(ScalarUDF::from(SettingsFunction { kind, settings: settings.clone(), signature }));
    }
}

/// The oid of a Postgres type name (`int4`, `integer`, `pg_catalog.text`, `_int4`, ...).
pub(super) fn type_oid(name: &str) -> Option<i32> {
    let name = name.trim().trim_start_matches("pg_catalog.").trim_matches('"').to_lowercase();
    if let Some(element) = name.strip_suffix("[]") {
        let element = type_oid(element)?;
        let element = pgwire::api::Type::from_oid(u32::try_from(element).ok()?)?;
        return type_oid(&format!("_{}", element.name()));
    }
    let canonical = match name.as_str() {
        "integer" | "int" => "int4",
        "bigint" => "int8",
        "smallint" => "int2",
        "boolean" => "bool",
        "real" => "float4",
        "double precision" => "float8",
        "character varying" => "varchar",
        "character" | "char" => "bpchar",
        "decimal" => "numeric",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        "time without time zone" => "time",
        "time with time zone" => "timetz",
        other => other,
    };
    static BY_NAME: std::sync::OnceLock<std::collections::HashMap<String, i32>> = std::sync::OnceLock::new();
    let by_name = BY_NAME.get_or_init(|| {
        (0..=5000u32)
            .filter_map(pgwire::api::Type::from_oid)
            .filter_map(|t| Some((t.name().to_string(), i32::try_from(t.oid()).ok()?)))
            .collect()
    });
    by_name.get(canonical).copied()
}

/// Postgres' `pg_size_pretty`: bytes below 10 kB, then kB, MB, GB, TB, PB, each below 10 of the
/// next unit... rounded half away from zero.
fn size_pretty(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if bytes.abs() < 10 * 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    for unit in UNITS {
        if value.abs() < 10.0 * 1024.0 - 0.5 || unit == "PB" {
            return format!("{} {unit}", value.round() as i64);
        }
        value /= 1024.0;
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn size_pretty_matches_postgres() {
        assert_eq!(super::size_pretty(8192), "8192 bytes");
        assert_eq!(super::size_pretty(10 * 1024), "10 kB");
        assert_eq!(super::size_pretty(1_000_000), "977 kB");
        assert_eq!(super::size_pretty(100_000_000), "95 MB");
    }

    #[tokio::test]
    async fn expand_array_numbers_each_array_from_one() {
        let context = datafusion::prelude::SessionContext::new();
        context.register_udf(super::ScalarUDF::from(super::ExpandArray::new()));
        let sql = "SELECT k, get_field(unnest(sluice_expand_array(a)), 'x') AS x, \
                   get_field(unnest(sluice_expand_array(a)), 'n') AS n \
                   FROM (VALUES (1, make_array(3, 4)), (2, make_array(7)), (3, make_array())) AS t(k, a) ORDER BY k, n";
        let batches = context.sql(sql).await.unwrap().collect().await.unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| ")).skip(1).collect();
        assert_eq!(rows, ["| 1 | 3 | 1 |", "| 1 | 4 | 2 |", "| 2 | 7 | 1 |"], "{text}");
    }

    #[test]
    fn pseudo_and_array_types_are_named() {
        assert_eq!(super::type_name_of_oid(2249).as_deref(), Some("record"));
        assert_eq!(super::type_name_of_oid(2283).as_deref(), Some("anyelement"));
        assert_eq!(super::type_name_of_oid(1017).as_deref(), Some("point[]"));
        assert_eq!(super::type_name_of_oid(2276).as_deref(), Some("\"any\""));
    }

    #[test]
    fn type_names_resolve_to_oids() {
        assert_eq!(super::type_oid("integer"), Some(23));
        assert_eq!(super::type_oid("pg_catalog.text"), Some(25));
        assert_eq!(super::type_oid("_int4"), Some(1007));
        assert_eq!(super::type_oid("integer[]"), Some(1007));
        assert_eq!(super::type_oid("time with time zone"), Some(1266));
        assert_eq!(super::type_oid("hstore"), None);
    }
}

/// `array_to_string` that also takes the text DataFusion's catalogs keep ACLs in (`nspacl`,
/// `proacl`, ... are text, not `aclitem[]`), which psql's `\dn+` and `\df+` join: a text
/// argument is returned as it is; arrays go to DataFusion's function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArrayToString {
    inner: Arc<ScalarUDF>,
    signature: Signature,
}

impl Default for ArrayToString {
    fn default() -> Self {
        Self::new()
    }
}

impl ArrayToString {
    pub fn new() -> Self {
        Self {
            inner: datafusion::functions_nested::string::array_to_string_udf(),
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

fn is_text(data_type: Option<&DataType>) -> bool {
    matches!(data_type, Some(DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8))
}

impl ScalarUDFImpl for ArrayToString {
    fn name(&self) -> &str {
        "array_to_string"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if is_text(arg_types.first()) {
            return Ok(arg_types.to_vec());
        }
        let fields: Vec<arrow::datatypes::FieldRef> =
            arg_types.iter().map(|t| Arc::new(arrow::datatypes::Field::new("f", t.clone(), true))).collect();
        let coerced =
            datafusion::logical_expr::type_coercion::functions::fields_with_udf(&fields, self.inner.as_ref())?;
        Ok(coerced.iter().map(|f| f.data_type().clone()).collect())
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        if is_text(arg_types.first()) {
            return Ok(DataType::Utf8);
        }
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if is_text(args.arg_fields.first().map(|f| f.data_type())) {
            return match args.args.first() {
                Some(value) => value.cast_to(&DataType::Utf8, None),
                None => Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None))),
            };
        }
        self.inner.invoke_with_args(args)
    }
}

/// `format_type(oid, typmod)`: datafusion-pg-catalog's, which names the everyday types as
/// PostgreSQL does (`integer`, `character varying(20)`, `numeric(10,2)`) and any other as
/// `oid(2249)`; those are named here from pgwire's list of PostgreSQL's types (`record`,
/// `anyelement`, `point[]`), as PostgreSQL's `format_type` does (the result of functions in
/// `pg_get_function_result`, psql's `\df`, pgjdbc's `getFunctions`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct FormatType {
    inner: Arc<ScalarUDF>,
    /// The enum types, which it names too.
    enums: super::enums::EnumNames,
}

/// PostgreSQL's name of a type datafusion-pg-catalog's `format_type` does not know.
/// A `text[]` column from its rows (None: a NULL array).
pub(super) fn text_lists(rows: impl IntoIterator<Item = Option<Vec<Option<String>>>>) -> ArrayRef {
    let mut builder = arrow::array::ListBuilder::new(arrow::array::StringBuilder::new());
    for row in rows {
        match row {
            Some(names) => {
                for name in names {
                    builder.values().append_option(name);
                }
                builder.append(true);
            }
            None => builder.append(false),
        }
    }
    Arc::new(builder.finish())
}

fn type_name_of_oid(oid: u32) -> Option<String> {
    let pg = pgwire::api::Type::from_oid(oid)?;
    Some(match pg.name() {
        // A keyword, which PostgreSQL quotes.
        "any" => "\"any\"".into(),
        name => match name.strip_prefix('_') {
            Some(element) => format!("{element}[]"),
            None => name.to_string(),
        },
    })
}

impl ScalarUDFImpl for FormatType {
    fn name(&self) -> &str {
        "format_type"
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let formatted = self.inner.invoke_with_args(args)?.into_array(rows)?;
        let formatted = arrow::compute::cast(&formatted, &DataType::Utf8)?;
        let enums = self.enums.enums();
        let named: StringArray = formatted
            .as_string::<i32>()
            .iter()
            .map(|name| {
                let name = name?;
                let oid = name.strip_prefix("oid(").and_then(|n| n.strip_suffix(')')).and_then(|n| n.parse().ok());
                let named =
                    oid.and_then(|oid| type_name_of_oid(oid).or_else(|| super::enums::EnumNames::name_of(&enums, oid)));
                Some(named.unwrap_or_else(|| name.to_string()))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(named)))
    }
}

/// `sluice_format_types(oids)`: `oids::regtype[]::text[]`, each type named as `format_type` names
/// it (pgcli's completion reads `proargtypes::regtype[]::text[]`). The oids come as an array, or
/// as the text of one that some catalog columns hold (`[23, 25]`, `{23,25}`, `23 25`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct FormatTypes {
    format_type: Arc<ScalarUDF>,
    signature: Signature,
}

impl FormatTypes {
    fn new(format_type: Arc<ScalarUDF>) -> Self {
        Self { format_type, signature: Signature::any(1, Volatility::Stable) }
    }

    /// The oids of one row's value: a list's elements, or the numbers in its text.
    fn oids(value: &ArrayRef, row: usize) -> DfResult<Option<Vec<Option<i64>>>> {
        if value.is_null(row) {
            return Ok(None);
        }
        let elements = match value.data_type() {
            DataType::List(_) => value.as_list::<i32>().value(row),
            DataType::LargeList(_) => value.as_list::<i64>().value(row),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let text = arrow::compute::cast(&value.slice(row, 1), &DataType::Utf8)?;
                let text = text.as_string::<i32>().value(0).to_string();
                let oids = text
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|n| !n.is_empty())
                    .map(|n| n.parse::<i64>().ok())
                    .collect();
                return Ok(Some(oids));
            }
            other => {
                return Err(datafusion::error::DataFusionError::Plan(format!("cannot cast type {other} to regtype[]")))
            }
        };
        let elements = arrow::compute::cast(&elements, &DataType::Int64)?;
        Ok(Some(elements.as_primitive::<arrow::datatypes::Int64Type>().iter().collect()))
    }
}

impl ScalarUDFImpl for FormatTypes {
    fn name(&self) -> &str {
        "sluice_format_types"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::List(Arc::new(arrow::datatypes::Field::new("item", DataType::Utf8, true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let Some(first) = args.args.first() else {
            return Err(datafusion::error::DataFusionError::Plan("sluice_format_types needs an argument".into()));
        };
        let value = first.clone().into_array(rows)?;
        let mut lists = Vec::with_capacity(rows);
        for row in 0..rows {
            let Some(oids) = Self::oids(&value, row)? else {
                lists.push(None);
                continue;
            };
            let count = oids.len();
            let oids = Arc::new(arrow::array::Int64Array::from(oids)) as ArrayRef;
            let named = self.format_type.invoke_with_args(ScalarFunctionArgs {
                args: vec![ColumnarValue::Array(oids), ColumnarValue::Scalar(ScalarValue::Int32(None))],
                arg_fields: vec![
                    Arc::new(arrow::datatypes::Field::new("oid", DataType::Int64, true)),
                    Arc::new(arrow::datatypes::Field::new("typmod", DataType::Int32, true)),
                ],
                number_rows: count,
                return_field: Arc::new(arrow::datatypes::Field::new("format_type", DataType::Utf8, true)),
                config_options: args.config_options.clone(),
            })?;
            let named = arrow::compute::cast(&named.into_array(count)?, &DataType::Utf8)?;
            lists.push(Some(named.as_string::<i32>().iter().map(|n| n.map(str::to_string)).collect::<Vec<_>>()));
        }
        Ok(ColumnarValue::Array(text_lists(lists)))
    }
}

/// `sluice_expand_array(a)`: the elements of an array each with its position from 1, as
/// `{x, n}` structs, which `unnest` makes the rows of PostgreSQL's
/// `information_schema._pg_expandarray(a)` (compat.rs rewrites the one into the other).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ExpandArray {
    signature: Signature,
}

impl Default for ExpandArray {
    fn default() -> Self {
        Self::new()
    }
}

impl ExpandArray {
    pub fn new() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }

    fn element_fields(element: &DataType) -> arrow::datatypes::Fields {
        arrow::datatypes::Fields::from(vec![
            arrow::datatypes::Field::new("x", element.clone(), true),
            arrow::datatypes::Field::new("n", DataType::Int32, false),
        ])
    }
}

impl ScalarUDFImpl for ExpandArray {
    fn name(&self) -> &str {
        "sluice_expand_array"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        let element = match arg_types.first() {
            Some(DataType::List(field) | DataType::LargeList(field) | DataType::FixedSizeList(field, _)) => {
                field.data_type().clone()
            }
            Some(DataType::Null) => DataType::Null,
            other => {
                return Err(datafusion::error::DataFusionError::Plan(format!(
                    "_pg_expandarray needs an array, not {other:?}"
                )))
            }
        };
        let item = DataType::Struct(Self::element_fields(&element));
        Ok(DataType::List(Arc::new(arrow::datatypes::Field::new("item", item, true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let Some(first) = args.args.first() else {
            return Err(datafusion::error::DataFusionError::Plan("_pg_expandarray needs an array".into()));
        };
        let arrays = first.clone().into_array(rows)?;
        let lists = match arrays.data_type() {
            DataType::List(_) => arrays,
            DataType::LargeList(field) | DataType::FixedSizeList(field, _) => {
                arrow::compute::cast(&arrays, &DataType::List(field.clone()))?
            }
            // NULL (an untyped NULL argument): no rows.
            _ => {
                let element = DataType::Null;
                let item = DataType::Struct(Self::element_fields(&element));
                let list = DataType::List(Arc::new(arrow::datatypes::Field::new("item", item, true)));
                return Ok(ColumnarValue::Array(arrow::array::new_null_array(&list, rows)));
            }
        };
        let lists = lists.as_list::<i32>();
        // Each element's position within its own array, from 1 (0 for values outside every
        // list, which a sliced array can hold).
        let offsets = lists.offsets();
        let mut positions = vec![0i32; lists.values().len()];
        for window in offsets.windows(2) {
            if let [start, end] = window {
                let (start, end) = (usize::try_from(*start).unwrap_or(0), usize::try_from(*end).unwrap_or(0));
                for (position, slot) in positions.iter_mut().take(end).skip(start).enumerate() {
                    *slot = i32::try_from(position + 1).unwrap_or(i32::MAX);
                }
            }
        }
        let fields = Self::element_fields(lists.values().data_type());
        let structs = arrow::array::StructArray::try_new(
            fields.clone(),
            vec![lists.values().clone(), Arc::new(arrow::array::Int32Array::from(positions)) as ArrayRef],
            None,
        )?;
        let item = Arc::new(arrow::datatypes::Field::new("item", DataType::Struct(fields), true));
        let out = arrow::array::ListArray::try_new(item, offsets.clone(), Arc::new(structs), lists.nulls().cloned())?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}
