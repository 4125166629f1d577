//! The System One client: one `POST` per request, retries with back-off, a batch split in
//! two when the API says it is too large, and at most `--max-workers` requests in flight.
//!
//! Wire contract (`reference/jev-laya.md` §1): `POST {endpoint}` with
//! `Authorization: Bearer <key>` and `{"model", "state", "questions"}`; the reply is
//! `{"model", "answers": {qid: {"type": "noul", "noul": p}}, "usage": {…}}`.
//!
//! Retry policy: connection errors, timeouts, 408, 425, 429, 5xx and 529 are retried (up to
//! [`Policy::attempts`] attempts), waiting `Retry-After`/`retry-after-ms` when the server sends
//! one, otherwise an exponential back-off with jitter; everything else (400, 401, 403, 404,
//! 422, …) is final. A `400` naming `max_tokens_exceeded` (or a `413`) splits the batch in two
//! and sends each half, down to a single call. A refused key (401/403) stops every request
//! not yet sent. The key never leaves the `Authorization` header: causes are built from
//! status codes and short, redacted snippets of bodies, and 422 bodies (which echo the
//! request) are never shown.
//!
//! [`Transport`] is the seam: [`HttpTransport`] is reqwest over rustls; tests can plug in a
//! scripted one.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use indicatif::ProgressBar;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::batch::Batch;
use crate::settings::{ApiKey, JevConfig};

/// What came back from one HTTP attempt.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// `retry-after-ms` or `retry-after` (seconds or an HTTP date), when sent.
    pub retry_after: Option<Duration>,
    pub body: Vec<u8>,
}

/// An attempt that got no HTTP reply.
#[derive(Debug, Clone)]
pub enum SendError {
    Timeout,
    Connect(String),
    Other(String),
}

impl SendError {
    fn describe(&self) -> String {
        match self {
            SendError::Timeout => "timed out".into(),
            SendError::Connect(e) => format!("connection failed: {e}"),
            SendError::Other(e) => format!("network error: {e}"),
        }
    }
}

/// Sends one request body and returns the reply. Implementations must be cheap to share.
/// The body is shared, not copied, between attempts.
pub trait Transport: Send + Sync + 'static {
    fn post(&self, body: Bytes) -> impl Future<Output = Result<Reply, SendError>> + Send;
}

/// Sent (as `true`) with `--long-context`.
pub const LONG_CONTEXT_HEADER: &str = "typesafe-danger-zone-long-context";

/// reqwest over rustls, no redirects (the key is never re-sent elsewhere).
pub struct HttpTransport {
    client: reqwest::Client,
    url: reqwest::Url,
    auth: reqwest::header::HeaderValue,
}

impl HttpTransport {
    pub fn new(cfg: &JevConfig, key: &ApiKey) -> Result<HttpTransport, String> {
        let url = reqwest::Url::parse(&cfg.endpoint)
            .map_err(|e| format!("invalid TYPESAFE_ENDPOINT: {e}"))?;
        let mut auth = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose()))
            .map_err(|_| {
                "the API key holds characters that cannot go in an HTTP header".to_string()
            })?;
        auth.set_sensitive(true);
        // --long-context: Jev's experimental long-context mode, on every request.
        let mut headers = reqwest::header::HeaderMap::new();
        if cfg.long_context {
            headers.insert(
                LONG_CONTEXT_HEADER,
                reqwest::header::HeaderValue::from_static("true"),
            );
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.timeout)
            .user_agent(concat!("lcc/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("could not build the HTTP client: {}", chain(&e)))?;
        Ok(HttpTransport { client, url, auth })
    }
}

/// An error and its causes, `: `-joined (reqwest's top-level message alone says little).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out
}

