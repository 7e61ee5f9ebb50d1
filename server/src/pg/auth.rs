//! Who may connect, and as what.
//!
//! - [`Users`]: the users file's users, handed to the engine, which keeps them with the roles
//!   made by `CREATE ROLE` ([`sluice::roles`]: SCRAM-SHA-256 verifiers and each one's rights).
//! - [`Startup`]: one connection's authentication. SCRAM when any user exists; with none, anyone
//!   on loopback (PostgreSQL's `trust`, and the server then refuses to listen beyond loopback).
//!   An unknown user goes through the same exchange as a known one and fails the same way;
//!   each failure is answered after a delay that grows with the recent failures of the user name
//!   and of the client's address. A
//!   connection takes one of the server's connection slots only once it is authenticated.

use std::collections::HashMap;
use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::sink::Sink;
use futures::SinkExt;
use parking_lot::Mutex;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, StartupHandler,
};
use pgwire::api::{ClientInfo, PgWireConnectionState, PidSecretKeyGenerator};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::startup::Authentication;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use serde::Deserialize;
use sluice::roles::{RoleConfig, Verifier};
use sluice::{Database, Privileges};

use super::scram::{self, Exchange, Failure};
use super::{CancelHandle, ServerState};

/// A user from the config file.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserConfig {
    pub name: String,
    pub password: String,
    #[serde(default)]
    pub read_only: bool,
    /// The warehouse owner (when no user is marked, the first user is the owner).
    #[serde(default)]
    pub owner: bool,
}

/// Reads a users file: a JSON array of `{"name", "password", "read_only", "owner"}`.
pub fn read_users_file(path: &Path) -> Result<Vec<UserConfig>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let users: Vec<UserConfig> =
        serde_json::from_str(&text).map_err(|e| format!("{} is not a JSON array of users: {e}", path.display()))?;
    if let Some(user) = users.iter().find(|u| u.owner && u.read_only) {
        return Err(format!("{}: user \"{}\" cannot be both owner and read_only", path.display(), user.name));
    }
    Ok(users)
}

/// The users the server knows (kept by the engine: [`sluice::roles`]), and what the server adds:
/// made-up verifiers for unknown names, and the record of recent password failures.
#[derive(Debug)]
pub struct Users {
    db: Database,
    /// Derives the salts shown for users that do not exist.
    mock_secret: [u8; 32],
    failures: Mutex<HashMap<String, (u32, Instant)>>,
}

/// Failures older than this are forgotten.
const FAILURE_MEMORY: Duration = Duration::from_secs(60);
/// The delay after a user's first recent failure; it doubles with each further one.
const FAILURE_DELAY_FIRST: Duration = Duration::from_millis(250);
const FAILURE_DELAY_MAX: Duration = Duration::from_secs(5);
/// The most user names whose failures are remembered.
const FAILURE_NAMES_MAX: usize = 10_000;

impl Users {
    /// Hands the users file's users to the engine: the user marked owner (else the first) is the
    /// warehouse owner.
    pub fn new(db: Database, configured: &[UserConfig]) -> Self {
        let owner = configured.iter().find(|u| u.owner).or(configured.first()).map(|u| u.name.clone());
        let roles: Vec<RoleConfig> = configured
            .iter()
            .map(|u| {
                let privileges = if u.read_only {
                    Privileges::READ_ONLY
                } else if u.owner || owner.as_deref() == Some(u.name.as_str()) {
                    Privileges::OWNER
                } else {
                    Privileges::NORMAL
                };
                RoleConfig { name: u.name.clone(), password: u.password.clone(), privileges }
            })
            .collect();
        db.configure_roles(&roles);
        Self { db, mock_secret: rand::random(), failures: Mutex::new(HashMap::new()) }
    }

    /// Whether any user exists (otherwise the server trusts loopback clients).
    pub async fn any(&self) -> bool {
        self.db.has_roles().await
    }

