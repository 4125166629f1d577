//! `lcc`: parse the command line, run, map the outcome to an exit code.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = lcc::cli::Cli::parse();
    match lcc::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let status = lcc::exit::status_for(&err);
            if status == lcc::exit::ExitStatus::BrokenPipe {
                return ExitCode::SUCCESS;
            }
            // Our own errors already carry their cause in their message.
            let _ = if err.downcast_ref::<lcc::error::Error>().is_some() {
                writeln!(std::io::stderr(), "error: {err}")
            } else {
                writeln!(std::io::stderr(), "error: {err:#}")
            };
            status.into()
        }
    }
}
