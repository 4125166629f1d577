//! Integration tests: the real `lcc` binary on fixtures.

mod judge;
mod mock_jev;
mod support;
