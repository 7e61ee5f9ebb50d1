//! Delta table schemas: the schema string (Spark's StructType JSON), its mapping to and from Arrow,
//! and column mapping (physical names and field ids).
//!
//! The Delta [`StructType`] is the source of truth for a table's schema; Arrow schemas are derived
//! from it for reading and writing. Field metadata is kept as JSON values so that it round-trips
//! exactly through the log. In Arrow, the column-mapping entries (and any other metadata) appear as
//! field metadata strings, which is how physical names reach the Parquet writer.
//!
//! Arrow shapes chosen for the Delta types (the same as the Parquet reader yields for files that
//! Spark writes, so data read from disk needs no renaming): `array` is a `List` whose item is named
//! `element`; `map` is a `Map` of `key_value` entries with `key` and `value`; `timestamp` is
//! `Timestamp(µs, "UTC")`, `timestamp_ntz` is `Timestamp(µs, None)`; `decimal(p,s)` is
//! `Decimal128(p,s)`; `void` is `Null`.
//!
//! Delta has no type for a time of day. Sluice stores one as a `long` of microseconds since
//! midnight whose field metadata names the type ([`DECLARED_TYPE_KEY`] = `time` or `time(p)`):
//! Spark and delta-rs read the number, Sluice reads Arrow `Time64(µs)`. The marker changes only
//! the Arrow type readers see ([`StructField::arrow_type`]); Parquet files, statistics and
//! partition values hold the `long` ([`StructType::to_physical_arrow`]), so the files are plain
//! Delta. A `long` without the marker (any table another writer made) stays a `long`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field, Fields, Schema, SchemaRef, TimeUnit};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Field metadata key of a column's physical name under column mapping.
pub const PHYSICAL_NAME_KEY: &str = "delta.columnMapping.physicalName";
/// Field metadata key of a column's id under column mapping.
pub const COLUMN_ID_KEY: &str = "delta.columnMapping.id";
/// Table property that enables column mapping (`none`, `name` or `id`).
pub const COLUMN_MAPPING_MODE_KEY: &str = "delta.columnMapping.mode";
/// Table property with the largest column id handed out so far.
pub const COLUMN_MAPPING_MAX_ID_KEY: &str = "delta.columnMapping.maxColumnId";
/// Arrow field metadata key under which the Parquet reader and writer keep field ids.
pub const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";
/// The time zone of `timestamp` columns in Arrow.
pub const UTC: &str = "UTC";
/// Field metadata key naming the type a column was declared with, where its Delta type alone
/// does not say it (`uuid` and `varchar(20)` stored as `string`, `time` stored as `long`).
pub const DECLARED_TYPE_KEY: &str = "sluice.type";
/// The Arrow type of a time-of-day column (microseconds since midnight).
pub const TIME_OF_DAY: ArrowType = ArrowType::Time64(TimeUnit::Microsecond);

/// Whether a declared type name is a time of day without zone: `time` or `time(p)`.
pub fn is_time_of_day(declared: &str) -> bool {
    declared == "time" || declared.strip_prefix("time(").is_some_and(|rest| rest.ends_with(')'))
}

/// The Arrow type of an `interval` column: months, days and nanoseconds, as DataFusion computes
/// with them.
pub const INTERVAL: ArrowType = ArrowType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano);
/// The declared type name of an `interval` column.
pub const INTERVAL_NAME: &str = "interval";

/// Largest nesting depth accepted in a schema string (a guard against hostile input).
const SCHEMA_DEPTH_MAX: usize = 64;

/// A Delta data type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataType {
    Primitive(PrimitiveType),
    Struct(StructType),
    Array(Box<ArrayType>),
    Map(Box<MapType>),
}

/// The primitive Delta types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrimitiveType {
    String,
    Long,
    Integer,
    Short,
    Byte,
    Float,
    Double,
    Boolean,
    Binary,
    Date,
    Timestamp,
    TimestampNtz,
    Decimal { precision: u8, scale: i8 },
    Void,
}

/// `array<element>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayType {
    pub element_type: DataType,
    pub contains_null: bool,
}

