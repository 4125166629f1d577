//! Rebuild through every adapter with synthetic decisions (drop, trim, dedupe), on the
//! fixtures in `fixtures/formats/`: the output reads back in its own format, the decided
//! pairs are gone or changed and nothing else is, no orphan is created, and each format's
//! structure stays valid (Claude Code's record chain, Chat's `tool_calls`, reasoning items).

use std::collections::{HashMap, HashSet};

use crate::decide::{self, Action, Decision};
use crate::json;
use crate::rebuild;

use super::{parse, Format, Pair, Transcript};

const CLAUDE: &str = include_str!("../../fixtures/formats/claude-code.jsonl");
const ANTHROPIC: &str = include_str!("../../fixtures/formats/anthropic.json");
const CHAT: &str = include_str!("../../fixtures/formats/openai-chat.json");
const RESPONSES: &str = include_str!("../../fixtures/formats/openai-responses.json");
const CODEX: &str = include_str!("../../fixtures/formats/codex.jsonl");

fn fixtures() -> [(Format, &'static str, &'static str); 5] {
    [
        (Format::ClaudeCode, CLAUDE, "toolu_01"),
        (Format::Anthropic, ANTHROPIC, "toolu_01"),
        (Format::OpenAiChat, CHAT, "call_"),
        (Format::OpenAiResponses, RESPONSES, "call_"),
        (Format::Codex, CODEX, "call_"),
    ]
}

fn pair(t: &Transcript, id: &str) -> Pair {
    t.pairs()
        .unwrap()
        .into_iter()
        .find(|p| t.call(p.call).id == id)
        .unwrap_or_else(|| panic!("no pair {id}"))
}

fn decision(p: Pair, action: Action) -> Decision {
    Decision {
        call: p.call,
        result: Some(p.result),
        action,
        keep_call: None,
        keep_result: None,
        source: "rules",
        reason: "test".into(),
    }
}

/// Every call id with its result id present (or not), and every result's call.
fn pairing(t: &Transcript) -> (HashSet<String>, HashSet<String>) {
    let calls: HashSet<String> = t
        .messages
        .iter()
        .flat_map(|m| m.calls.iter().map(|c| c.id.clone()))
        .collect();
    let results: HashSet<String> = t
        .messages
        .iter()
        .flat_map(|m| m.results.iter().map(|r| r.id.clone()))
        .collect();
    (calls, results)
}

fn message_span<'s>(t: &Transcript, src: &'s str, mi: usize) -> &'s str {
    let s = t.messages[mi].slot;
    let (a, b) = t.layout.containers[s.container].children[s.index];
    &src[a..b]
}

struct Outcome {
    before: Transcript<'static>,
    after: Transcript<'static>,
    text: String,
}

/// Drop R1, B1 and E1; trim R2 to 20 chars; dedupe nothing else.
fn run(format: Format, src: &'static str, prefix: &str) -> Outcome {
    let t = parse(src, None).unwrap();
    assert_eq!(t.format, format);
    let id = |s: &str| format!("{prefix}{s}");
    let r2 = pair(&t, &id("R2"));
    let trimmed = decide::trimmed(&t.result_text(r2.result), "Read", 20).unwrap();
    let decisions = vec![
        decision(pair(&t, &id("R1")), Action::Drop),
        decision(pair(&t, &id("B1")), Action::Drop),
        decision(r2, Action::Trim(trimmed.clone())),
        decision(pair(&t, &id("E1")), Action::Drop),
    ];
    let out = rebuild::apply(&t, src, &decisions);
    let text: &'static str = out.text(src).leak();
    let after = parse(text, Some(format))
        .unwrap_or_else(|e| panic!("{}: output does not parse: {e}", format.name()));
    assert!(after.warnings.is_empty(), "{:?}", after.warnings);

    // The decided pairs are gone (both sides), the trimmed one has its new text.
    let (calls, results) = pairing(&after);
    for gone in ["R1", "B1", "E1"] {
        assert!(
            !calls.contains(&id(gone)),
            "{}: call {gone} left",
            format.name()
        );
        assert!(
            !results.contains(&id(gone)),
            "{}: result {gone} left",
            format.name()
        );
    }
    let r2_after = pair(&after, &id("R2"));
    assert_eq!(after.result_text(r2_after.result), trimmed);
    // No orphan: every surviving call still has its result and the reverse.
    let (calls_before, results_before) = pairing(&t);
    for c in &calls {
        assert_eq!(results.contains(c), results_before.contains(c), "{c}");
    }
    for r in &results {
        assert_eq!(calls.contains(r), calls_before.contains(r), "{r}");
    }
    // Messages that held none of the decided blocks are byte-identical, in order.
    let touched: HashSet<usize> = decisions
        .iter()
        .flat_map(|d| [d.call.message, d.result.unwrap().message])
        .collect();
    let removed: HashSet<usize> = out.removed_messages.iter().copied().collect();
    let kept: Vec<usize> = (0..t.messages.len())
        .filter(|i| !removed.contains(i))
        .collect();
    assert_eq!(kept.len(), after.messages.len());
    for (ai, &bi) in kept.iter().enumerate() {
        assert_eq!(t.messages[bi].text, after.messages[ai].text);
        if !touched.contains(&bi) {
            // Claude Code re-points a record whose parent was removed: nothing else changes.
            let unlinked = |s: &str| -> String {
                match (format, s.find("\"parentUuid\":")) {
                    (Format::ClaudeCode, Some(i)) => {
                        let end = s[i..].find(',').map_or(s.len(), |j| i + j);
                        format!("{}{}", &s[..i], &s[end..])
                    }
                    _ => s.to_string(),
                }
            };
            assert_eq!(
                unlinked(message_span(&t, src, bi)),
                unlinked(message_span(&after, text, ai)),
                "{}: message {bi} changed",
                format.name()
            );
        }
    }
    Outcome {
        before: t,
        after,
        text: text.to_string(),
    }
}