    /// The verifier to check a user's password against: a made-up one for an unknown user.
    async fn verifier(&self, name: &str) -> Verifier {
        match self.db.login(name).await {
            Some(login) => login.verifier,
            None => Verifier::mock(&self.mock_secret, name),
        }
    }

    /// Records a failed password of `name` from `address` and returns how long to wait before
    /// answering it: the longer of the delays the user name and the address have earned, so that
    /// guessing many names from one address is slowed as much as guessing one name.
    fn failed(&self, name: &str, address: std::net::IpAddr) -> Duration {
        let mut failures = self.failures.lock();
        let now = Instant::now();
        if failures.len() >= FAILURE_NAMES_MAX {
            failures.retain(|_, (_, last)| now.duration_since(*last) < FAILURE_MEMORY);
        }
        let mut delay = Duration::ZERO;
        for key in [format!("user {name}"), format!("address {address}")] {
            let entry = failures.entry(key).or_insert((0, now));
            if now.duration_since(entry.1) >= FAILURE_MEMORY {
                entry.0 = 0;
            }
            entry.0 = entry.0.saturating_add(1);
            entry.1 = now;
            let doublings = entry.0.saturating_sub(1).min(16);
            delay = delay.max(FAILURE_DELAY_FIRST.saturating_mul(1 << doublings).min(FAILURE_DELAY_MAX));
        }
        delay
    }

    /// Forgets a user name's failures once it logs in (its address's stay until they age out).
    fn succeeded(&self, name: &str) {
        self.failures.lock().remove(&format!("user {name}"));
    }
}

/// A connection authenticated as a loopback client with no users configured (`trust`): it keeps
/// the owner's rights even if roles are created while it is connected.
pub struct Trusted;

/// The connection slot an authenticated connection holds until it closes.
pub struct ConnectionSlot(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

/// Where one connection's SCRAM exchange stands.
enum Step {
    AwaitingClientFirst,
    AwaitingClientFinal(Box<Exchange>),
    Done,
}

/// One connection's authentication.
pub struct Startup {
    state: Arc<ServerState>,
    /// SCRAM when users exist (decided when the connection opens).
    scram: bool,
    step: tokio::sync::Mutex<Step>,
}

fn error(severity: &str, sqlstate: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(severity.into(), sqlstate.into(), message.into())))
}

fn fatal(sqlstate: &str, message: impl Into<String>) -> PgWireError {
    error("FATAL", sqlstate, message)
}

impl Startup {
    pub fn new(state: Arc<ServerState>, scram: bool) -> Self {
        Self { state, scram, step: tokio::sync::Mutex::new(Step::AwaitingClientFirst) }
    }

