//! A mock System One server for the judge tests: plain HTTP/1.1 on 127.0.0.1, one thread per
//! connection, keep-alive, every request recorded. The test decides each reply (status,
//! headers, body, a delay, or closing the connection without answering) from the request.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// 1-based, in arrival order.
    pub n: usize,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }

    /// The question ids, in body order.
    pub fn question_keys(&self) -> Vec<String> {
        self.json()["questions"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The call ids asked about, in order (from the `keep_call_` questions).
    pub fn call_ids(&self) -> Vec<String> {
        self.question_keys()
            .iter()
            .filter_map(|k| k.strip_prefix("keep_call_").map(str::to_string))
            .collect()
    }
}

/// What to answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
    /// Close the connection without answering.
    pub close: bool,
}

impl Reply {
    pub fn raw(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
            delay: Duration::ZERO,
            close: false,
        }
    }

    pub fn json(status: u16, v: &Value) -> Reply {
        Reply::raw(status, &v.to_string())
    }

    pub fn close() -> Reply {
        Reply {
            close: true,
            ..Reply::raw(0, "")
        }
    }

    pub fn after_ms(mut self, ms: u64) -> Reply {
        self.delay = Duration::from_millis(ms);
        self
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }
}

/// The resolved model the mock reports.
pub const MODEL: &str = "jev-mock-9.9";
/// `usage.input_tokens` the mock reports per request.
pub const INPUT_TOKENS: u64 = 1000;

/// A 200 answering every question with `f(question id)` (a whole answer object).
pub fn answers(req: &Request, f: impl Fn(&str) -> Value) -> Reply {
    let mut map = serde_json::Map::new();
    for k in req.question_keys() {
        map.insert(k.clone(), f(&k));
    }
    Reply::json(
        200,
        &json!({"model": MODEL, "answers": map, "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 2}}),
    )
}

/// `{"type": "noul", "noul": p}`.
pub fn noul(p: f64) -> Value {
    json!({"type": "noul", "noul": p})
}

/// Answers by call name: an id containing `keep` → keep both (0.9/0.9); `trim` → keep the
/// call only (0.9/0.1); `drop` → neither (0.1/0.1); anything else 0.8/0.8.
pub fn by_name(qid: &str) -> Value {
    let (is_call, id) = match qid.strip_prefix("keep_call_") {
        Some(id) => (true, id),
        None => (false, qid.strip_prefix("keep_result_").unwrap_or(qid)),
    };
    let (kc, kr) = if id.contains("keep") {
        (0.9, 0.9)
    } else if id.contains("trim") {
        (0.9, 0.1)
    } else if id.contains("drop") {
        (0.1, 0.1)
    } else {
        (0.8, 0.8)
    };
    noul(if is_call { kc } else { kr })
}

type Behaviour = dyn Fn(&Request) -> Reply + Send + Sync;

struct Inner {
    requests: Mutex<Vec<Request>>,
    count: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    stop: AtomicBool,
    behaviour: Box<Behaviour>,
}

/// A running mock; stops when dropped.
pub struct Mock {
    pub url: String,
    addr: std::net::SocketAddr,
    inner: Arc<Inner>,
}

impl Mock {
    pub fn start(f: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            requests: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            behaviour: Box::new(f),
        });
        let acceptor = Arc::clone(&inner);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if acceptor.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let inner = Arc::clone(&acceptor);
                thread::spawn(move || serve(stream, &inner));
            }
        });
        Mock {
            url: format!("http://{addr}/v1/systemone"),
            addr,
            inner,
        }
    }

    /// A mock answering every question [`by_name`].
    pub fn by_name() -> Mock {
        Mock::start(|r| answers(r, by_name))
    }

    pub fn requests(&self) -> Vec<Request> {
        let mut v = self.inner.requests.lock().unwrap().clone();
        v.sort_by_key(|r| r.n);
        v
    }

    pub fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// A request as read off the wire, before it is numbered.
struct Raw {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Raw> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Raw {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn serve(stream: TcpStream, inner: &Inner) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(raw) = read_request(&mut reader) {
        let n = inner.count.fetch_add(1, Ordering::SeqCst) + 1;
        let req = Request {
            n,
            method: raw.method,
            path: raw.path,
            headers: raw.headers,
            body: raw.body,
            at: Instant::now(),
        };
        let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner.max_in_flight.fetch_max(now, Ordering::SeqCst);
        inner.requests.lock().unwrap().push(req.clone());
        let reply = (inner.behaviour)(&req);
        thread::sleep(reply.delay);
        inner.in_flight.fetch_sub(1, Ordering::SeqCst);
        if reply.close {
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            reply.status,
            reason(reply.status),
            reply.body.len()
        );
        for (k, v) in &reply.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if writer.write_all(head.as_bytes()).is_err()
            || writer.write_all(reply.body.as_bytes()).is_err()
            || writer.flush().is_err()
        {
            return;
        }
    }
}
