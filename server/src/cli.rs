//! The `sluice` command line.
//!
//! - `sluice sql [--data DIR] [-c SQL]... [-f FILE]... [--csv]`: runs statements and prints their
//!   results (aligned tables like psql, or CSV of the last statement); with neither `-c` nor `-f`,
//!   an interactive prompt with history. A failing statement prints `ERROR: ...` on stderr and
//!   the command exits with status 1.
//! - `sluice lineage [--data DIR] [--format svg|dot|mermaid] [--output FILE]`: the lineage graph
//!   (see `sluice::lineage`).

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
    /// Run a self-contained demo: an in-process Kafka cluster fed with generated events, a
    /// pipeline from bronze to silver and gold tables and views, served over pgwire and HTTP.
    Demo(crate::demo::DemoArgs),
    /// Draw a warehouse's lineage graph: sources, tables, flows and views, with their states.
    Lineage {
        /// The warehouse: a folder, memory://, s3://, gs:// or az:// URL.
        #[arg(long, default_value = DEFAULT_DATA_DIR)]
        data: String,
        /// svg (a picture), dot (Graphviz) or mermaid.
        #[arg(long, value_enum, default_value_t = LineageFormat::Svg)]
        format: LineageFormat,
        /// Write the graph to this file (by default to standard output).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
}

/// The formats of `sluice lineage`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LineageFormat {
    Svg,
    Dot,
    Mermaid,
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
    /// Serve HTTP on this address too: /metrics (Prometheus), /health and the status page at /
    /// (off unless given; beyond loopback it asks for the users' passwords).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// Days the event log (sluice.events) keeps events.
    #[arg(long, default_value_t = 7.0)]
    event_retention_days: f64,
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
            Command::Demo(args) => crate::demo::run(args).await,
            Command::Lineage { data, format, output } => lineage(&data, format, output).await,
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
    let code = run_sql(&db, commands, files, csv).await;
    // What the statements did (their DDL, the flows they ran) reaches the event log before exit.
    if let Err(e) = db.flush_events().await {
        eprintln!("WARNING: the last events were not written to the event log: {e}");
    }
    code
}

