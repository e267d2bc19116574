//! The control plane's audit log: kube-apiserver records, at `Metadata` level, every request
//! in the namespaces [`AUDITED`] names (and nothing else, so the suite's other tests do not pay
//! for it), as JSON lines the tenancy tests read to see who made each request and as whom.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ControlPlane;

/// The namespaces whose requests are audited.
pub const AUDITED: [&str; 2] = ["audited-a", "audited-b"];

const POLICY: &str = "audit-policy.yaml";
const LOG: &str = "audit.log";

/// kube-apiserver's audit flags for a control plane in `dir` (writing the policy there).
pub(super) fn flags(dir: &Path) -> Vec<String> {
    let namespaces = AUDITED
        .map(|namespace| format!("\"{namespace}\""))
        .join(", ");
    let policy = format!(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: Metadata\n  namespaces: [{namespaces}]\n- level: None\n"
    );
    std::fs::write(dir.join(POLICY), policy).expect("the audit policy is written");
    vec![
        format!("--audit-policy-file={}", dir.join(POLICY).display()),
        format!("--audit-log-path={}", dir.join(LOG).display()),
        "--audit-log-format=json".to_owned(),
        "--audit-log-mode=blocking".to_owned(),
    ]
}

impl ControlPlane {
    /// The audit log's path.
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join(LOG)
    }

    /// Every audit event written so far (the `ResponseComplete` and `Panic` stages).
    pub fn audit_events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.audit_log()).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .collect()
    }
}
