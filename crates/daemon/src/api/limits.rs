//! Shares of the API per client and per tenant, so that one tenant exhausting its share hurts
//! only itself (issue 26: 1,030 keep-alive connections from one job once left the admin and
//! every other tenant with 503s).
//!
//! ```text
//!   accept ──► per client (a remote address; on this host, the uid owning the client's socket)
//!          │     at most `max_connections_per_client` open: beyond, 503 and closed
//!          └─► first request naming a tenant (its token, or a job's run token) ──► the
//!                connection counts for that tenant: at most `max_connections_per_tenant`
//!                (beyond, 429 and closed); each request at most `max_requests_in_flight_per_tenant`
//! ```
//!
//! The admin is held by neither tenant limit. On this machine a job runs as its tenant's uid
//! (when the daemon is root), so the per-client limit separates tenants' jobs from each other
//! and from the admin's CLI before any token is read; a remote host (a Slurm node running several
//! tenants' jobs) is one client, and its connections are told apart by tenant only once they send
//! a request.

use super::Api;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// Per-tenant limits on the API (config keys of the same names).
#[derive(Clone, Copy, Debug)]
pub struct TenantLimits {
    /// Connections one tenant's requests may hold open at once (its clients' and its jobs').
    pub max_connections_per_tenant: usize,
    /// Requests of one tenant being handled at once.
    pub max_requests_in_flight_per_tenant: usize,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits { max_connections_per_tenant: 64, max_requests_in_flight_per_tenant: 16 }
    }
}

/// How many of something each key holds; a [`Held`] gives its one back when dropped.
#[derive(Debug)]
pub(crate) struct Counts<K: Ord> {
    held: Mutex<BTreeMap<K, usize>>,
}

impl<K: Ord> Default for Counts<K> {
    fn default() -> Self {
        Counts { held: Mutex::new(BTreeMap::new()) }
    }
}

impl<K: Ord + Clone + Send + 'static> Counts<K> {
    /// One more for `key`, unless it already holds `most`; then how many it holds.
    pub(crate) fn take(self: &Arc<Self>, key: &K, most: usize) -> Result<Held<K>, usize> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(key.clone()).or_insert(0);
        if *n >= most {
            return Err(*n);
        }
        *n += 1;
        Ok(Held { counts: self.clone(), key: key.clone() })
    }

    fn give_back(&self, key: &K) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(key);
            }
        }
    }
}

/// One unit of a [`Counts`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Held<K: Ord + Clone + Send + 'static> {
    counts: Arc<Counts<K>>,
    key: K,
}

impl<K: Ord + Clone + Send + 'static> Drop for Held<K> {
    fn drop(&mut self) {
        self.counts.give_back(&self.key);
    }
}

/// What the API counts per tenant.
#[derive(Debug, Default)]
pub(crate) struct TenantShares {
    pub(crate) limits: TenantLimits,
    connections: Arc<Counts<String>>,
    in_flight: Arc<Counts<String>>,
}

impl TenantShares {
    pub(crate) fn new(limits: TenantLimits) -> Self {
        TenantShares { limits, ..Default::default() }
    }
}

/// A connection, as the requests on it see it: the tenant it counts for, once one of them named
/// a tenant.
#[derive(Debug, Default)]
pub(crate) struct ConnectionShare {
    tenant: Mutex<Option<Held<String>>>,
}

/// Who a connection comes from, for `max_connections_per_client`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Client {
    /// Another host.
    Address(IpAddr),
    /// This host: the uid owning the client's socket (a job runs as its tenant's uid).
    LocalUser(u32),
}

impl Client {
    /// The client at `peer` of a connection accepted on `local`.
    pub(crate) fn of(peer: SocketAddr, local: SocketAddr) -> Client {
        let ip = peer.ip().to_canonical();
        let this_host = ip.is_loopback() || ip == local.ip().to_canonical();
        match this_host.then(|| socket_owner(peer, local)).flatten() {
            Some(uid) => Client::LocalUser(uid),
            None => Client::Address(ip),
        }
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Client::Address(ip) => write!(f, "{ip}"),
            Client::LocalUser(uid) => write!(f, "uid {uid} on this host"),
        }
    }
}

/// The uid owning the client's end of a connection between two sockets of this host: the row of
/// `/proc/net/tcp{,6}` whose local address is the peer's and whose remote address is ours —
/// both whole (address and port): a job may bind any 127/8 address and our own port, and with
/// ports alone its socket would be taken for our accepted one, owned by the daemon's uid.
fn socket_owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let table = if peer.is_ipv4() { "/proc/net/tcp" } else { "/proc/net/tcp6" };
    owner_in(&std::fs::read_to_string(table).ok()?, peer, local)
}

/// In a `/proc/net/tcp{,6}` table: the uid of the socket from `from` to `to`.
fn owner_in(table: &str, from: SocketAddr, to: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (proc_address(local)? == from && proc_address(remote)? == to).then(|| uid.parse().ok()).flatten()
    })
}

