//! Login roles: who may connect, with what password and what rights.
//!
//! Two sources, with names unique across both:
//!
//! - roles the operator configures when a server starts ([`crate::Database::configure_roles`]: `sluice
//!   serve --users`), fixed for the database handle's life;
//! - roles created with `CREATE ROLE name PASSWORD '...'` by the owner, kept in the catalog.
//!
//! A password is kept only as a SCRAM-SHA-256 [`Verifier`], PostgreSQL's `pg_authid` form: enough
//! to check a password, not to log in with. The wire protocol's exchange itself is the server's.
//!
//! This module sits on the catalog only: [`Roles`] is held by the database, which exposes it
//! (`Database::login`, ...), and the session dispatches the role statements to it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use datafusion::sql::sqlparser::ast::{AlterRoleOperation, CreateRole, Expr, Ident, ObjectName, Password, RoleOption};
use ring::rand::SecureRandom;
use ring::{digest, hmac};

use crate::catalog::{Catalog, RoleEntry};
use crate::error::{Error, Result};
use crate::privileges::Privileges;

/// PBKDF2 iterations of new verifiers (PostgreSQL's default).
pub const SCRAM_ITERATIONS: u32 = 4096;

/// A stored password: `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // The system's random source does not fail on the platforms Sluice runs on; if it did, the
    // bytes would stay zero and the verifier would still check only its own password.
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    bytes
}

impl Verifier {
    /// A new verifier for a password, with a random salt, as libpq makes one (postgres-protocol:
    /// SASLprep where it applies, 4096 iterations).
    pub fn for_password(password: &str) -> Verifier {
        let text = postgres_protocol::password::scram_sha_256(password.as_bytes());
        // The crate writes the form `parse` reads; were it ever not to, the role gets a verifier
        // no password matches (it cannot log in) rather than a weak one.
        Verifier::parse(&text).unwrap_or_else(|| Verifier::mock(&random::<32>(), ""))
    }

    /// The verifier of a SCRAM SaltedPassword.
    pub fn from_salted_password(iterations: u32, salt: Vec<u8>, salted_password: &[u8]) -> Verifier {
        let key = hmac::Key::new(hmac::HMAC_SHA256, salted_password);
        let client_key = hmac::sign(&key, b"Client Key");
        let stored_key = digest::digest(&digest::SHA256, client_key.as_ref()).as_ref().to_vec();
        let server_key = hmac::sign(&key, b"Server Key").as_ref().to_vec();
        Verifier { iterations, salt, stored_key, server_key }
    }

    /// Whether `password` is the one this verifier was made from (for clients that send a
    /// password itself, as HTTP basic authentication does): SCRAM's SaltedPassword with the
    /// verifier's salt and iterations gives the same StoredKey, compared in constant time.
    pub fn verify_password(&self, password: &str) -> bool {
        let Some(iterations) = std::num::NonZeroU32::new(self.iterations) else { return false };
        let prepared = stringprep::saslprep(password).map(|p| p.into_owned()).unwrap_or_else(|_| password.to_string());
        let mut salted = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            iterations,
            &self.salt,
            prepared.as_bytes(),
            &mut salted,
        );
        let candidate = Verifier::from_salted_password(self.iterations, self.salt.clone(), &salted);
        candidate.stored_key.len() == self.stored_key.len()
            && candidate.stored_key.iter().zip(&self.stored_key).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }

    /// Parses `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn parse(text: &str) -> Option<Verifier> {
        let rest = text.strip_prefix("SCRAM-SHA-256$")?;
        let (head, keys) = rest.split_once('$')?;
        let (iterations, salt) = head.split_once(':')?;
        let (stored_key, server_key) = keys.split_once(':')?;
        let verifier = Verifier {
            iterations: iterations.parse().ok().filter(|i| *i > 0)?,
            salt: STANDARD.decode(salt).ok()?,
            stored_key: STANDARD.decode(stored_key).ok()?,
            server_key: STANDARD.decode(server_key).ok()?,
        };
        (verifier.stored_key.len() == 32 && verifier.server_key.len() == 32).then_some(verifier)
    }

    /// A verifier for a user that does not exist: a salt stable for `(secret, user)`, and keys no
    /// password matches.
    pub fn mock(secret: &[u8], user: &str) -> Verifier {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let salt = hmac::sign(&key, user.as_bytes()).as_ref().iter().take(16).copied().collect();
        Verifier {
            iterations: SCRAM_ITERATIONS,
            salt,
            stored_key: random::<32>().to_vec(),
            server_key: random::<32>().to_vec(),
        }
    }
}

