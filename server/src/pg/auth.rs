//! Who may connect: users from a config file and roles created with `CREATE ROLE ... PASSWORD`,
//! authenticated with SCRAM-SHA-256; with no users at all, anyone on loopback (Postgres' `trust`).
//!
//! Passwords are kept only as SCRAM salted passwords. Read-only users may run queries, SHOW/SET
//! and COPY TO, but nothing that writes data or changes the catalog.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::auth::sasl::scram::gen_salted_password;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use serde::Deserialize;
use sluice::catalog::RoleEntry;
use sluice::Database;

/// PBKDF2 iterations of the salted passwords (Postgres' default, and pgwire's).
pub const SCRAM_ITERATIONS: u32 = 4096;

/// A user from the config file.
#[derive(Debug, Clone, Deserialize)]
pub struct UserConfig {
    pub name: String,
    pub password: String,
    #[serde(default)]
    pub read_only: bool,
}

/// Reads a users file: a JSON array of `{"name", "password", "read_only"}`.
pub fn read_users_file(path: &Path) -> Result<Vec<UserConfig>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a JSON array of users: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len()).step_by(2).map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

/// The stored form of a password.
pub fn role_entry(name: &str, password: &str, read_only: bool) -> RoleEntry {
    let salt: [u8; 16] = rand::random();
    let salted = gen_salted_password(password, &salt, SCRAM_ITERATIONS as usize);
    RoleEntry {
        name: name.to_string(),
        salt: hex(&salt),
        salted_password: hex(&salted),
        iterations: SCRAM_ITERATIONS,
        read_only,
    }
}

/// The users the server knows: the config file's (fixed at start) and the catalog's roles.
#[derive(Debug)]
pub struct Users {
    configured: BTreeMap<String, RoleEntry>,
    db: Database,
}

impl Users {
    pub fn new(db: Database, configured: &[UserConfig]) -> Self {
        let configured =
            configured.iter().map(|u| (u.name.clone(), role_entry(&u.name, &u.password, u.read_only))).collect();
        Self { configured, db }
    }

    /// Whether any user exists (otherwise the server trusts loopback clients).
    pub async fn any(&self) -> bool {
        let _ = self.db.inner().catalog.refresh().await;
        !self.configured.is_empty() || !self.db.inner().catalog.current().roles.is_empty()
    }

    /// The stored password of a user.
    pub async fn find(&self, name: &str) -> Option<RoleEntry> {
        if let Some(entry) = self.configured.get(name) {
            return Some(entry.clone());
        }
        let _ = self.db.inner().catalog.refresh().await;
        self.db.inner().catalog.current().roles.get(name).cloned()
    }
}

/// The SCRAM password source.
#[derive(Debug)]
pub struct ScramSource {
    pub users: Arc<Users>,
}

#[async_trait]
impl AuthSource for ScramSource {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let name = login.user().unwrap_or_default();
        let failed = || {
            PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                "28P01".into(),
                format!("password authentication failed for user \"{name}\""),
            )))
        };
        let entry = self.users.find(name).await.ok_or_else(failed)?;
        let salt = unhex(&entry.salt).ok_or_else(failed)?;
        let salted = unhex(&entry.salted_password).ok_or_else(failed)?;
        Ok(Password::new(Some(salt), salted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(&[0, 1, 255])), Some(vec![0, 1, 255]));
        let entry = role_entry("u", "secret", true);
        assert_eq!(entry.salt.len(), 32);
        assert!(entry.read_only);
    }
}
