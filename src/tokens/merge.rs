//! Byte-pair merging, counting only.
//!
//! A piece starts as one part per byte. While some two adjacent parts concatenate to a token,
//! the pair whose token has the lowest rank is merged (the leftmost such pair when the same
//! token occurs at several places); the piece's token count is the number of parts left. A
//! piece that is itself a token counts 1 without merging.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::table::Table;

/// Pieces up to this many bytes are merged by rescanning a small array (cheap, and quadratic
/// only in a bounded length); longer ones through a heap over a linked list of parts.
const SCAN_MAX: usize = 128;

const NONE: u32 = u32::MAX;

/// The number of tokens `piece` encodes to.
pub fn count(t: &Table, piece: &[u8]) -> usize {
    match piece.len() {
        0 => 0,
        1 => 1,
        _ if t.rank(piece).is_some() => 1,
        n if n <= SCAN_MAX => count_scan(t, piece),
        _ => count_heap(t, piece),
    }
}

fn rank_or_none(t: &Table, b: &[u8]) -> u32 {
    t.rank(b).unwrap_or(NONE)
}

/// Parts kept in order in arrays; each step finds the lowest-ranked pair by a scan.
fn count_scan(t: &Table, b: &[u8]) -> usize {
    let n = b.len();
    // Part `i` is `b[start[i]..start[i + 1]]`; `rank[i]` is the rank of parts `i` and `i + 1`
    // together (or NONE). `m` parts; `start[m] == n`.
    let mut start = [0u32; SCAN_MAX + 1];
    let mut rank = [NONE; SCAN_MAX];
    for (i, s) in start.iter_mut().enumerate().take(n + 1) {
        *s = i as u32;
    }
    for (i, r) in rank.iter_mut().enumerate().take(n - 1) {
        *r = t.pair_rank(b[i], b[i + 1]);
    }
    let mut m = n;
    let span = |start: &[u32], i: usize, j: usize| &b[start[i] as usize..start[j] as usize];
    loop {
        let mut best = NONE;
        let mut at = 0;
        for (i, &r) in rank[..m - 1].iter().enumerate() {
            if r < best {
                best = r;
                at = i;
            }
        }
        if best == NONE {
            return m;
        }
        // Merge parts `at` and `at + 1`: drop the boundary between them.
        start.copy_within(at + 2..=m, at + 1);
        if at + 3 <= m {
            rank.copy_within(at + 2..m - 1, at + 1);
        }
        m -= 1;
        if at + 1 < m {
            rank[at] = rank_or_none(t, span(&start, at, at + 2));
        }
        if at > 0 {
            rank[at - 1] = rank_or_none(t, span(&start, at - 1, at + 1));
        }
    }
}

/// Parts as a doubly linked list over byte positions, candidate merges in a min-heap keyed by
/// (rank, start). A heap entry is stale once its part has gone or its pair's rank changed;
/// stale entries are skipped when popped.
fn count_heap(t: &Table, b: &[u8]) -> usize {
    let n = b.len();
    // For a part starting at byte `i`: `next[i]` is where the next part starts (n at the end),
    // `prev[i]` where the previous one starts (NONE for the first), `rank[i]` the rank of the
    // pair it starts (NONE if none), `alive[i]` whether a part starts at `i`.
    let mut next: Vec<u32> = (1..=n as u32).collect();
    let mut prev: Vec<u32> = (0..n as u32).map(|i| i.wrapping_sub(1)).collect(); // 0 → NONE
    let mut alive = vec![true; n];
    let mut rank = vec![NONE; n];
    let mut heap = BinaryHeap::with_capacity(n);
    for i in 0..n - 1 {
        let r = t.pair_rank(b[i], b[i + 1]);
        rank[i] = r;
        if r != NONE {
            heap.push(Reverse((r, i as u32)));
        }
    }
    let mut parts = n;
    // The rank of the pair starting at part `i`, whose second part starts at `j`.
    let pair_at = |next: &[u32], i: usize, j: usize| -> u32 {
        if j >= n {
            return NONE;
        }
        rank_or_none(t, &b[i..next[j] as usize])
    };
    while let Some(Reverse((r, i))) = heap.pop() {
        let i = i as usize;
        if !alive[i] || rank[i] != r {
            continue;
        }
        let j = next[i] as usize;
        alive[j] = false;
        let after = next[j];
        next[i] = after;
        if (after as usize) < n {
            prev[after as usize] = i as u32;
        }
        parts -= 1;
        rank[i] = pair_at(&next, i, after as usize);
        if rank[i] != NONE {
            heap.push(Reverse((rank[i], i as u32)));
        }
        let p = prev[i];
        if p != NONE {
            let p = p as usize;
            rank[p] = pair_at(&next, p, i);
            if rank[p] != NONE {
                heap.push(Reverse((rank[p], p as u32)));
            }
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both merge strategies agree on pieces long enough to stress them.
    #[test]
    fn scan_and_heap_agree() {
        let t = crate::tokens::table_of(crate::tokens::Encoding::O200k);
        let mut seed: u64 = 3;
        let alphabet = b"  ==--aaAb1\n\t.,/xyz";
        for len in 2..=SCAN_MAX {
            for _ in 0..20 {
                let piece: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        alphabet[(seed >> 33) as usize % alphabet.len()]
                    })
                    .collect();
                assert_eq!(
                    count_scan(&t, &piece),
                    count_heap(&t, &piece),
                    "{:?}",
                    String::from_utf8_lossy(&piece)
                );
            }
        }
    }
}
