//! SCRAM-SHA-256 on the server side, checked against the engine's stored verifier
//! ([`sluice::roles::Verifier`], PostgreSQL's `pg_authid` form).
//!
//! The verifier is enough to check a password but not to log in: a client proves that it knows
//! ClientKey, whose hash is StoredKey. (pgwire's SCRAM server needs the SaltedPassword, from
//! which a client can compute ClientKey itself, so Sluice does the exchange here.)
//!
//! A user who does not exist gets the same exchange as one who does, with a salt derived from
//! the name and a server secret (stable for the server's life, as PostgreSQL's mock salt is), and
//! fails at the same step with the same message.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::{digest, hmac};

/// The mechanism Sluice offers (no channel binding: SCRAM-SHA-256-PLUS is not offered).
pub const MECHANISM: &str = "SCRAM-SHA-256";

pub use sluice::roles::Verifier;

/// A failed exchange: a malformed message (SQLSTATE 08P01) or a wrong password (28P01).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Protocol(String),
    Password,
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::Protocol(message.into())
}

/// The server's state between its first message and the client's last.
#[derive(Debug)]
pub struct Exchange {
    verifier: Verifier,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

/// Answers the client's first message (`n,,n=user,r=nonce`) with the server's first message.
pub fn server_first(client_first: &[u8], verifier: Verifier) -> Result<(String, Exchange), Failure> {
    let text = std::str::from_utf8(client_first).map_err(|_| protocol("SCRAM message is not valid UTF-8"))?;
    let mut fields = text.splitn(3, ',');
    let flag = fields.next().unwrap_or_default();
    let authzid = fields.next().ok_or_else(|| protocol("malformed SCRAM message"))?;
    let bare = fields.next().ok_or_else(|| protocol("malformed SCRAM message"))?;
    match flag {
        // "y": the client supports channel binding but thinks the server does not (true).
        "n" | "y" => {}
        f if f.starts_with("p=") => {
            return Err(protocol("channel binding is not supported (the server offers SCRAM-SHA-256 only)"))
        }
        _ => return Err(protocol("malformed SCRAM message (unexpected channel-binding flag)")),
    }
    if !authzid.is_empty() {
        return Err(protocol("client uses authorization identity, but it is not supported"));
    }
    // The user name in the message is ignored, as PostgreSQL does: the startup packet's counts.
    let client_nonce = bare
        .split(',')
        .find_map(|attribute| attribute.strip_prefix("r="))
        .filter(|nonce| !nonce.is_empty() && nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b','))
        .ok_or_else(|| protocol("malformed SCRAM message (no nonce)"))?;
    let nonce = format!("{client_nonce}{}", STANDARD.encode(rand::random::<[u8; 18]>()));
    let server_first = format!("r={nonce},s={},i={}", STANDARD.encode(&verifier.salt), verifier.iterations);
    let exchange = Exchange {
        verifier,
        gs2_header: format!("{flag},{authzid},"),
        client_first_bare: bare.to_string(),
        server_first: server_first.clone(),
        nonce,
    };
    Ok((server_first, exchange))
}

