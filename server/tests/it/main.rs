//! Integration tests of the `sluice` program (one binary; see STYLE.md).

mod auth;
mod cli;
mod clients;
mod dbt;
mod differential;
mod jdbc;
mod node;
mod pg;
mod security;
mod serve;
mod subscriptions;
