//! Identity columns: `SERIAL`, `BIGSERIAL` and `GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY`,
//! stored as Delta identity columns (writer feature `identityColumns`: `delta.identity.start`,
//! `.step`, `.highWaterMark` and `.allowExplicitInsert` in the column's metadata), so delta-rs
//! and Spark read and continue the same sequence.
//!
//! Values come from an allocator per table and column, shared by the warehouse's sessions: it
//! starts past the high-water mark of the newest snapshot it has seen and never hands a value
//! out twice. A commit that writes generated values records the new high-water mark in the same
//! commit (the writer holds the table's lock, see [`crate::keys`], so marks only grow); values
//! of a statement that fails are skipped, as PostgreSQL's sequences skip them.

use std::collections::HashMap;
use std::sync::Mutex;

use arrow::array::Int64Array;
use serde_json::Value;
use sluice_storage::protocol::{
    IDENTITY_ALLOW_EXPLICIT_INSERT_KEY, IDENTITY_HIGH_WATER_MARK_KEY, IDENTITY_START_KEY, IDENTITY_STEP_KEY,
};
use sluice_storage::schema::{StructField, StructType};

use crate::error::{Error, Result};

/// An identity column's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub start: i64,
    pub step: i64,
    pub high_water_mark: Option<i64>,
    /// BY DEFAULT (true) or ALWAYS (false).
    pub allow_explicit_insert: bool,
    /// MINVALUE and MAXVALUE, when given (Sluice's own column metadata: Delta's identity
    /// columns have no bounds); values past them are refused (2200H), as PostgreSQL's sequence
    /// refuses them.
    pub min: Option<i64>,
    pub max: Option<i64>,
    /// CYCLE: past a bound the next value is the other bound (Sluice's column metadata; then
    /// both bounds are recorded).
    pub cycle: bool,
    /// CACHE, as declared (recorded for the catalogs; values are taken per statement).
    pub cache: i64,
}

impl Default for Identity {
    /// PostgreSQL's defaults: from 1 by 1, GENERATED ALWAYS, no bounds but the type's, NO CYCLE.
    fn default() -> Self {
        Identity {
            start: 1,
            step: 1,
            high_water_mark: None,
            allow_explicit_insert: false,
            min: None,
            max: None,
            cycle: false,
            cache: 1,
        }
    }
}

/// The column metadata keys of an identity column's MINVALUE and MAXVALUE.
pub const IDENTITY_MIN_KEY: &str = "sluice.identity.minValue";
pub const IDENTITY_MAX_KEY: &str = "sluice.identity.maxValue";
/// The column metadata keys of an identity column's CYCLE and CACHE (absent: NO CYCLE, CACHE 1).
pub const IDENTITY_CYCLE_KEY: &str = "sluice.identity.cycle";
pub const IDENTITY_CACHE_KEY: &str = "sluice.identity.cache";