impl Exchange {
    /// Checks the client's proof (`c=...,r=...,p=...`); on success, the server's final message.
    pub fn server_final(&self, client_final: &[u8]) -> Result<String, Failure> {
        let text = std::str::from_utf8(client_final).map_err(|_| protocol("SCRAM message is not valid UTF-8"))?;
        let (without_proof, proof) =
            text.rsplit_once(",p=").ok_or_else(|| protocol("malformed SCRAM message (no proof)"))?;
        let mut attributes = without_proof.split(',');
        let binding = attributes.next().and_then(|a| a.strip_prefix("c=")).unwrap_or_default();
        if STANDARD.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(protocol("SCRAM channel binding check failed"));
        }
        if attributes.next().and_then(|a| a.strip_prefix("r=")) != Some(self.nonce.as_str()) {
            return Err(protocol("SCRAM nonce does not match"));
        }
        let proof = STANDARD.decode(proof).map_err(|_| protocol("malformed SCRAM proof"))?;
        if proof.len() != self.verifier.stored_key.len() {
            return Err(protocol("malformed SCRAM proof"));
        }
        let auth_message = format!("{},{},{without_proof}", self.client_first_bare, self.server_first);
        let stored = hmac::Key::new(hmac::HMAC_SHA256, &self.verifier.stored_key);
        let client_signature = hmac::sign(&stored, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(client_signature.as_ref()).map(|(p, s)| p ^ s).collect();
        let computed = digest::digest(&digest::SHA256, &client_key);
        // Constant time: compare the HMACs of both keys rather than the keys themselves.
        let check = hmac::Key::new(hmac::HMAC_SHA256, &self.verifier.server_key);
        let tag = hmac::sign(&check, computed.as_ref());
        if hmac::verify(&check, &self.verifier.stored_key, tag.as_ref()).is_err() {
            return Err(Failure::Password);
        }
        let server = hmac::Key::new(hmac::HMAC_SHA256, &self.verifier.server_key);
        let server_signature = hmac::sign(&server, auth_message.as_bytes());
        Ok(format!("v={}", STANDARD.encode(server_signature.as_ref())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client side of an exchange, per RFC 5802, for the tests.
    fn client_final(password: &str, gs2_header: &str, client_first_bare: &str, server_first: &str) -> String {
        let mut fields = server_first.split(',');
        let nonce = fields.next().unwrap().strip_prefix("r=").unwrap();
        let salt = STANDARD.decode(fields.next().unwrap().strip_prefix("s=").unwrap()).unwrap();
        let iterations: u32 = fields.next().unwrap().strip_prefix("i=").unwrap().parse().unwrap();
        let mut salted = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            std::num::NonZeroU32::new(iterations).unwrap(),
            &salt,
            password.as_bytes(),
            &mut salted,
        );
        let key = hmac::Key::new(hmac::HMAC_SHA256, &salted);
        let client_key = hmac::sign(&key, b"Client Key");
        let stored_key = digest::digest(&digest::SHA256, client_key.as_ref());
        let without_proof = format!("c={},r={nonce}", STANDARD.encode(gs2_header));
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, stored_key.as_ref()), auth_message.as_bytes());
        let proof: Vec<u8> = client_key.as_ref().iter().zip(signature.as_ref()).map(|(k, s)| k ^ s).collect();
        format!("{without_proof},p={}", STANDARD.encode(proof))
    }

    #[test]
    fn the_right_password_passes_and_a_wrong_one_fails() {
        let verifier = Verifier::for_password("pencil");
        assert_eq!(Verifier::parse(&verifier.to_string()), Some(verifier.clone()));
        let bare = "n=,r=rOprNGfwEbeRWgbNEkqO";
        let (first, exchange) = server_first(format!("n,,{bare}").as_bytes(), verifier.clone()).unwrap();
        assert!(exchange
            .server_final(client_final("pencil", "n,,", bare, &first).as_bytes())
            .unwrap()
            .starts_with("v="));
        let (first, exchange) = server_first(format!("n,,{bare}").as_bytes(), verifier).unwrap();
        assert_eq!(exchange.server_final(client_final("pen", "n,,", bare, &first).as_bytes()), Err(Failure::Password));
    }

    #[test]
    fn the_salted_password_of_old_catalogs_gives_the_same_verifier() {
        let salt = b"0123456789abcdef".to_vec();
        let mut salted = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            std::num::NonZeroU32::new(4096).unwrap(),
            &salt,
            b"pencil",
            &mut salted,
        );
        let verifier = Verifier::from_salted_password(4096, salt, &salted);
        let bare = "n=,r=abc";
        let (first, exchange) = server_first(format!("y,,{bare}").as_bytes(), verifier).unwrap();
        let final_message = client_final("pencil", "y,,", bare, &first);
        assert!(exchange.server_final(final_message.as_bytes()).is_ok());
    }

    #[test]
    fn malformed_messages_are_protocol_errors() {
        let verifier = Verifier::mock(b"secret", "nobody");
        assert_eq!(Verifier::mock(b"secret", "nobody").salt, verifier.salt);
        for message in ["", "n,,", "p=tls-server-end-point,,n=,r=x", "n,a=x,n=,r=x", "n,,n=,r="] {
            assert!(matches!(server_first(message.as_bytes(), verifier.clone()), Err(Failure::Protocol(_))));
        }
        let (_, exchange) = server_first(b"n,,n=,r=abc", verifier).unwrap();
        for message in ["c=biws,r=abc,p=AAAA", "garbage", "c=eSws,r=abc,p=AAAA"] {
            assert!(matches!(exchange.server_final(message.as_bytes()), Err(Failure::Protocol(_))));
        }
    }
}