impl Transport for HttpTransport {
    fn post(&self, body: Bytes) -> impl Future<Output = Result<Reply, SendError>> + Send {
        let req = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::AUTHORIZATION, self.auth.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        async move {
            let classify = |e: reqwest::Error| {
                let e = e.without_url();
                if e.is_timeout() {
                    SendError::Timeout
                } else if e.is_connect() {
                    SendError::Connect(chain(&e))
                } else {
                    SendError::Other(chain(&e))
                }
            };
            let resp = req.send().await.map_err(classify)?;
            let status = resp.status().as_u16();
            let retry_after = retry_after(resp.headers());
            let body = resp.bytes().await.map_err(classify)?.to_vec();
            Ok(Reply {
                status,
                retry_after,
                body,
            })
        }
    }
}

pub(crate) fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = h
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = h.get("retry-after")?.to_str().ok()?.trim();
    parse_retry_after(v, SystemTime::now())
}

/// `Retry-After`: delta-seconds, or an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let parts: Vec<&str> = v.split_whitespace().collect();
    let [_, day, mon, year, hms, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: i64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == mon)? as i64
        + 1;
    let year: i64 = year.parse().ok()?;
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (t.next()??, t.next()??, t.next()??);
    // Days since 1970-01-01 (civil-from-days inverse).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let at = days * 86_400 + h * 3600 + m * 60 + s;
    let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs() as i64;
    Some(Duration::from_secs(u64::try_from(at - now).unwrap_or(0)))
}

/// How patiently to retry.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
    pub retry_after_cap: Duration,
}

impl Policy {
    pub fn from_config(c: &JevConfig) -> Policy {
        Policy {
            attempts: c.max_attempts.max(1),
            base: c.retry_base,
            cap: c.retry_cap,
            retry_after_cap: c.retry_after_cap,
        }
    }

    /// Back-off before attempt `n + 1` (n ≥ 1): base·2^(n−1), capped, times a jitter in
    /// [0.75, 1].
    fn backoff(&self, n: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << (n - 1).min(16))
            .min(self.cap);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let jitter = 0.75 + 0.25 * f64::from(nanos % 1000) / 1000.0;
        exp.mul_f64(jitter)
    }
}

/// Why a request finally failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKind {
    /// `400 max_tokens_exceeded` or `413`: split and resend.
    TooLarge,
    /// 401/403: the key is refused; nothing more is sent.
    Auth(u16),
    Other,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailKind,
    pub cause: String,
}

/// Replaces the key wherever it shows up (a server may echo headers in an error body).
#[derive(Clone)]
pub struct Redactor(Option<Arc<str>>);

impl Redactor {
    pub fn new(key: &ApiKey) -> Redactor {
        let k = key.expose();
        Redactor((k.len() >= 4).then(|| Arc::from(k)))
    }

    pub fn none() -> Redactor {
        Redactor(None)
    }

    pub fn clean(&self, s: &str) -> String {
        match &self.0 {
            Some(k) if s.contains(&**k) => s.replace(&**k, "<redacted>"),
            _ => s.to_string(),
        }
    }
}

/// A short, one-line, redacted view of an error body.
fn snippet(body: &[u8], redact: &Redactor) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(body);
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let clean = redact.clean(&one_line);
    if clean.chars().count() > MAX {
        let cut: String = clean.chars().take(MAX).collect();
        format!("{cut}…")
    } else if clean.is_empty() {
        "(empty body)".into()
    } else {
        clean
    }
}

fn classify(reply: &Reply, redact: &Redactor) -> (bool, Failure) {
    let code = reply.status;
    let body = || snippet(&reply.body, redact);
    let fail = |kind, cause| Failure { kind, cause };
    match code {
        400 if String::from_utf8_lossy(&reply.body).contains("max_tokens_exceeded") => (
            false,
            fail(
                FailKind::TooLarge,
                "HTTP 400 max_tokens_exceeded: the request is over Jev's context limit".into(),
            ),
        ),
        413 => (
            false,
            fail(
                FailKind::TooLarge,
                "HTTP 413: the request body is too large".into(),
            ),
        ),
        401 | 403 => (
            false,
            fail(
                FailKind::Auth(code),
                format!("the API refused the key (HTTP {code})"),
            ),
        ),
        422 => (
            false,
            fail(
                FailKind::Other,
                "HTTP 422: the API rejected the request as invalid (body not shown: it echoes the request)".into(),
            ),
        ),
        408 | 425 | 429 | 500..=599 => (true, fail(FailKind::Other, format!("HTTP {code}: {}", body()))),
        _ => (false, fail(FailKind::Other, format!("HTTP {code}: {}", body()))),
    }
}

