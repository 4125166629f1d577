//! Integration tests: the real `lcc` binary on fixtures (see `fixtures/README.md`).

mod compact;
mod errors;
mod explain;
mod io;
mod report;
mod roundtrip;
mod rules;
mod support;
