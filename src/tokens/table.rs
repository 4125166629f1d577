//! An encoding's token table: each token's bytes, by rank, and an open-addressing hash index
//! from bytes to rank.
//!
//! The build script (`build.rs`, which includes this file) writes the three parts of each
//! table into `OUT_DIR` once; the crate embeds them and reads them in place, so nothing is
//! built at start-up and only the pages a run looks at become resident.
//!
//! Layout, all integers little-endian `u32`:
//! - `bytes`: every token's bytes, concatenated in rank order;
//! - `offsets`: `n + 1` offsets into `bytes` (token `r` is `bytes[offsets[r]..offsets[r + 1]]`);
//! - `slots`: a power-of-two number of slots, each 0 (empty) or `rank + 1` in the low
//!   [`RANK_BITS`] bits and a tag (high bits of the key's hash) above them. A key lives at the
//!   first slot from `hash & mask` on (linear probing); the tag rejects most wrong slots
//!   without reading the token's bytes;
//! - `pairs`: 65 536 ranks, one per two-byte string (`u32::MAX` where it is no token), so the
//!   first lookups of every merge, one per adjacent byte pair, are a single read.

/// Bits of a slot that hold `rank + 1`.
pub const RANK_BITS: u32 = 18;
const RANK_MASK: u32 = (1 << RANK_BITS) - 1;

/// The hash of a token's bytes (shared by the build script and the lookup, so it must never
/// depend on anything but the bytes).
#[inline]
pub fn hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (b.len() as u64).wrapping_mul(K);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(27);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^ (h >> 32)
}

#[inline]
fn tag(h: u64) -> u32 {
    (h >> (64 - (32 - RANK_BITS))) as u32
}

#[inline]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// The slots for `tokens` (in rank order): at least twice as many as tokens.
#[allow(dead_code)] // used by the build script
pub fn build_slots(tokens: &[&[u8]]) -> Vec<u32> {
    assert!(tokens.len() < RANK_MASK as usize, "too many tokens");
    let size = (tokens.len() * 2).next_power_of_two();
    let mask = size - 1;
    let mut slots = vec![0u32; size];
    for (rank, t) in tokens.iter().enumerate() {
        let h = hash(t);
        let mut i = h as usize & mask;
        while slots[i] != 0 {
            i = (i + 1) & mask;
        }
        slots[i] = (tag(h) << RANK_BITS) | (rank as u32 + 1);
    }
    slots
}

/// The `pairs` part for `tokens` (in rank order).
#[allow(dead_code)] // used by the build script
pub fn build_pairs(tokens: &[&[u8]]) -> Vec<u32> {
    let mut pairs = vec![u32::MAX; 1 << 16];
    for (rank, t) in tokens.iter().enumerate() {
        if let [a, b] = t[..] {
            pairs[usize::from(a) << 8 | usize::from(b)] = rank as u32;
        }
    }
    pairs
}

/// A table read in place from its parts (see the module doc).
#[derive(Clone, Copy)]
pub struct Table<'a> {
    pub bytes: &'a [u8],
    pub offsets: &'a [u8],
    pub slots: &'a [u8],
    pub pairs: &'a [u8],
}

impl<'a> Table<'a> {
    /// The number of tokens.
    #[allow(dead_code)] // used by tests
    pub fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }

    /// The bytes of the token of rank `r` (which must be below [`Table::len`]).
    #[inline]
    pub fn token(&self, r: u32) -> &'a [u8] {
        let r = r as usize;
        &self.bytes[u32_at(self.offsets, r) as usize..u32_at(self.offsets, r + 1) as usize]
    }

    /// The rank of the two-byte token `a b`, or `u32::MAX` when there is none.
    #[inline]
    pub fn pair_rank(&self, a: u8, b: u8) -> u32 {
        u32_at(self.pairs, usize::from(a) << 8 | usize::from(b))
    }

    /// The rank of the token whose bytes are `b`, if there is one.
    #[inline]
    pub fn rank(&self, b: &[u8]) -> Option<u32> {
        let h = hash(b);
        let mask = self.slots.len() / 4 - 1;
        let want = tag(h);
        let mut i = h as usize & mask;
        loop {
            let s = u32_at(self.slots, i);
            if s == 0 {
                return None;
            }
            if s >> RANK_BITS == want {
                let r = (s & RANK_MASK) - 1;
                if self.token(r) == b {
                    return Some(r);
                }
            }
            i = (i + 1) & mask;
        }
    }
}