/// `map<key, value>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapType {
    pub key_type: DataType,
    pub value_type: DataType,
    pub value_contains_null: bool,
}

/// One column (or nested field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructField {
    pub name: String,
    pub data_type: DataType,
    pub nullable: bool,
    pub metadata: Map<String, Value>,
}

/// A struct: the table schema, or a nested struct column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StructType {
    pub fields: Vec<StructField>,
}

/// How the columns of a table's Parquet files are matched to its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnMappingMode {
    /// Parquet columns carry the logical names.
    None,
    /// Parquet columns carry `delta.columnMapping.physicalName`.
    Name,
    /// Parquet columns are matched by field id (`delta.columnMapping.id`).
    Id,
}

impl ColumnMappingMode {
    /// Reads the mode from a table configuration.
    pub fn from_configuration(configuration: &HashMap<String, String>) -> Result<Self> {
        match configuration.get(COLUMN_MAPPING_MODE_KEY).map(|s| s.to_ascii_lowercase()) {
            None => Ok(Self::None),
            Some(mode) => match mode.as_str() {
                "none" => Ok(Self::None),
                "name" => Ok(Self::Name),
                "id" => Ok(Self::Id),
                other => Err(Error::Schema(format!("unknown column mapping mode '{other}'"))),
            },
        }
    }
}

impl PrimitiveType {
    /// The name used in schema strings.
    pub fn type_name(&self) -> String {
        match self {
            Self::String => "string".into(),
            Self::Long => "long".into(),
            Self::Integer => "integer".into(),
            Self::Short => "short".into(),
            Self::Byte => "byte".into(),
            Self::Float => "float".into(),
            Self::Double => "double".into(),
            Self::Boolean => "boolean".into(),
            Self::Binary => "binary".into(),
            Self::Date => "date".into(),
            Self::Timestamp => "timestamp".into(),
            Self::TimestampNtz => "timestamp_ntz".into(),
            Self::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            Self::Void => "void".into(),
        }
    }

    fn parse(name: &str) -> Result<Self> {
        let lower = name.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "string" => Self::String,
            "long" | "bigint" => Self::Long,
            "integer" | "int" => Self::Integer,
            "short" | "smallint" => Self::Short,
            "byte" | "tinyint" => Self::Byte,
            "float" | "real" => Self::Float,
            "double" => Self::Double,
            "boolean" => Self::Boolean,
            "binary" => Self::Binary,
            "date" => Self::Date,
            "timestamp" => Self::Timestamp,
            "timestamp_ntz" | "timestamp without time zone" => Self::TimestampNtz,
            "void" => Self::Void,
            "decimal" => Self::Decimal { precision: 10, scale: 0 },
            _ => return parse_decimal(&lower).ok_or_else(|| Error::Schema(format!("unknown type '{name}'"))),
        })
    }

    /// The Arrow type that holds this type.
    pub fn to_arrow(&self) -> ArrowType {
        match self {
            Self::String => ArrowType::Utf8,
            Self::Long => ArrowType::Int64,
            Self::Integer => ArrowType::Int32,
            Self::Short => ArrowType::Int16,
            Self::Byte => ArrowType::Int8,
            Self::Float => ArrowType::Float32,
            Self::Double => ArrowType::Float64,
            Self::Boolean => ArrowType::Boolean,
            Self::Binary => ArrowType::Binary,
            Self::Date => ArrowType::Date32,
            Self::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            Self::TimestampNtz => ArrowType::Timestamp(TimeUnit::Microsecond, None),
            Self::Decimal { precision, scale } => ArrowType::Decimal128(*precision, *scale),
            Self::Void => ArrowType::Null,
        }
    }
}

fn parse_decimal(lower: &str) -> Option<PrimitiveType> {
    let inner = lower.strip_prefix("decimal")?.trim().strip_prefix('(')?.strip_suffix(')')?;
    let (precision, scale) = inner.split_once(',')?;
    let precision: u8 = precision.trim().parse().ok()?;
    let scale: i8 = scale.trim().parse().ok()?;
    (1..=38).contains(&precision).then_some(())?;
    (scale >= 0 && scale as u8 <= precision).then_some(PrimitiveType::Decimal { precision, scale })
}

