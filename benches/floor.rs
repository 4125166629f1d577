//! The floor under `lcc compact`: how long reading a transcript and writing it back takes
//! with nothing decided. Run: `cargo bench --bench floor -- FILE` (no test harness).

use std::time::Instant;

fn main() {
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "bench-out/t50000.json".into());
    let src = std::fs::read_to_string(&path).expect("read the transcript");
    let mb = src.len() as f64 / 1e6;
    let time = |label: &str, f: &dyn Fn() -> usize| {
        let mut best = f64::MAX;
        let mut out = 0;
        for _ in 0..3 {
            let t = Instant::now();
            out = f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{label:<48} {:>8.0} ms  ({:.0} MB/s, {out} bytes out)",
            best * 1e3,
            mb / best
        );
    };
    time("serde_json: parse to Value + serialize", &|| {
        let v: serde_json::Value = serde_json::from_str(&src).expect("valid JSON");
        serde_json::to_string(&v).expect("serialize").len()
    });
    time("lcc: parse typed transcript + splice (no edits)", &|| {
        let t = lcc::transcript::parse(&src, None).expect("transcript");
        let r = lcc::rebuild::apply(&t, &src, &[]);
        r.text(&src).len()
    });
    time("lcc: syntax check only", &|| {
        lcc::json::parse_shallow(&src, 0, src.len(), 0).map_or(0, |_| src.len())
    });
}
