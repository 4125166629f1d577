//! `lcc` compacts coding-agent transcripts by tool call, without summarizing.
//!
//! The pipeline runs one way: read ([`io`]) → detect the format and parse into typed messages
//! and call/result pairs ([`transcript`], over the span-keeping reader in [`json`]) → pin
//! ([`pin`]) → decide (the offline [`rules`] policy, or a judge) → [`rebuild`] the original
//! bytes with only the decided spans changed → verify → write the output and the
//! [`report`]. `lcc explain` ([`explain`]) renders a report and never touches the network.
//!
//! Layering: only [`io`] touches files and standard streams, only [`settings`] reads the
//! environment, and [`commands`] sequences the pure stages. This library exists for the
//! binary, its tests and its benchmarks; it is not a stable public API.

pub mod cli;
pub mod commands;
pub mod decide;
pub mod error;
pub mod exit;
pub mod explain;
pub mod fasthash;
pub mod io;
pub mod json;
pub mod json_check;
pub mod judge;
pub mod mcp;
pub mod pin;
pub mod rebuild;
pub mod report;
pub mod rules;
pub mod settings;
pub mod summary;
pub mod tokens;
pub mod transcript;

use cli::{Cli, Command};

/// Run one command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Compact(args) => {
            let s = settings::CompactSettings::from_args(&args, settings::Env::read())?;
            commands::compact::run(&s)
        }
        Command::Explain(args) => commands::explain::run(&args),
        Command::Recall(args) => commands::recall::run(&args, &settings::Env::read()),
        Command::Mcp => mcp::serve(),
    }
}