/// An address as `/proc/net/tcp{,6}` prints it: the address's bytes in 32-bit words, each in
/// this machine's byte order, in hex; a colon; the port in hex.
fn proc_address(text: &str) -> Option<SocketAddr> {
    let (address, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..address.len() / 8).map(|i| address.get(8 * i..8 * i + 8).and_then(|w| u32::from_str_radix(w, 16).ok())).collect::<Option<_>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The tenant a request is made for, if any: by its tenant token, or — on a progress report —
/// by its job's run token (checked: a made-up token for another tenant's job counts for no one).
fn tenant_of(api: &Api, request: &Request) -> Option<String> {
    let token = super::bearer_token(request.headers())?;
    let hash = crate::auth::sha256_hex(token);
    if hash == api.admin_token_sha256 {
        return None;
    }
    if let Some(tenant) = api.daemon.tenant_by_token_hash(&hash) {
        return Some(tenant);
    }
    let id = request.uri().path().strip_prefix("/v1/jobs/")?.strip_suffix("/progress")?.parse().ok()?;
    api.daemon.tenant_of_run_token(id, &hash)
}

fn refused(status: StatusCode, message: String, close: bool) -> Response {
    let mut response = (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
    let headers = response.headers_mut();
    headers.insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
    if close {
        headers.insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}

/// The per-tenant shares: a request naming a tenant counts its connection for that tenant (the
/// first such request does) and itself as in flight while it is handled.
pub(crate) async fn tenant_shares(State(api): State<Api>, request: Request, next: Next) -> Response {
    let Some(tenant) = tenant_of(&api, &request) else { return next.run(request).await };
    let shares = api.shares.clone();
    if let Some(connection) = request.extensions().get::<Arc<ConnectionShare>>() {
        let mut counted = connection.tenant.lock().unwrap_or_else(|p| p.into_inner());
        if counted.is_none() {
            match shares.connections.take(&tenant, shares.limits.max_connections_per_tenant) {
                Ok(held) => *counted = Some(held),
                Err(n) => {
                    let message = format!("tenant {tenant} has {n} connections open, the most it may (max_connections_per_tenant); reuse one or close some");
                    return refused(StatusCode::TOO_MANY_REQUESTS, message, true);
                }
            }
        }
    }
    let _in_flight = match shares.in_flight.take(&tenant, shares.limits.max_requests_in_flight_per_tenant) {
        Ok(held) => held,
        Err(n) => {
            let message = format!("tenant {tenant} has {n} requests in flight, the most it may (max_requests_in_flight_per_tenant); retry in a second");
            return refused(StatusCode::TOO_MANY_REQUESTS, message, false);
        }
    };
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_refuse_beyond_the_most_and_give_back_on_drop() {
        let counts: Arc<Counts<String>> = Arc::default();
        let a = "a".to_string();
        let first = counts.take(&a, 2).expect("one");
        let second = counts.take(&a, 2).expect("two");
        assert_eq!(counts.take(&a, 2).err(), Some(2));
        assert!(counts.take(&"b".to_string(), 2).is_ok(), "another key has its own share");
        drop(first);
        let _third = counts.take(&a, 2).expect("one was given back");
        drop(second);
    }

    #[test]
    fn the_owner_of_a_local_socket_is_read_from_the_proc_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1B9E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n   1: 0100007F:D431 0100007F:1B9E 01 00000000:00000000 00:00000000 00000000 1900000001        0 2 1\n   2: 0100007F:1B9E 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n";
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        assert_eq!(owner_in(table, at(0xD431), at(0x1B9E)), Some(1_900_000_001), "the client's row, not the server's");
        assert_eq!(owner_in(table, at(0x1B9E), at(0xD431)), Some(0));
        assert_eq!(owner_in(table, at(1), at(2)), None);
        assert_eq!(proc_address("0100007F:1B9E"), Some(at(0x1B9E)));
        // A job bound to another loopback address and to the daemon's own port (7070): its socket
        // and the daemon's accepted one have the same ports; only the addresses tell them apart.
        let spoof = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1B9E 0200007F:1B9E 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n   1: 0200007F:1B9E 0100007F:1B9E 01 00000000:00000000 00:00000000 00000000 1900000001        0 2 1\n";
        let job = SocketAddr::from(([127, 0, 0, 2], 0x1B9E));
        assert_eq!(owner_in(spoof, job, at(0x1B9E)), Some(1_900_000_001), "the job's socket, not the daemon's");
        assert_eq!(proc_address("0000000000000000FFFF00000100007F:1B9E"), Some("[::ffff:127.0.0.1]:7070".parse().expect("addr")));
    }

    #[test]
    fn a_connection_from_this_host_is_told_apart_by_the_uid_owning_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let local = listener.local_addr().expect("addr");
        let client = std::net::TcpStream::connect(local).expect("connect");
        let (_server_side, peer) = listener.accept().expect("accept");
        assert_eq!(peer, client.local_addr().expect("addr"));
        let me = nix::unistd::Uid::effective().as_raw();
        assert_eq!(Client::of(peer, local), Client::LocalUser(me));
        let remote: SocketAddr = "10.1.2.3:4000".parse().expect("addr");
        assert_eq!(Client::of(remote, local), Client::Address("10.1.2.3".parse().expect("ip")));
    }
}
