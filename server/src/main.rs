//! The `sluice` command: see `sluice --help`.

fn main() -> std::process::ExitCode {
    sluice_server::cli::main()
}
