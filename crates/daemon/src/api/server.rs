//! Serving connections: hyper's HTTP/1 server with a header timeout, an idle timeout and a
//! connection limit (axum::serve has none of them).

use super::*;

/// Limits on the HTTP connections (`header_timeout_s`, `idle_timeout_s` and `max_connections` in
/// the config file).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// A request's headers must be complete this long after the connection opened or the previous
    /// response was sent (so a client sending nothing, or headers a byte at a time, or an idle
    /// keep-alive connection, is closed after it).
    pub header_timeout: std::time::Duration,
    /// A connection on which no byte moves either way for this long (a stalled upload, a client
    /// that stopped reading its response) is closed.
    pub idle_timeout: std::time::Duration,
    /// Most connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Most connections open at once from one client (a remote address, or a uid on this
    /// host); more are answered 503 and closed.
    pub max_connections_per_client: usize,
    /// On shutdown, how long requests in flight may take to finish.
    pub drain: std::time::Duration,
}

/// What a connection over the limit gets before it is closed.
pub(super) const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 53\r\n\r\n{\"error\":\"too many connections; retry in a second\"}\r\n";

/// What a connection over its client's limit gets before it is closed.
pub(super) const TOO_MANY_FROM_CLIENT: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 91\r\n\r\n{\"error\":\"too many connections from this client (max_connections_per_client); retry later\"}";

/// Serves `router` on `listener` (HTTP/1.1) within `limits` until `shutdown` completes; then
/// stops accepting, lets requests in flight finish (at most `limits.drain`), and returns what
/// `shutdown` gave.
pub async fn serve_connections<T>(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = T>,
) -> T {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let per_client: Arc<super::limits::Counts<super::limits::Client>> = Arc::default();
    let refused_from_client = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut rejected: u64 = 0;
    tokio::pin!(shutdown);
    let reason = loop {
        let (stream, peer) = tokio::select! {
            reason = &mut shutdown => break reason,
            accepted = listener.accept() => match accepted {
                Ok(connection) => connection,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment rather than spin.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Best effort: the answer fits in the socket's buffer, and the client is not waited for.
            let _ = stream.try_write(TOO_MANY_CONNECTIONS);
            rejected += 1;
            if rejected.is_power_of_two() {
                tracing::warn!(%peer, "refused a connection: {} already open (max_connections); {rejected} refused so far", limits.max_connections);
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Who the client is is asked of the kernel in the connection's own task: the accept loop
        // waits for nobody.
        let (per_client, watcher, router, http, refused_from_client) = (
            per_client.clone(),
            graceful.watcher(),
            router.clone(),
            http.clone(),
            refused_from_client.clone(),
        );
        tokio::spawn(async move {
            // This connection's own local address (not the listener's, which may be 0.0.0.0): a
            // client on this host connecting to one of its addresses is told by its socket's owner.
            let client = stream
                .local_addr()
                .map_or(super::limits::Client::Address(peer.ip()), |local| {
                    super::limits::Client::of(peer, local)
                });
            let from_client = match per_client.take(&client, limits.max_connections_per_client) {
                Ok(held) => held,
                Err(open) => {
                    let _ = stream.try_write(TOO_MANY_FROM_CLIENT);
                    let refused =
                        refused_from_client.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if refused.is_power_of_two() {
                        tracing::warn!(%peer, "refused a connection: {client} has {open} open (max_connections_per_client); {refused} refused so far");
                    }
                    return;
                }
            };
            let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
            // The requests of this connection learn which tenant it counts for (`limits.rs`).
            let share = Arc::new(super::limits::ConnectionShare::default());
            let service = hyper::service::service_fn(
                move |mut request: hyper::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(share.clone());
                    tower::ServiceExt::oneshot(router.clone(), request)
                },
            );
            if let Err(e) = watcher.watch(http.serve_connection(io, service)).await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(permit);
            drop(from_client);
        });
    };
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.drain) => tracing::warn!("requests still in flight after {:?}; closing their connections", limits.drain),
    }
    reason
}

/// A stream that fails with `TimedOut` when a read or write has waited `timeout` since the last
/// byte moved either way.
pub(super) struct IdleTimeout<S> {
    inner: S,
    timeout: std::time::Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<S> IdleTimeout<S> {
    fn new(inner: S, timeout: std::time::Duration) -> Self {
        IdleTimeout {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    /// After a read or write: resets the deadline when bytes moved; when the operation waits,
    /// turns it into an error once the deadline has passed.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<std::io::Result<T>>,
        moved: impl FnOnce(&T) -> bool,
    ) -> Poll<std::io::Result<T>> {
        match result {
            Poll::Ready(Ok(value)) => {
                if moved(&value) {
                    let next = tokio::time::Instant::now() + self.timeout;
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(value))
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connection idle past idle_timeout_s",
                ))),
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        let moved = buf.filled().len() > before;
        this.check(cx, result, |_| moved)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for IdleTimeout<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.check(cx, result, |n| *n > 0)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.check(cx, result, |n| *n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(cx, result, |_| false)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