impl DataType {
    /// Parses a type from its JSON form in a schema string.
    pub fn from_json(value: &Value) -> Result<Self> {
        Self::from_json_at(value, 0)
    }

    fn from_json_at(value: &Value, depth: usize) -> Result<Self> {
        if depth > SCHEMA_DEPTH_MAX {
            return Err(Error::Schema(format!("schema nested deeper than {SCHEMA_DEPTH_MAX} levels")));
        }
        match value {
            Value::String(name) => Ok(Self::Primitive(PrimitiveType::parse(name)?)),
            Value::Object(object) => match object.get("type").and_then(Value::as_str) {
                Some("struct") => Ok(Self::Struct(StructType::from_json_at(value, depth + 1)?)),
                Some("array") => {
                    let element = object.get("elementType").ok_or_else(|| missing("array", "elementType"))?;
                    Ok(Self::Array(Box::new(ArrayType {
                        element_type: Self::from_json_at(element, depth + 1)?,
                        contains_null: object.get("containsNull").and_then(Value::as_bool).unwrap_or(true),
                    })))
                }
                Some("map") => {
                    let key = object.get("keyType").ok_or_else(|| missing("map", "keyType"))?;
                    let value = object.get("valueType").ok_or_else(|| missing("map", "valueType"))?;
                    Ok(Self::Map(Box::new(MapType {
                        key_type: Self::from_json_at(key, depth + 1)?,
                        value_type: Self::from_json_at(value, depth + 1)?,
                        value_contains_null: object.get("valueContainsNull").and_then(Value::as_bool).unwrap_or(true),
                    })))
                }
                other => Err(Error::Schema(format!("unknown complex type {other:?}"))),
            },
            other => Err(Error::Schema(format!("a type must be a string or an object, found {other}"))),
        }
    }

    /// The JSON form used in schema strings.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Primitive(p) => Value::String(p.type_name()),
            Self::Struct(s) => s.to_json(),
            Self::Array(a) => json!({
                "type": "array",
                "elementType": a.element_type.to_json(),
                "containsNull": a.contains_null,
            }),
            Self::Map(m) => json!({
                "type": "map",
                "keyType": m.key_type.to_json(),
                "valueType": m.value_type.to_json(),
                "valueContainsNull": m.value_contains_null,
            }),
        }
    }

    /// The Arrow type for this type, with logical field names.
    pub fn to_arrow(&self) -> ArrowType {
        self.to_arrow_with(NameChoice::Logical)
    }

    fn to_arrow_with(&self, names: NameChoice) -> ArrowType {
        match self {
            Self::Primitive(p) => p.to_arrow(),
            Self::Struct(s) => ArrowType::Struct(s.to_arrow_fields(names)),
            Self::Array(a) => {
                ArrowType::List(Arc::new(Field::new("element", a.element_type.to_arrow_with(names), a.contains_null)))
            }
            Self::Map(m) => {
                let entries = Fields::from(vec![
                    Field::new("key", m.key_type.to_arrow_with(names), false),
                    Field::new("value", m.value_type.to_arrow_with(names), m.value_contains_null),
                ]);
                ArrowType::Map(Arc::new(Field::new("key_value", ArrowType::Struct(entries), false)), false)
            }
        }
    }

    /// Converts an Arrow type. Unsigned integers widen to the next signed type (UInt64 to long).
    pub fn from_arrow(arrow: &ArrowType) -> Result<Self> {
        use PrimitiveType as P;
        let primitive = |p| Ok(Self::Primitive(p));
        match arrow {
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => primitive(P::String),
            ArrowType::Int64 | ArrowType::UInt32 | ArrowType::UInt64 => primitive(P::Long),
            ArrowType::Int32 | ArrowType::UInt16 => primitive(P::Integer),
            ArrowType::Int16 | ArrowType::UInt8 => primitive(P::Short),
            ArrowType::Int8 => primitive(P::Byte),
            ArrowType::Float16 | ArrowType::Float32 => primitive(P::Float),
            ArrowType::Float64 => primitive(P::Double),
            ArrowType::Boolean => primitive(P::Boolean),
            ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView | ArrowType::FixedSizeBinary(_) => {
                primitive(P::Binary)
            }
            ArrowType::Date32 | ArrowType::Date64 => primitive(P::Date),
            ArrowType::Timestamp(_, Some(_)) => primitive(P::Timestamp),
            ArrowType::Timestamp(_, None) => primitive(P::TimestampNtz),
            ArrowType::Decimal128(p, s) if *p <= 38 && *s >= 0 => primitive(P::Decimal { precision: *p, scale: *s }),
            ArrowType::Null => primitive(P::Void),
            ArrowType::Struct(fields) => Ok(Self::Struct(StructType::from_arrow_fields(fields)?)),
            ArrowType::List(item) | ArrowType::LargeList(item) | ArrowType::ListView(item) => {
                Ok(Self::Array(Box::new(ArrayType {
                    element_type: Self::from_arrow(item.data_type())?,
                    contains_null: item.is_nullable(),
                })))
            }
            ArrowType::FixedSizeList(item, _) => Ok(Self::Array(Box::new(ArrayType {
                element_type: Self::from_arrow(item.data_type())?,
                contains_null: item.is_nullable(),
            }))),
            ArrowType::Map(entries, _) => match entries.data_type() {
                ArrowType::Struct(kv) if kv.len() == 2 => match kv.as_ref() {
                    [key, value] => Ok(Self::Map(Box::new(MapType {
                        key_type: Self::from_arrow(key.data_type())?,
                        value_type: Self::from_arrow(value.data_type())?,
                        value_contains_null: value.is_nullable(),
                    }))),
                    _ => Err(Error::Schema("map entries must be a struct of two fields".into())),
                },
                other => Err(Error::Schema(format!("map entries must be a struct of two fields, found {other}"))),
            },
            ArrowType::Dictionary(_, value) => Self::from_arrow(value),
            other => Err(Error::Schema(format!("Arrow type {other} has no Delta equivalent"))),
        }
    }

    /// Whether a value of this type may be stored where `other` is declared (used by writers).
    pub fn is_primitive(&self) -> bool {
        matches!(self, Self::Primitive(_))
    }
}

