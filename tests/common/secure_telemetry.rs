//! A client of a host's secured telemetry port (HTTPS with its self-signed certificate, bearer
//! tokens): curl, as a scraper configured with `insecure_skip_verify` would ask.

/// GET `path` on `https://<address>` with `token` (none: no Authorization header): the status
/// and the body; `None` when nothing answers.
pub async fn https_get(address: &str, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    let mut command = std::process::Command::new("curl");
    command.args(["-sk", "--max-time", "10", "-w", "\n%{http_code}"]);
    if let Some(token) = token {
        command
            .arg("-H")
            .arg(format!("Authorization: Bearer {token}"));
    }
    command.arg(format!("https://{address}{path}"));
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let (body, code) = text.rsplit_once('\n')?;
    let code: u16 = code.trim().parse().ok()?;
    (code != 0).then(|| (code, body.to_owned()))
}
