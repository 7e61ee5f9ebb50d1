//! Enum types (`CREATE TYPE mood AS ENUM ('sad', 'ok')`) as the catalog keeps them: the labels in
//! their declared order, each with PostgreSQL's `enumsortorder`, and the OIDs clients know the
//! type and its labels by (`pg_type`, `pg_enum`, RowDescription).
//!
//! A column of an enum type is a Delta `string` column (delta-rs and Spark read the labels as
//! text) whose metadata names the type twice: [`crate::types::DECLARED_TYPE_KEY`] holds its name
//! as PostgreSQL's `format_type` prints it (`mood`, `sc.color`), for every reader of the table,
//! and [`ENUM_OID_KEY`] its OID, which stays the same through renames and is what Sluice looks
//! the type up by. The labels themselves live only here: adding or renaming one changes no table.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::CatalogState;
use crate::error::{Error, Result};

/// Column (and Arrow field) metadata key holding the OID of a column's enum type.
pub const ENUM_OID_KEY: &str = "sluice.enum_oid";
/// The first OID given to an enum type, its array type or a label (2^29: above
/// datafusion-pg-catalog's relation OIDs, below the server's per-session object OIDs).
pub const ENUM_OID_FIRST: u32 = 1 << 29;
/// The longest label PostgreSQL accepts, in bytes (`NAMEDATALEN - 1`).
pub const LABEL_BYTES_MAX: usize = 63;

/// One label of an enum type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnumLabel {
    pub label: String,
    /// PostgreSQL's `pg_enum.enumsortorder`: the labels sort by it.
    pub sort_order: f32,
    /// `pg_enum.oid`.
    pub oid: u32,
}

/// An enum type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnumEntry {
    /// The type's `pg_type` OID; its array type's is the next one.
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// In sort order.
    pub labels: Vec<EnumLabel>,
    #[serde(default)]
    pub created_ms: i64,
}

/// Where `ALTER TYPE ... ADD VALUE` puts a label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelPlace {
    Last,
    Before(String),
    After(String),
}

/// The name of a type as `format_type` prints it: quoted where needed, and qualified by its
/// schema unless that is `public` (the schema of the default search path).
pub fn declared_name(schema: &str, name: &str) -> String {
    let name = quoted_if_needed(name);
    if schema == super::DEFAULT_SCHEMA {
        name
    } else {
        format!("{}.{name}", quoted_if_needed(schema))
    }
}

