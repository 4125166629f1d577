//! Claude Code session JSONL (`~/.claude/projects/<dir>/<session>.jsonl`).
//!
//! One record per line (pretty-printed records spanning lines are read too). Records of type
//! `user` and `assistant` carry an Anthropic API message under `message`; their
//! `message.content` is read like Anthropic content (`text`, `tool_use`, `tool_result`,
//! `thinking`, ...). Every other record (`system`, `summary`, `attachment`, `progress`,
//! `file-history-snapshot`, compact boundaries, ...) is not a message: it is never changed,
//! except that its links are re-pointed when a record it names is removed.
//!
//! # One typed message per record
//! Claude Code streams one assistant turn as several records that share `message.id` (one
//! content block each), chained by `parentUuid`. Each record is its own typed message. This
//! keeps rebuild exact and simple: a record is removed only when this pass removed every call
//! and result it held and it holds nothing else (non-blank text, an image, ...); the other
//! records of the same turn stay as they were. Pairing is by id across records, so it does not
//! care how a turn is split; pinning counts records (the newest `--preserve-recent` records
//! are pinned), which pins a little less conversation than one message per turn would, never
//! a call without its result (a pair is pinned when either side is).
//!
//! # Keeping the session valid
//! * A removed record's children (`parentUuid`), and any `logicalParentUuid` / `leafUuid`
//!   naming it, are re-pointed to its nearest surviving ancestor (or `null`).
//! * A record whose result the model now sees changed (trimmed, deduped, replaced) or lost
//!   (dropped while the record stays for other content) loses its `toolUseResult`: that field
//!   is the UI's copy of the tool output, not sent to the model, and it must not contradict
//!   what the model sees. A `sourceToolAssistantUUID` naming a removed record goes too.
//! * Untouched records are byte-identical; a torn last line is left as it was (a warning).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::decide::{Action, Decision};
use crate::json::{self, Edit, Node};

use super::blocks::anthropic_content;
use super::{
    jsonl, Container, ContainerId, ContainerKind, Format, Layout, Message, ParseError, Slot,
    Transcript,
};

/// Per record (index = the record's child index in the lines container): its id, its links,
/// and the members rebuild may have to delete.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    pub records: Vec<ChainRecord>,
}

#[derive(Debug, Clone, Default)]
pub struct ChainRecord {
    pub uuid: Option<String>,
    /// `parentUuid` (None when null or absent).
    pub parent: Option<String>,
    /// `parentUuid`, `logicalParentUuid` and `leafUuid` values that name a record.
    pub links: Vec<Link>,
    /// The record object, registered when it has members rebuild may delete.
    pub object: Option<ContainerId>,
    /// Member index of `toolUseResult`.
    pub tool_use_result: Option<usize>,
    /// Member index of `sourceToolAssistantUUID`, and the record it names.
    pub source_tool_assistant: Option<(usize, String)>,
}

/// A string value naming another record.
#[derive(Debug, Clone)]
pub struct Link {
    pub start: usize,
    pub end: usize,
    pub target: String,
}

const LINK_KEYS: [&str; 3] = ["parentUuid", "logicalParentUuid", "leafUuid"];

pub fn parse(src: &str) -> Result<Transcript<'_>, ParseError> {
    let mut layout = Layout::default();
    let lines = layout.add(Container {
        kind: ContainerKind::Lines,
        open: 0,
        close: 0,
        children: Vec::new(),
        member_of: None,
    });
    let mut messages = Vec::new();
    let mut chain = Chain::default();
    let warnings = jsonl::for_each(src, |rec| {
        let index = layout.containers[lines].children.len();
        layout.containers[lines].children.push(rec.span);
        let slot = Slot {
            container: lines,
            index,
        };
        let (cr, msg) = record(src, &rec.node, rec.line, slot, &mut layout)?;
        chain.records.push(cr);
        if let Some(m) = msg {
            messages.push(m);
        }
        Ok(())
    })?;
    layout.chain = Some(chain);
    Ok(Transcript {
        src,
        format: Format::ClaudeCode,
        messages,
        layout,
        warnings,
    })
}

fn str_of(src: &str, n: Option<&Node>) -> Option<String> {
    n.and_then(|v| v.as_str(src))
        .map(std::borrow::Cow::into_owned)
}

