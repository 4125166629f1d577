//! Writes the token tables of `o200k_base` and `cl100k_base` into `OUT_DIR` (see
//! `src/tokens/table.rs` for the layout). The tokens come from tiktoken-rs, the reference the
//! counts are tested against, so the tables are its vocabularies by construction; the repo
//! carries no vocabulary file of its own.

use std::path::Path;

#[allow(dead_code)]
#[path = "src/tokens/table.rs"]
mod table;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/tokens/table.rs");
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out);
    let o200k = tiktoken_rs::o200k_base().expect("tiktoken-rs builds o200k_base");
    write(out, "o200k", &o200k, 199_998);
    let cl100k = tiktoken_rs::cl100k_base().expect("tiktoken-rs builds cl100k_base");
    write(out, "cl100k", &cl100k, 100_256);
}

/// Ranks run from 0 without gaps up to the special tokens; `expected` is how many there are.
fn write(out: &Path, name: &str, bpe: &tiktoken_rs::CoreBPE, expected: usize) {
    let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(expected);
    while tokens.len() < expected {
        let rank = tokens.len() as u32;
        let t = bpe
            .decode_bytes(&[rank])
            .unwrap_or_else(|_| panic!("{name}: no token of rank {rank}"));
        tokens.push(t);
    }
    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity(4 * (expected + 1));
    for t in &tokens {
        offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(t);
    }
    offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    let refs: Vec<&[u8]> = tokens.iter().map(Vec::as_slice).collect();
    let slots: Vec<u8> = table::build_slots(&refs)
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    let pairs: Vec<u8> = table::build_pairs(&refs)
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    let t = table::Table {
        bytes: &bytes,
        offsets: &offsets,
        slots: &slots,
        pairs: &pairs,
    };
    for (rank, tok) in refs.iter().enumerate() {
        assert_eq!(t.rank(tok), Some(rank as u32), "{name}: duplicate token");
        if let [a, b] = tok[..] {
            assert_eq!(t.pair_rank(a, b), rank as u32, "{name}: duplicate pair");
        }
    }
    for (ext, data) in [
        ("bytes", &bytes),
        ("offsets", &offsets),
        ("slots", &slots),
        ("pairs", &pairs),
    ] {
        std::fs::write(out.join(format!("{name}.{ext}")), data).expect("write to OUT_DIR");
    }
}
