//! Integration tests of sluice-storage (one binary; see STYLE.md).

mod common;
mod fixtures;
mod interop;
mod peers;
mod processes;
mod roundtrip;
