//! Integration tests of the `sluice` program (one binary; see STYLE.md).

mod auth;
mod cli;
mod clients;
mod dbt;
mod demo;
mod differential;
mod http;
mod jdbc;
mod node;
mod pg;
mod security;
mod serve;
mod status_page;
mod subscriptions;
