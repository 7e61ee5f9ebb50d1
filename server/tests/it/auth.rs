//! Regression tests of the authentication findings against `sluice serve` (issue 18, findings 7,
//! 8, 10 and 11), over pgwire: stored passwords, who manages roles, unauthenticated connections,
//! user enumeration and failure delays, and what PostgreSQL refuses in Bind and SET.

use std::time::{Duration, Instant};

use sluice_server::pg::{serve, Server, ServerConfig, UserConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_postgres::{Client, NoTls};

fn users() -> Vec<UserConfig> {
    vec![
        UserConfig { name: "user".into(), password: "u".into(), ..Default::default() },
        UserConfig { name: "owner".into(), password: "o".into(), owner: true, ..Default::default() },
        UserConfig { name: "reader".into(), password: "r".into(), read_only: true, ..Default::default() },
    ]
}

struct Warehouse {
    server: Server,
    dir: tempfile::TempDir,
}

impl Warehouse {
    async fn start(config: ServerConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, config).await
    }

    async fn start_in(dir: tempfile::TempDir, config: ServerConfig) -> Self {
        let db = sluice::Database::open(dir.path().to_str().unwrap()).await.unwrap();
        let config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            allowed_paths: vec![dir.path().to_path_buf()],
            ..config
        };
        let server = serve(db, config).await.unwrap();
        Self { server, dir }
    }

    fn port(&self) -> u16 {
        self.server.local_addr.port()
    }

    async fn try_connect(&self, user: &str, password: &str) -> Result<Client, tokio_postgres::Error> {
        let url = format!("host=127.0.0.1 port={} user={user} password={password} dbname=sluice", self.port());
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }

    async fn connect(&self, user: &str) -> Client {
        let password = users().into_iter().find(|u| u.name == user).map(|u| u.password).unwrap();
        self.try_connect(user, &password).await.unwrap()
    }
}

fn with_users() -> ServerConfig {
    ServerConfig { users: users(), ..Default::default() }
}

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|e| e.message().to_string()).unwrap_or_else(|| e.to_string())
}

fn catalog_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir.join("_sluice/catalog")).unwrap().flatten() {
        text.push_str(&std::fs::read_to_string(entry.path()).unwrap());
    }
    text
}

/// Finding 7: the catalog keeps verifiers (StoredKey, ServerKey), from which no client logs in;
/// catalogs that kept SaltedPassword are upgraded when the server starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_passwords_are_verifiers_that_do_not_log_in() {
    // An older catalog: a role stored with its SaltedPassword.
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sluice::Database::open(dir.path().to_str().unwrap()).await.unwrap();
        let salt = *b"0123456789abcdef";
        let salted = pgwire::api::auth::sasl::scram::gen_salted_password("old-secret", &salt, 4096);
        let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let role = sluice::catalog::RoleEntry {
            name: "veteran".into(),
            verifier: String::new(),
            read_only: false,
            salt: Some(hex(&salt)),
            salted_password: Some(hex(&salted)),
        };
        db.inner()
            .warehouse
            .catalog
            .update(|state| {
                state.roles.insert(role.name.clone(), role.clone());
                Ok(())
            })
            .await
            .unwrap();
        assert!(catalog_text(dir.path()).contains("salted_password"));
    }
    let warehouse = Warehouse::start_in(dir, with_users()).await;
    let data = warehouse.dir.path().to_path_buf();
    warehouse.try_connect("veteran", "old-secret").await.expect("the upgraded role logs in");
    let owner = warehouse.connect("owner").await;
    owner.batch_execute("CREATE ROLE fresh PASSWORD 'new-secret'").await.unwrap();
    warehouse.try_connect("fresh", "new-secret").await.expect("a new role logs in");

    let catalog: serde_json::Value = {
        let mut latest = std::fs::read_dir(data.join("_sluice/catalog")).unwrap().flatten().collect::<Vec<_>>();
        latest.sort_by_key(|e| e.file_name());
        serde_json::from_str(&std::fs::read_to_string(latest.last().unwrap().path()).unwrap()).unwrap()
    };
    let text = catalog.to_string();
    assert!(!text.contains("salted_password"), "{text}");
    for name in ["veteran", "fresh"] {
        let verifier = catalog["roles"][name]["verifier"].as_str().unwrap().to_string();
        assert!(verifier.starts_with("SCRAM-SHA-256$4096:"), "{verifier}");
        // Neither key, nor the verifier itself, is a password.
        let keys = verifier.rsplit('$').next().unwrap().to_string();
        for guess in [verifier.clone(), keys.split(':').next().unwrap().into(), keys.split(':').nth(1).unwrap().into()]
        {
            let Err(refused) = warehouse.try_connect(name, &guess).await else {
                panic!("a stored key is not a password")
            };
            assert_eq!(code(&refused), "28P01");
        }
    }
    // No client reads the catalog's or the server's files.
    owner.batch_execute("CREATE TABLE k (line text)").await.unwrap();
    for file in ["_sluice/catalog/00000000000000000001.json", "_sluice/tls/server.key"] {
        let refused = owner.batch_execute(&format!("COPY k FROM '{file}'")).await.unwrap_err();
        assert_eq!(code(&refused), "42501", "{file}: {refused}");
    }
}

