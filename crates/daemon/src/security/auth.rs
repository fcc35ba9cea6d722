//! Bearer tokens: random 256-bit secrets, stored only as SHA-256 hashes (a stolen store does not
//! give access), compared by hash. Tokens never appear in logs or in API responses except the one
//! that creates them.

use sha2::{Digest, Sha256};
use std::io::Read;

/// A new random token (64 hex digits from the OS's random source).
pub fn new_token() -> String {
    new_tokens(1).pop().unwrap_or_default()
}

/// `count` new random tokens ([`new_token`]'s), read from the OS's random source at once.
pub fn new_tokens(count: usize) -> Vec<String> {
    let mut bytes = vec![0u8; 32 * count];
    // /dev/urandom does not block and does not fail on Linux; fall back to time and pid mixing
    // only if it is unreadable (then the tokens are weak, and the daemon says so).
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        eprintln!("arbiter: /dev/urandom unreadable; tokens are weak");
        for (i, chunk) in bytes.chunks_mut(32).enumerate() {
            let seed = format!(
                "{:?}{}{i}",
                std::time::SystemTime::now(),
                std::process::id()
            );
            chunk.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        }
    }
    bytes.chunks(32).map(hex).collect()
}

/// SHA-256 of `token`, hex.
pub fn sha256_hex(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Who a request comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The admin: sees and manages everything.
    Admin,
    /// A tenant: sees and manages its own jobs.
    Tenant(String),
}

impl Caller {
    /// The tenant to restrict to (`None` for the admin).
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Caller::Admin => None,
            Caller::Tenant(t) => Some(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashes_stable() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{a}"
        );
        let many = new_tokens(3);
        assert!(
            many.len() == 3
                && many.iter().all(|t| t.len() == 64)
                && many[0] != many[1]
                && many[1] != many[2]
        );
    }
}
