//! # sluice-server: the `sluice` program
//!
//! - [`allocator`]: the settings of the programs' allocator (mimalloc);
//! - [`cli`]: the command line (`sluice sql`, `sluice serve`);
//! - [`demo`]: `sluice demo`, a pipeline fed by an in-process Kafka cluster;
//! - [`format`]: results as aligned tables (like psql) or CSV;
//! - [`pg`]: the PostgreSQL wire protocol server.
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

pub mod allocator;
pub mod cli;
pub mod demo;
pub mod format;
pub mod http;
pub mod metrics;
pub mod pg;
