//! Reading a judge's response: `{"model", "answers": {qid: {"type": "noul", "noul": p}},
//! "usage": {"input_tokens": n}}`, shared by Jev and laya.
//!
//! The body is read in one pass straight into what the judge needs: the resolved model,
//! `usage.input_tokens`, and per question id an [`Answer`] (a `noul` probability, or not a
//! usable answer). Nothing else is kept, and ids are borrowed from the body when they hold no
//! escapes. It reads exactly as a `serde_json::Value` would: the same syntax errors (every
//! member is parsed, numbers included, whether used or not), the last of duplicate members
//! wins, and an answer is usable only when it is an object whose `type`, if present, is the
//! string `noul` and whose `noul` is a number.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::fasthash::FastMap;

/// One question's answer, as read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    /// `{"noul": p}` (with `"type": "noul"` or no type); `p` not yet range-checked.
    Noul(f64),
    /// Anything else.
    Unusable,
}

impl Answer {
    /// The answer a JSON value gives (what [`Response`]'s one-pass reader must agree with).
    #[cfg(test)]
    pub fn of(v: &serde_json::Value) -> Answer {
        v.as_object()
            .filter(|o| o.get("type").is_none_or(|t| t == "noul"))
            .and_then(|o| o.get("noul"))
            .filter(|n| n.is_number())
            .and_then(serde_json::Value::as_f64)
            .map_or(Answer::Unusable, Answer::Noul)
    }
}

#[derive(Debug)]
pub struct Response<'a> {
    pub model: Option<String>,
    pub answers: FastMap<Cow<'a, str>, Answer>,
    pub input_tokens: Option<usize>,
}

impl Response<'_> {
    /// The answer to question `qid`, if the response has one.
    pub fn answer(&self, qid: &str) -> Option<Answer> {
        self.answers.get(qid).copied()
    }
}

/// Read a response body; `Err` says what is wrong with it.
pub fn parse_response(body: &[u8]) -> Result<Response<'_>, String> {
    let parsed = serde_json::from_slice::<Top<'_>>(body).map_err(|e| {
        if body.iter().all(u8::is_ascii_whitespace) {
            "the response body is empty".to_string()
        } else {
            format!("the response is not JSON ({e})")
        }
    })?;
    let Top::Object {
        answers,
        model,
        resolved_model,
        input_tokens,
    } = parsed
    else {
        return Err("the response is not a JSON object".into());
    };
    let answers = match answers {
        Some(Some(m)) => m,
        Some(None) => return Err("its 'answers' member is not an object".into()),
        None => return Err("it has no 'answers' member".into()),
    };
    // The first of the two that is a string, if not empty.
    let model = [model, resolved_model]
        .into_iter()
        .find_map(|m| match m {
            Some(Any::Str(s)) => Some(s),
            _ => None,
        })
        .filter(|m| !m.is_empty())
        .map(Cow::into_owned);
    Ok(Response {
        model,
        answers,
        input_tokens: input_tokens.and_then(|n| usize::try_from(n).ok()),
    })
}

/// Scalar visits that all give `$v` (each value is still parsed in full by the reader).
macro_rules! scalars {
    ($v:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($v)
        }
    };
}

/// The top level of a response.
enum Top<'a> {
    Object {
        /// `Some(None)`: present but not an object.
        answers: Option<Option<FastMap<Cow<'a, str>, Answer>>>,
        model: Option<Any<'a>>,
        resolved_model: Option<Any<'a>>,
        /// `usage.input_tokens` when it is an unsigned integer.
        input_tokens: Option<u64>,
    },
    NotObject,
}

impl<'de> de::Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Top<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
                let (mut answers, mut model, mut resolved_model, mut input_tokens) =
                    (None, None, None, None);
                while let Some(key) = map.next_key_seed(Key)? {
                    match &*key {
                        "answers" => answers = Some(map.next_value_seed(Answers)?),
                        "model" => model = Some(map.next_value_seed(AnySeed)?),
                        "resolved_model" => resolved_model = Some(map.next_value_seed(AnySeed)?),
                        "usage" => input_tokens = map.next_value_seed(Usage)?,
                        _ => {
                            map.next_value_seed(AnySeed)?;
                        }
                    }
                }
                Ok(Top::Object {
                    answers,
                    model,
                    resolved_model,
                    input_tokens,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top<'de>, A::Error> {
                drain(seq)?;
                Ok(Top::NotObject)
            }
            scalars!(Top::NotObject);
        }
        d.deserialize_any(V)
    }
}