/// The self-signed key is the server's alone.
#[test]
fn the_self_signed_key_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("server.key");
    std::fs::write(&key, "old").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, written) = sluice_server::pg::self_signed(dir.path()).unwrap();
    assert_eq!(written, key);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// Finding 8: only the owner creates, alters and drops roles; a catalog role cannot take a
/// users-file name (and so cannot lift its read-only flag).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owner_manages_roles() {
    let warehouse = Warehouse::start(with_users()).await;
    let user = warehouse.connect("user").await;
    for sql in ["CREATE ROLE reader PASSWORD 'x'", "CREATE ROLE other PASSWORD 'x'", "DROP ROLE reader"] {
        let refused = user.batch_execute(sql).await.unwrap_err();
        assert_eq!(code(&refused), "42501", "{sql}: {refused}");
    }
    let owner = warehouse.connect("owner").await;
    let taken = owner.batch_execute("CREATE ROLE reader PASSWORD 'x'").await.unwrap_err();
    assert_eq!(code(&taken), "42710", "{taken}");
    owner.batch_execute("CREATE ROLE IF NOT EXISTS reader PASSWORD 'x'").await.unwrap();
    let refused = owner.batch_execute("DROP ROLE reader").await.unwrap_err();
    assert_eq!(code(&refused), "0A000", "{refused}");
    assert!(warehouse.try_connect("reader", "x").await.is_err());
    let reader = warehouse.connect("reader").await;
    let refused = reader.batch_execute("CREATE TABLE t (a int)").await.unwrap_err();
    assert_eq!(code(&refused), "25006", "{refused}");

    // A role the owner made is a normal role: it writes, but manages no roles.
    owner.batch_execute("CREATE ROLE writer PASSWORD 'w1'").await.unwrap();
    let writer = warehouse.try_connect("writer", "w1").await.unwrap();
    writer.batch_execute("CREATE TABLE t (a int); INSERT INTO t VALUES (1)").await.unwrap();
    let refused = writer.batch_execute("ALTER ROLE writer PASSWORD 'mine'").await.unwrap_err();
    assert_eq!(code(&refused), "42501", "{refused}");
    owner.batch_execute("ALTER ROLE writer WITH PASSWORD 'w2'").await.unwrap();
    assert!(warehouse.try_connect("writer", "w1").await.is_err());
    warehouse.try_connect("writer", "w2").await.unwrap();
    owner.batch_execute("DROP ROLE writer").await.unwrap();
    assert!(warehouse.try_connect("writer", "w2").await.is_err());
}

/// Reads one backend message: its type and body.
async fn read_message(socket: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let kind = socket.read_u8().await.ok()?;
    let length = socket.read_i32().await.ok()?;
    let mut body = vec![0; usize::try_from(length).ok()?.checked_sub(4)?];
    socket.read_exact(&mut body).await.ok()?;
    Some((kind, body))
}

/// The SQLSTATE of an ErrorResponse body.
fn sqlstate(body: &[u8]) -> String {
    body.split(|b| *b == 0)
        .find(|field| field.first() == Some(&b'C'))
        .map(|field| String::from_utf8_lossy(&field[1..]).to_string())
        .unwrap_or_default()
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut message = vec![kind];
    message.extend(((body.len() + 4) as i32).to_be_bytes());
    message.extend(body);
    message
}

