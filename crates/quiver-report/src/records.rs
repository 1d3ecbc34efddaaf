//! The records of `quiver bench report`: one JSON object per line of a result file, recognised
//! by its fields (see the crate documentation for the kinds).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The `bench` field of a `bench net` sample (`quiver_bench::net::sample::SAMPLE_BENCH`; this
/// crate reads result files, not the load generator's types).
pub const SAMPLE_BENCH: &str = "net-sample";

/// What kind of result a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sim,
    Local,
    Net,
    /// A sample of a sampled `bench net` run (`"bench": "net-sample"`: a soak's).
    Sample,
    /// Has `keys_per_sec` but is none of the above (a figure script's own row).
    Other,
}

/// One line of a result file.
#[derive(Clone, Debug)]
pub struct Record {
    pub kind: Kind,
    fields: Map<String, Value>,
    tags: BTreeMap<String, String>,
}

impl Record {
    /// Reads a record from a JSON object; `None` if it is of no known kind.
    pub fn from_object(fields: Map<String, Value>) -> Option<Record> {
        let text = |k: &str| fields.get(k).and_then(Value::as_str);
        let kind = if text("sim") == Some("vector-width") {
            Kind::Sim
        } else if text("bench") == Some("local") {
            Kind::Local
        } else if text("bench") == Some(SAMPLE_BENCH) {
            Kind::Sample
        } else if !fields.contains_key("keys_per_sec") {
            return None;
        } else if fields.contains_key("system") || fields.contains_key("mode") {
            Kind::Net
        } else {
            Kind::Other
        };
        let tags = match fields.get("tags") {
            Some(Value::Object(t)) => t
                .iter()
                .filter_map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => return None,
                    };
                    Some((k.clone(), v))
                })
                .collect(),
            _ => BTreeMap::new(),
        };
        Some(Record { kind, fields, tags })
    }

    pub fn num(&self, field: &str) -> Option<f64> {
        self.fields
            .get(field)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
    }

    /// Every field of the record, as read.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    pub fn text(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(Value::as_str)
    }

    pub fn tag(&self, name: &str) -> Option<&str> {
        self.tags.get(name).map(String::as_str)
    }

    /// A tag read as a number (`"8"` -> 8).
    pub fn tag_num(&self, name: &str) -> Option<f64> {
        self.tag(name)?.trim().parse().ok()
    }

    /// `tags.figure`: which figure script made the record.
    pub fn figure(&self) -> Option<&str> {
        self.tag("figure")
    }
}

/// Reads every record of `path`. Unknown kinds of object are counted in `ignored`.
pub fn read_records(path: &Path, ignored: &mut usize) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let parse_error = |reason: String| Error::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(fields)) => match Record::from_object(fields) {
                Some(r) => out.push(r),
                None => *ignored += 1,
            },
            Ok(_) => return Err(parse_error("not a JSON object".into())),
            Err(e) => return Err(parse_error(format!("not JSON: {e}"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: Value) -> Record {
        let Value::Object(m) = v else { panic!() };
        Record::from_object(m).expect("a known kind")
    }

    #[test]
    fn kinds_and_tags() {
        assert_eq!(rec(json!({"sim": "vector-width"})).kind, Kind::Sim);
        assert_eq!(
            rec(json!({"bench": "local", "keys_per_sec": 1.0})).kind,
            Kind::Local
        );
        let r = rec(json!({"system": "quiver", "keys_per_sec": 1.0,
                           "tags": {"G": 8, "pattern": "direct", "x": null}}));
        assert_eq!(r.kind, Kind::Net);
        assert_eq!(r.tag("G"), Some("8"));
        assert_eq!(r.tag_num("G"), Some(8.0));
        assert_eq!(r.tag("x"), None);
        assert_eq!(rec(json!({"keys_per_sec": 1.0})).kind, Kind::Other);
        assert_eq!(
            rec(json!({"bench": "net-sample", "t_s": 0.0})).kind,
            Kind::Sample
        );
        let Value::Object(m) = json!({"hello": 1}) else {
            panic!()
        };
        assert!(Record::from_object(m).is_none());
    }
}
