//! Integration tests: the real `lcc` binary on fixtures (see `fixtures/README.md`).

mod compact;
mod errors;
mod explain;
mod io;
mod judge;
mod mcp;
mod mock_jev;
mod report;
mod roundtrip;
mod support;
mod windowed;
