//! The standalone `embedded-apiserver serve` binary: writes a kubeconfig and says how to use it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test]
async fn serve_writes_a_kubeconfig_and_prints_the_export_line() {
    let dir = std::env::temp_dir().join(format!("embedded-apiserver-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_embedded-apiserver"))
        .args(["serve", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().unwrap();
    let export = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .find(|l| l.trim_start().starts_with("export KUBECONFIG="))
        }),
    )
    .await
    .expect("the export line within 20 s")
    .unwrap();
    let export = export.expect("an export KUBECONFIG= line");
    let path = export.trim().trim_start_matches("export KUBECONFIG=");
    let config = kube::config::Kubeconfig::read_from(path).expect("a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let version = client
        .apiserver_version()
        .await
        .expect("the server answers over HTTPS");
    assert_eq!(version.major, "1");
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_dir_all(&dir).ok();
}