fn missing(kind: &str, key: &str) -> Error {
    Error::Schema(format!("{kind} type without '{key}'"))
}

/// Which Arrow form of a schema: as readers see it, or as Parquet files hold it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NameChoice {
    /// Logical names and the types readers see (a time of day as `Time64`).
    Logical,
    /// Logical names and the stored types (a time of day as `Int64`).
    Stored,
    /// Physical names (column mapping), field ids and the stored types.
    Physical,
}

impl StructField {
    /// A nullable or non-nullable field without metadata.
    pub fn new(name: impl Into<String>, data_type: DataType, nullable: bool) -> Self {
        Self { name: name.into(), data_type, nullable, metadata: Map::new() }
    }

    /// The name of the column in Parquet files under column mapping `name` (the logical name
    /// when the field has no physical name).
    pub fn physical_name(&self) -> &str {
        self.metadata.get(PHYSICAL_NAME_KEY).and_then(Value::as_str).unwrap_or(&self.name)
    }

    /// The column-mapping id, if the field has one.
    pub fn column_id(&self) -> Option<i64> {
        match self.metadata.get(COLUMN_ID_KEY)? {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.data_type.to_json(),
            "nullable": self.nullable,
            "metadata": Value::Object(self.metadata.clone()),
        })
    }

    /// Whether the column holds a time of day (a `long` declared `time`, see the module docs).
    pub fn is_time_of_day(&self) -> bool {
        self.data_type == DataType::Primitive(PrimitiveType::Long)
            && self.metadata.get(DECLARED_TYPE_KEY).and_then(Value::as_str).is_some_and(is_time_of_day)
    }

    /// Whether the column holds intervals: a `string` declared `interval`. Delta has no interval
    /// type; the text is Arrow's form of the value (`1 mons 2 days 3.500000000 secs`), which
    /// every Delta reader shows as it is and Arrow's cast reads back exactly (months, days and
    /// nanoseconds stay apart, as PostgreSQL keeps them).
    pub fn is_interval(&self) -> bool {
        self.data_type == DataType::Primitive(PrimitiveType::String)
            && self.metadata.get(DECLARED_TYPE_KEY).and_then(Value::as_str) == Some(INTERVAL_NAME)
    }

    /// The Arrow type of the column as readers see it: its Delta type's, except for a time of day
    /// (`Time64(µs)`, stored as a `long`) and an interval (`Interval(MonthDayNano)`, stored as a
    /// `string`).
    pub fn arrow_type(&self) -> ArrowType {
        if self.is_time_of_day() {
            return TIME_OF_DAY;
        }
        if self.is_interval() {
            return INTERVAL;
        }
        self.data_type.to_arrow()
    }

    fn to_arrow(&self, names: NameChoice) -> Field {
        let name = match names {
            NameChoice::Logical | NameChoice::Stored => self.name.clone(),
            NameChoice::Physical => self.physical_name().to_string(),
        };
        let mut metadata: HashMap<String, String> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
            .collect();
        if let (NameChoice::Physical, Some(id)) = (names, self.column_id()) {
            metadata.insert(PARQUET_FIELD_ID_KEY.to_string(), id.to_string());
        }
        let data_type = match names {
            NameChoice::Logical if self.is_time_of_day() => TIME_OF_DAY,
            NameChoice::Logical if self.is_interval() => INTERVAL,
            _ => self.data_type.to_arrow_with(names),
        };
        Field::new(name, data_type, self.nullable).with_metadata(metadata)
    }

    /// Converts an Arrow field (a `Time32`/`Time64` one becomes a time of day, stored as `long`).
    pub fn from_arrow(field: &Field) -> Result<Self> {
        let mut metadata: Map<String, Value> = field
            .metadata()
            .iter()
            .filter(|(k, _)| k.as_str() != PARQUET_FIELD_ID_KEY)
            .map(|(k, v)| {
                let value = if k == COLUMN_ID_KEY {
                    v.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::String(v.clone()))
                } else if k == PHYSICAL_NAME_KEY {
                    Value::String(v.clone())
                } else {
                    serde_json::from_str::<Value>(v)
                        .ok()
                        .filter(|parsed| !parsed.is_string() && !parsed.is_number())
                        .unwrap_or_else(|| Value::String(v.clone()))
                };
                (k.clone(), value)
            })
            .collect();
        let data_type = match field.data_type() {
            // A time of day is stored as its microseconds, the field naming the type.
            ArrowType::Time32(_) | ArrowType::Time64(_) => {
                if !metadata.get(DECLARED_TYPE_KEY).and_then(Value::as_str).is_some_and(is_time_of_day) {
                    metadata.insert(DECLARED_TYPE_KEY.into(), Value::String("time".into()));
                }
                DataType::Primitive(PrimitiveType::Long)
            }
            // An interval is stored as text, the field naming the type.
            ArrowType::Interval(_) => {
                metadata.insert(DECLARED_TYPE_KEY.into(), Value::String(INTERVAL_NAME.into()));
                DataType::Primitive(PrimitiveType::String)
            }
            other => DataType::from_arrow(other)?,
        };
        Ok(Self { name: field.name().clone(), data_type, nullable: field.is_nullable(), metadata })
    }
}