fn record(
    src: &str,
    node: &Node,
    line: usize,
    slot: Slot,
    layout: &mut Layout,
) -> Result<(ChainRecord, Option<Message>), ParseError> {
    let mut cr = ChainRecord::default();
    if node.members().is_none() {
        return Ok((cr, None));
    }
    cr.uuid = str_of(src, node.get("uuid"));
    for key in LINK_KEYS {
        if let Some(v) = node.get(key) {
            if let Some(target) = v.as_str(src) {
                if key == "parentUuid" {
                    cr.parent = Some(target.to_string());
                }
                cr.links.push(Link {
                    start: v.start,
                    end: v.end,
                    target: target.into_owned(),
                });
            }
        }
    }
    let ty = str_of(src, node.get("type"));
    let Some(msg) = node.get("message").filter(|m| m.members().is_some()) else {
        return Ok((cr, None));
    };
    let Some(ty) = ty.filter(|t| t == "user" || t == "assistant") else {
        return Ok((cr, None));
    };
    let role = str_of(src, msg.get("role"))
        .filter(|r| !r.is_empty())
        .unwrap_or(ty);
    let path = format!("line {line}");
    let content = anthropic_content(
        src,
        msg.get("content"),
        &format!("{path}: message.content"),
        layout,
    )?;
    let tur = node.member_index("toolUseResult");
    let sta = node.member_index("sourceToolAssistantUUID").and_then(|i| {
        let v = &node.members().unwrap_or_default()[i].value;
        v.as_str(src).map(|s| (i, s.into_owned()))
    });
    if (tur.is_some() && !content.results.is_empty()) || sta.is_some() {
        cr.object = Some(layout.add_node(node, None));
        cr.tool_use_result = tur.filter(|_| !content.results.is_empty());
        cr.source_tool_assistant = sta;
    }
    let m = Message {
        role,
        has_other_content: content.has_other_content(),
        text: content.text,
        calls: content.calls,
        results: content.results,
        slot,
        path,
    };
    Ok((cr, Some(m)))
}

/// Re-point links past removed records; drop `toolUseResult` where the model's result changed
/// and `sourceToolAssistantUUID` where it names a removed record.
pub fn extra_edits(
    t: &Transcript,
    chain: &Chain,
    removed_messages: &[usize],
    decisions: &[Decision],
) -> Vec<Edit> {
    let removed: HashSet<usize> = removed_messages
        .iter()
        .map(|&mi| t.messages[mi].slot.index)
        .collect();
    // Removed record id -> its parent id.
    let mut gone: HashMap<&str, Option<&str>> = HashMap::new();
    for &r in &removed {
        if let Some(u) = chain.records.get(r).and_then(|c| c.uuid.as_deref()) {
            gone.insert(u, chain.records[r].parent.as_deref());
        }
    }
    let resolve = |target: &str| -> Option<String> {
        let mut cur = target;
        for _ in 0..=gone.len() {
            match gone.get(cur) {
                None => return Some(cur.to_string()),
                Some(None) => return None,
                Some(Some(p)) => cur = p,
            }
        }
        None // a cycle among removed records: detach
    };

    let mut edits = Vec::new();
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    if !gone.is_empty() {
        for (ri, rec) in chain.records.iter().enumerate() {
            if removed.contains(&ri) {
                continue;
            }
            for l in &rec.links {
                if gone.contains_key(l.target.as_str()) {
                    edits.push(Edit {
                        start: l.start,
                        end: l.end,
                        text: resolve(&l.target)
                            .map_or_else(|| "null".into(), |u| json::quote(&u, false)),
                    });
                }
            }
            if let Some((m, target)) = &rec.source_tool_assistant {
                if gone.contains_key(target.as_str()) {
                    members.entry(ri).or_default().push(*m);
                }
            }
        }
    }
    for d in decisions {
        if d.action == Action::Keep {
            continue;
        }
        let Some(r) = d.result else { continue };
        let ri = t.messages[r.message].slot.index;
        if removed.contains(&ri) {
            continue;
        }
        if let Some(m) = chain.records.get(ri).and_then(|c| c.tool_use_result) {
            members.entry(ri).or_default().push(m);
        }
    }
    for (ri, mut list) in members {
        let Some(obj) = chain.records[ri].object else {
            continue;
        };
        list.sort_unstable();
        list.dedup();
        let c = &t.layout.containers[obj];
        edits.extend(json::delete_children(&c.children, &list, c.open, c.close));
    }
    edits
}
