//! Integration tests of the engine (one binary; see STYLE.md).

mod alerts;
mod api;
mod cdc;
mod changes;
mod common;
mod crash;
#[cfg(feature = "kafka")]
mod debezium;
mod delta_readers;
mod events;
mod files;
mod fixtures;
mod flows;
mod foreign_keys;
mod interop;
#[cfg(feature = "kafka")]
mod kafka;
mod keys;
mod layout;
mod sequences;
mod subscribe;
mod temporary;
mod transactions;
mod view_crash;
mod views;
