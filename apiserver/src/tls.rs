//! The serving certificate: a CA generated at start and a leaf for `localhost`/`127.0.0.1`
//! signed by it, as a rustls server configuration.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::StartError;

/// The generated certificates.
#[derive(Clone)]
pub(crate) struct Certs {
    /// PEM of the CA certificate clients should trust.
    pub ca_pem: String,
    /// The rustls server configuration serving the leaf.
    pub server_config: Arc<rustls::ServerConfig>,
}

/// Generates a CA and a serving certificate for the loopback names.
pub(crate) fn generate() -> Result<Certs, StartError> {
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(StartError::Certificate)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "embedded-apiserver CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(StartError::Certificate)?;
    let ca =
        rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).map_err(StartError::Certificate)?;

    let mut leaf_params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default.svc".to_string(),
    ])
    .map_err(StartError::Certificate)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "embedded-apiserver");
    let leaf_key = KeyPair::generate().map_err(StartError::Certificate)?;
    let leaf = leaf_params
        .signed_by(&leaf_key, &ca)
        .map_err(StartError::Certificate)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server_config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(StartError::Tls)?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone(), CertificateDer::from(ca.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .map_err(StartError::Tls)?;
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Certs {
        ca_pem: ca.pem(),
        server_config: Arc::new(server_config),
    })
}
