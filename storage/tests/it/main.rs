//! Integration tests of sluice-storage (one binary; see STYLE.md).

mod common;
mod damaged_log;
mod fixtures;
mod interop;
mod log_hygiene;
mod peers;
mod processes;
mod roundtrip;
mod stage;
mod vacuum;