async fn run_sql(db: &Database, commands: Vec<String>, files: Vec<PathBuf>, csv: bool) -> ExitCode {
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
        return interactive(db).await;
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
        http,
        event_retention_days,
    } = args;
    let data = data.as_str();
    let tls = tls_cert.zip(tls_key);
    let options = sluice::DatabaseOptions {
        memory_limit_bytes: memory_limit,
        query_memory_limit_bytes: query_memory_limit,
        event_retention_ms: (event_retention_days.max(0.0) * 86_400_000.0) as i64,
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
    let http_db = db.clone();
    match crate::pg::serve(db.clone(), config).await {
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
            // HTTP beside pgwire: a port in use is said clearly, and pgwire keeps serving.
            let http = match http {
                Some(address) => match crate::http::serve(http_db, address).await {
                    Ok(http) => {
                        println!("status page and metrics on http://{}/ (/metrics, /health)", http.local_addr);
                        Some(http)
                    }
                    Err(e) => {
                        eprintln!("ERROR: HTTP not started: {e} (pgwire keeps serving)");
                        None
                    }
                },
                None => None,
            };
            let _ = tokio::signal::ctrl_c().await;
            server.stop();
            if let Some(http) = http {
                http.stop();
            }
            if let Err(e) = db.flush_events().await {
                eprintln!("WARNING: the last events were not written to the event log: {e}");
            }
            if let Err(e) = db.checkpoint_journal().await {
                eprintln!("WARNING: the journal was not checkpointed (the next start replays it): {e}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ERROR: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `sluice lineage`: the graph as the system tables show it in this process (flows and sources
/// it has just started, not a server's that has the warehouse open).
async fn lineage(data: &str, format: LineageFormat, output: Option<PathBuf>) -> ExitCode {
    let db = match Database::open(data).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("ERROR: cannot open {data}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let graph = match sluice::lineage::lineage_graph(&db).await {
        Ok(graph) => graph,
        Err(e) => {
            eprintln!("ERROR: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = match format {
        LineageFormat::Svg => sluice::lineage::to_svg(&graph),
        LineageFormat::Dot => sluice::lineage::to_dot(&graph),
        LineageFormat::Mermaid => sluice::lineage::to_mermaid(&graph),
    };
    let written = match &output {
        Some(path) => std::fs::write(path, text.as_bytes()),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let to = output.map_or("standard output".to_string(), |p| p.display().to_string());
            eprintln!("ERROR: cannot write {to}: {e}");
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
    println!("sluice {} on {} (\\? for help, \\q to quit)", env!("CARGO_PKG_VERSION"), db.location());
    let session = db.session();
    let mut prompt = Prompt::default();
    loop {
        let line = match editor.readline(prompt.prompt()) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                prompt.buffer.clear();
                continue;
            }
            Err(_) => break,
        };
        let _ = editor.add_history_entry(line.trim());
        match prompt.line(&line) {
            Action::Nothing => {}
            Action::Quit => break,
            Action::Print(text) => print!("{text}"),
            Action::Run(sql) => prompt.run(&session, &sql).await,
            Action::Describe { table, system } => print!("{}", describe(db, table.as_deref(), system).await),
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    ExitCode::SUCCESS
}

/// What a line typed at the prompt asks for.
#[derive(Debug, PartialEq)]
enum Action {
    Nothing,
    Quit,
    Print(String),
    Run(String),
    /// `\d [table]` (`system`: `\dS`, which lists Sluice's own tables too).
    Describe {
        table: Option<String>,
        system: bool,
    },
}

const HELP: &str = "\
  \\d [NAME]   list tables, or describe table NAME (\\dS: with Sluice's system tables)
  \\dt         list tables (\\dtS: with Sluice's system tables)
  \\dn         list schemas
  \\x          toggle expanded output
  \\timing     toggle timing of statements
  \\h          help on SQL (PostgreSQL's reference applies)
  \\?          this help
  \\q          quit
";

/// The interactive prompt's state: the statement being typed and the display toggles.
#[derive(Debug, Default)]
struct Prompt {
    buffer: String,
    expanded: bool,
    timing: bool,
}

impl Prompt {
    fn prompt(&self) -> &'static str {
        if self.buffer.is_empty() {
            "sluice=> "
        } else {
            "sluice-> "
        }
    }

    /// A line typed: backslash commands act at once, also in the middle of a statement (as in
    /// psql); SQL runs when a line ends with `;`.
    fn line(&mut self, line: &str) -> Action {
        let trimmed = line.trim();
        if trimmed.starts_with('\\') {
            return self.backslash(trimmed);
        }
        self.buffer.push_str(line);
        self.buffer.push('\n');
        if trimmed.ends_with(';') {
            return Action::Run(std::mem::take(&mut self.buffer));
        }
        Action::Nothing
    }

    fn backslash(&mut self, command: &str) -> Action {
        let mut words = command.split_whitespace();
        let name = words.next().unwrap_or_default();
        let argument = words.next().map(str::to_string);
        match name {
            "\\q" => Action::Quit,
            "\\?" => Action::Print(HELP.to_string()),
            "\\h" | "\\help" => Action::Print(
                "Sluice speaks PostgreSQL's SQL: see https://www.postgresql.org/docs/current/sql-commands.html \
                 (and the README for Sluice's own statements).\n"
                    .to_string(),
            ),
            "\\x" => {
                self.expanded = !self.expanded;
                Action::Print(format!("Expanded display is {}.\n", if self.expanded { "on" } else { "off" }))
            }
            "\\timing" => {
                self.timing = !self.timing;
                Action::Print(format!("Timing is {}.\n", if self.timing { "on" } else { "off" }))
            }
            "\\d" | "\\dS" | "\\d+" => Action::Describe { table: argument, system: name == "\\dS" },
            "\\dt" | "\\dt+" => Action::Describe { table: None, system: false },
            "\\dtS" => Action::Describe { table: None, system: true },
            "\\dn" => Action::Run(
                "SELECT schema_name AS \"Name\" FROM information_schema.schemata \
                 WHERE schema_name NOT IN ('information_schema', '__temp') ORDER BY 1"
                    .into(),
            ),
            other => Action::Print(format!("invalid command {other}\nTry \\? for help.\n")),
        }
    }

    async fn run(&self, session: &sluice::Session, sql: &str) {
        let started = std::time::Instant::now();
        match session.execute(sql).await {
            Ok(results) => {
                for result in &results {
                    if self.expanded {
                        print!("{}", crate::format::expanded(result));
                    } else {
                        print!("{}", crate::format::aligned(result));
                    }
                }
            }
            Err(e) => eprintln!("ERROR: {e}"),
        }
        if self.timing {
            println!("Time: {:.3} ms", started.elapsed().as_secs_f64() * 1000.0);
        }
    }
}

/// `\d`: the tables (without Sluice's system tables unless `system`), or one table's columns with
/// their PostgreSQL types.
async fn describe(db: &Database, table: Option<&str>, system: bool) -> String {
    use std::sync::Arc;

    use arrow::array::{RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    let relations = db.relations().await;
    let text = |name: &str| Field::new(name, DataType::Utf8, true);
    let (schema, columns): (Vec<Field>, Vec<Vec<String>>) = match table {
        None => {
            let listed: Vec<_> = relations
                .iter()
                .filter(|r| system || r.schema != sluice::system::SYSTEM_SCHEMA)
                .map(|r| (r.schema.clone(), r.table.clone()))
                .collect();
            (
                vec![text("Schema"), text("Name"), text("Type")],
                vec![
                    listed.iter().map(|(s, _)| s.clone()).collect(),
                    listed.iter().map(|(_, t)| t.clone()).collect(),
                    listed.iter().map(|_| "table".to_string()).collect(),
                ],
            )
        }
        Some(name) => {
            let (schema_name, table_name) = match name.split_once('.') {
                Some((s, t)) => (s.to_string(), t.to_string()),
                None => (sluice::catalog::DEFAULT_SCHEMA.to_string(), name.to_string()),
            };
            let Some(relation) = relations.iter().find(|r| r.schema == schema_name && r.table == table_name) else {
                return format!("Did not find any relation named \"{name}\".\n");
            };
            let columns = &relation.columns;
            (
                vec![text("Column"), text("Type"), text("Nullable"), text("Default")],
                vec![
                    columns.iter().map(|c| c.name.clone()).collect(),
                    columns.iter().map(|c| c.type_name.clone()).collect(),
                    columns.iter().map(|c| if c.nullable { String::new() } else { "not null".into() }).collect(),
                    columns.iter().map(|c| c.default.clone().unwrap_or_default()).collect(),
                ],
            )
        }
    };
    let schema = Arc::new(Schema::new(schema));
    let arrays = columns.into_iter().map(|c| Arc::new(StringArray::from(c)) as arrow::array::ArrayRef).collect();
    match RecordBatch::try_new(schema.clone(), arrays) {
        Ok(batch) => crate::format::aligned(&sluice::StatementResult::Rows { schema, batches: vec![batch] }),
        Err(e) => format!("ERROR: {e}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_reads_lines_as_psql_does() {
        let mut prompt = Prompt::default();
        assert_eq!(prompt.line("SELECT 1"), Action::Nothing);
        assert_eq!(prompt.prompt(), "sluice-> ");
        // \\q quits in the middle of a statement.
        assert_eq!(prompt.line("\\q"), Action::Quit);
        assert_eq!(prompt.line(";"), Action::Run("SELECT 1\n;\n".into()));
        assert_eq!(prompt.prompt(), "sluice=> ");
        assert_eq!(prompt.line("\\x"), Action::Print("Expanded display is on.\n".into()));
        assert!(prompt.expanded);
        assert_eq!(prompt.line("\\timing"), Action::Print("Timing is on.\n".into()));
        assert_eq!(prompt.line("\\d t"), Action::Describe { table: Some("t".into()), system: false });
        assert_eq!(prompt.line("\\dtS"), Action::Describe { table: None, system: true });
        assert!(matches!(prompt.line("\\?"), Action::Print(help) if help.contains("\\timing")));
        assert!(matches!(prompt.line("\\bogus"), Action::Print(text) if text.starts_with("invalid command")));
    }

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