/// Read every element of an array, keeping nothing.
fn drain<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element_seed(AnySeed)?.is_some() {}
    Ok(())
}

/// An object key, borrowed when it holds no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(s))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s))
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON value, parsed in full, of which only a string or a number is kept.
enum Any<'a> {
    Str(Cow<'a, str>),
    U64(u64),
    I64(i64),
    F64(f64),
    Other,
}

impl Any<'_> {
    /// `Value::as_f64` of a number.
    fn number(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        match *self {
            Any::U64(n) => Some(n as f64),
            Any::I64(n) => Some(n as f64),
            Any::F64(n) => Some(n),
            _ => None,
        }
    }
}

struct AnySeed;

impl<'de> DeserializeSeed<'de> for AnySeed {
    type Value = Any<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Any<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Any::Other)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Any::I64(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Any::U64(n))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Any::F64(n))
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Any::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Any::Str(Cow::Owned(s.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Any::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                drain(seq)?;
                Ok(Any::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_key_seed(Key)?.is_some() {
                    map.next_value_seed(AnySeed)?;
                }
                Ok(Any::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// `answers`: each member read as an [`Answer`]; `None` when it is not an object.
struct Answers;

impl<'de> DeserializeSeed<'de> for Answers {
    type Value = Option<FastMap<Cow<'de, str>, Answer>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<FastMap<Cow<'de, str>, Answer>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = FastMap::default();
                out.reserve(map.size_hint().unwrap_or(0));
                while let Some(key) = map.next_key_seed(Key)? {
                    let answer = map.next_value_seed(AnswerSeed)?;
                    out.insert(key, answer);
                }
                Ok(Some(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                drain(seq)?;
                Ok(None)
            }
            scalars!(None);
        }
        d.deserialize_any(V)
    }
}

/// One answer: usable when an object whose last `type` (if any) is `"noul"` and whose last
/// `noul` is a number.
struct AnswerSeed;

impl<'de> DeserializeSeed<'de> for AnswerSeed {
    type Value = Answer;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Answer;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answer, A::Error> {
                let mut type_ok = true;
                let mut noul = None;
                while let Some(key) = map.next_key_seed(Key)? {
                    let v = map.next_value_seed(AnySeed)?;
                    match &*key {
                        "type" => type_ok = matches!(&v, Any::Str(s) if s == "noul"),
                        "noul" => noul = v.number(),
                        _ => {}
                    }
                }
                Ok(match noul {
                    Some(p) if type_ok => Answer::Noul(p),
                    _ => Answer::Unusable,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Answer, A::Error> {
                drain(seq)?;
                Ok(Answer::Unusable)
            }
            scalars!(Answer::Unusable);
        }
        d.deserialize_any(V)
    }
}

/// `usage`: its last `input_tokens` when that is an unsigned integer.
struct Usage;

impl<'de> DeserializeSeed<'de> for Usage {
    type Value = Option<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<u64>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u64>, A::Error> {
                let mut n = None;
                while let Some(key) = map.next_key_seed(Key)? {
                    let v = map.next_value_seed(AnySeed)?;
                    if key == "input_tokens" {
                        n = match v {
                            Any::U64(n) => Some(n),
                            _ => None,
                        };
                    }
                }
                Ok(n)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<u64>, A::Error> {
                drain(seq)?;
                Ok(None)
            }
            scalars!(None);
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The one-pass reader agrees with reading a `Value` on every answer shape, on duplicate
    /// members, and on the model and usage members.
    #[test]
    fn reads_as_a_value_would() {
        let answers = [
            r#"{"type": "noul", "noul": 0.25}"#,
            r#"{"noul": 1}"#,
            r#"{"noul": 0}"#,
            r#"{"noul": -3}"#,
            r#"{"noul": 1.7}"#,
            r#"{"noul": true}"#,
            r#"{"noul": "0.9"}"#,
            r#"{"noul": null}"#,
            r#"{"noul": [0.5]}"#,
            r#"{"type": "choice", "noul": 0.5}"#,
            r#"{"type": null, "noul": 0.5}"#,
            r#"{"type": "noul", "noul": 0.5, "type": "x"}"#,
            r#"{"type": "x", "type": "noul", "noul": 0.5}"#,
            r#"{"noul": 0.1, "noul": "no"}"#,
            r#"{"noul": "no", "noul": 0.75, "extra": {"a": [1, {"b": null}]}}"#,
            r#"{"type": "no\u0075l", "noul": 0.5}"#,
            r#"{"no\u0075l": 0.5}"#,
            r#"{}"#,
            r#"0.9"#,
            r#"[0.9]"#,
            r#""noul""#,
            r#"null"#,
            r#"18446744073709551615"#,
        ];
        for a in answers {
            let v: Value = serde_json::from_str(a).unwrap();
            let body = format!(r#"{{"answers": {{"q": {a}, "k\"2": {a}}}}}"#);
            let r = parse_response(body.as_bytes()).unwrap();
            assert_eq!(r.answer("q"), Some(Answer::of(&v)), "{a}");
            assert_eq!(r.answer("k\"2"), Some(Answer::of(&v)), "{a}");
            assert_eq!(r.answer("x"), None);
        }
        let r = parse_response(
            br#"{"answers": {"q": {"noul": 0.5}, "q": 3}, "model": 7, "resolved_model": "r", "usage": {"input_tokens": 5, "input_tokens": 12}}"#,
        )
        .unwrap();
        assert_eq!(r.answer("q"), Some(Answer::Unusable));
        assert_eq!(r.model.as_deref(), Some("r"));
        assert_eq!(r.input_tokens, Some(12));
        // An empty model is no model, even with a resolved_model.
        let r = parse_response(br#"{"answers": {}, "model": "", "resolved_model": "r"}"#);
        assert_eq!(r.unwrap().model, None);
        for usage in [
            r#"{"input_tokens": -1}"#,
            r#"{"input_tokens": 1.5}"#,
            "[1]",
            "3",
        ] {
            let body = format!(r#"{{"answers": {{}}, "usage": {usage}}}"#);
            assert_eq!(parse_response(body.as_bytes()).unwrap().input_tokens, None);
        }
        // The last `answers` member is the one read.
        let e = parse_response(br#"{"answers": {}, "answers": [1]}"#).unwrap_err();
        assert_eq!(e, "its 'answers' member is not an object");
    }

    /// Malformed bodies fail with the message a `Value` read gives, numbers out of range in
    /// unused members included.
    #[test]
    fn errors_are_a_value_read_s() {
        let bodies: [&[u8]; 9] = [
            b"",
            b"  \n",
            b"<html>",
            br#"{"answers": {}, "x": 1e400}"#,
            br#"{"answers": {"q": {"noul": 0.5, "y": [1e999]}}}"#,
            br#"{"answers": {}} trailing"#,
            br#"{"answers": {"q": }}"#,
            b"[1, 2",
            br#"{"answers": {}, "usage": {"input_tokens": 1}"#,
        ];
        for body in bodies {
            let want = match serde_json::from_slice::<Value>(body) {
                Err(e) if body.iter().all(u8::is_ascii_whitespace) => {
                    let _ = e;
                    "the response body is empty".to_string()
                }
                Err(e) => format!("the response is not JSON ({e})"),
                Ok(v) => panic!("{v} parsed"),
            };
            assert_eq!(parse_response(body).unwrap_err(), want);
        }
        assert_eq!(
            parse_response(b"[1]").unwrap_err(),
            "the response is not a JSON object"
        );
        assert_eq!(
            parse_response(b"\"x\"").unwrap_err(),
            "the response is not a JSON object"
        );
        assert_eq!(
            parse_response(br#"{"model": "m"}"#).unwrap_err(),
            "it has no 'answers' member"
        );
    }
}
