//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `lcc` binary under test, with a clean environment (no key, network off).
pub fn lcc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lcc"));
    c.env_remove("TYPESAFE_API_KEY")
        .env_remove("TYPESAFE_ENDPOINT")
        .env_remove("LAYA_ENDPOINT")
        .env("LCC_TYPESAFE_KEY_FILE", "/nonexistent/lcc-test-key")
        .env("LCC_DISABLE_NETWORK", "1");
    c
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

pub fn run(c: &mut Command) -> Output {
    c.output().expect("run lcc")
}