fn as_i64(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

impl Identity {
    pub fn of(field: &StructField) -> Option<Self> {
        let start = as_i64(field.metadata.get(IDENTITY_START_KEY))?;
        let step = as_i64(field.metadata.get(IDENTITY_STEP_KEY)).unwrap_or(1);
        Some(Self {
            start,
            step: if step == 0 { 1 } else { step },
            high_water_mark: as_i64(field.metadata.get(IDENTITY_HIGH_WATER_MARK_KEY)),
            allow_explicit_insert: match field.metadata.get(IDENTITY_ALLOW_EXPLICIT_INSERT_KEY) {
                Some(Value::Bool(b)) => *b,
                Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
                _ => false,
            },
            min: as_i64(field.metadata.get(IDENTITY_MIN_KEY)),
            max: as_i64(field.metadata.get(IDENTITY_MAX_KEY)),
            cycle: matches!(field.metadata.get(IDENTITY_CYCLE_KEY), Some(Value::Bool(true))),
            cache: as_i64(field.metadata.get(IDENTITY_CACHE_KEY)).filter(|c| *c > 0).unwrap_or(1),
        })
    }

    /// Marks a column as an identity column.
    pub fn declare(self, field: &mut StructField) {
        field.metadata.insert(IDENTITY_START_KEY.into(), Value::from(self.start));
        field.metadata.insert(IDENTITY_STEP_KEY.into(), Value::from(self.step));
        field.metadata.insert(IDENTITY_ALLOW_EXPLICIT_INSERT_KEY.into(), Value::Bool(self.allow_explicit_insert));
        if let Some(mark) = self.high_water_mark {
            field.metadata.insert(IDENTITY_HIGH_WATER_MARK_KEY.into(), Value::from(mark));
        }
        let cycle = self.cycle.then_some(Value::Bool(true));
        let cache = (self.cache != 1).then(|| Value::from(self.cache));
        for (key, value) in [
            (IDENTITY_MIN_KEY, self.min.map(Value::from)),
            (IDENTITY_MAX_KEY, self.max.map(Value::from)),
            (IDENTITY_CYCLE_KEY, cycle),
            (IDENTITY_CACHE_KEY, cache),
        ] {
            match value {
                Some(value) => field.metadata.insert(key.into(), value),
                None => field.metadata.remove(key),
            };
        }
    }

    /// Whether `value` is past `mark` in the direction of the step.
    fn beyond(&self, value: i64, mark: i64) -> bool {
        if self.step > 0 {
            value > mark
        } else {
            value < mark
        }
    }
}

/// The name PostgreSQL gives the sequence of a SERIAL or identity column: `<table>_<column>_seq`.
pub fn sequence_name(table: &str, column: &str) -> String {
    format!("{table}_{column}_seq")
}

/// Field metadata marking an identity column made by SERIAL (whose identity is a DEFAULT).
pub const SERIAL_KEY: &str = "sluice.serial";

/// Whether an identity column was declared SERIAL.
pub fn is_serial(field: &StructField) -> bool {
    matches!(field.metadata.get(SERIAL_KEY), Some(Value::Bool(true)))
}

/// Makes a column a plain one: no identity (its values so far stay).
pub fn forget_identity(field: &mut StructField) {
    for key in [
        IDENTITY_START_KEY,
        IDENTITY_STEP_KEY,
        IDENTITY_HIGH_WATER_MARK_KEY,
        IDENTITY_ALLOW_EXPLICIT_INSERT_KEY,
        IDENTITY_MIN_KEY,
        IDENTITY_MAX_KEY,
        IDENTITY_CYCLE_KEY,
        IDENTITY_CACHE_KEY,
        SERIAL_KEY,
    ] {
        field.metadata.remove(key);
    }
}

/// The identity columns of a schema: position and sequence.
pub fn identity_columns(schema: &StructType) -> Vec<(usize, Identity)> {
    schema.fields.iter().enumerate().filter_map(|(i, f)| Some((i, Identity::of(f)?))).collect()
}

/// Hands out identity values, per table id and column.
#[derive(Debug, Default)]
pub struct Allocators {
    /// The last value handed out.
    last: Mutex<HashMap<(String, String), i64>>,
}

impl Allocators {
    /// `count` new values of `column` of table `id`, whose sequence (as the newest snapshot
    /// records it) is `identity`.
    pub fn allocate(&self, id: &str, column: &str, identity: Identity, count: usize) -> Result<Int64Array> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let entry = last.entry((id.to_string(), column.to_string())).or_insert(i64::MIN);
        let floor = identity.high_water_mark.unwrap_or_else(|| identity.start.saturating_sub(identity.step));
        // A cycling sequence's mark goes back at each turn, so only a first use takes it.
        if *entry == i64::MIN || (!identity.cycle && identity.beyond(floor, *entry)) {
            *entry = floor;
        }
        let overflow = || Error::data("2200H", format!("identity column \"{column}\" reached its limit"));
        let past_bound = |value: i64| match (identity.min, identity.max) {
            (Some(min), _) if value < min => {
                Some(Error::data("2200H", format!("identity column \"{column}\" reached its minimum value ({min})")))
            }
            (_, Some(max)) if value > max => {
                Some(Error::data("2200H", format!("identity column \"{column}\" reached its maximum value ({max})")))
            }
            _ => None,
        };
        let mut values = Vec::with_capacity(count);
        let mut value = *entry;
        for _ in 0..count {
            value = match (value.checked_add(identity.step), identity.cycle, identity.min, identity.max) {
                // PostgreSQL's CYCLE: past MAXVALUE an ascending sequence goes on from MINVALUE,
                // past MINVALUE a descending one from MAXVALUE.
                (next, true, Some(min), Some(max)) if next.is_none_or(|next| next < min || next > max) => {
                    if identity.step > 0 {
                        min
                    } else {
                        max
                    }
                }
                (next, ..) => next.ok_or_else(overflow)?,
            };
            if let Some(error) = past_bound(value) {
                return Err(error);
            }
            values.push(value);
        }
        *entry = value;
        Ok(Int64Array::from(values))
    }

    /// The schema to commit when values of table `id` were handed out past the high-water marks
    /// `schema` records (None when none were). Values a statement gave itself (BY DEFAULT) do
    /// not move the mark, as they do not move a PostgreSQL sequence; values handed out to a
    /// statement that then failed do (a gap, as in PostgreSQL).
    pub fn advanced_schema(&self, id: &str, schema: &StructType) -> Option<StructType> {
        let marks: Vec<(usize, i64)> = {
            let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            identity_columns(schema)
                .into_iter()
                .filter_map(|(i, identity)| {
                    let name = &schema.fields.get(i)?.name;
                    let handed = *last.get(&(id.to_string(), name.clone()))?;
                    let moved = match identity.high_water_mark {
                        None => true,
                        Some(mark) if identity.cycle => handed != mark,
                        Some(mark) => identity.beyond(handed, mark),
                    };
                    moved.then_some((i, handed))
                })
                .collect()
        };
        if marks.is_empty() {
            return None;
        }
        let mut next = schema.clone();
        for (i, mark) in marks {
            if let Some(field) = next.fields.get_mut(i) {
                field.metadata.insert(IDENTITY_HIGH_WATER_MARK_KEY.into(), Value::from(mark));
            }
        }
        Some(next)
    }

    /// Makes `value` the last value handed out (`setval`).
    pub fn set(&self, id: &str, column: &str, value: i64) {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).insert((id.to_string(), column.to_string()), value);
    }

    /// Forgets a dropped table's sequences.
    pub fn forget(&self, id: &str) {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).retain(|(table, _), _| table != id);
    }
}

