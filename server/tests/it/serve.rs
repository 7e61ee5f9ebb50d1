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
