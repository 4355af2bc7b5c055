//! Errors of the Kubernetes layer, classified (transient, not found, conflict, invalid) so the
//! plugin that talks to the API can decide its CNI codes.

use super::retry::ErrorClass;
use std::path::PathBuf;
use std::time::Duration;

/// The client's error as a person reads it: the server's own message and reason for an API
/// answer (the client's Display adds a Rust dump of the whole Status).
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!(
            "the API server answered {} {}: {}",
            status.code, status.reason, status.message
        ),
        other => other.to_string(),
    }
}

/// A refused certificate as a person reads it (rustls words some only by their variant name).
fn certificate_problem(why: &rustls::CertificateError) -> String {
    use rustls::CertificateError as E;
    match why {
        E::UnknownIssuer => "it is not signed by a CA the kubeconfig trusts".into(),
        E::NotValidForName => "it does not cover the server's name".into(),
        E::Expired => "it has expired".into(),
        E::NotValidYet => "it is not valid yet".into(),
        // Cluster CAs often share a name (kubeadm's are all "kubernetes"): another cluster's
        // certificate then names the trusted CA as its issuer, and only its signature fails.
        E::BadSignature => {
            "it is not signed by the CA the kubeconfig trusts (its issuer has that CA's name but \
             another key: another cluster's CA)"
                .into()
        }
        E::Revoked => "it has been revoked".into(),
        E::BadEncoding => "it does not parse".into(),
        other => other.to_string(),
    }
}

/// What went wrong talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig file cannot be read or used.
    #[error("cannot use kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The client could not be built (TLS, proxy settings).
    #[error("cannot build a Kubernetes client from {path}: {source}")]
    Client {
        /// The kubeconfig it came from.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the Kubernetes client runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A call failed (after retries when the failure was transient).
    #[error("{what}: {}", describe(source))]
    Api {
        /// What was being done, to which object.
        what: String,
        /// How the failure was classified.
        class: ErrorClass,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The TLS handshake refused the server's certificate (code 7: the kubeconfig's trust is
    /// wrong, and stays wrong until the kubeconfig is rewritten).
    #[error(
        "{what}: the API server's certificate was refused: {}; the kubeconfig {kubeconfig} must \
         name the cluster's CA (certificate-authority or certificate-authority-data) and a server \
         its certificate covers (server, tls-server-name)",
        certificate_problem(why)
    )]
    Untrusted {
        /// What was being done.
        what: String,
        /// The kubeconfig the client was built from.
        kubeconfig: String,
        /// What the certificate check found.
        why: rustls::CertificateError,
    },
    /// The API server answered 401 (code 7: the credentials stay refused until the kubeconfig is
    /// rewritten).
    #[error(
        "{what}: the API server refused the credentials (401 Unauthorized): the token of the \
         kubeconfig {kubeconfig} is not valid for this cluster (expired, revoked, or another \
         cluster's); the installer rewrites it from the service account"
    )]
    Unauthenticated {
        /// What was being done.
        what: String,
        /// The kubeconfig the client was built from.
        kubeconfig: String,
    },
    /// A call did not answer in time (after retries).
    #[error("{what}: no answer within {:.1} s ({attempts} attempts)", .timeout.as_secs_f64())]
    Timeout {
        /// What was being done.
        what: String,
        /// The per-call timeout.
        timeout: Duration,
        /// How many attempts were made.
        attempts: u32,
    },
    /// An object the API returned does not have the expected shape.
    #[error("{what}: unexpected object: {why}")]
    Shape {
        /// What was read.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// The attachment's conflist does not publish the attachment (code 7).
    #[error("chain completeness check: NetworkAttachmentDefinition {namespace}/{name}: {source}")]
    ChainIncomplete {
        /// NAD namespace.
        namespace: String,
        /// NAD name.
        name: String,
        /// What is missing.
        #[source]
        source: ChainError,
    },
    /// No Node matched a local address.
    #[error("node name auto-detection: {0}")]
    NodeNotDetected(String),
    /// The API server's host name did not resolve (code 11: DNS may come back).
    #[error("cannot resolve the API server {host} (getent ahosts): {why}")]
    Resolve {
        /// The host name of the kubeconfig's server.
        host: String,
        /// What getent said, or why it could not run.
        why: String,
    },
}

impl KubeError {
    /// The classification of an API failure (`None` for other errors).
    pub fn class(&self) -> Option<ErrorClass> {
        match self {
            Self::Api { class, .. } => Some(*class),
            Self::Timeout { .. } => Some(ErrorClass::Transient),
            Self::Untrusted { .. } => Some(ErrorClass::Untrusted),
            Self::Unauthenticated { .. } => Some(ErrorClass::Unauthenticated),
            _ => None,
        }
    }

    /// Whether the failure may pass: a transient API class, a timeout, or a server name that
    /// did not resolve (DNS may come back).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Resolve { .. }) || self.class() == Some(ErrorClass::Transient)
    }

    /// Whether the API server refused the object as invalid (HTTP 422).
    pub fn is_invalid(&self) -> bool {
        self.status_code() == Some(422)
    }

    /// Whether the object does not exist (HTTP 404).
    pub fn is_not_found(&self) -> bool {
        self.class() == Some(ErrorClass::NotFound)
    }

    /// Whether the failure is a 409 (stale resourceVersion or an existing name).
    pub fn is_conflict(&self) -> bool {
        self.class() == Some(ErrorClass::Conflict)
    }

    /// Whether the kubeconfig's trust or credentials were refused (a certificate the CA does not
    /// sign or that does not cover the server's name, or a 401): a configuration problem that no
    /// retry within this process can fix.
    pub fn is_refused(&self) -> bool {
        matches!(self, Self::Untrusted { .. } | Self::Unauthenticated { .. })
    }

    /// The HTTP status of an API error response, if there was one.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            Self::Unauthenticated { .. } => Some(401),
            _ => None,
        }
    }
}

/// Why a NAD's configuration does not make a complete chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// `spec.config` is absent or empty.
    #[error("it has no spec.config")]
    NoConfig,
    /// `spec.config` is not JSON.
    #[error("spec.config is not valid JSON: {0}")]
    NotJson(String),
    /// No `galactic-bgp` entry follows the master.
    #[error(
        "its conflist has no \"galactic-bgp\" entry after the master plugin; the attachment would \
         succeed with no route to its VPC (add galactic-bgp to the end of the plugins list)"
    )]
    MissingBgp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_answer_reads_as_the_servers_message_without_a_status_dump() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 422, "reason": "Invalid",
            "message": "BGPAdvertisement.network.datumapis.com \"1-1\" is invalid: spec: Invalid value: \"object\": at least one of prefixes, redistribute, or originateFrom must be specified"
        }))
        .unwrap();
        let err = KubeError::Api {
            what: "create BGPAdvertisement galactic-system/1-1".into(),
            class: ErrorClass::Permanent,
            source: kube::Error::Api(Box::new(status)),
        };
        let text = err.to_string();
        assert_eq!(
            text,
            "create BGPAdvertisement galactic-system/1-1: the API server answered 422 Invalid: \
             BGPAdvertisement.network.datumapis.com \"1-1\" is invalid: spec: Invalid value: \
             \"object\": at least one of prefixes, redistribute, or originateFrom must be specified"
        );
        assert!(
            !text.contains("Status {") && !text.contains("Some("),
            "{text}"
        );
    }
}
