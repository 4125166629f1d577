//! Integration tests: the real `lcc` binary on fixtures (see `fixtures/README.md`).

mod compact;
mod errors;
mod explain;
mod formats;
mod io;
mod judge;
mod laya;
mod mcp;
mod mock_jev;
mod report;
mod roundtrip;
mod rules;
mod support;
mod tokens;
mod windowed;
