//! The `sluice` command line.
//!
//! - `sluice sql [--data DIR] [-c SQL]... [-f FILE]... [--csv]`: runs statements and prints their
//!   results (aligned tables like psql, or CSV of the last statement); with neither `-c` nor `-f`,
//!   an interactive prompt with history. A failing statement prints `ERROR: ...` on stderr and
//!   the command exits with status 1.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice::Database;

/// The warehouse used when `--data` is not given.
pub const DEFAULT_DATA_DIR: &str = "./sluice-data";

#[derive(Parser)]
#[command(name = "sluice", version, about = "Sluice: an embedded lakehouse database with streaming tables")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run SQL against a warehouse folder (or URL).
    Sql {
        /// The warehouse: a folder, memory://, s3://, gs:// or az:// URL.
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: String,
        /// SQL to run (several statements separated by `;`); may be repeated.
        #[arg(short = 'c', long = "command")]
        commands: Vec<String>,
        /// A file of SQL to run; may be repeated.
        #[arg(short = 'f', long = "file")]
        files: Vec<PathBuf>,
        /// Print the last statement's rows as CSV with a header line.
        #[arg(long)]
        csv: bool,
    },
    /// Serve a warehouse over the PostgreSQL wire protocol.
    Serve(ServeArgs),
}

/// The options of `sluice serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The warehouse: a folder, memory://, s3://, gs:// or az:// URL.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data: String,
    /// Address to listen on (loopback unless users are configured).
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: std::net::SocketAddr,
    /// A JSON file of users: [{"name": "...", "password": "...", "read_only": false, "owner": false}]
    /// (the owner is the user marked "owner", else the first).
    #[arg(long)]
    users: Option<PathBuf>,
    /// TLS certificate (PEM).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// Generate a self-signed certificate for localhost (in DATA/_sluice/tls/).
    #[arg(long, conflicts_with = "tls_cert")]
    tls_self_signed: bool,
    /// Most clients served at once.
    #[arg(long, default_value_t = 100)]
    max_connections: usize,
    /// More folders clients may read and write with COPY ... 'file' (besides the data folder).
    #[arg(long = "allow-path")]
    allow_paths: Vec<PathBuf>,
    /// The largest message a client may send, in bytes (a query, a Bind, one COPY chunk).
    #[arg(long = "max-message-size", default_value_t = crate::pg::socket::MESSAGE_BYTES_MAX_DEFAULT)]
    message_bytes_max: usize,
    /// Refuse clients that do not use TLS (needs --tls-cert/--tls-key or --tls-self-signed).
    #[arg(long)]
    require_tls: bool,
    /// Most clients authenticating at once (apart from --max-connections).
    #[arg(long, default_value_t = crate::pg::STARTUP_CONNECTIONS_MAX_DEFAULT)]
    max_startup_connections: usize,
    /// Seconds a client has to authenticate.
    #[arg(long, default_value_t = crate::pg::AUTHENTICATION_TIMEOUT_MS_DEFAULT / 1000)]
    authentication_timeout: u64,
    /// Memory all queries together may hold: bytes, or with a unit (512MB, 4GB, 4GiB); by default
    /// half of the machine's memory.
    #[arg(long, value_parser = parse_bytes)]
    memory_limit: Option<usize>,
    /// Memory one query may hold (by default all of --memory-limit).
    #[arg(long, value_parser = parse_bytes)]
    query_memory_limit: Option<usize>,
}

/// `4096`, `512MB`, `4GB`, `4GiB`, `1.5G` as bytes (K, M, G, T in powers of 1024, as PostgreSQL's
/// memory settings).
fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{text:?} is not a size (such as 512MB or 4GB)"))?;
    let factor: f64 = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use B, KB, MB, GB or TB)")),
    };
    let bytes = number * factor;
    if !(1.0..=(usize::MAX as f64)).contains(&bytes) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as usize)
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        // A statement's future nests deeply (DDL that rewrites a table runs DML inside); 2 MiB,
        // tokio's default, overflows in a debug build.
        .thread_stack_size(sluice::STATEMENT_STACK_BYTES)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ERROR: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Sql { data, commands, files, csv } => sql(&data, commands, files, csv).await,
            Command::Serve(args) => serve(args).await,
        }
    })
}

