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
}

/// Talks to one daemon.
pub struct Client {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Client {
    /// A client for `base` (e.g. `http://127.0.0.1:7070`) with bearer `token`.
    pub fn new(base: &str, token: &str) -> Self {
        let config = ureq::Agent::config_builder().http_status_as_error(false).build();
        Client { base: base.trim_end_matches('/').to_string(), token: token.trim().to_string(), agent: config.into() }
    }

    fn check(&self, url: &str, result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<String, ClientError> {
        let mut response = result.map_err(|e| ClientError::Transport { url: url.to_string(), message: e.to_string() })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        if status >= 400 {
            let message = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["error"].as_str().map(str::to_string)).unwrap_or(text);
            return Err(ClientError::Status { status, message });
        }
        Ok(text)
    }

    /// GET a path, as text.
    pub fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self.agent.get(&url).header("authorization", &format!("Bearer {}", self.token)).call();
        self.check(&url, result)
    }

    /// GET a path, as JSON.
    pub fn get(&self, path: &str) -> Result<Value, ClientError> {
        let text = self.get_text(path)?;
        serde_json::from_str(&text).map_err(|e| ClientError::Transport { url: path.to_string(), message: e.to_string() })
    }

    /// POST JSON to a path.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let result = self.agent.post(&url).header("authorization", &format!("Bearer {}", self.token)).send_json(body);
        let text = self.check(&url, result)?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}