/// An identifier as PostgreSQL prints it: bare when it is lower case letters, digits and
/// underscores, else in double quotes. (`crate::names` has the same, but names sits above the
/// catalog.)
fn quoted_if_needed(name: &str) -> String {
    let plain = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The enum type OID an Arrow field's metadata names, if it names one.
pub fn field_enum_oid(metadata: &HashMap<String, String>) -> Option<u32> {
    metadata.get(ENUM_OID_KEY)?.parse().ok()
}

/// 22P02 for a value that is not a label of the type named `type_name`.
pub fn invalid_input(type_name: &str, value: &str) -> Error {
    Error::data("22P02", format!("invalid input value for enum {type_name}: \"{value}\""))
}

fn not_a_label(label: &str) -> Error {
    Error::data("22023", format!("\"{label}\" is not an existing enum label"))
}

/// 22023 for a label PostgreSQL refuses (empty or longer than 63 bytes).
pub fn check_label(label: &str) -> Result<()> {
    if label.is_empty() || label.len() > LABEL_BYTES_MAX {
        return Err(Error::data(
            "22023",
            format!("invalid enum label \"{label}\": labels must be 1 to {LABEL_BYTES_MAX} bytes long"),
        ));
    }
    Ok(())
}

impl EnumEntry {
    /// The OID of the type's array type (`_mood`).
    pub fn array_oid(&self) -> u32 {
        self.oid.saturating_add(1)
    }

    /// The name `format_type` prints (see [`declared_name`]).
    pub fn declared_name(&self) -> String {
        declared_name(&self.schema, &self.name)
    }

    /// The labels in sort order.
    pub fn label_names(&self) -> Vec<String> {
        self.labels.iter().map(|l| l.label.clone()).collect()
    }

    /// The position of a label in sort order.
    pub fn position(&self, label: &str) -> Option<usize> {
        self.labels.iter().position(|l| l.label == label)
    }

    /// Adds a label as `ALTER TYPE ... ADD VALUE` does (sort orders as PostgreSQL gives them: the
    /// last one's plus one at the end, a neighbour's minus one before the first, else the middle
    /// between the two neighbours). Returns false when the label is there already and
    /// `if_not_exists`; 42710 when it is there otherwise, 22023 for a neighbour that is not a
    /// label.
    pub fn add_label(&mut self, label: &str, place: &LabelPlace, if_not_exists: bool, oid: u32) -> Result<bool> {
        check_label(label)?;
        if self.position(label).is_some() {
            if if_not_exists {
                return Ok(false);
            }
            return Err(Error::data("42710", format!("enum label \"{label}\" already exists")));
        }
        let order = |i: usize| self.labels.get(i).map(|l| l.sort_order);
        let (index, sort_order) = match place {
            LabelPlace::Last => (self.labels.len(), self.labels.last().map_or(1.0, |l| l.sort_order + 1.0)),
            LabelPlace::Before(neighbour) => {
                let at = self.position(neighbour).ok_or_else(|| not_a_label(neighbour))?;
                let next = order(at).unwrap_or(1.0);
                let sort_order = match at.checked_sub(1).and_then(order) {
                    Some(previous) => (previous + next) / 2.0,
                    None => next - 1.0,
                };
                (at, sort_order)
            }
            LabelPlace::After(neighbour) => {
                let at = self.position(neighbour).ok_or_else(|| not_a_label(neighbour))?;
                let previous = order(at).unwrap_or(1.0);
                let sort_order = match order(at + 1) {
                    Some(next) => (previous + next) / 2.0,
                    None => previous + 1.0,
                };
                (at + 1, sort_order)
            }
        };
        self.labels.insert(index, EnumLabel { label: label.to_string(), sort_order, oid });
        Ok(true)
    }

    /// Renames a label (`ALTER TYPE ... RENAME VALUE`): 22023 when `from` is no label, 42710 when
    /// `to` is one.
    pub fn rename_label(&mut self, from: &str, to: &str) -> Result<()> {
        check_label(to)?;
        let at = self.position(from).ok_or_else(|| not_a_label(from))?;
        if self.position(to).is_some() {
            return Err(Error::data("42710", format!("enum label \"{to}\" already exists")));
        }
        if let Some(label) = self.labels.get_mut(at) {
            label.label = to.to_string();
        }
        Ok(())
    }
}

impl CatalogState {
    /// The enum type `schema.name`.
    pub fn enum_type(&self, schema: &str, name: &str) -> Option<&EnumEntry> {
        self.enums.get(&super::key(schema, name))
    }

    /// The enum type with this `pg_type` OID.
    pub fn enum_by_oid(&self, oid: u32) -> Option<&EnumEntry> {
        self.enums.values().find(|e| e.oid == oid)
    }

    /// The enum type an Arrow field's metadata names.
    pub fn enum_of_field(&self, metadata: &HashMap<String, String>) -> Option<&EnumEntry> {
        self.enum_by_oid(field_enum_oid(metadata)?)
    }

    /// The next free OID for an enum type or label: past every one given so far.
    pub fn next_enum_oid(&self) -> u32 {
        let used =
            self.enums.values().flat_map(|e| std::iter::once(e.array_oid()).chain(e.labels.iter().map(|l| l.oid)));
        used.max().map_or(ENUM_OID_FIRST, |oid| oid.saturating_add(1)).max(ENUM_OID_FIRST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mood() -> EnumEntry {
        let labels = ["sad", "ok", "happy"]
            .iter()
            .zip(1u32..)
            .map(|(l, i)| EnumLabel { label: l.to_string(), sort_order: i as f32, oid: 10 + i })
            .collect();
        EnumEntry { oid: 1, schema: "public".into(), name: "mood".into(), labels, created_ms: 0 }
    }

    #[test]
    fn labels_are_added_with_postgresqls_sort_orders() {
        let mut e = mood();
        assert!(e.add_label("meh", &LabelPlace::Before("ok".into()), false, 20).unwrap());
        assert!(e.add_label("first", &LabelPlace::Before("sad".into()), false, 21).unwrap());
        assert!(e.add_label("last", &LabelPlace::Last, false, 22).unwrap());
        assert!(e.add_label("between", &LabelPlace::After("happy".into()), false, 23).unwrap());
        let orders: Vec<(String, f32)> = e.labels.iter().map(|l| (l.label.clone(), l.sort_order)).collect();
        let expected =
            [("first", 0.0), ("sad", 1.0), ("meh", 1.5), ("ok", 2.0), ("happy", 3.0), ("between", 3.5), ("last", 4.0)];
        assert_eq!(orders, expected.iter().map(|(l, o)| (l.to_string(), *o)).collect::<Vec<_>>());
        assert!(!e.add_label("ok", &LabelPlace::Last, true, 24).unwrap());
        assert_eq!(e.add_label("ok", &LabelPlace::Last, false, 24).unwrap_err().sqlstate(), "42710");
        assert_eq!(e.add_label("x", &LabelPlace::Before("zz".into()), false, 24).unwrap_err().sqlstate(), "22023");
        assert_eq!(e.rename_label("zz", "y").unwrap_err().sqlstate(), "22023");
        assert_eq!(e.rename_label("last", "ok").unwrap_err().sqlstate(), "42710");
        e.rename_label("last", "ecstatic").unwrap();
        assert_eq!(e.position("ecstatic"), Some(6));
    }

    #[test]
    fn names_are_qualified_outside_public() {
        assert_eq!(declared_name("public", "mood"), "mood");
        assert_eq!(declared_name("sc", "color"), "sc.color");
        assert_eq!(declared_name("public", "Mixed Case"), "\"Mixed Case\"");
    }
}