impl StructType {
    /// A struct of these fields.
    pub fn new(fields: Vec<StructField>) -> Self {
        Self { fields }
    }

    /// Parses a schema string.
    pub fn parse(schema_string: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(schema_string)
            .map_err(|e| Error::Schema(format!("schema string is not valid JSON: {e}")))?;
        let schema = Self::from_json_at(&value, 0)?;
        schema.check_names()?;
        Ok(schema)
    }

    fn from_json_at(value: &Value, depth: usize) -> Result<Self> {
        let fields = value
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Schema("struct type without 'fields'".into()))?;
        let fields = fields
            .iter()
            .map(|field| {
                let name = field
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::Schema("struct field without 'name'".into()))?;
                let data_type = field.get("type").ok_or_else(|| missing("field", "type"))?;
                Ok(StructField {
                    name: name.to_string(),
                    data_type: DataType::from_json_at(data_type, depth + 1)?,
                    nullable: field.get("nullable").and_then(Value::as_bool).unwrap_or(true),
                    metadata: field.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { fields })
    }

    /// Field names must be unique, ignoring case, at every level.
    pub fn check_names(&self) -> Result<()> {
        let mut seen = HashSet::new();
        for field in &self.fields {
            if field.name.is_empty() {
                return Err(Error::Schema("a column name must not be empty".into()));
            }
            if !seen.insert(field.name.to_lowercase()) {
                return Err(Error::Schema(format!("column '{}' appears twice (names ignore case)", field.name)));
            }
            if let DataType::Struct(inner) = &field.data_type {
                inner.check_names()?;
            }
        }
        Ok(())
    }

    /// The schema string.
    pub fn to_json(&self) -> Value {
        json!({"type": "struct", "fields": self.fields.iter().map(StructField::to_json).collect::<Vec<_>>()})
    }

    /// The schema string as text.
    pub fn to_schema_string(&self) -> String {
        self.to_json().to_string()
    }

    /// The field with this name (exact match first, then ignoring case as Delta does).
    pub fn field(&self, name: &str) -> Option<&StructField> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .or_else(|| self.fields.iter().find(|f| f.name.eq_ignore_ascii_case(name)))
    }

