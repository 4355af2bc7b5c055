//! The fixture's TLS, as a cluster's: a cluster CA made for each server and a server certificate
//! it signs for the loopback names, so clients verify the server exactly as they verify a real
//! API server (the CA from the kubeconfig, the certificate's names against the URL's host or
//! `tls-server-name`). Keys are ECDSA P-256: generating one costs well under a millisecond, where
//! an RSA key would add tens of milliseconds to every server's start.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::Arc;

/// The names the server certificate covers: every way a client on this machine reaches a
/// loopback server (IPv4, IPv6, the host name).
pub const SERVER_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// Why the fixture's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A key or certificate could not be generated.
    #[error("cannot generate the fixture's certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the server's configuration.
    #[error("cannot configure the fixture's TLS server: {0}")]
    Config(#[from] rustls::Error),
}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> Self {
        std::io::Error::other(e)
    }
}

/// A cluster certificate authority: the certificate a kubeconfig trusts, and the key that signs
/// the server's certificate.
pub struct ClusterCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl ClusterCa {
    /// A new CA (its own P-256 key, self-signed).
    pub fn generate() -> Result<Self, TlsError> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "galactic-fixture-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { issuer })
    }

    /// The CA certificate, PEM (what `certificate-authority` points at).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A rustls server configuration presenting a certificate this CA signed for
    /// [`SERVER_NAMES`].
    pub(super) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let names: Vec<String> = SERVER_NAMES.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "galactic-fixture-apiserver");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let certificate = params.signed_by(&key, &self.issuer)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        // The provider is named rather than taken from the process default: a test binary that
        // links another rustls provider must not change what the fixture serves.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![certificate.der().clone()], key_der)?;
        // As kube-apiserver: HTTP/2 for a client that offers it, HTTP/1.1 for one that does not.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}