#[cfg(test)]
mod tests {
    use sluice_storage::schema::{DataType, PrimitiveType};

    use super::*;

    fn field(identity: Identity) -> StructField {
        let mut field = StructField::new("id", DataType::Primitive(PrimitiveType::Long), false);
        identity.declare(&mut field);
        field
    }

    #[test]
    fn values_continue_past_the_high_water_mark_and_are_never_handed_out_twice() {
        let identity =
            Identity { start: 10, step: 5, high_water_mark: None, allow_explicit_insert: false, ..Identity::default() };
        let allocators = Allocators::default();
        assert_eq!(allocators.allocate("t", "id", identity, 3).unwrap().values().to_vec(), vec![10, 15, 20]);
        // A snapshot that has not seen them yet does not hand them out again.
        assert_eq!(allocators.allocate("t", "id", identity, 1).unwrap().values().to_vec(), vec![25]);
        // Another engine wrote up to 100.
        let moved = Identity { high_water_mark: Some(100), ..identity };
        assert_eq!(allocators.allocate("t", "id", moved, 2).unwrap().values().to_vec(), vec![105, 110]);
        let down =
            Identity { start: -1, step: -1, high_water_mark: None, allow_explicit_insert: true, ..Identity::default() };
        assert_eq!(allocators.allocate("u", "id", down, 2).unwrap().values().to_vec(), vec![-1, -2]);
    }

    #[test]
    fn the_mark_moves_with_handed_out_values_only() {
        let identity = Identity {
            start: 1,
            step: 1,
            high_water_mark: Some(3),
            allow_explicit_insert: true,
            ..Identity::default()
        };
        let schema = StructType::new(vec![field(identity)]);
        let allocators = Allocators::default();
        assert_eq!(allocators.advanced_schema("t", &schema), None);
        allocators.allocate("t", "id", identity, 2).unwrap();
        let next = allocators.advanced_schema("t", &schema).unwrap();
        assert_eq!(Identity::of(&next.fields[0]).unwrap().high_water_mark, Some(5));
        assert_eq!(allocators.advanced_schema("t", &next), None);
    }
}
