//! `sluice serve` as a child process on a free loopback port, for the tests that drive it with
//! real clients (clients.rs, dbt.rs).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Serve {
    child: Child,
    pub port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn serve(data: &Path, extra: &[&str]) -> Serve {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--data", data.to_str().unwrap(), "--listen", &listen])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "sluice serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Serve { child, port }
}

/// One statement through psql (unaligned, tuples only) as `user`: its output, or psql's error.
pub fn psql_as(port: u16, user: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", user, "-d", "sluice", "-c", sql])
        .env("PGPASSWORD", "x")
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).to_string());
    }
    Ok(String::from_utf8(out.stdout).unwrap().trim().to_string())
}

/// The rows of a simple query as `col|col|...` lines.
pub fn text(messages: &[tokio_postgres::SimpleQueryMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect::<Vec<_>>().join("|"))
            }
            _ => None,
        })
        .collect()
}
