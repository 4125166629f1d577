//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `lcc` binary under test, with a clean environment (no key, network off, the stash
/// under the target directory).
pub fn lcc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lcc"));
    c.env_remove("TYPESAFE_API_KEY")
        .env_remove("TYPESAFE_ENDPOINT")
        .env_remove("LAYA_ENDPOINT")
        .env_remove("LAYA_API_KEY")
        .env_remove("LAYA_MODEL")
        .env_remove("LCC_LAYA_TIMEOUT_MS")
        .env_remove("LCC_LAYA_HEALTH_TIMEOUT_MS")
        .env("LCC_TYPESAFE_KEY_FILE", "/nonexistent/lcc-test-key")
        .env("LCC_DISABLE_NETWORK", "1")
        // --rules-mode stashed never writes to the user's cache from a test.
        .env(
            "LCC_STASH_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("lcc-test-stash"),
        );
    c
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A fixture's path as a string argument.
pub fn fx(name: &str) -> String {
    fixture(name).to_string_lossy().into_owned()
}

/// A fixture's text.
pub fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("read fixture")
}

pub fn run(c: &mut Command) -> Output {
    c.output().expect("run lcc")
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn out(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    /// Assert the exit code, showing stderr when it is not the expected one.
    #[track_caller]
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "exit code {} (wanted {code}); stderr:\n{}",
            self.code, self.stderr
        );
        self
    }
}

fn finish(o: Output) -> Run {
    Run {
        code: o.status.code().expect("exit code (not killed by a signal)"),
        stdout: o.stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Run `lcc ARGS`.
pub fn lcc_run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    finish(run(lcc().args(args).stdin(Stdio::null())))
}

/// Run `lcc recall ARGS` with `LCC_STASH_DIR` set to `stash`.
pub fn lcc_recall<S: AsRef<std::ffi::OsStr>>(stash: &Path, args: &[S]) -> Run {
    finish(run(lcc()
        .arg("recall")
        .args(args)
        .env("LCC_STASH_DIR", stash)
        .stdin(Stdio::null())))
}

/// Run `lcc ARGS` with `input` on stdin.
pub fn lcc_stdin<S: AsRef<std::ffi::OsStr>>(args: &[S], input: &[u8]) -> Run {
    let mut child = lcc()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lcc");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    finish(child.wait_with_output().expect("wait for lcc"))
}

/// A fresh temporary directory.
pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// A path inside a directory, as a string argument.
pub fn at(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// Parse a JSON file (keys keep their order).
pub fn json_file(path: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("read JSON file");
    serde_json::from_str(&text).expect("valid JSON")
}

/// Compact a fixture with the given extra flags; returns the run and the parsed report.
pub fn compact(name: &str, flags: &[&str]) -> (Run, serde_json::Value) {
    let dir = tmp();
    let report = at(dir.path(), "report.json");
    let mut args = vec!["compact".to_string(), fx(name), "-r".into(), report.clone()];
    args.extend(flags.iter().map(|s| (*s).to_string()));
    let r = lcc_run(&args).expect(0);
    let v = json_file(&report);
    (r, v)
}

/// The decisions of a report as (id, decision, reason) triples, in report order.
pub fn decisions(report: &serde_json::Value) -> Vec<(String, String, String)> {
    report["decisions"]
        .as_array()
        .expect("decisions list")
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap().to_string(),
                d["decision"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The decision for one call id.
#[track_caller]
pub fn decision<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["decisions"]
        .as_array()
        .expect("decisions list")
        .iter()
        .find(|d| d["id"] == id)
        .unwrap_or_else(|| panic!("no decision for {id}"))
}

/// Replace the JSON string that follows `"<id_key>": "<id>", "text": ` in `src` with `new`
/// (JSON-quoted): the bytes a result-text edit should produce, computed independently of lcc.
#[track_caller]
pub fn with_text(src: &str, id_key: &str, id: &str, new: &str) -> String {
    let marker = format!("\"{id_key}\": \"{id}\", \"text\": ");
    let at = src
        .find(&marker)
        .unwrap_or_else(|| panic!("marker {marker} not in source"))
        + marker.len();
    let end = json_value_end(src, at);
    format!(
        "{}{}{}",
        &src[..at],
        serde_json::to_string(new).unwrap(),
        &src[end..]
    )
}

/// End offset of the JSON value (a string, or an object/array) that starts at `at`.
fn json_value_end(src: &str, at: usize) -> usize {
    let b = src.as_bytes();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut i = at;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_str = false;
                if depth == 0 {
                    return i + 1;
                }
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    panic!("unterminated JSON value at {at}");
}

/// Files in a directory tree whose name looks like one of lcc's temporary files.
pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(".lcc-"))
            {
                found.push(p);
            }
        }
    }
    found
}

/// A report's text without its `timing` object (the one part allowed to differ between runs).
#[track_caller]
pub fn without_timing(report: &str) -> String {
    let cut = report
        .find(",\n  \"timing\": {")
        .expect("report has a timing object");
    let rest = &report[cut..];
    let close = rest.find("\n  }").expect("timing object closes") + "\n  }".len();
    assert_eq!(&rest[close..], "\n}\n", "timing is the report's last key");
    report[..cut].to_string()
}