/// Opens a connection and sends a startup packet for `user`.
async fn start_raw(port: u16, user: &str) -> TcpStream {
    let mut socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for part in ["user", user, "database", "sluice"] {
        body.extend(part.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut packet = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend(body);
    socket.write_all(&packet).await.unwrap();
    socket
}

/// Sends SCRAM's first message for `user`; returns the server's answer (type, body).
async fn scram_first(port: u16, user: &str) -> (u8, Vec<u8>) {
    let mut socket = start_raw(port, user).await;
    let (kind, body) = read_message(&mut socket).await.unwrap();
    assert_eq!((kind, &body[..4]), (b'R', &10i32.to_be_bytes()[..]), "AuthenticationSASL for {user}");
    let first = b"n,,n=,r=0123456789abcdef";
    let mut body = b"SCRAM-SHA-256\0".to_vec();
    body.extend((first.len() as i32).to_be_bytes());
    body.extend(first);
    socket.write_all(&frame(b'p', &body)).await.unwrap();
    read_message(&mut socket).await.unwrap()
}

/// Finding 11: an unknown user gets the same exchange as a known one (a salt that does not change
/// between attempts), fails with the same error, and failures are answered after a delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_users_look_like_known_ones_and_failures_are_slowed() {
    let warehouse = Warehouse::start(with_users()).await;
    let port = warehouse.port();
    let salt = |body: &[u8]| {
        let text = String::from_utf8_lossy(&body[4..]).to_string();
        text.split(',').find_map(|f| f.strip_prefix("s=")).unwrap().to_string()
    };
    let (kind, known) = scram_first(port, "owner").await;
    assert_eq!((kind, &known[..4]), (b'R', &11i32.to_be_bytes()[..]), "SASLContinue for a known user");
    let (kind, unknown) = scram_first(port, "nobody").await;
    assert_eq!((kind, &unknown[..4]), (b'R', &11i32.to_be_bytes()[..]), "SASLContinue for an unknown user");
    assert_eq!(salt(&unknown), salt(&scram_first(port, "nobody").await.1), "a stable salt for an unknown user");
    assert_ne!(salt(&unknown), salt(&scram_first(port, "nobody2").await.1));

    let known = warehouse.try_connect("owner", "wrong").await.err().unwrap();
    let started = Instant::now();
    let unknown = warehouse.try_connect("nobody", "wrong").await.err().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250), "a failure is answered after a delay");
    assert_eq!((code(&known), code(&unknown)), ("28P01".to_string(), "28P01".to_string()));
    assert_eq!(message(&known).replace("owner", "X"), message(&unknown).replace("nobody", "X"));
    warehouse.try_connect("owner", "o").await.expect("the right password still works");
}

/// Finding 10: clients that connect and say nothing hold only startup slots, for the
/// authentication timeout; they lock no user out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_unauthenticated_connections_lock_no_one_out() {
    let config = ServerConfig {
        connections_max: 4,
        startup_connections_max: 8,
        authentication_timeout_ms: 4000,
        ..with_users()
    };
    let warehouse = Warehouse::start(config).await;
    let port = warehouse.port();
    let connected = warehouse.connect("owner").await;
    let mut idle = Vec::new();
    for _ in 0..30 {
        idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    // The connected client is not disturbed.
    connected.simple_query("SELECT 1").await.unwrap();
    // Beyond the startup slots, a client waits briefly for one, then is refused (53300 once it
    // says who it is; as it says nothing, the refusal closes it); the others are closed by the
    // authentication timeout.
    for socket in &mut idle {
        let mut bytes = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), socket.read_to_end(&mut bytes)).await;
        assert!(read.is_ok(), "an idle connection stays open past the authentication timeout");
    }
    // A client beyond the startup slots that does send its startup packet is told why.
    let mut waiting = Vec::new();
    for _ in 0..8 {
        waiting.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    // Let the server hand them the slots first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut beyond = start_raw(port, "user").await;
    let (kind, body) = read_message(&mut beyond).await.unwrap();
    assert_eq!((kind, sqlstate(&body)), (b'E', "53300".to_string()));
    drop(waiting);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // With the slots free again, users connect up to --max-connections, and no further.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(warehouse.connect("user").await);
    }
    let full = warehouse.try_connect("user", "u").await.err().unwrap();
    assert_eq!(code(&full), "53300", "{full}");
    connected.simple_query("SELECT 1").await.unwrap();
}

/// A server with no users (loopback trust), for the protocol tests.
async fn trusting() -> Warehouse {
    Warehouse::start(ServerConfig::default()).await
}

/// Sends a Parse of `SELECT $1::int` and then `bind` (a Bind body), Execute and Sync; returns the
/// messages up to ReadyForQuery or the end of the connection.
async fn bind_exchange(port: u16, bind: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut socket = start_raw(port, "tester").await;
    while let Some((kind, _)) = read_message(&mut socket).await {
        if kind == b'Z' {
            break;
        }
    }
    let mut parse = b"\0SELECT $1::int\0".to_vec();
    parse.extend(0i16.to_be_bytes());
    let mut batch = frame(b'P', &parse);
    batch.extend(frame(b'B', bind));
    batch.extend(frame(b'E', &[0, 0, 0, 0, 0]));
    batch.extend(frame(b'S', &[]));
    socket.write_all(&batch).await.unwrap();
    let mut messages = Vec::new();
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_secs(10), read_message(&mut socket)).await {
        let done = message.0 == b'Z';
        messages.push(message);
        if done {
            break;
        }
    }
    messages
}