    /// The position of a field by name (as [`Self::field`]).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields
            .iter()
            .position(|f| f.name == name)
            .or_else(|| self.fields.iter().position(|f| f.name.eq_ignore_ascii_case(name)))
    }

    /// The Arrow schema with logical names (what readers see).
    pub fn to_arrow(&self) -> Schema {
        Schema::new(self.to_arrow_fields(NameChoice::Logical))
    }

    /// The Arrow schema of Parquet files: the stored types, and under column mapping the physical
    /// names and field ids.
    pub fn to_physical_arrow(&self, mode: ColumnMappingMode) -> Schema {
        match mode {
            ColumnMappingMode::None => Schema::new(self.to_arrow_fields(NameChoice::Stored)),
            _ => Schema::new(self.to_arrow_fields(NameChoice::Physical)),
        }
    }

    fn to_arrow_fields(&self, names: NameChoice) -> Fields {
        self.fields.iter().map(|f| f.to_arrow(names)).collect()
    }

    /// Converts an Arrow schema.
    pub fn from_arrow(schema: &Schema) -> Result<Self> {
        Self::from_arrow_fields(schema.fields())
    }

    fn from_arrow_fields(fields: &Fields) -> Result<Self> {
        let schema = Self { fields: fields.iter().map(|f| StructField::from_arrow(f)).collect::<Result<_>>()? };
        schema.check_names()?;
        Ok(schema)
    }

    /// The largest column-mapping id used anywhere in the schema.
    pub fn max_column_id(&self) -> i64 {
        fn walk(data_type: &DataType, max: &mut i64) {
            match data_type {
                DataType::Struct(s) => {
                    for f in &s.fields {
                        *max = (*max).max(f.column_id().unwrap_or(0));
                        walk(&f.data_type, max);
                    }
                }
                DataType::Array(a) => walk(&a.element_type, max),
                DataType::Map(m) => {
                    walk(&m.key_type, max);
                    walk(&m.value_type, max);
                }
                DataType::Primitive(_) => {}
            }
        }
        let mut max = 0;
        walk(&DataType::Struct(self.clone()), &mut max);
        max
    }

    /// Gives every field without one a column-mapping id and physical name, numbering from
    /// `max_id + 1`; returns the new largest id.
    pub fn assign_column_mapping(&mut self, mut max_id: i64) -> i64 {
        fn walk(data_type: &mut DataType, max_id: &mut i64) {
            match data_type {
                DataType::Struct(s) => {
                    for f in &mut s.fields {
                        if f.column_id().is_none() {
                            *max_id += 1;
                            f.metadata.insert(COLUMN_ID_KEY.into(), Value::from(*max_id));
                        }
                        if !f.metadata.contains_key(PHYSICAL_NAME_KEY) {
                            let physical = format!("col-{}", uuid::Uuid::new_v4());
                            f.metadata.insert(PHYSICAL_NAME_KEY.into(), Value::String(physical));
                        }
                        walk(&mut f.data_type, max_id);
                    }
                }
                DataType::Array(a) => walk(&mut a.element_type, max_id),
                DataType::Map(m) => {
                    walk(&mut m.key_type, max_id);
                    walk(&mut m.value_type, max_id);
                }
                DataType::Primitive(_) => {}
            }
        }
        let mut data_type = DataType::Struct(std::mem::take(self));
        walk(&mut data_type, &mut max_id);
        if let DataType::Struct(s) = data_type {
            *self = s;
        }
        max_id
    }

    /// Whether any column (nested ones included) has a type satisfying `predicate`.
    pub fn any_type(&self, predicate: &dyn Fn(&PrimitiveType) -> bool) -> bool {
        fn walk(data_type: &DataType, predicate: &dyn Fn(&PrimitiveType) -> bool) -> bool {
            match data_type {
                DataType::Primitive(p) => predicate(p),
                DataType::Struct(s) => s.fields.iter().any(|f| walk(&f.data_type, predicate)),
                DataType::Array(a) => walk(&a.element_type, predicate),
                DataType::Map(m) => walk(&m.key_type, predicate) || walk(&m.value_type, predicate),
            }
        }
        self.fields.iter().any(|f| walk(&f.data_type, predicate))
    }
}