    /// Takes a connection slot, registers the connection for CancelRequests and tells the client
    /// it is in.
    async fn admit<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Ok(slot) = self.state.connection_slots.clone().try_acquire_owned() else {
            return Err(fatal("53300", "sorry, too many clients already"));
        };
        client.session_extensions().insert(ConnectionSlot(slot));
        let (pid, secret) = self.state.pids.generate(&*client);
        client.set_pid_and_secret_key(pid, secret.clone());
        let (handle, guard) = self.state.manager.register(pid, secret);
        // Under Sluice's own type, so that pgwire does not race statements against cancels
        // (see `CancelHandle`).
        client.session_extensions().insert(CancelHandle(handle));
        client.session_extensions().insert(guard);
        finish_authentication(client, self.state.parameters.as_ref()).await
    }

    async fn password_failed(&self, user: &str, address: std::net::IpAddr) -> PgWireError {
        tokio::time::sleep(self.state.users.failed(user, address)).await;
        fatal("28P01", format!("password authentication failed for user \"{user}\""))
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let user = client.metadata().get("user").cloned().unwrap_or_default();
        match message {
            PgWireFrontendMessage::Startup(startup) => {
                protocol_negotiation(client, &startup).await?;
                save_startup_parameters_to_metadata(client, &startup);
                let user = client.metadata().get("user").cloned().unwrap_or_default();
                if self.state.require_tls && !client.is_secure() {
                    return Err(fatal(
                        "28000",
                        format!(
                            "no encryption: user \"{user}\" must connect with TLS (the server runs with --require-tls)"
                        ),
                    ));
                }
                if !self.scram {
                    if !client.socket_addr().ip().is_loopback() {
                        return Err(fatal("28000", "no users are configured, so only loopback clients may connect"));
                    }
                    client.session_extensions().insert(Trusted);
                    return self.admit(client).await;
                }
                if user.is_empty() {
                    return Err(fatal("28000", "no PostgreSQL user name specified in startup packet"));
                }
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                client
                    .send(PgWireBackendMessage::Authentication(Authentication::SASL(vec![scram::MECHANISM.into()])))
                    .await?;
                Ok(())
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) if self.scram => {
                let mut step = self.step.lock().await;
                match std::mem::replace(&mut *step, Step::Done) {
                    Step::AwaitingClientFirst => {
                        let initial = message.into_sasl_initial_response()?;
                        if initial.auth_method != scram::MECHANISM {
                            return Err(fatal(
                                "08P01",
                                format!(
                                    "client selected an invalid SASL authentication mechanism: {}",
                                    initial.auth_method
                                ),
                            ));
                        }
                        let verifier = self.state.users.verifier(&user).await;
                        let data = initial.data.unwrap_or_default();
                        let (server_first, exchange) =
                            scram::server_first(&data, verifier).map_err(|failure| match failure {
                                Failure::Protocol(text) => fatal("08P01", text),
                                Failure::Password => fatal("28P01", "password authentication failed"),
                            })?;
                        *step = Step::AwaitingClientFinal(Box::new(exchange));
                        client
                            .send(PgWireBackendMessage::Authentication(Authentication::SASLContinue(
                                server_first.into_bytes().into(),
                            )))
                            .await?;
                        Ok(())
                    }
                    Step::AwaitingClientFinal(exchange) => {
                        let response = message.into_sasl_response()?;
                        match exchange.server_final(&response.data) {
                            Ok(server_final) => {
                                self.state.users.succeeded(&user);
                                client
                                    .feed(PgWireBackendMessage::Authentication(Authentication::SASLFinal(
                                        server_final.into_bytes().into(),
                                    )))
                                    .await?;
                                self.admit(client).await
                            }
                            Err(Failure::Protocol(text)) => Err(fatal("08P01", text)),
                            Err(Failure::Password) => Err(self.password_failed(&user, client.socket_addr().ip()).await),
                        }
                    }
                    Step::Done => Err(fatal("08P01", "unexpected authentication message")),
                }
            }
            _ => Err(fatal("08P01", "unexpected message during authentication")),
        }
    }
}

/// The rights of a connection's user, for the engine to check on each statement.
pub fn privileges<C: ClientInfo>(state: &ServerState, client: &C) -> Privileges {
    if client.session_extensions().get::<Trusted>().is_some() {
        return Privileges::OWNER;
    }
    let user = client.metadata().get("user").cloned().unwrap_or_default();
    // A role dropped while its connection is open keeps only the right to read.
    state.db.role_privileges(&user).unwrap_or(Privileges::READ_ONLY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failures_slow_down_per_user_name_and_per_address() {
        let users = Users::new(Database::open("memory://").await.unwrap(), &[]);
        let (one, two): (std::net::IpAddr, std::net::IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let ms = |d: Duration| d.as_millis();
        assert_eq!(ms(users.failed("a", one)), 250);
        // Another name from the same address: the address's second failure.
        assert_eq!(ms(users.failed("b", one)), 500);
        // The same name from elsewhere: the name's second failure.
        assert_eq!(ms(users.failed("a", two)), 500);
        assert_eq!(ms(users.failed("c", two)), 500);
        assert_eq!(ms(users.failed("a", two)), 1000);
        users.succeeded("a");
        assert_eq!(ms(users.failed("d", [10, 0, 0, 3].into())), 250);
        for _ in 0..20 {
            users.failed("e", one);
        }
        assert_eq!(ms(users.failed("e", one)), 5000, "the delay is capped");
    }
}
