//! SQL: Sluice's parser (sqlparser plus Sluice's statements), names, and the execution of each
//! kind of statement (queries through DataFusion; DDL, DML and maintenance on the table log).

pub mod catalog_provider;
pub mod copy_in;
pub mod ddl;
pub mod dialect;
pub mod dml;
pub mod names;
pub mod params;
pub mod parser;
pub mod query;
pub mod streaming;
