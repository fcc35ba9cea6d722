//! `GET /v1/jobs/{id}/logs`: a window of the job's log streamed from its file (never read whole
//! into memory), at most [`MAX_LOG_RESPONSE_BYTES`] per response.

use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogQuery {
    /// Only the last N bytes.
    tail_bytes: Option<u64>,
    /// Start at this byte (to page through a log longer than one response).
    offset: Option<u64>,
    /// At most this many bytes (default and most: [`MAX_LOG_RESPONSE_BYTES`]).
    max_bytes: Option<u64>,
}

/// A job's output, streamed from its log file: never read into memory, at most
/// [`MAX_LOG_RESPONSE_BYTES`] per response. Headers say which part of how much was sent:
/// `x-arbiter-log-size` (the whole file), `x-arbiter-log-start` (first byte sent) and
/// `x-arbiter-log-truncated: true` when bytes inside the window asked for were left out by the cap.
pub(super) async fn job_logs(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
    q: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = api.caller(&headers)?;
    let q = query(q)?;
    let id = api.daemon.job_ref(&id)?;
    api.daemon.job(id, caller.tenant())?;
    let cap = match q.max_bytes {
        None => MAX_LOG_RESPONSE_BYTES,
        Some(n) if (1..=MAX_LOG_RESPONSE_BYTES).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::bad(
                "max_bytes",
                format!("{n} is not in 1..={MAX_LOG_RESPONSE_BYTES}"),
            ));
        }
    };
    if q.tail_bytes.is_some() && q.offset.is_some() {
        return Err(ApiError::bad(
            "tail_bytes",
            "give tail_bytes or offset, not both",
        ));
    }
    let path = api.daemon.log_path(id);
    // No log yet (the job has not run): an empty one.
    let (file, size) = match tokio::fs::File::open(&path).await {
        Ok(file) => {
            let size = file
                .metadata()
                .await
                .map_err(|e| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("log of job {id}: {e}"),
                    )
                })?
                .len();
            (Some(file), size)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, 0),
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("log of job {id}: {e}"),
            ));
        }
    };
    let (start, end, truncated) = log_window(size, q.tail_bytes, q.offset, cap);
    let body = match file {
        Some(mut file) if end > start => {
            file.seek(std::io::SeekFrom::Start(start))
                .await
                .map_err(|e| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("log of job {id}: {e}"),
                    )
                })?;
            Body::new(FileWindow {
                file,
                remaining: end - start,
                buf: vec![0; 64 * 1024].into_boxed_slice(),
            })
        }
        _ => Body::empty(),
    };
    let headers = [
        ("content-type", "text/plain; charset=utf-8".to_string()),
        ("x-arbiter-log-size", size.to_string()),
        ("x-arbiter-log-start", start.to_string()),
        ("x-arbiter-log-truncated", truncated.to_string()),
    ];
    Ok((headers, body).into_response())
}

/// The byte range `[start, end)` of a log of `size` bytes to send, and whether the cap left out
/// bytes the caller asked for: the last `tail` bytes, or from `offset` to the end; at most `cap`.
pub(super) fn log_window(
    size: u64,
    tail: Option<u64>,
    offset: Option<u64>,
    cap: u64,
) -> (u64, u64, bool) {
    match tail {
        Some(tail) => {
            let wanted = tail.min(size);
            (size - wanted.min(cap), size, wanted > cap)
        }
        None => {
            let start = offset.unwrap_or(0).min(size);
            let end = size.min(start.saturating_add(cap));
            (start, end, end < size)
        }
    }
}

/// `remaining` bytes of a file from where it is positioned, read in chunks as the client takes
/// them.
pub(super) struct FileWindow {
    file: tokio::fs::File,
    remaining: u64,
    buf: Box<[u8]>,
}

impl HttpBody for FileWindow {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = usize::try_from(this.remaining)
            .unwrap_or(usize::MAX)
            .min(this.buf.len());
        let mut read = ReadBuf::new(&mut this.buf[..want]);
        match Pin::new(&mut this.file).poll_read(cx, &mut read) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) if read.filled().is_empty() => {
                this.remaining = 0;
                Poll::Ready(Some(Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the log shrank while it was being sent",
                ))))
            }
            Poll::Ready(Ok(())) => {
                let chunk = Bytes::copy_from_slice(read.filled());
                this.remaining -= chunk.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_windows_are_capped_and_tails_are_exact() {
        // (size, tail, offset, cap) -> (start, end, truncated)
        assert_eq!(log_window(100, None, None, 1000), (0, 100, false));
        assert_eq!(log_window(100, None, None, 40), (0, 40, true));
        assert_eq!(log_window(100, Some(4), None, 40), (96, 100, false));
        assert_eq!(log_window(100, Some(60), None, 40), (60, 100, true));
        assert_eq!(log_window(100, Some(500), None, 1000), (0, 100, false));
        assert_eq!(log_window(100, None, Some(90), 40), (90, 100, false));
        assert_eq!(log_window(100, None, Some(500), 40), (100, 100, false));
        assert_eq!(log_window(0, Some(4), None, 40), (0, 0, false));
    }
}