/// Send one body with retries. Returns the 2xx body, or why it failed.
pub async fn send<T: Transport>(
    t: &T,
    body: &Bytes,
    p: &Policy,
    redact: &Redactor,
) -> Result<Vec<u8>, Failure> {
    let mut attempt = 1;
    loop {
        let (retryable, failure, wait) = match t.post(body.clone()).await {
            Ok(r) if (200..300).contains(&r.status) => return Ok(r.body),
            Ok(r) => {
                let (retryable, f) = classify(&r, redact);
                (retryable, f, r.retry_after)
            }
            Err(e) => (
                true,
                Failure {
                    kind: FailKind::Other,
                    cause: redact.clean(&e.describe()),
                },
                None,
            ),
        };
        if !retryable {
            return Err(failure);
        }
        if attempt >= p.attempts {
            return Err(Failure {
                cause: format!("{} (after {attempt} attempts)", failure.cause),
                ..failure
            });
        }
        let wait = wait.map_or_else(|| p.backoff(attempt), |w| w.min(p.retry_after_cap));
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// The states batches are sent with: one for every batch, or one per window of a long
/// session, assembled when its batch is sent.
pub enum States {
    One(String),
    Windows(Arc<super::window::Plan>),
}

impl States {
    fn write(&self, i: usize, out: &mut String) {
        match self {
            States::One(s) => out.push_str(s),
            States::Windows(plan) => plan.write_state(i, out),
        }
    }
}

/// Everything a request needs besides its calls.
pub struct Job {
    pub model: String,
    /// The fitted state JSON (per [`Batch::state`]).
    pub states: States,
    /// Per candidate: its call id and tool, which its two questions are written from
    /// ([`super::batch::write_question_members`]) when a request is built.
    pub calls: Vec<(Box<str>, Box<str>)>,
    /// Per [`Batch::state`]: its budget count, to size the body.
    pub state_tokens: Vec<usize>,
    pub policy: Policy,
    pub redact: Redactor,
}

impl Job {
    /// `{"model": …, "state": …, "questions": {…}}`, written once into a buffer of about its
    /// size.
    pub fn body(&self, state: usize, calls: &[usize]) -> Bytes {
        // States run about 3 bytes per token (4 leaves room); a question pair's length is
        // known, plus a separator.
        let tokens = self.state_tokens.get(state).copied().unwrap_or(0);
        let questions: usize = calls
            .iter()
            .map(|&i| 2 + super::batch::question_members_len(&self.calls[i].0, &self.calls[i].1))
            .sum();
        let mut out = String::with_capacity(64 + self.model.len() + 4 * tokens + questions);
        out.push_str("{\"model\": ");
        crate::json::quote_into(&mut out, &self.model, false);
        out.push_str(", \"state\": ");
        self.states.write(state, &mut out);
        out.push_str(", \"questions\": {");
        for (n, &i) in calls.iter().enumerate() {
            if n > 0 {
                out.push_str(", ");
            }
            let (id, tool) = &self.calls[i];
            super::batch::write_question_members(&mut out, id, tool);
        }
        out.push_str("}}");
        Bytes::from(out)
    }
}

/// One request that was sent (or not) for part of a batch.
#[derive(Debug, Clone)]
pub struct PartResult {
    pub calls: Vec<usize>,
    pub outcome: Result<Vec<u8>, Failure>,
}

/// A batch's requests, in order (more than one when it was split).
#[derive(Debug, Clone)]
pub struct BatchResult {
    pub number: usize,
    pub parts: Vec<PartResult>,
    /// How many times a part was split.
    pub splits: usize,
    pub latency: Duration,
}

/// Send one batch, splitting on "too large". Parts are sent one after the other.
async fn run_batch<T: Transport>(t: &T, job: &Job, b: Batch, refused: &AtomicU16) -> BatchResult {
    let started = Instant::now();
    let mut queue: VecDeque<Vec<usize>> = VecDeque::from([b.calls]);
    let mut parts = Vec::new();
    let mut splits = 0;
    while let Some(calls) = queue.pop_front() {
        let code = refused.load(Ordering::SeqCst);
        if code != 0 {
            parts.push(PartResult {
                calls,
                outcome: Err(Failure {
                    kind: FailKind::Auth(code),
                    cause: format!("the API refused the key (HTTP {code})"),
                }),
            });
            continue;
        }
        let outcome = send(t, &job.body(b.state, &calls), &job.policy, &job.redact).await;
        match outcome {
            Err(Failure {
                kind: FailKind::TooLarge,
                ..
            }) if calls.len() > 1 => {
                let mid = calls.len().div_ceil(2);
                let (a, b) = calls.split_at(mid);
                queue.push_front(b.to_vec());
                queue.push_front(a.to_vec());
                splits += 1;
            }
            Err(Failure {
                kind: FailKind::Auth(code),
                ..
            }) => {
                refused.store(code, Ordering::SeqCst);
                parts.push(PartResult { calls, outcome });
            }
            outcome => parts.push(PartResult { calls, outcome }),
        }
    }
    BatchResult {
        number: b.number,
        parts,
        splits,
        latency: started.elapsed(),
    }
}

/// Send every batch, at most `workers` at a time; results come back in batch order.
pub async fn run_all<T: Transport>(
    t: Arc<T>,
    job: Arc<Job>,
    batches: Vec<Batch>,
    workers: usize,
    progress: ProgressBar,
) -> Vec<BatchResult> {
    let n = batches.len();
    let sem = Arc::new(Semaphore::new(workers.max(1)));
    let refused = Arc::new(AtomicU16::new(0));
    let mut set = JoinSet::new();
    for (i, b) in batches.into_iter().enumerate() {
        let (t, job, sem, refused, progress) = (
            Arc::clone(&t),
            Arc::clone(&job),
            Arc::clone(&sem),
            Arc::clone(&refused),
            progress.clone(),
        );
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let r = run_batch(&*t, &job, b, &refused).await;
            progress.inc(1);
            (i, r)
        });
    }
    let mut out: Vec<Option<BatchResult>> = vec![None; n];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, r)) => out[i] = Some(r),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Answers from a script: a function of (request number, body).
    struct Scripted<F> {
        n: Mutex<usize>,
        f: F,
        seen: Mutex<Vec<String>>,
    }

    impl<F> Transport for Scripted<F>
    where
        F: Fn(usize, &str) -> Result<Reply, SendError> + Send + Sync + 'static,
    {
        fn post(&self, body: Bytes) -> impl Future<Output = Result<Reply, SendError>> + Send {
            let body = String::from_utf8(body.to_vec()).unwrap();
            let n = {
                let mut g = self.n.lock().unwrap();
                *g += 1;
                *g
            };
            let r = (self.f)(n, &body);
            self.seen.lock().unwrap().push(body);
            async move { r }
        }
    }

    fn reply(status: u16, body: &str) -> Result<Reply, SendError> {
        Ok(Reply {
            status,
            retry_after: None,
            body: body.as_bytes().to_vec(),
        })
    }

    fn policy() -> Policy {
        Policy {
            attempts: 3,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
            retry_after_cap: Duration::from_millis(50),
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn scripted<F>(f: F) -> Scripted<F>
    where
        F: Fn(usize, &str) -> Result<Reply, SendError>,
    {
        Scripted {
            n: Mutex::new(0),
            f,
            seen: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn retries_then_succeeds_and_stops_on_final_codes() {
        let t = scripted(|n, _| {
            if n < 3 {
                reply(503, "busy")
            } else {
                reply(200, "{}")
            }
        });
        let r = rt().block_on(send(
            &t,
            &Bytes::from_static(b"x"),
            &policy(),
            &Redactor::none(),
        ));
        assert_eq!(r.unwrap(), b"{}");
        assert_eq!(*t.n.lock().unwrap(), 3);

        let t = scripted(|_, _| reply(503, "busy"));
        let e = rt()
            .block_on(send(
                &t,
                &Bytes::from_static(b"x"),
                &policy(),
                &Redactor::none(),
            ))
            .unwrap_err();
        assert_eq!(e.cause, "HTTP 503: busy (after 3 attempts)");

        for code in [400, 401, 403, 404, 422] {
            let t = scripted(move |_, _| reply(code, "nope"));
            let e = rt()
                .block_on(send(
                    &t,
                    &Bytes::from_static(b"x"),
                    &policy(),
                    &Redactor::none(),
                ))
                .unwrap_err();
            assert_eq!(*t.n.lock().unwrap(), 1, "{code} must not be retried");
            assert!(!e.cause.contains("after"), "{}", e.cause);
        }
        let t = scripted(|n, _| {
            if n == 1 {
                Err(SendError::Connect("refused".into()))
            } else {
                reply(200, "{}")
            }
        });
        assert!(rt()
            .block_on(send(
                &t,
                &Bytes::from_static(b"x"),
                &policy(),
                &Redactor::none()
            ))
            .is_ok());
    }

    #[test]
    fn error_bodies_are_cut_and_redacted() {
        let key = ApiKey("sk-very-secret".into());
        let body = format!("echo Bearer {} {}", key.expose(), "x".repeat(500));
        let t = scripted(move |_, _| reply(404, &body));
        let e = rt()
            .block_on(send(
                &t,
                &Bytes::from_static(b"x"),
                &policy(),
                &Redactor::new(&key),
            ))
            .unwrap_err();
        assert!(!e.cause.contains("sk-very-secret"));
        assert!(e.cause.contains("<redacted>"));
        assert!(e.cause.chars().count() < 230, "{}", e.cause);
    }

    #[test]
    fn too_large_batches_are_split_down_to_one_call() {
        // Refuse any request with more than two calls.
        let t = Arc::new(scripted(|_, body: &str| {
            if body.matches("\"keep_call_").count() > 2 {
                reply(
                    400,
                    "{\"detail\": {\"error_type\": \"max_tokens_exceeded\"}}",
                )
            } else {
                reply(200, "{}")
            }
        }));
        let job = Arc::new(Job {
            model: "m".into(),
            states: States::One("{}".into()),
            calls: (0..5)
                .map(|i| (format!("q{i}").into(), "Read".into()))
                .collect(),
            state_tokens: vec![1],
            policy: policy(),
            redact: Redactor::none(),
        });
        let batches = vec![Batch {
            number: 1,
            calls: vec![0, 1, 2, 3, 4],
            question_tokens: 0,
            state: 0,
        }];
        let out = rt().block_on(run_all(
            Arc::clone(&t),
            job,
            batches,
            2,
            ProgressBar::hidden(),
        ));
        let parts: Vec<_> = out[0].parts.iter().map(|p| p.calls.clone()).collect();
        assert_eq!(parts, vec![vec![0, 1], vec![2], vec![3, 4]]);
        assert!(out[0].parts.iter().all(|p| p.outcome.is_ok()));
        assert_eq!(out[0].splits, 2);
        // Every body is the whole request, its questions those of its part.
        let seen = t.seen.lock().unwrap();
        let asked: Vec<Vec<String>> = seen
            .iter()
            .map(|body| {
                let v: serde_json::Value = serde_json::from_str(body).unwrap();
                assert_eq!(v["model"], "m");
                assert_eq!(v["state"], serde_json::json!({}));
                v["questions"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect()
            })
            .collect();
        let want = |ids: &[usize]| -> Vec<String> {
            ids.iter()
                .flat_map(|i| [format!("keep_call_q{i}"), format!("keep_result_q{i}")])
                .collect()
        };
        assert_eq!(asked.len(), 5);
        assert_eq!(asked[0], want(&[0, 1, 2, 3, 4]));
        assert_eq!(asked[2..], [want(&[0, 1]), want(&[2]), want(&[3, 4])]);
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777 - 10);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
