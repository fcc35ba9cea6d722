//! Webhooks' secrets, signatures and the addresses a webhook may reach.
//!
//! A webhook is an outbound request made from the daemon's place in the network, to a URL someone
//! typed: without rules it is a way to reach what only the daemon can reach (its own API, a cloud
//! metadata service at 169.254.169.254, a database on the private network). So:
//!
//! - only `http` and `https` URLs, with a host, without credentials (`user:pass@`), at most
//!   [`MAX_URL_BYTES`];
//! - never the daemon's own listen address (nor its `public_url`);
//! - never a link-local (169.254.0.0/16, fe80::/10: where metadata services live), unspecified,
//!   multicast or broadcast address, whatever the configuration;
//! - loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7) and shared (100.64/10) addresses
//!   only with `[webhooks] allow_private = true`;
//! - checked on every address the name resolves to, at every delivery, and the request goes to an
//!   address so checked (a name that later resolves elsewhere — DNS rebinding — gains nothing);
//! - no redirects followed, no proxy from the environment.
//!
//! Signatures follow Stripe's scheme: `Arbiter-Signature: t=<unix seconds>,v1=<hex>` where the hex
//! is HMAC-SHA256, keyed with the tenant's secret (its bytes as shown), of `<t>.<body>`. A receiver
//! recomputes it, compares in constant time, and refuses a `t` too far from its clock (a replayed
//! request carries an old one). [`verify`] is that check.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Longest webhook URL accepted.
pub const MAX_URL_BYTES: usize = 2048;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Arbiter-Signature";

/// What a secret starts with (so that one found in a file or a log says what it is).
pub const SECRET_PREFIX: &str = "whsec_";

/// A webhook secret: shown once, to the admin, when made; stored in the store (mode 0600); never
/// in a log (its `Debug` says nothing of it).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A new random secret: [`SECRET_PREFIX`] and 256 bits from the OS, hex.
    pub fn generate() -> Self {
        Secret(format!(
            "{SECRET_PREFIX}{}",
            crate::security::auth::new_token()
        ))
    }

    /// The secret itself (to show it once, and to sign with).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// HMAC-SHA256 of `<timestamp>.<body>` keyed with `secret`, hex.
