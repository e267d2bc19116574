//! The fidelity corpus (`fidelity/corpus.yaml`): request sequences, and the known departures of
//! the embedded server from a real one, each with its reason.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::compare::{Difference, Mode, glob};

/// The whole corpus.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Corpus {
    pub departures: Vec<Departure>,
    pub sequences: Vec<Sequence>,
}

/// A difference the suite accepts, and why. Matches a difference when the sequence, step and
/// field path match its globs (`*` for any run of characters).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Departure {
    pub id: String,
    #[serde(default = "any")]
    pub sequence: String,
    #[serde(default = "any")]
    pub step: String,
    pub fields: Vec<String>,
    pub reason: String,
}

fn any() -> String {
    "*".into()
}

/// Requests run in order in a namespace of their own (`fidelity-<name>`, `${ns}` in the steps).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequence {
    pub name: String,
    pub steps: Vec<Step>,
}

/// One request, sent to both servers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub name: String,
    #[serde(default = "get")]
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A JSON body (written as YAML in the corpus).
    pub body: Option<Value>,
    /// A body sent as written (an apply configuration in YAML).
    pub text: Option<String>,
    /// `merge`, `json`, `strategic` or `apply`: sets the PATCH content type.
    pub patch: Option<String>,
    /// Variables to read from this answer's body on each server: name → JSON pointer.
    #[serde(default)]
    pub save: BTreeMap<String, String>,
    #[serde(default)]
    pub compare: Mode,
    /// JSON pointers: compare only these parts of the body.
    #[serde(default)]
    pub select: Vec<String>,
    /// Resend (bounded) until the real server answers this code: a new CRD is served a moment
    /// after it is created.
    pub until: Option<u16>,
    /// Resend (bounded) until the answer's body (as JSON text) contains this text: an RBAC
    /// change reaches a real server's authorizer through its informers a moment after the write.
    pub until_text: Option<String>,
    /// Send as whoever this bearer token names (`${name}` substituted) instead of the admin;
    /// an empty string sends no credentials (anonymous).
    pub bearer: Option<String>,
    /// Before sending: compact both servers' history (etcd's revisions, the embedded server's
    /// watch history), so every resourceVersion before now is gone.
    #[serde(default)]
    pub compact: bool,
}

fn get() -> String {
    "GET".into()
}

impl Corpus {
    /// Reads and checks the corpus file.
    pub fn load(path: &std::path::Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!("the fidelity corpus {} cannot be read: {e}", path.display())
        });
        let corpus: Self = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "the fidelity corpus {} is not valid: {e}; fix the entry it names",
                path.display()
            )
        });
        let mut names: Vec<&str> = corpus.sequences.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(
            count,
            names.len(),
            "two sequences of {} share a name; rename one",
            path.display()
        );
        corpus
    }

    /// The departure that explains `difference` in `sequence`/`step`, if any.
    pub fn departure(
        &self,
        sequence: &str,
        step: &str,
        difference: &Difference,
    ) -> Option<&Departure> {
        self.departures.iter().find(|d| {
            glob(&d.sequence, sequence)
                && glob(&d.step, step)
                && d.fields.iter().any(|f| glob(f, &difference.path))
        })
    }
}

impl Step {
    /// The request headers, the PATCH content type included.
    pub fn request_headers(&self, vars: &BTreeMap<String, String>) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), substitute(v, vars)))
            .collect();
        let content_type = match self.patch.as_deref() {
            Some("merge") => Some("application/merge-patch+json"),
            Some("json") => Some("application/json-patch+json"),
            Some("strategic") => Some("application/strategic-merge-patch+json"),
            Some("apply") => Some("application/apply-patch+yaml"),
            Some(other) => panic!(
                "step {}: patch `{other}` is not merge, json, strategic or apply",
                self.name
            ),
            None if self.body.is_some() || self.text.is_some() => Some("application/json"),
            None => None,
        };
        if let Some(content_type) = content_type
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            headers.push(("Content-Type".into(), content_type.into()));
        }
        headers
    }

    /// The request body with the variables substituted.
    pub fn request_body(&self, vars: &BTreeMap<String, String>) -> Vec<u8> {
        if let Some(text) = &self.text {
            return substitute(text, vars).into_bytes();
        }
        self.body.as_ref().map_or_else(Vec::new, |body| {
            let mut body = body.clone();
            substitute_json(&mut body, vars);
            body.to_string().into_bytes()
        })
    }
}

/// `${name}` replaced by the variable's value.
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (name, value) in vars {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    assert!(
        !out.contains("${"),
        "`{text}` names a variable no earlier step saved; known: {:?}",
        vars.keys().collect::<Vec<_>>()
    );
    out
}

/// `${name}` substituted in every string of a JSON body; `${bytes:N}` becomes N bytes of `x`.
fn substitute_json(value: &mut Value, vars: &BTreeMap<String, String>) {
    match value {
        Value::String(text) => {
            if let Some(n) = text
                .strip_prefix("${bytes:")
                .and_then(|t| t.strip_suffix('}'))
            {
                let n: usize = n.parse().expect("${bytes:N} takes a number");
                *text = "x".repeat(n);
            } else {
                *text = substitute(text, vars);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| substitute_json(v, vars)),
        Value::Object(map) => map.values_mut().for_each(|v| substitute_json(v, vars)),
        _ => {}
    }
}