/// The Arrow schema of a table's data files: the table schema without its partition columns.
pub fn data_schema(schema: &StructType, partition_columns: &[String]) -> StructType {
    StructType {
        fields: schema
            .fields
            .iter()
            .filter(|f| !partition_columns.iter().any(|p| p.eq_ignore_ascii_case(&f.name)))
            .cloned()
            .collect(),
    }
}

/// A shared Arrow schema with logical names.
pub fn arrow_schema_ref(schema: &StructType) -> SchemaRef {
    Arc::new(schema.to_arrow())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_string_round_trips() {
        let text = r#"{"type":"struct","fields":[
            {"name":"a","type":"long","nullable":true,"metadata":{}},
            {"name":"d","type":"decimal(38,18)","nullable":false,"metadata":{"comment":"x"}},
            {"name":"s","type":{"type":"struct","fields":[{"name":"t","type":"timestamp_ntz","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
            {"name":"l","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
            {"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"integer","containsNull":false},"valueContainsNull":true},"nullable":true,"metadata":{}}
        ]}"#;
        let schema = StructType::parse(text).unwrap();
        assert_eq!(StructType::parse(&schema.to_schema_string()).unwrap(), schema);
        let arrow = schema.to_arrow();
        assert_eq!(arrow.field(1).data_type(), &ArrowType::Decimal128(38, 18));
        let back = StructType::from_arrow(&arrow).unwrap();
        assert_eq!(back, schema);
    }

    #[test]
    fn rejects_bad_types_and_duplicate_names() {
        assert!(StructType::parse(r#"{"type":"struct","fields":[{"name":"a","type":"decimal(40,1)"}]}"#).is_err());
        assert!(StructType::parse(r#"{"type":"struct","fields":[{"name":"a","type":"wat"}]}"#).is_err());
        let dup = r#"{"type":"struct","fields":[{"name":"a","type":"long"},{"name":"A","type":"long"}]}"#;
        assert!(StructType::parse(dup).is_err());
        assert!(StructType::parse("{").is_err());
    }

    #[test]
    fn column_mapping_assigns_ids_and_physical_names() {
        let mut schema = StructType::new(vec![
            StructField::new("a", DataType::Primitive(PrimitiveType::Long), true),
            StructField::new(
                "s",
                DataType::Struct(StructType::new(vec![StructField::new(
                    "b",
                    DataType::Primitive(PrimitiveType::String),
                    true,
                )])),
                true,
            ),
        ]);
        let max = schema.assign_column_mapping(0);
        assert_eq!(max, 3);
        assert_eq!(schema.max_column_id(), 3);
        assert!(schema.fields[0].physical_name().starts_with("col-"));
        let physical = schema.to_physical_arrow(ColumnMappingMode::Name);
        assert_eq!(physical.field(0).metadata().get(PARQUET_FIELD_ID_KEY).map(String::as_str), Some("1"));
    }
}