fn mac_hex(secret: &str, timestamp_unix_s: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length (RFC 2104): `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(timestamp_unix_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The value of the [`SIGNATURE_HEADER`] for `body` sent at `timestamp_unix_s`.
pub fn signature_header(secret: &Secret, timestamp_unix_s: i64, body: &[u8]) -> String {
    format!(
        "t={timestamp_unix_s},v1={}",
        mac_hex(secret.expose(), timestamp_unix_s, body)
    )
}

/// Why a signed request is not accepted (what a receiver checks).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The header is not `t=<int>,v1=<hex>`.
    #[error("malformed signature header")]
    Malformed,
    /// The timestamp is further than the tolerance from now: a replay, or a clock far off.
    #[error("timestamp {0} s away from now")]
    Stale(i64),
    /// No `v1` matches the body and timestamp.
    #[error("signature does not match")]
    Mismatch,
}

/// What a receiver does with a request: accepts it if one `v1` of `header` is the HMAC of
/// `<t>.<body>` under `secret` (compared in constant time) and `t` is within `tolerance_s` of
/// `now_unix_s`.
pub fn verify(
    secret: &str,
    header: &str,
    body: &[u8],
    now_unix_s: i64,
    tolerance_s: i64,
) -> Result<(), VerifyError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => {
                timestamp = Some(t.parse::<i64>().map_err(|_| VerifyError::Malformed)?)
            }
            Some(("v1", s)) => signatures.push(s),
            _ => {}
        }
    }
    let t = timestamp.ok_or(VerifyError::Malformed)?;
    if signatures.is_empty() {
        return Err(VerifyError::Malformed);
    }
    let skew = now_unix_s.saturating_sub(t);
    if skew.abs() > tolerance_s {
        return Err(VerifyError::Stale(skew));
    }
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return Err(VerifyError::Mismatch);
    };
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = mac.finalize().into_bytes();
    let matches =
        |hex: &str| decode_hex(hex).is_some_and(|bytes| constant_time_eq(&bytes, &expected));
    if signatures.iter().any(|s| matches(s)) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Equal contents, in time that depends on the length only (no early exit on the first
/// difference, which would tell an attacker how much of a forged signature is right).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Which addresses webhooks may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Loopback, private and shared addresses are allowed (`[webhooks] allow_private`).
    pub allow_private: bool,
    /// The daemon's own API: its listen address, and its `public_url`'s host and port.
    pub own: Vec<SocketAddr>,
    /// `public_url`'s host (lower case) and port, as written.
    pub own_host_port: Option<(String, u16)>,
}

/// Why an address is refused, if it is.
pub fn address_problem(policy: &AddressPolicy, addr: SocketAddr) -> Option<String> {
    let ip = canonical(addr.ip());
    let own_port = policy.own.iter().any(|own| own.port() == addr.port());
    // Listening on 0.0.0.0 or ::, the daemon answers on every address of the host; on loopback
    // it answers at any loopback address with that port too (127.0.0.2 is still this host).
    let own = policy.own.iter().any(|own| {
        let own_ip = canonical(own.ip());
        own.port() == addr.port()
            && (own_ip == ip
                || own_ip.is_unspecified()
                || (own_ip.is_loopback() && ip.is_loopback()))
    });
    if own || (own_port && ip.is_loopback()) {
        return Some(format!("{addr} is the daemon's own API"));
    }
    match class(ip) {
        Class::Public => None,
        Class::Private if policy.allow_private => None,
        Class::Private => Some(format!(
            "{ip} is a loopback or private address; set [webhooks] allow_private = true in the daemon's config to allow receivers on the local network"
        )),
        Class::Never(what) => Some(format!("{ip} is {what}, never a webhook receiver")),
    }
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is judged as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

enum Class {
    Public,
    Private,
    Never(&'static str),
}

fn class(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => class_v4(v4),
        IpAddr::V6(v6) => class_v6(v6),
    }
}

fn class_v4(ip: Ipv4Addr) -> Class {
    let [a, b, ..] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Class::Never("an unspecified (0.0.0.0/8) address")
    } else if ip.is_link_local() {
        Class::Never("link-local (169.254.0.0/16, where cloud metadata services answer)")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Class::Never("a multicast, broadcast or reserved address")
    } else if ip.is_loopback() || ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        Class::Private
    } else {
        Class::Public
    }
}

fn class_v6(ip: Ipv6Addr) -> Class {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Class::Never("the unspecified address")
    } else if first & 0xffc0 == 0xfe80 {
        Class::Never("link-local (fe80::/10)")
    } else if ip.is_multicast() {
        Class::Never("a multicast address")
    } else if ip.is_loopback() || first & 0xfe00 == 0xfc00 {
        Class::Private
    } else {
        Class::Public
    }
}

/// A webhook URL as given, checked for everything but where its host resolves to: scheme, host,
/// credentials, length, and an address literal or `localhost` by the policy. Returns the parsed
/// URL, or why it is refused.
pub fn check_url(text: &str, policy: &AddressPolicy, tls: bool) -> Result<url::Url, String> {
    if text.len() > MAX_URL_BYTES {
        return Err(format!("longer than {MAX_URL_BYTES} bytes"));
    }
    crate::security::text::check("webhook", text, crate::security::text::Text::Line)
        .map_err(|e| e.reason)?;
    let url = url::Url::parse(text).map_err(|e| format!("not a URL ({e})"))?;
    match url.scheme() {
        "http" => {}
        "https" if tls => {}
        "https" => return Err("https needs a daemon built with the `webhook-tls` feature (cargo build --features arbiter-daemon/webhook-tls); this one speaks http only".into()),
        other => return Err(format!("scheme `{other}` is not http or https")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL are refused (they would be stored and shown); authenticate the request by its signature".into());
    }
    let port = url.port_or_known_default().ok_or("no port")?;
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => {
            return literal(policy, SocketAddr::new(IpAddr::V4(ip), port)).map(|()| url);
        }
        Some(url::Host::Ipv6(ip)) => {
            return literal(policy, SocketAddr::new(IpAddr::V6(ip), port)).map(|()| url);
        }
        None => return Err("no host".into()),
    };
    if policy
        .own_host_port
        .as_ref()
        .is_some_and(|(h, p)| *h == host && *p == port)
    {
        return Err("it is the daemon's own API (its public_url)".into());
    }
    // Whatever localhost resolves to, it is this machine.
    if host == "localhost" || host.ends_with(".localhost") {
        return literal(
            policy,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        )
        .map(|()| url);
    }
    Ok(url)
}

fn literal(policy: &AddressPolicy, addr: SocketAddr) -> Result<(), String> {
    address_problem(policy, addr).map_or(Ok(()), Err)
}

/// The addresses of `host:port` the policy allows, resolved now; an error names why none is
/// (no address at all, or each one refused: the first reason).
pub fn resolve_allowed(
    policy: &AddressPolicy,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, String> {
    use std::net::ToSocketAddrs;
    let all: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let mut refused = None;
    let allowed: Vec<SocketAddr> = all
        .into_iter()
        .filter(|a| match address_problem(policy, *a) {
            None => true,
            Some(why) => {
                refused.get_or_insert(why);
                false
            }
        })
        .collect();
    match (allowed.is_empty(), refused) {
        (false, _) => Ok(allowed),
        (true, Some(why)) => Err(format!("{host} resolves to {why}")),
        (true, None) => Err(format!("{host} has no address")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow_private: bool) -> AddressPolicy {
        AddressPolicy {
            allow_private,
            own: vec!["127.0.0.1:7070".parse().expect("addr")],
            own_host_port: Some(("arbiter.lab".into(), 7070)),
        }
    }

    #[test]
    fn a_signature_verifies_and_a_changed_body_an_old_timestamp_or_another_secret_does_not() {
        let secret = Secret::generate();
        assert!(
            secret.expose().starts_with(SECRET_PREFIX)
                && secret.expose().len() == SECRET_PREFIX.len() + 64
        );
        assert_eq!(format!("{secret:?}"), "Secret(..)", "never in a log");
        let body = br#"{"event":"succeeded"}"#;
        let header = signature_header(&secret, 1_000, body);
        assert_eq!(verify(secret.expose(), &header, body, 1_010, 300), Ok(()));
        assert_eq!(
            verify(
                secret.expose(),
                &header,
                br#"{"event":"failed"}"#,
                1_010,
                300
            ),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(secret.expose(), &header, body, 2_000, 300),
            Err(VerifyError::Stale(1_000))
        );
        assert_eq!(
            verify(Secret::generate().expose(), &header, body, 1_010, 300),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(secret.expose(), "v1=00", body, 1_000, 300),
            Err(VerifyError::Malformed)
        );
        // A replay with a new timestamp but the old signature fails: the timestamp is signed.
        let v1 = header.split("v1=").nth(1).expect("v1");
        assert_eq!(
            verify(
                secret.expose(),
                &format!("t=1500,v1={v1}"),
                body,
                1_500,
                300
            ),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn the_signature_is_rfc_2104_hmac_sha256_of_timestamp_dot_body() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(mac_hex("Jefe", 0, b"").len(), 64);
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").expect("key");
        mac.update(b"what do ya want for nothing?");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // And ours is that MAC over "<t>.<body>".
        let mut mac = Hmac::<Sha256>::new_from_slice(b"k").expect("key");
        mac.update(b"42.{}");
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            signature_header(&Secret("k".into()), 42, b"{}"),
            format!("t=42,v1={expected}")
        );
    }

    #[test]
    fn urls_other_than_plain_http_to_an_allowed_host_are_refused_with_the_reason() {
        let strict = policy(false);
        assert!(check_url("http://hooks.example.com/arbiter?x=1", &strict, false).is_ok());
        for (bad, why) in [
            ("ftp://hooks.example.com/", "scheme"),
            ("file:///etc/passwd", "scheme"),
            ("gopher://x/", "scheme"),
            ("https://hooks.example.com/", "webhook-tls"),
            ("http://user:pw@hooks.example.com/", "credentials"),
            ("http://user@hooks.example.com/", "credentials"),
            ("http://127.0.0.1:7070/v1/jobs", "own API"),
            ("http://127.0.0.2:7070/", "own API"),
            ("http://[::ffff:127.0.0.1]:7070/", "own API"),
            ("http://arbiter.lab:7070/", "own API"),
            ("http://127.0.0.1:9000/", "allow_private"),
            ("http://localhost:9000/", "allow_private"),
            ("http://10.1.2.3/", "allow_private"),
            ("http://[fd00::1]/", "allow_private"),
            ("http://169.254.169.254/latest/meta-data/", "link-local"),
            ("http://[fe80::1]/", "link-local"),
            ("http://0.0.0.0:9000/", "unspecified"),
            ("http://224.0.0.1/", "multicast"),
            ("not a url", "not a URL"),
            ("http://exa\u{202e}mple.com/", "202e"),
        ] {
            let e = check_url(bad, &strict, false).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(
            check_url(
                &format!("http://h.example.com/{}", "a".repeat(MAX_URL_BYTES)),
                &strict,
                false
            )
            .is_err()
        );
        // allow_private opens loopback and private networks, never the daemon or metadata.
        let open = policy(true);
        assert!(check_url("http://127.0.0.1:9000/hook", &open, false).is_ok());
        assert!(check_url("http://10.1.2.3/", &open, false).is_ok());
        assert!(check_url("http://127.0.0.1:7070/", &open, false).is_err());
        assert!(check_url("http://169.254.169.254/", &open, false).is_err());
        assert!(check_url("https://hooks.example.com/", &open, true).is_ok());
    }

    #[test]
    fn a_daemon_listening_everywhere_is_its_own_api_at_any_address_with_its_port() {
        let everywhere = AddressPolicy {
            allow_private: true,
            own: vec!["0.0.0.0:7070".parse().expect("addr")],
            own_host_port: None,
        };
        assert!(address_problem(&everywhere, "10.0.0.5:7070".parse().expect("addr")).is_some());
        assert!(address_problem(&everywhere, "10.0.0.5:8080".parse().expect("addr")).is_none());
        assert!(address_problem(&everywhere, "8.8.8.8:443".parse().expect("addr")).is_none());
    }

    #[test]
    fn names_are_checked_on_every_address_they_resolve_to() {
        let strict = policy(false);
        let e = resolve_allowed(&strict, "localhost", 9000).expect_err("loopback");
        assert!(e.contains("allow_private"), "{e}");
        assert!(
            resolve_allowed(&policy(true), "localhost", 9000)
                .is_ok_and(|a| a.iter().all(|a| a.ip().is_loopback()))
        );
        assert!(
            resolve_allowed(&policy(true), "localhost", 7070).is_err(),
            "the daemon's own port on loopback"
        );
    }
}