impl std::fmt::Display for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }
}

/// A role the operator configures (a users file's user).
#[derive(Debug, Clone)]
pub struct RoleConfig {
    pub name: String,
    pub password: String,
    pub privileges: Privileges,
}

/// What a login needs to know of a role.
#[derive(Debug, Clone)]
pub struct Login {
    pub verifier: Verifier,
    pub privileges: Privileges,
}

/// The roles of a warehouse: the configured ones, and the catalog's.
#[derive(Debug, Default)]
pub struct Roles {
    configured: std::sync::RwLock<std::collections::BTreeMap<String, Login>>,
}

/// The stored form of a new role. A password that already is a SCRAM verifier (as clients that
/// hash on their side send it) is stored as given.
fn role_entry(name: &str, password: &str, read_only: bool) -> RoleEntry {
    let verifier = Verifier::parse(password).unwrap_or_else(|| Verifier::for_password(password));
    RoleEntry { name: name.to_string(), verifier: verifier.to_string(), read_only, salt: None, salted_password: None }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len()).step_by(2).map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

fn password_text(expr: &Expr) -> String {
    match expr {
        Expr::Value(value) => match &value.value {
            datafusion::sql::sqlparser::ast::Value::SingleQuotedString(s)
            | datafusion::sql::sqlparser::ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

fn role_name(name: &ObjectName) -> String {
    name.to_string().trim_matches('"').to_string()
}

impl Roles {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, std::collections::BTreeMap<String, Login>> {
        self.configured.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the roles the operator configures; they keep their rights and reserve their names.
    pub fn configure(&self, roles: &[RoleConfig]) {
        let mut configured = self.configured.write().unwrap_or_else(|p| p.into_inner());
        configured.clear();
        for role in roles {
            let login = Login { verifier: Verifier::for_password(&role.password), privileges: role.privileges };
            configured.insert(role.name.clone(), login);
        }
    }

    fn reserved(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// Whether any role exists.
    pub async fn any(&self, catalog: &Catalog) -> bool {
        if !self.read().is_empty() {
            return true;
        }
        let _ = catalog.refresh().await;
        !catalog.current().roles.is_empty()
    }

    /// A role's verifier and rights, for a login (`None`: no such role).
    pub async fn login(&self, catalog: &Catalog, name: &str) -> Option<Login> {
        if let Some(login) = self.read().get(name) {
            return Some(login.clone());
        }
        let _ = catalog.refresh().await;
        let role = catalog.current().roles.get(name).cloned()?;
        let privileges = if role.read_only { Privileges::READ_ONLY } else { Privileges::NORMAL };
        Some(Login { verifier: Verifier::parse(&role.verifier)?, privileges })
    }

    /// The rights of a role (`None`: no such role). A role made with CREATE ROLE is a normal or a
    /// read-only role; only a configured role can be the owner.
    pub fn privileges(&self, catalog: &Catalog, name: &str) -> Option<Privileges> {
        if let Some(login) = self.read().get(name) {
            return Some(login.privileges);
        }
        let state = catalog.current();
        let role = state.roles.get(name)?;
        Some(if role.read_only { Privileges::READ_ONLY } else { Privileges::NORMAL })
    }

    /// Every role's name, sorted.
    pub fn names(&self, catalog: &Catalog) -> Vec<String> {
        let mut names: Vec<String> = self.read().keys().cloned().collect();
        names.extend(catalog.current().roles.keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// Replaces the SCRAM SaltedPasswords that older catalogs kept (enough to log in) with
    /// verifiers (not enough).
    pub async fn upgrade_stored_passwords(&self, catalog: &Catalog) -> Result<()> {
        if !catalog.current().roles.values().any(|r| r.salted_password.is_some()) {
            return Ok(());
        }
        catalog
            .update(|state| {
                for role in state.roles.values_mut() {
                    let (Some(salt), Some(salted)) = (role.salt.take(), role.salted_password.take()) else {
                        continue;
                    };
                    if let (Some(salt), Some(salted)) = (unhex(&salt), unhex(&salted)) {
                        role.verifier = Verifier::from_salted_password(SCRAM_ITERATIONS, salt, &salted).to_string();
                    }
                }
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// `CREATE ROLE name [WITH] [LOGIN] PASSWORD 'x' [IN ROLE pg_read_all_data]` (the owner's:
    /// [`crate::rights`] refuses it to other roles).
    pub async fn create(&self, catalog: &Catalog, create: &CreateRole) -> Result<()> {
        let Some(Password::Password(password)) = &create.password else {
            return Err(Error::NotSupported("CREATE ROLE without a PASSWORD (Sluice roles are login roles)".into()));
        };
        let password = password_text(password);
        let read_only =
            create.in_role.iter().chain(&create.role).any(|r| r.value.eq_ignore_ascii_case("pg_read_all_data"));
        for name in &create.names {
            let name = role_name(name);
            if self.reserved(&name) {
                if create.if_not_exists {
                    continue;
                }
                return Err(Error::DuplicateObject { kind: "role", name });
            }
            let entry = role_entry(&name, &password, read_only);
            let if_not_exists = create.if_not_exists;
            catalog
                .update(|state| {
                    if state.roles.contains_key(&entry.name) {
                        return if if_not_exists {
                            Ok(())
                        } else {
                            Err(Error::DuplicateObject { kind: "role", name: entry.name.clone() })
                        };
                    }
                    state.roles.insert(entry.name.clone(), entry.clone());
                    Ok(())
                })
                .await?;
        }
        Ok(())
    }

    /// `ALTER ROLE name [WITH] PASSWORD 'x'` (the owner's).
    pub async fn alter(&self, catalog: &Catalog, name: &Ident, operation: &AlterRoleOperation) -> Result<()> {
        let name = name.value.clone();
        let AlterRoleOperation::WithOptions { options } = operation else {
            return Err(Error::NotSupported(format!("ALTER ROLE ... {operation} (only PASSWORD)")));
        };
        let mut password = None;
        for option in options {
            match option {
                RoleOption::Password(Password::Password(value)) => password = Some(password_text(value)),
                other => return Err(Error::NotSupported(format!("ALTER ROLE ... {other} (only PASSWORD)"))),
            }
        }
        let Some(password) = password else { return Ok(()) };
        if self.reserved(&name) {
            return Err(Error::NotSupported(format!(
                "changing the password of role \"{name}\", which comes from the users file (change it there)"
            )));
        }
        catalog
            .update(|state| match state.roles.get_mut(&name) {
                Some(role) => {
                    role.verifier = role_entry(&name, &password, role.read_only).verifier;
                    Ok(())
                }
                None => Err(Error::UndefinedObject { kind: "role", name: name.clone() }),
            })
            .await
            .map(|_| ())
    }

    /// `DROP ROLE [IF EXISTS] name, ...` (the owner's).
    pub async fn drop(&self, catalog: &Catalog, names: &[ObjectName], if_exists: bool) -> Result<()> {
        for name in names {
            let name = role_name(name);
            if self.reserved(&name) {
                return Err(Error::NotSupported(format!(
                    "dropping role \"{name}\", which comes from the users file (remove it there)"
                )));
            }
            catalog
                .update(|state| match state.roles.remove(&name) {
                    Some(_) => Ok(()),
                    None if if_exists => Ok(()),
                    None => Err(Error::UndefinedObject { kind: "role", name: name.clone() }),
                })
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifiers_round_trip_and_a_given_verifier_is_kept() {
        let verifier = Verifier::for_password("pencil");
        assert_eq!(Verifier::parse(&verifier.to_string()), Some(verifier.clone()));
        assert_eq!(role_entry("u", &verifier.to_string(), false).verifier, verifier.to_string());
        assert!(role_entry("u", "secret", true).verifier.starts_with("SCRAM-SHA-256$4096:"));
        assert_eq!(Verifier::mock(b"s", "nobody").salt, Verifier::mock(b"s", "nobody").salt);
        assert_ne!(Verifier::mock(b"s", "nobody").salt, Verifier::mock(b"s", "other").salt);
    }
}
