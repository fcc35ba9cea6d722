//! A small blocking HTTP client for the CLI (`arbiter submit | jobs | show | cancel | logs |
//! cluster | tenants`), configured by `ARBITER_URL` and `ARBITER_TOKEN`.

use serde_json::Value;

/// A client error, with the server's message when it sent one.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status.
    #[error("HTTP {status}: {message}")]
    Status {
        /// Status code.
        status: u16,
        /// The server's `error` text.
        message: String,
    },
    /// No answer (daemon down, wrong URL).
    #[error("cannot reach the daemon at {url}: {message}")]
    Transport {
        /// URL tried.
        url: String,
        /// What failed.
        message: String,
    },
    /// Writing what the daemon sent failed (a closed pipe: `arbiter logs 3 | head`).
    #[error("writing the output: {0}")]
    Output(#[source] std::io::Error),
}

/// What part of a log a [`Client::get_log`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPart {
    /// Size of the whole log, bytes.
    pub size: u64,
    /// First byte sent.
    pub start: u64,
    /// Bytes sent.
    pub len: u64,
    /// The daemon's response cap left out bytes that were asked for.
    pub truncated: bool,
}

/// Attempts of a submission before a transport error (or a 503) is final.
const SUBMIT_ATTEMPTS: u32 = 4;

/// Largest text response read into memory (above the daemon's 16 MiB log cap).
const MAX_TEXT_BYTES: u64 = 32 * 1024 * 1024;

/// Talks to one daemon.
pub struct Client {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Client {
    /// A client for `base` (e.g. `http://127.0.0.1:7070`) with bearer `token`.
    pub fn new(base: &str, token: &str) -> Self {
        // Pooled connections are dropped before the daemon's keep-alive limit (its
        // `header_timeout_s`, 10 s by default) closes them under us.
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_age(std::time::Duration::from_secs(5))
            .build();
        Client {
            base: base.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
            agent: config.into(),
        }
    }

    fn check(
        &self,
        url: &str,
        result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<String, ClientError> {
        let mut response = result.map_err(|e| ClientError::Transport {
            url: url.to_string(),
            message: e.to_string(),
        })?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_TEXT_BYTES)
            .read_to_string();
        if status >= 400 {
            let text = text.unwrap_or_default();
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or(text);
            return Err(ClientError::Status { status, message });
        }
        text.map_err(|e| ClientError::Transport {
            url: url.to_string(),
            message: e.to_string(),
        })
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn json_reply(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    /// GET a path, as text.
    pub fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .get(&url)
            .header("authorization", &self.auth())
            .call();
        self.check(&url, result)
    }

    /// GET a path, as JSON.
    pub fn get(&self, path: &str) -> Result<Value, ClientError> {
        let text = self.get_text(path)?;
        serde_json::from_str(&text).map_err(|e| ClientError::Transport {
            url: path.to_string(),
            message: e.to_string(),
        })
    }

    /// POST JSON to a path.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .post(&url)
            .header("authorization", &self.auth())
            .send_json(body);
        Ok(Self::json_reply(&self.check(&url, result)?))
    }

    /// PATCH a path with JSON.
    pub fn patch(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .patch(&url)
            .header("authorization", &self.auth())
            .send_json(body);
        Ok(Self::json_reply(&self.check(&url, result)?))
    }

    /// PUT JSON to a path.
    pub fn put(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .put(&url)
            .header("authorization", &self.auth())
            .send_json(body);
        Ok(Self::json_reply(&self.check(&url, result)?))
    }

    /// DELETE a path.
    pub fn delete(&self, path: &str) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .delete(&url)
            .header("authorization", &self.auth())
            .call();
        Ok(Self::json_reply(&self.check(&url, result)?))
    }

    /// Submits a job (`POST /v1/jobs`) with an idempotency key, retrying a few times with
    /// backoff when the daemon cannot be reached or answers 503: the key makes a retry of a
    /// submission that did arrive return that job (`"duplicate": true`) instead of a second one.
    pub fn submit(&self, body: &Value, idempotency_key: &str) -> Result<Value, ClientError> {
        let url = format!("{}/v1/jobs", self.base);
        let mut delay = std::time::Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            let result = self
                .agent
                .post(&url)
                .header("authorization", &self.auth())
                .header("idempotency-key", idempotency_key)
                .send_json(body);
            match self.check(&url, result) {
                Err(
                    e @ (ClientError::Transport { .. } | ClientError::Status { status: 503, .. }),
                ) if attempt < SUBMIT_ATTEMPTS => {
                    tracing::warn!(
                        "submission attempt {attempt} of {SUBMIT_ATTEMPTS} failed ({e}); retrying in {delay:?} with the same idempotency key"
                    );
                    std::thread::sleep(delay);
                    delay *= 3;
                    attempt += 1;
                }
                other => return other.map(|text| Self::json_reply(&text)),
            }
        }
    }

    /// Streams a log (`GET /v1/jobs/{id}/logs?...`) into `out` without holding it in memory;
    /// says which part of the log it was.
    pub fn get_log(
        &self,
        path: &str,
        out: &mut dyn std::io::Write,
    ) -> Result<LogPart, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self
            .agent
            .get(&url)
            .header("authorization", &self.auth())
            .call();
        let mut response = result.map_err(|e| ClientError::Transport {
            url: url.clone(),
            message: e.to_string(),
        })?;
        if response.status().as_u16() >= 400 {
            return self.check(&url, Ok(response)).map(|_| LogPart {
                size: 0,
                start: 0,
                len: 0,
                truncated: false,
            });
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (size, start, truncated) = (
            header("x-arbiter-log-size"),
            header("x-arbiter-log-start"),
            header("x-arbiter-log-truncated"),
        );
        let mut reader = response.body_mut().as_reader();
        let mut buf = vec![0u8; 64 * 1024];
        let mut len = 0u64;
        loop {
            let n = match std::io::Read::read(&mut reader, &mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(ClientError::Transport {
                        url,
                        message: e.to_string(),
                    });
                }
            };
            out.write_all(&buf[..n]).map_err(ClientError::Output)?;
            len += n as u64;
        }
        out.flush().map_err(ClientError::Output)?;
        let number = |v: Option<String>| v.and_then(|v| v.parse().ok());
        Ok(LogPart {
            size: number(size).unwrap_or(len),
            start: number(start).unwrap_or(0),
            len,
            truncated: truncated.as_deref() == Some("true"),
        })
    }
}
