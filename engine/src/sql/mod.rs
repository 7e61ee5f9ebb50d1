//! SQL: names, and the execution of each kind of statement (queries through DataFusion; DDL, DML
//! and maintenance on the table log). The statements themselves are parsed by [`crate::syntax`].

pub mod cast_names;
pub mod catalog_provider;
pub mod collations;
pub mod column_type;
pub mod comments;
pub mod context;
pub mod copy_in;
pub mod ddl;
pub mod dml;
pub mod enums;
pub mod evolve;
pub mod generated;
pub mod indexes;
pub mod keyed;
pub mod lateral;
pub mod params;
pub mod point;
pub mod postgres_forms;
pub mod quality;
pub mod query;
pub mod references;
pub mod sequence_ddl;
pub mod sequences;
pub mod temporary;
pub mod upsert;
pub mod views;
pub mod whole_rows;
pub mod with_ties;
// The syntax is a layer of its own (crate::syntax); these names stay for callers.
pub use crate::names;
pub use crate::syntax::{dialect, parser, streaming};
