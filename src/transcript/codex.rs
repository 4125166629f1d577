//! Codex CLI rollout JSONL (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
//!
//! Each line is `{timestamp, type, payload}`. `response_item` payloads are Responses items
//! (see [`super::openai_responses`]): messages, `function_call` / `custom_tool_call` and their
//! `*_output`s, `reasoning`. They are what the model sees, and each conversational one is a
//! typed message. Every other line (`session_meta`, `turn_context`, `event_msg`, `compacted`)
//! is never changed, except:
//! * a `reasoning` item whose produced calls/messages are all removed goes with them;
//! * an `event_msg` about a call (`exec_command_end`, `patch_apply_end`, ... with its
//!   `call_id`) is removed when the call and its output are both removed: it is the UI's copy
//!   of a call that no longer exists. Events about kept or trimmed calls stay as they were.
//!
//! The exec header (`Chunk ID:`, `Wall time:`, `Process exited with code N`, `Original token
//! count:`, `Output:`) is part of the result text; the lossless policy already ignores its
//! volatile lines when comparing outputs.

use std::collections::HashMap;

use super::openai_responses::Builder;
use super::{
    jsonl, Companion, Container, ContainerKind, Format, Layout, ParseError, Slot, Transcript,
};

pub fn parse(src: &str) -> Result<Transcript<'_>, ParseError> {
    let mut layout = Layout::default();
    let lines = layout.add(Container {
        kind: ContainerKind::Lines,
        open: 0,
        close: 0,
        children: Vec::new(),
        member_of: None,
    });
    let mut b = Builder::default();
    let mut events: Vec<(Slot, String)> = Vec::new();
    let warnings = jsonl::for_each(src, |rec| {
        let index = layout.containers[lines].children.len();
        layout.containers[lines].children.push(rec.span);
        let slot = Slot {
            container: lines,
            index,
        };
        let n = &rec.node;
        let ty = n.get("type").and_then(|t| t.as_str(src));
        let Some(payload) = n.get("payload").filter(|p| p.members().is_some()) else {
            return Ok(());
        };
        match ty.as_deref() {
            Some("response_item") => b.push(
                src,
                payload,
                format!("line {}: payload", rec.line),
                slot,
                &mut layout,
            )?,
            Some("event_msg") => {
                if let Some(id) = payload.get("call_id").and_then(|v| v.as_str(src)) {
                    events.push((slot, id.into_owned()));
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    let (messages, mut companions) = b.finish();
    let mut holders: HashMap<&str, Vec<usize>> = HashMap::new();
    for (mi, m) in messages.iter().enumerate() {
        for id in m
            .calls
            .iter()
            .map(|c| c.id.as_str())
            .chain(m.results.iter().map(|r| r.id.as_str()))
        {
            holders.entry(id).or_default().push(mi);
        }
    }
    for (slot, id) in events {
        if let Some(ms) = holders.get(id.as_str()) {
            companions.push(Companion {
                slot,
                messages: ms.clone(),
            });
        }
    }
    layout.companions = companions;
    Ok(Transcript {
        src,
        format: Format::Codex,
        messages,
        layout,
        warnings,
    })
}