/// serde_json refuses lone surrogates: read a copy without the fixtures' one.
fn value(text: &str) -> serde_json::Value {
    serde_json::from_str(&text.replace("\\ud83d", "")).unwrap()
}

fn records(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(value).collect()
}

#[test]
fn every_format_rebuilds_synthetic_decisions() {
    for (format, src, prefix) in fixtures() {
        run(format, src, prefix);
    }
}

#[test]
fn claude_code_chain_stays_valid() {
    let o = run(Format::ClaudeCode, CLAUDE, "toolu_01");
    let recs = records(&o.text);
    let uuids: HashSet<&str> = recs
        .iter()
        .filter_map(|r| r.get("uuid").and_then(|u| u.as_str()))
        .collect();
    for r in &recs {
        if let Some(p) = r.get("parentUuid").and_then(|p| p.as_str()) {
            assert!(uuids.contains(p), "dangling parentUuid {p}");
        }
        if let Some(p) = r.get("sourceToolAssistantUUID").and_then(|p| p.as_str()) {
            assert!(uuids.contains(p), "dangling sourceToolAssistantUUID {p}");
        }
    }
    // One chain from the first message to the last record: walking parents from the leaf
    // reaches every message record.
    let by_uuid: HashMap<&str, &serde_json::Value> = recs
        .iter()
        .filter_map(|r| r.get("uuid").and_then(|u| u.as_str()).map(|u| (u, r)))
        .collect();
    let mut seen = 0;
    let mut cur = recs.last().unwrap();
    loop {
        if matches!(cur["type"].as_str(), Some("user" | "assistant")) {
            seen += 1;
        }
        match cur.get("parentUuid").and_then(|p| p.as_str()) {
            Some(p) => cur = by_uuid[p],
            None => break,
        }
    }
    assert_eq!(seen, o.after.messages.len());
    // The trimmed result's record lost its UI copy; the kept ones did not.
    for r in &recs {
        let Some(content) = r["message"]["content"].as_array() else {
            continue;
        };
        for b in content {
            if b["type"] == "tool_result" {
                let id = b["tool_use_id"].as_str().unwrap();
                assert_eq!(
                    r.get("toolUseResult").is_none(),
                    id == "toolu_01R2",
                    "toolUseResult of {id}"
                );
            }
        }
    }
    // The trimmed array result kept its block structure: one text block.
    let r2 = recs
        .iter()
        .find(|r| r["message"]["content"][0]["tool_use_id"] == "toolu_01R2")
        .unwrap();
    let blocks = r2["message"]["content"][0]["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["type"], "text");
    // The thinking record of B1's turn stays (it is not B1's record); the text of R1's turn
    // stays.
    assert!(o.text.contains("Run the failing test to see the panic."));
    assert!(o.text.contains("I'll start by reading the parser."));
    // Untouched odd bytes survive.
    assert!(o.text.contains("\\ud83d") && o.text.contains("5.70E1") && o.text.contains("4.25e4"));
    // R1, B1 and E1: each its tool_use record and its tool_result record.
    assert_eq!(o.before.messages.len() - 6, o.after.messages.len());
}

#[test]
fn anthropic_message_goes_with_its_thinking() {
    let o = run(Format::Anthropic, ANTHROPIC, "toolu_01");
    // [thinking, tool_use B1] is removed whole; [text, tool_use R1] keeps its text.
    assert!(!o.text.contains("Run the failing test to see the panic."));
    assert!(o.text.contains("I'll start by reading the parser."));
    let v: serde_json::Value = value(&o.text);
    let msgs = v["messages"].as_array().unwrap();
    // user/assistant alternation is kept by removing both sides of each dropped pair.
    assert_eq!(msgs.len(), o.before.messages.len() - 4);
    assert!(o.text.contains("\"temperature\": 1.0e0") && o.text.contains("\\ud83d"));
}

#[test]
fn chat_tool_calls_key_goes_when_emptied() {
    let o = run(Format::OpenAiChat, CHAT, "call_");
    let v: serde_json::Value = value(&o.text);
    let msgs = v["messages"].as_array().unwrap();
    let r1_turn = msgs
        .iter()
        .find(|m| m["content"] == "I'll start by reading the parser.")
        .unwrap();
    assert!(r1_turn.get("tool_calls").is_none(), "{r1_turn}");
    // B1's assistant message had no content: it is removed with its tool message; R1's and
    // E1's keep their text.
    assert_eq!(msgs.len(), o.before.messages.len() - 4);
    for m in msgs {
        if m["role"] == "assistant" {
            assert!(
                m.get("tool_calls").is_none() || !m["tool_calls"].as_array().unwrap().is_empty()
            );
        }
    }
}

fn reasoning_left(items: &[serde_json::Value]) -> Vec<String> {
    items
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .map(|i| i["encrypted_content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn responses_reasoning_goes_with_the_calls_it_produced() {
    let o = run(Format::OpenAiResponses, RESPONSES, "call_");
    let v: serde_json::Value = value(&o.text);
    let left = reasoning_left(v["input"].as_array().unwrap());
    // rs 02 produced only B1 (dropped): gone. rs 01 and 04 also produced a message: kept.
    assert!(!left.iter().any(|r| r.contains("02")), "{left:?}");
    assert_eq!(left.len(), 6, "{left:?}");
    assert!(o.text.contains("\"max_output_tokens\": 1.6e4"));
}

#[test]
fn codex_events_and_reasoning_follow_their_calls() {
    let o = run(Format::Codex, CODEX, "call_");
    let recs = records(&o.text);
    let payloads: Vec<serde_json::Value> = recs
        .iter()
        .filter(|r| r["type"] == "response_item")
        .map(|r| r["payload"].clone())
        .collect();
    let left = reasoning_left(&payloads);
    assert!(!left.iter().any(|r| r.contains("02")), "{left:?}");
    assert_eq!(left.len(), 6);
    let event_calls: Vec<&str> = recs
        .iter()
        .filter(|r| r["type"] == "event_msg")
        .filter_map(|r| r["payload"]["call_id"].as_str())
        .collect();
    for gone in ["call_R1", "call_B1", "call_E1"] {
        assert!(!event_calls.contains(&gone), "{gone} event left");
    }
    assert!(event_calls.contains(&"call_R2"));
    // Every other line is byte-identical: the lines of the output are a subsequence of the
    // input's lines, apart from R2's output line.
    let before: Vec<&str> = CODEX.lines().collect();
    let mut i = 0;
    for line in o.text.lines() {
        if line.contains("\"call_id\":\"call_R2\",\"output\"") {
            i = before
                .iter()
                .position(|l| l.contains("\"call_id\":\"call_R2\",\"output\""))
                .unwrap()
                + 1;
            continue;
        }
        while before[i] != line {
            i += 1;
        }
        i += 1;
    }
    assert!(o.text.contains("2.8e1"));
}

#[test]
fn blocks_without_a_text_block_become_one() {
    let src = r#"[{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [ ]}]},
 {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "x", "input": {}}]},
 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]}]"#;
    let t = parse(src, None).unwrap();
    assert_eq!(t.format, Format::Anthropic);
    let d = |id: &str| decision(pair(&t, id), Action::Trim(format!("new {id}")));
    let out = rebuild::apply(&t, src, &[d("t1"), d("t2")]).text(src);
    let after = parse(&out, None).unwrap();
    assert_eq!(after.result_text(pair(&after, "t1").result), "new t1");
    assert_eq!(after.result_text(pair(&after, "t2").result), "new t2");
    assert!(out.contains(r#""content": [{"type":"text","text":"new t2"}]"#));
    // The image placeholder made the original text differ from a text-only result.
    assert!(t.result_text(pair(&t, "t2").result).contains("image/png"));
    let _ = json::parse(&out).unwrap();
}

#[test]
fn twin_in_lcc_shape_has_the_same_typed_view() {
    for (format, src, _) in fixtures() {
        let t = parse(src, None).unwrap();
        let twin = super::lcc::write(&t);
        let tt = parse(&twin, None).unwrap();
        assert_eq!(tt.format, Format::Lcc);
        assert_eq!(t.messages.len(), tt.messages.len(), "{}", format.name());
        for (a, b) in t.messages.iter().zip(&tt.messages) {
            assert_eq!(a.text, b.text);
            let calls = |m: &super::Message| -> Vec<(String, String, serde_json::Value)> {
                m.calls
                    .iter()
                    .map(|c| (c.id.clone(), c.tool.clone(), c.input.clone()))
                    .collect()
            };
            let results = |t: &Transcript, m: &super::Message| -> Vec<(String, String, bool)> {
                m.results
                    .iter()
                    .map(|r| (r.id.clone(), t.text(r).into_owned(), r.is_error))
                    .collect()
            };
            assert_eq!(calls(a), calls(b));
            assert_eq!(results(&t, a), results(&tt, b));
        }
    }
}

/// The same session written in each format reads into the same calls and results (Codex's
/// tools and outputs are its own, so it is compared on ids only).
#[test]
fn formats_agree_on_the_session() {
    let view = |src: &str, prefix: &str| -> Vec<(String, String, String)> {
        let t = parse(src, None).unwrap();
        t.pairs()
            .unwrap()
            .iter()
            .map(|p| {
                let id = t.call(p.call).id.trim_start_matches(prefix).to_string();
                (
                    id,
                    t.result_text(p.result).into_owned(),
                    t.call(p.call).tool.clone(),
                )
            })
            .collect()
    };
    let claude = view(CLAUDE, "toolu_01");
    assert_eq!(claude, view(ANTHROPIC, "toolu_01"));
    let texts = |v: &[(String, String, String)]| -> Vec<(String, String)> {
        v.iter().map(|(i, t, _)| (i.clone(), t.clone())).collect()
    };
    let chat = view(CHAT, "call_");
    let responses = view(RESPONSES, "call_");
    // Same ids and outputs except the edit, whose tool reports differently.
    let no_edit = |v: Vec<(String, String)>| -> Vec<(String, String)> {
        v.into_iter().filter(|(i, _)| i != "E1").collect()
    };
    assert_eq!(no_edit(texts(&claude)), no_edit(texts(&chat)));
    assert_eq!(no_edit(texts(&claude)), no_edit(texts(&responses)));
    let ids =
        |v: &[(String, String, String)]| -> Vec<String> { v.iter().map(|x| x.0.clone()).collect() };
    assert_eq!(ids(&claude), ids(&view(CODEX, "call_")));
    // is_error is carried where the format has it.
    let t = parse(CLAUDE, None).unwrap();
    assert!(t.result(pair(&t, "toolu_01B1").result).is_error);
    let t = parse(ANTHROPIC, None).unwrap();
    assert!(t.result(pair(&t, "toolu_01B1").result).is_error);
    // Inputs: JSON-string arguments are read as the JSON they hold.
    let t = parse(CHAT, None).unwrap();
    assert_eq!(
        t.call(pair(&t, "call_B1").call).input,
        serde_json::json!({"command": "cargo test parser"})
    );
    let t = parse(CODEX, None).unwrap();
    assert_eq!(
        t.call(pair(&t, "call_B1").call).input["cmd"],
        "cargo test parser"
    );
    assert!(t
        .call(pair(&t, "call_E1").call)
        .input
        .as_str()
        .unwrap()
        .starts_with("*** Begin Patch"));
}

#[test]
fn claude_code_links_follow_removed_records() {
    // u1 <- a1 (tool_use t1) <- p1 (progress under a1) <- r1 (tool_result t1)
    //    <- s1 (summary, leaf r1) ; b1 (boundary, logical parent r1) <- u2 (text + result t2)
    // a2 (tool_use t2, parent u1) ; t2's result sits in u2 next to a text block.
    let src = concat!(
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"go"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#,
        "\n",
        r#"{"type":"progress","uuid":"p1","parentUuid":"a1","data":{"type":"bash_progress"}}"#,
        "\n",
        r#"{"type":"user","uuid":"r1","parentUuid":"p1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a\nb"}]},"toolUseResult":{"stdout":"a\nb"},"sourceToolAssistantUUID":"a1"}"#,
        "\n",
        r#"{"type":"summary","summary":"listing","leafUuid":"r1"}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a2","parentUuid":"r1","message":{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"pwd"}}]}}"#,
        "\n",
        r#"{"type":"system","subtype":"compact_boundary","uuid":"b1","parentUuid":null,"logicalParentUuid":"r1"}"#,
        "\n",
        r#"{"type":"user","uuid":"u2","parentUuid":"b1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"/repo"},{"type":"text","text":"and then?"}]},"toolUseResult":{"stdout":"/repo"},"sourceToolAssistantUUID":"a2"}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a3","parentUuid":"u2","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}"#,
        "\n",
    );
    let t = parse(src, None).unwrap();
    assert_eq!(t.format, Format::ClaudeCode);
    let decisions = [
        decision(pair(&t, "t1"), Action::Drop),
        decision(pair(&t, "t2"), Action::Drop),
    ];
    let out = rebuild::apply(&t, src, &decisions).text(src);
    let recs = records(&out);
    let by_uuid: HashMap<&str, &serde_json::Value> = recs
        .iter()
        .filter_map(|r| r.get("uuid").and_then(|u| u.as_str()).map(|u| (u, r)))
        .collect();
    // a1, r1 and a2 are gone; u2 stays for its text.
    assert!(
        !by_uuid.contains_key("a1") && !by_uuid.contains_key("r1") && !by_uuid.contains_key("a2")
    );
    assert_eq!(by_uuid["p1"]["parentUuid"], "u1");
    // r1's parent p1 survives: links to r1 now name p1.
    assert_eq!(recs[2]["leafUuid"], "p1", "summary: {}", recs[2]);
    assert_eq!(by_uuid["b1"]["logicalParentUuid"], "p1");
    assert_eq!(by_uuid["b1"]["parentUuid"], serde_json::Value::Null);
    let u2 = by_uuid["u2"];
    assert_eq!(u2["message"]["content"].as_array().unwrap().len(), 1);
    assert!(u2.get("toolUseResult").is_none(), "{u2}");
    assert!(u2.get("sourceToolAssistantUUID").is_none(), "{u2}");
    assert_eq!(u2["parentUuid"], "b1");
    assert_eq!(recs.len(), 6);
    let after = parse(&out, None).unwrap();
    assert!(after.pairs().unwrap().is_empty());
    assert_eq!(after.messages.len(), 3);
}

/// A long lcc transcript is built in parallel chunks: every slot must still point at its own
/// bytes, and of several bad messages the first one is reported.
#[test]
fn parallel_build_keeps_slots_and_the_first_error() {
    let n = 1500; // three chunks and a bit
    let msgs: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"role":"assistant","text":"m{i}","toolUses":[{{"id":"c{i}","tool":"Bash","input":{{"command":"echo {i}"}}}}],"toolResults":[{{"tool_use_id":"c{i}","text":"out {i}\nline"}}]}}"#
            )
        })
        .collect();
    let src = format!("[{}]", msgs.join(",\n"));
    let t = parse(&src, Some(Format::Lcc)).unwrap();
    assert_eq!(t.messages.len(), n);
    for (i, m) in t.messages.iter().enumerate() {
        assert_eq!(m.path, format!("[{i}]"));
        let (a, b) = t.layout.containers[m.slot.container].children[m.slot.index];
        assert!(
            src[a..b].contains(&format!(r#""text":"m{i}""#)),
            "message {i}"
        );
        let c = &m.calls[0];
        let (a, b) = t.layout.containers[c.slot.container].children[c.slot.index];
        assert_eq!(
            json::parse(&src[a..b]).unwrap().to_value(&src[a..b])["id"],
            format!("c{i}")
        );
        let r = &m.results[0];
        let (a, b) = t.layout.containers[r.slot.container].children[r.slot.index];
        assert!(src[a..b].contains(&format!(r#""tool_use_id":"c{i}""#)));
        assert_eq!(t.text(r), format!("out {i}\nline"));
        // The block arrays are members of their own message's object.
        let member = t.layout.containers[c.slot.container].member_of.unwrap();
        assert_eq!(
            t.layout.containers[member.container].open,
            t.layout.containers[m.slot.container].children[m.slot.index].0
        );
    }
    let mut bad = msgs.clone();
    bad[1300] = "7".into();
    bad[700] = r#"{"role":"user","toolUses":5}"#.into();
    let err = parse(&format!("[{}]", bad.join(",")), Some(Format::Lcc)).unwrap_err();
    assert_eq!(err.path, "[700].toolUses", "{err:?}");
}