async fn sql(data: &str, commands: Vec<String>, files: Vec<PathBuf>, csv: bool) -> ExitCode {
    let db = match Database::open(data).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("ERROR: cannot open {data}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut scripts = commands;
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => scripts.push(text),
            Err(e) => {
                eprintln!("ERROR: cannot read {}: {e}", file.display());
                return ExitCode::FAILURE;
            }
        }
    }
    if scripts.is_empty() {
        return interactive(&db).await;
    }
    let session = db.session();
    let mut last = None;
    for script in scripts {
        let statements = match sluice::sql::parser::parse_statements(&script) {
            Ok(statements) => statements,
            Err(e) => {
                eprintln!("ERROR: {e}");
                return ExitCode::FAILURE;
            }
        };
        for statement in statements {
            match session.run(statement, &[]).await {
                Ok(result) => {
                    if !csv {
                        print!("{}", crate::format::aligned(&result));
                    }
                    last = Some(result);
                }
                Err(e) => {
                    eprintln!("ERROR: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    if csv {
        if let Some(result) = last {
            match crate::format::csv(&result) {
                Ok(text) => print!("{text}"),
                Err(e) => {
                    eprintln!("ERROR: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let _ = std::io::stdout().flush();
    ExitCode::SUCCESS
}

async fn serve(args: ServeArgs) -> ExitCode {
    let ServeArgs {
        data,
        listen,
        users,
        tls_cert,
        tls_key,
        tls_self_signed,
        max_connections,
        mut allow_paths,
        message_bytes_max,
        require_tls,
        max_startup_connections,
        authentication_timeout,
        memory_limit,
        query_memory_limit,
    } = args;
    let data = data.as_str();
    let tls = tls_cert.zip(tls_key);
    let options = sluice::DatabaseOptions {
        memory_limit_bytes: memory_limit,
        query_memory_limit_bytes: query_memory_limit,
        ..Default::default()
    };
    let db = match Database::open_with(data, options).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("ERROR: cannot open {data}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let users = match users.map(|p| crate::pg::auth::read_users_file(&p)).transpose() {
        Ok(users) => users.unwrap_or_default(),
        Err(e) => {
            eprintln!("ERROR: {e}");
            return ExitCode::FAILURE;
        }
    };
    let data_dir = PathBuf::from(data);
    if !data.contains("://") {
        allow_paths.insert(0, std::fs::canonicalize(&data_dir).unwrap_or(data_dir.clone()));
    }
    let tls = if tls_self_signed {
        match crate::pg::self_signed(&data_dir.join("_sluice/tls")) {
            Ok(paths) => Some(paths),
            Err(e) => {
                eprintln!("ERROR: cannot make a self-signed certificate: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        tls
    };
    let trust = users.is_empty() && !db.has_roles().await;
    let config = crate::pg::ServerConfig {
        listen,
        connections_max: max_connections,
        users,
        tls: tls.clone(),
        allowed_paths: allow_paths,
        message_bytes_max,
        startup_connections_max: max_startup_connections,
        authentication_timeout_ms: authentication_timeout.saturating_mul(1000),
        require_tls,
    };
    match crate::pg::serve(db, config).await {
        Ok(server) => {
            println!(
                "sluice {} serving {data} on {}{}",
                env!("CARGO_PKG_VERSION"),
                server.local_addr,
                if tls.is_some() { " (TLS available)" } else { "" }
            );
            if trust {
                println!(
                    "no users are configured: any user name is accepted from loopback clients (like Postgres' trust)"
                );
            }
            let _ = tokio::signal::ctrl_c().await;
            server.stop();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ERROR: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn interactive(db: &Database) -> ExitCode {
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("ERROR: no terminal: {e}");
            return ExitCode::FAILURE;
        }
    };
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".sluice_history"));
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    println!("sluice {} on {} (\\q to quit, \\dt to list tables)", env!("CARGO_PKG_VERSION"), db.location());
    let session = db.session();
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() { "sluice=> " } else { "sluice-> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(_) => break,
        };
        let trimmed = line.trim();
        if buffer.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            match backslash(trimmed) {
                Some(sql) => run_and_print(&session, &sql).await,
                None => break,
            }
            continue;
        }
        buffer.push_str(&line);
        buffer.push('\n');
        if trimmed.ends_with(';') {
            let _ = editor.add_history_entry(buffer.trim());
            run_and_print(&session, &buffer).await;
            buffer.clear();
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    ExitCode::SUCCESS
}

/// The SQL behind a backslash command, or `None` to quit.
fn backslash(command: &str) -> Option<String> {
    let mut words = command.split_whitespace();
    match words.next() {
        Some("\\q") => None,
        Some("\\dt") => Some("SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_schema NOT IN ('information_schema', '__temp') ORDER BY 1, 2".into()),
        Some("\\dn") => Some("SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name NOT IN ('information_schema', '__temp') ORDER BY 1".into()),
        Some("\\d") => match words.next() {
            Some(table) => Some(format!("SELECT column_name AS column, data_type AS type, is_nullable AS nullable FROM information_schema.columns WHERE table_name = '{}' ORDER BY ordinal_position", table.replace('\'', "''"))),
            None => Some("SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_schema NOT IN ('information_schema', '__temp') ORDER BY 1, 2".into()),
        },
        _ => Some(format!("SELECT 'unknown command {}' AS error", command.replace('\'', "''"))),
    }
}

async fn run_and_print(session: &sluice::Session, sql: &str) {
    match session.execute(sql).await {
        Ok(results) => {
            for result in &results {
                print!("{}", crate::format::aligned(result));
            }
        }
        Err(e) => eprintln!("ERROR: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_postgres_memory_settings() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512MB"), Ok(512 << 20));
        assert_eq!(parse_bytes("4GiB"), Ok(4 << 30));
        assert_eq!(parse_bytes("1.5g"), Ok(3 << 29));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("4 parsecs").is_err());
        assert!(parse_bytes("0").is_err());
    }
}
