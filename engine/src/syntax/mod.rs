//! Sluice's SQL syntax: the dialect, the statement types ([`parser::SluiceStatement`], with the
//! streaming statements of [`streaming`]) and their parsers. It depends on nothing above the
//! catalog's types, so that every layer (rights, planning, the features) can name statements.

pub mod alert;
pub mod cdc;
pub mod comment;
pub mod cursor;
pub mod dialect;
pub mod dml_with;
pub mod parser;
pub mod sequence;
pub mod streaming;
pub mod subscription;
pub mod tokens;
