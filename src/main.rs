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
            let _ = writeln!(std::io::stderr(), "{}", lcc::exit::message(&err));
            status.into()
        }
    }
}
