//! HTTPS for the secured telemetry port: the certificate from `telemetry.tls`, or a self-signed
//! one made at start (as controller-runtime does when given no certificate directory), and a
//! listener whose TLS handshakes run beside the accept loop, each bounded, so a client that
//! never finishes one holds up no one.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS configuration: `cert`/`key` PEM files, or a self-signed certificate for
/// `localhost`, `127.0.0.1` and this host's name.
///
/// # Errors
/// A file that cannot be read or holds no certificate or key (named, with the fix).
pub fn server_config(files: Option<(&Path, &Path)>) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use anyhow::Context as _;
    let (chain, key) = match files {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .with_context(|| {
                    format!(
                        "telemetry.tls.certFile {}: not a readable PEM certificate chain",
                        cert.display()
                    )
                })?;
            if chain.is_empty() {
                anyhow::bail!(
                    "telemetry.tls.certFile {} holds no certificate; give a PEM file with \
                     `-----BEGIN CERTIFICATE-----` blocks",
                    cert.display()
                );
            }
            let private = PrivateKeyDer::from_pem_file(key).with_context(|| {
                format!(
                    "telemetry.tls.keyFile {}: not a readable PEM private key (PKCS#8, PKCS#1 \
                     or SEC1)",
                    key.display()
                )
            })?;
            (chain, private)
        }
        None => self_signed()?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|error| anyhow::anyhow!("the telemetry certificate and key: {error}"))?;
    Ok(Arc::new(config))
}

fn self_signed() -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if let Ok(host) = std::env::var("HOSTNAME")
        && !host.is_empty()
    {
        names.push(host);
    }
    let certified = rcgen::generate_simple_self_signed(names)
        .map_err(|error| anyhow::anyhow!("cannot make a self-signed certificate: {error}"))?;
    let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der())
        .map_err(|error| anyhow::anyhow!("the self-signed certificate's key: {error}"))?;
    Ok((vec![certified.cert.der().clone()], key))
}

/// A listener of TLS connections for `axum::serve`.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    /// Accepts on `listener`; each connection's handshake runs in its own task.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (sender, handshaken) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = sender.closed() => return, // the server stopped: release the port
                };
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::debug!(%error, "telemetry port: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, sender) = (acceptor.clone(), sender.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%error, %peer, "telemetry port: TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%peer, "telemetry port: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self {
            handshaken,
            local_addr,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(accepted) => accepted,
            None => std::future::pending().await, // the accept loop ended: nothing more comes
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}
