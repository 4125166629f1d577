//! Integration tests: the real `lcc` binary on fixtures.

mod formats;
mod support;
