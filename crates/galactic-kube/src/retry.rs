//! Classification of client errors, and the retry policy for transient ones.

use std::time::Duration;

/// How a failed call should be treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Worth retrying: 5xx, 429, timeouts, refused or dropped connections.
    Transient,
    /// 409: a stale resourceVersion or an existing name; the caller re-reads and re-applies.
    Conflict,
    /// 404.
    NotFound,
    /// The TLS handshake refused the server's certificate (not signed by the kubeconfig's CA,
    /// not valid for the server's name, expired): the same kubeconfig is refused again, so it
    /// fails at once.
    Untrusted,
    /// 401: the server refused the kubeconfig's credentials; fails at once.
    Unauthenticated,
    /// Anything else (validation, authorisation, malformed responses): fail at once.
    Permanent,
}

/// Classifies a client error.
pub fn classify(err: &kube::Error) -> ErrorClass {
    match err {
        kube::Error::Api(status) => classify_status(status.code, &status.reason),
        _ if refused_certificate(err).is_some() => ErrorClass::Untrusted,
        // Transport failures: the request may or may not have reached the server. Callers
        // treat a retried create that meets 409 as "re-read", so retrying is safe.
        kube::Error::HyperError(_) | kube::Error::Service(_) => ErrorClass::Transient,
        _ => ErrorClass::Permanent,
    }
}

/// The certificate error of a TLS handshake that refused the server, anywhere in `err`'s chain
/// of causes. The TLS stream reports it inside `io::Error`s (two, nested), whose `source()` skips
/// the error each wraps, so the walk descends into an `io::Error`'s payload instead.
pub fn refused_certificate(err: &kube::Error) -> Option<&rustls::CertificateError> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidCertificate(why)) = e.downcast_ref() {
            return Some(why);
        }
        next = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

fn classify_status(code: u16, reason: &str) -> ErrorClass {
    match code {
        401 => ErrorClass::Unauthenticated,
        404 => ErrorClass::NotFound,
        409 => ErrorClass::Conflict,
        429 | 500 | 502 | 503 | 504 => ErrorClass::Transient,
        _ if matches!(reason, "ServerTimeout" | "Timeout" | "TooManyRequests") => {
            ErrorClass::Transient
        }
        _ => ErrorClass::Permanent,
    }
}

/// How often, and how patiently, a transient failure is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first one included (at least 1).
    pub attempts: u32,
    /// Wait before the second attempt; doubled before each later one.
    pub base_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, waiting 100, 200 and 400 ms in between.
    fn default() -> Self {
        Self {
            attempts: 4,
            base_backoff: Duration::from_millis(100),
        }
    }
}

impl RetryPolicy {
    /// A single attempt (probes such as STATUS must answer quickly).
    pub fn once() -> Self {
        Self {
            attempts: 1,
            base_backoff: Duration::ZERO,
        }
    }

    /// The wait before attempt `n` (1-based; `n >= 2`).
    pub fn backoff(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(2).min(16);
        self.base_backoff.saturating_mul(1 << doublings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            Status {
                code,
                reason: reason.into(),
                ..Status::failure("x", reason)
            }
            .boxed(),
        )
    }

    #[test]
    fn statuses_are_classified_like_the_api_conventions_say() {
        for (code, reason, class) in [
            (500, "InternalError", ErrorClass::Transient),
            (503, "ServiceUnavailable", ErrorClass::Transient),
            (429, "TooManyRequests", ErrorClass::Transient),
            (504, "Timeout", ErrorClass::Transient),
            (409, "Conflict", ErrorClass::Conflict),
            (409, "AlreadyExists", ErrorClass::Conflict),
            (404, "NotFound", ErrorClass::NotFound),
            (401, "Unauthorized", ErrorClass::Unauthenticated),
            (422, "Invalid", ErrorClass::Permanent),
            (403, "Forbidden", ErrorClass::Permanent),
            (400, "BadRequest", ErrorClass::Permanent),
        ] {
            assert_eq!(classify(&api(code, reason)), class, "{code} {reason}");
        }
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            classify(&kube::Error::Service(Box::new(io))),
            ErrorClass::Transient
        );
    }

    #[test]
    fn backoff_doubles() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(2), Duration::from_millis(100));
        assert_eq!(p.backoff(3), Duration::from_millis(200));
        assert_eq!(p.backoff(4), Duration::from_millis(400));
    }
}
