//! The imperative shell: one function per subcommand, sequencing the pure stages and doing
//! the I/O at the edges.

pub mod compact;
pub mod explain;
pub mod recall;
