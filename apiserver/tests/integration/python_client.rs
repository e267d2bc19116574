//! Compatibility with the official Kubernetes Python client: list, watch with resourceVersion,
//! replace with a stale resourceVersion (409), and server-side apply.

use std::path::PathBuf;
use std::process::Command;

use crate::common::server;

/// The venv's python with the `kubernetes` package, or a failure telling how to install it.
fn python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [root.join(".venv/bin/python"), PathBuf::from("python3")];
    for python in candidates {
        let ok = Command::new(&python)
            .args(["-c", "import kubernetes"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return python;
        }
    }
    panic!(
        "no python with the `kubernetes` package found (.venv/bin/python or python3 on PATH): \
         run scripts/install-test-deps.sh"
    );
}

#[tokio::test]
async fn official_python_client_lists_watches_replaces_and_applies() {
    let s = server().await;
    let dir =
        std::env::temp_dir().join(format!("embedded-apiserver-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    s.write_kubeconfig(&kubeconfig).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_compat.py");
    let mut cmd = Command::new(python());
    cmd.arg(script).arg(&kubeconfig);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::task::spawn_blocking(move || cmd.output()),
    )
    .await
    .expect("the python checks finish within 60 s")
    .unwrap()
    .expect("python runs");
    std::fs::remove_dir_all(&dir).ok();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python checks failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("python client: all checks passed"),
        "{stdout}"
    );
}
