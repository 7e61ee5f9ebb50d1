//! FOREIGN KEY constraints as the catalog keeps them.
//!
//! A foreign key belongs to its referencing (child) table's entry and names the referenced
//! (parent) table by id, so renaming either table keeps it. The catalog is the one place that
//! knows both ends: a DELETE on a parent finds the tables that reference it here without
//! opening every table. Enforcement is in [`crate::sql::references`].

use serde::{Deserialize, Serialize};

use super::{CatalogState, TableEntry};

/// What a foreign key does to referencing rows when their referenced key goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RefAction {
    #[default]
    NoAction,
    Restrict,
    Cascade,
    SetNull,
    SetDefault,
}

impl RefAction {
    /// The letter `pg_constraint.confdeltype` and `confupdtype` use.
    pub fn code(&self) -> &'static str {
        match self {
            RefAction::NoAction => "a",
            RefAction::Restrict => "r",
            RefAction::Cascade => "c",
            RefAction::SetNull => "n",
            RefAction::SetDefault => "d",
        }
    }

    /// `NO ACTION`, `CASCADE`, ... as SQL and `information_schema` spell it.
    pub fn words(&self) -> &'static str {
        match self {
            RefAction::NoAction => "NO ACTION",
            RefAction::Restrict => "RESTRICT",
            RefAction::Cascade => "CASCADE",
            RefAction::SetNull => "SET NULL",
            RefAction::SetDefault => "SET DEFAULT",
        }
    }

    /// Whether it only checks (the statement fails while a referencing row is left).
    pub fn checks_only(&self) -> bool {
        matches!(self, RefAction::NoAction | RefAction::Restrict)
    }
}

/// One FOREIGN KEY constraint of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub name: String,
    /// The referencing columns, in the constraint's order.
    pub columns: Vec<String>,
    /// The referenced table's id.
    pub parent: String,
    /// The referenced columns, one per referencing column (a unique key of the parent).
    pub parent_columns: Vec<String>,
    #[serde(default)]
    pub on_delete: RefAction,
    #[serde(default)]
    pub on_update: RefAction,
    /// MATCH FULL: a key is either all NULL or has no NULL (the default, MATCH SIMPLE: a key with a
    /// NULL is not checked).
    #[serde(default)]
    pub match_full: bool,
    /// Added NOT VALID: the rows there when it was added were not checked (VALIDATE CONSTRAINT
    /// checks them and clears this).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_valid: bool,
}

impl CatalogState {
    /// The table with this id.
    pub fn table_by_id(&self, id: &str) -> Option<&TableEntry> {
        self.tables.values().find(|t| t.id == id)
    }

    /// The foreign keys that reference the table with this id, each with its table.
    pub fn references_to<'a>(&'a self, id: &'a str) -> impl Iterator<Item = (&'a TableEntry, &'a ForeignKey)> + 'a {
        self.tables
            .values()
            .flat_map(move |t| t.foreign_keys.iter().filter(move |k| k.parent == id).map(move |k| (t, k)))
    }

    /// Whether a foreign key references the table with this id.
    pub fn is_referenced(&self, id: &str) -> bool {
        self.references_to(id).next().is_some()
    }
}
