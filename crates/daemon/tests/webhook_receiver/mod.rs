//! A webhook receiver on loopback for tests: records every request (headers, body) and answers
//! as told — 200, another status, or not at all (the connection held open).
#![allow(dead_code)] // each test binary uses part of it

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// With this status.
    Status(u16),
    /// Not at all: the request is read and recorded, the connection held.
    Hang,
}

/// One request received.
#[derive(Clone, Debug)]
pub struct Received {
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// A receiver listening on 127.0.0.1.
pub struct Receiver {
    pub url: String,
    answer: Arc<Mutex<Answer>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Starts one that answers `answer`.
    pub fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let answer = Arc::new(Mutex::new(answer));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (answer.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (a, r) = (a.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &a, &r));
            }
        });
        Receiver {
            url,
            answer,
            received,
        }
    }

    /// Answers `answer` from now on.
    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().expect("lock") = answer;
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// Waits up to `timeout_s` for at least `n` requests; returns them.
    pub fn wait_for(&self, n: usize, timeout_s: u64) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(timeout_s);
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver got {} requests, not {n}: {got:?}",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn serve(stream: TcpStream, answer: &Mutex<Answer>, received: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = BTreeMap::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        received.lock().expect("lock").push(Received {
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let now = *answer.lock().expect("lock");
        match now {
            Answer::Status(code) => {
                let reply = format!("HTTP/1.1 {code} X\r\ncontent-length: 0\r\n\r\n");
                if stream.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            }
            Answer::Hang => {
                // Held until the other side goes away.
                let mut sink = [0u8; 1];
                let _ = reader.read(&mut sink);
                return;
            }
        }
    }
}
