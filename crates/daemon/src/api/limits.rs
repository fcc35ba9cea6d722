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
        TenantLimits {
            max_connections_per_tenant: 64,
            max_requests_in_flight_per_tenant: 16,
        }
    }
}

/// How many of something each key holds; a [`Held`] gives its one back when dropped.
#[derive(Debug)]
pub(crate) struct Counts<K: Ord> {
    held: Mutex<BTreeMap<K, usize>>,
}

impl<K: Ord> Default for Counts<K> {
    fn default() -> Self {
        Counts {
            held: Mutex::new(BTreeMap::new()),
        }
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
        Ok(Held {
            counts: self.clone(),
            key: key.clone(),
        })
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
        TenantShares {
            limits,
            ..Default::default()
        }
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

/// The uid owning the client's end of a connection between two sockets of this host, asked of
/// the kernel for that one socket (`NETLINK_SOCK_DIAG`, an exact lookup by both addresses and
/// ports). Not by reading `/proc/net/tcp`: its cost grows with every socket on the host, which a
/// job can make 100,000 of (TIME_WAIT rows) to slow every accept; and matching its rows by ports
/// let a job bound to the daemon's own port pass for the daemon's accepted socket, owned by root.
fn socket_owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    // A client of IPv4 seen through an IPv6 listener (`::ffff:127.0.0.1`) has an IPv4 socket.
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let (peer, local) = match (canonical(peer), canonical(local)) {
        (p, l) if p.is_ipv4() == l.is_ipv4() => (p, l),
        _ => (peer, local),
    };
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .ok()?;
    // A kernel that does not answer at once does not hold up the connection.
    let timeout = nix::sys::time::TimeVal::new(0, 100_000);
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &timeout).ok()?;
    sendto(
        fd.as_raw_fd(),
        &diag_request(peer, local),
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .ok()?;
    let mut answer = [0u8; 1024];
    let n = recv(fd.as_raw_fd(), &mut answer, MsgFlags::empty()).ok()?;
    diag_uid(answer.get(..n)?)
}

/// `SOCK_DIAG_BY_FAMILY` with the exact socket `from` → `to` (TCP; established sockets only).
fn diag_request(from: SocketAddr, to: SocketAddr) -> Vec<u8> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const TCP_ESTABLISHED: u32 = 1;
    let family: u8 = if from.is_ipv4() { 2 } else { 10 };
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    req.extend_from_slice(&[0u8; 8]); // sequence number, port id
    req.extend_from_slice(&[family, 6, 0, 0]); // family, IPPROTO_TCP, no extensions, padding
    req.extend_from_slice(&(1u32 << TCP_ESTABLISHED).to_ne_bytes());
    req.extend_from_slice(&from.port().to_be_bytes());
    req.extend_from_slice(&to.port().to_be_bytes());
    for ip in [from.ip(), to.ip()] {
        let mut bytes = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => bytes[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => bytes.copy_from_slice(&v6.octets()),
        }
        req.extend_from_slice(&bytes);
    }
    req.extend_from_slice(&0u32.to_ne_bytes()); // any interface
    req.extend_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
    req
}

/// The uid in a `SOCK_DIAG_BY_FAMILY` answer (`None` for an error or no such socket).
fn diag_uid(answer: &[u8]) -> Option<u32> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY {
        return None; // NLMSG_ERROR: no such socket
    }
    // nlmsghdr (16) + inet_diag_msg: family, state, timer, retrans (4), sockid (48), expires,
    // rqueue, wqueue (12), then the uid.
    Some(u32::from_ne_bytes(answer.get(80..84)?.try_into().ok()?))
}

/// The tenant a request is made for, if any: by its tenant token, or — on a progress report —
/// by its job's run token (checked: a made-up token for another tenant's job counts for no one).
fn tenant_of(api: &Api, request: &Request) -> Option<String> {
    let token = super::bearer_token(request.headers())?;
    let hash = crate::security::auth::sha256_hex(token);
    if hash == api.admin_token_sha256 {
        return None;
    }
    if let Some(tenant) = api.daemon.tenant_by_token_hash(&hash) {
        return Some(tenant);
    }
    let id = request
        .uri()
        .path()
        .strip_prefix("/v1/jobs/")?
        .strip_suffix("/progress")?
        .parse()
        .ok()?;
    api.daemon.tenant_of_run_token(id, &hash)
}

fn refused(status: StatusCode, message: String, close: bool) -> Response {
    let mut response =
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    if close {
        headers.insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// The per-tenant shares: a request naming a tenant counts its connection for that tenant (the
/// first such request does) and itself as in flight while it is handled.
pub(crate) async fn tenant_shares(
    State(api): State<Api>,
    request: Request,
    next: Next,
) -> Response {
    let Some(tenant) = tenant_of(&api, &request) else {
        return next.run(request).await;
    };
    let shares = api.shares.clone();
    if let Some(connection) = request.extensions().get::<Arc<ConnectionShare>>() {
        let mut counted = connection.tenant.lock().unwrap_or_else(|p| p.into_inner());
        if counted.is_none() {
            match shares
                .connections
                .take(&tenant, shares.limits.max_connections_per_tenant)
            {
                Ok(held) => *counted = Some(held),
                Err(n) => {
                    let message = format!(
                        "tenant {tenant} has {n} connections open, the most it may (max_connections_per_tenant); reuse one or close some"
                    );
                    return refused(StatusCode::TOO_MANY_REQUESTS, message, true);
                }
            }
        }
    }
    let _in_flight = match shares
        .in_flight
        .take(&tenant, shares.limits.max_requests_in_flight_per_tenant)
    {
        Ok(held) => held,
        Err(n) => {
            let message = format!(
                "tenant {tenant} has {n} requests in flight, the most it may (max_requests_in_flight_per_tenant); retry in a second"
            );
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
        assert!(
            counts.take(&"b".to_string(), 2).is_ok(),
            "another key has its own share"
        );
        drop(first);
        let _third = counts.take(&a, 2).expect("one was given back");
        drop(second);
    }

    #[test]
    fn the_kernels_answer_for_no_such_socket_gives_no_owner() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let local = listener.local_addr().expect("addr");
        let nobody: SocketAddr = "127.0.0.9:1".parse().expect("addr");
        assert_eq!(socket_owner(nobody, local), None);
        assert_eq!(diag_request(nobody, local).len(), 72);
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
        assert_eq!(
            Client::of(remote, local),
            Client::Address("10.1.2.3".parse().expect("ip"))
        );
    }
}
