//! The report's token counts from the real binary: exact for both encodings on text that
//! takes every path of the counter (the hand-written ASCII pre-tokenizer, the regex one for
//! other scripts, the heap merge for long runs), checked against tiktoken-rs.

use crate::support::{at, json_file, lcc_run, tmp};

/// A one-message transcript's `tokens_before` (its only piece is the message text).
fn tokens_before(text: &str, model: &str) -> (u64, serde_json::Value) {
    let dir = tmp();
    let input = at(dir.path(), "in.json");
    let report = at(dir.path(), "report.json");
    let src = serde_json::json!({ "messages": [{ "role": "user", "content": text }] });
    std::fs::write(&input, src.to_string()).unwrap();
    let args = [
        "compact",
        &input,
        "--format",
        "openai-chat",
        "--provider",
        "rules",
        "--model",
        model,
        "-q",
        "fix it",
        "-r",
        &report,
        "--quiet",
    ];
    lcc_run(&args).expect(0);
    let r = json_file(&report);
    (r["tokens_before"].as_u64().unwrap(), r)
}

fn text() -> String {
    let mut t = String::from("fn main() {\n    println!(\"it's fine\");\n}\r\n");
    t += "Привет'S мир, ΑΘΗΝΑ λόγος; 東京の天気 😀👍🏽 e\u{301}n\u{303}o שלום مرحبا ١٢٣\n";
    t += &" ".repeat(3_000);
    t += "x";
    t += &"=-".repeat(1_500);
    t += &"1234567890".repeat(100);
    t += "\n\n  \t";
    t
}

#[test]
fn report_counts_are_tiktoken_counts_for_both_encodings() {
    let t = text();
    let o200k = tiktoken_rs::o200k_base().unwrap().encode_ordinary(&t).len() as u64;
    let cl100k = tiktoken_rs::cl100k_base()
        .unwrap()
        .encode_ordinary(&t)
        .len() as u64;
    assert_ne!(o200k, cl100k, "the encodings should differ on this text");

    let (n, r) = tokens_before(&t, "gpt-4.1");
    assert_eq!(n, o200k);
    assert_eq!(r["tokenizer"], "o200k_base");
    assert_eq!(r["token_count_method"], "exact");

    let (n, r) = tokens_before(&t, "gpt-4");
    assert_eq!(n, cl100k);
    assert_eq!(r["tokenizer"], "cl100k_base");

    let (n, r) = tokens_before(&t, "some-other-model");
    assert_eq!(n, o200k);
    assert_eq!(r["token_count_method"], "approximate");
}