fn bind_body(formats: &[i16], parameters: &[(i32, &[u8])], results: &[i16]) -> Vec<u8> {
    let mut body = b"\0\0".to_vec();
    body.extend((formats.len() as i16).to_be_bytes());
    formats.iter().for_each(|f| body.extend(f.to_be_bytes()));
    body.extend((parameters.len() as i16).to_be_bytes());
    for (length, bytes) in parameters {
        body.extend(length.to_be_bytes());
        body.extend(*bytes);
    }
    body.extend((results.len() as i16).to_be_bytes());
    results.iter().for_each(|f| body.extend(f.to_be_bytes()));
    body
}

/// Finding 11: a Bind PostgreSQL refuses is refused with its SQLSTATE (PostgreSQL 15 answers each
/// of these as below).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_postgres_refuses_are_refused() {
    let warehouse = trusting().await;
    let port = warehouse.port();
    let errors = |messages: &[(u8, Vec<u8>)]| {
        messages.iter().filter(|(kind, _)| *kind == b'E').map(|(_, body)| sqlstate(body)).collect::<Vec<_>>()
    };
    let good = bind_exchange(port, &bind_body(&[], &[(1, b"5")], &[])).await;
    assert!(good.iter().any(|(kind, _)| *kind == b'D'), "{good:?}");
    assert!(errors(&good).is_empty());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("more values than parameters", bind_body(&[], &[(1, b"5"), (1, b"6")], &[]), "08P01"),
        ("fewer values than parameters", bind_body(&[], &[], &[]), "08P01"),
        ("two formats for one value", bind_body(&[0, 0], &[(1, b"5")], &[]), "08P01"),
        ("an unknown parameter format", bind_body(&[7], &[(1, b"5")], &[]), "22023"),
        ("an unknown result format", bind_body(&[], &[(1, b"5")], &[7]), "22023"),
        ("a length of -2", bind_body(&[], &[(-2, b"")], &[]), "08P01"),
        ("a value past the message's end", bind_body(&[], &[(100, b"5")], &[])[..11].to_vec(), "08P01"),
    ];
    for (name, bind, expected) in cases {
        let messages = bind_exchange(port, &bind).await;
        assert_eq!(errors(&messages), vec![expected.to_string()], "{name}: {messages:?}");
        assert!(!messages.iter().any(|(kind, _)| *kind == b'D'), "{name}: no rows");
    }
    // The server is still there.
    let client = warehouse.try_connect("tester", "").await.unwrap();
    client.simple_query("SELECT 1").await.unwrap();
}

/// Finding 11: a time zone that does not exist is refused, as PostgreSQL does (22023).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_time_zones_are_refused() {
    let warehouse = trusting().await;
    let client = warehouse.try_connect("tester", "").await.unwrap();
    for sql in ["SET TimeZone = 'Mars/Olympus'", "SET TIME ZONE 'Nowhere'", "SET statement_timeout = 'soon'"] {
        let refused = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(code(&refused), "22023", "{sql}: {refused}");
    }
    assert!(message(&client.batch_execute("SET TimeZone = 'Mars/Olympus'").await.unwrap_err())
        .contains("invalid value for parameter \"TimeZone\": \"Mars/Olympus\""));
    for sql in
        ["SET TimeZone = 'Europe/Paris'", "SET TIME ZONE 'UTC'", "SET TimeZone = '+02:00'", "SET TIME ZONE LOCAL"]
    {
        client.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// Finding 11: with --require-tls, a client that does not use TLS is refused (28000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_tls_refuses_plain_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = sluice_server::pg::self_signed(&dir.path().join("tls")).unwrap();
    let config = ServerConfig { tls: Some((cert, key)), require_tls: true, ..with_users() };
    let warehouse = Warehouse::start(config).await;
    let refused = warehouse.try_connect("owner", "o").await.err().unwrap();
    assert_eq!(code(&refused), "28000", "{refused}");
    // Without a certificate the option is refused at start.
    let db = sluice::Database::open(dir.path().join("other").to_str().unwrap()).await.unwrap();
    let config = ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), require_tls: true, ..with_users() };
    assert!(serve(db, config).await.is_err());
}

/// `SET ROLE` to another role is refused (0A000), not accepted and ignored: a connection keeps
/// its login's rights. Switching to the login's own role, NONE or DEFAULT changes nothing and is
/// accepted, as in PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_roles_is_refused_not_ignored() {
    let warehouse = Warehouse::start(with_users()).await;
    let reader = warehouse.connect("reader").await;
    for sql in ["SET ROLE owner", "SET SESSION AUTHORIZATION owner", "SET ROLE \"user\""] {
        let refused = reader.batch_execute(sql).await.unwrap_err();
        assert_eq!(code(&refused), "0A000", "{sql}: {refused}");
    }
    for sql in ["SET ROLE reader", "SET ROLE NONE", "RESET ROLE", "SET SESSION AUTHORIZATION DEFAULT"] {
        reader.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let refused = reader.batch_execute("CREATE TABLE t (a int)").await.unwrap_err();
    assert_eq!(code(&refused), "25006", "{refused}");
}
