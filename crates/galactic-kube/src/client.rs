//! The client: built once per process from the resolved kubeconfig, with a current-thread runtime.

use super::error::KubeError;
use super::retry::{classify, refused_certificate, ErrorClass, RetryPolicy};
use galactic_core::log;
use serde_json::json;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

/// Timeouts and retry settings of a [`KubeClient`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions {
    /// Deadline of one attempt of one call (upstream: 10 s).
    pub call_timeout: Duration,
    /// Retry of transient failures.
    pub retry: RetryPolicy,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }
}

/// A Kubernetes client with its own current-thread runtime and blocking, retried calls.
pub struct KubeClient {
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    options: ClientOptions,
    /// Where the client's server, trust and credentials came from, for messages.
    kubeconfig: String,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, KubeError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(KubeError::Runtime)
}

/// Release plugins link their libc (musl) statically (see `xtask build-and-stage`), and a static
/// libc's `getaddrinfo` cannot use the host's NSS modules (systemd-resolved, LDAP, the host's
/// `nsswitch.conf` order), which only a dynamic glibc loads. A kubeconfig server given by host
/// name is therefore resolved by the host's own `getent ahosts` (the host's NSS and
/// nsswitch.conf, as a dynamic binary would), and the client connects to that address while
/// verifying the certificate for the name (`tls_server_name`, unless the kubeconfig sets one).
/// IP literals are used as they are.
pub fn pin_server_address(config: &mut kube::Config) -> Result<(), KubeError> {
    let Some(host) = config.cluster_url.host().map(str::to_owned) else {
        return Ok(());
    };
    if host
        .trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .is_ok()
    {
        return Ok(());
    }
    let address = resolve_with_getent(&host)?;
    let authority = match (address, config.cluster_url.port_u16()) {
        (std::net::IpAddr::V6(a), Some(port)) => format!("[{a}]:{port}"),
        (std::net::IpAddr::V6(a), None) => format!("[{a}]"),
        (a, Some(port)) => format!("{a}:{port}"),
        (a, None) => a.to_string(),
    };
    let mut parts = config.cluster_url.clone().into_parts();
    parts.authority = Some(authority.parse().map_err(|e| KubeError::Resolve {
        host: host.clone(),
        why: format!("{authority} is not a valid authority: {e}"),
    })?);
    config.cluster_url = http::Uri::from_parts(parts).map_err(|e| KubeError::Resolve {
        host: host.clone(),
        why: format!("cannot rebuild the server URL: {e}"),
    })?;
    config.tls_server_name.get_or_insert(host);
    Ok(())
}

/// The first address `getent ahosts NAME` prints.
fn resolve_with_getent(host: &str) -> Result<std::net::IpAddr, KubeError> {
    let failed = |why: String| KubeError::Resolve {
        host: host.to_owned(),
        why,
    };
    let out = std::process::Command::new("getent")
        .args(["ahosts", host])
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| failed(format!("cannot run getent: {e}")))?;
    if !out.status.success() {
        return Err(failed(format!("no address ({})", out.status)));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| failed("getent printed no address".into()))
}

impl KubeClient {
    /// Builds a client from the kubeconfig at `path` (its current context): its server, the CA
    /// it trusts (the server's certificate is always verified) and its credentials.
    pub fn from_kubeconfig(path: &Path, options: ClientOptions) -> Result<Self, KubeError> {
        let started = Instant::now();
        let runtime = runtime()?;
        let kubeconfig =
            kube::config::Kubeconfig::read_from(path).map_err(|source| KubeError::Kubeconfig {
                path: path.into(),
                source,
            })?;
        let client = runtime.block_on(async {
            let mut config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|source| KubeError::Kubeconfig {
                path: path.into(),
                source,
            })?;
            if cfg!(target_feature = "crt-static") {
                pin_server_address(&mut config)?;
            }
            config.connect_timeout = Some(options.call_timeout);
            config.read_timeout = Some(options.call_timeout);
            config.write_timeout = Some(options.call_timeout);
            // One retry policy, ours: it knows every transient class, logs each retry and
            // lets probes (STATUS) make a single attempt.
            config.default_retry = false;
            super::transport::client(config).map_err(|source| KubeError::Client {
                path: path.into(),
                source,
            })
        })?;
        let setup = started.elapsed();
        log::debug(
            "kube: client ready",
            json!({"kubeconfig": path, "setupMs": setup.as_secs_f64() * 1000.0}),
        );
        Ok(Self {
            runtime,
            client,
            options,
            kubeconfig: path.display().to_string(),
        })
    }

    /// A client built by `build` on this client's own runtime (the kube client spawns its
    /// request buffer onto the current runtime): how a caller brings its own transport, such as
    /// the test kit's in-process API server.
    pub fn from_built(
        build: impl FnOnce() -> kube::Client,
        options: ClientOptions,
    ) -> Result<Self, KubeError> {
        let runtime = runtime()?;
        let client = runtime.block_on(async { build() });
        Ok(Self {
            runtime,
            client,
            options,
            kubeconfig: "(none: a transport built in process)".into(),
        })
    }

    /// The underlying client, for building `Api` handles.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The options this client was built with.
    pub fn options(&self) -> ClientOptions {
        self.options
    }

    /// Runs `fut` to completion on this client's runtime.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.runtime.block_on(fut)
    }

    /// Runs one API call with the per-call timeout, retrying transient failures with exponential
    /// backoff. `what` names the operation and object for messages and logs.
    pub fn call<T, F, Fut>(&self, what: &str, op: F) -> Result<T, KubeError>
    where
        F: FnMut(kube::Client) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        self.call_with(what, self.options.retry, op)
    }

    /// [`call`](Self::call) with an explicit retry policy.
    pub fn call_with<T, F, Fut>(
        &self,
        what: &str,
        policy: RetryPolicy,
        op: F,
    ) -> Result<T, KubeError>
    where
        F: FnMut(kube::Client) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        self.runtime.block_on(self.attempts(what, policy, op))
    }

    /// Runs every call of `calls` with the per-call timeout and this client's retry policy,
    /// all in flight together (one connection's streams over HTTP/2): the independent requests
    /// of one step cost one round trip, not one each. Each result is its call's, in order.
    pub fn call_together<T>(&self, calls: Vec<Together<'_, T>>) -> Vec<Result<T, KubeError>> {
        let policy = self.options.retry;
        let pending = calls
            .into_iter()
            .map(|call| async move { self.attempts(&call.what, policy, call.op).await });
        self.runtime
            .block_on(futures_util::future::join_all(pending))
    }

    /// One call's attempts: each within the per-call timeout, a transient failure retried with
    /// exponential backoff (logged), anything else returned at once.
    async fn attempts<T, F, Fut>(
        &self,
        what: &str,
        policy: RetryPolicy,
        mut op: F,
    ) -> Result<T, KubeError>
    where
        F: FnMut(kube::Client) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let attempts = policy.attempts.max(1);
        let timeout = self.options.call_timeout;
        let mut attempt = 1;
        loop {
            let err = match tokio::time::timeout(timeout, op(self.client.clone())).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(source)) => {
                    let class = classify(&source);
                    if class != ErrorClass::Transient || attempt >= attempts {
                        return Err(self.failed(what, class, source));
                    }
                    source.to_string()
                }
                Err(_elapsed) if attempt >= attempts => {
                    return Err(KubeError::Timeout {
                        what: what.to_owned(),
                        timeout,
                        attempts,
                    })
                }
                Err(_elapsed) => format!("no answer within {:.1} s", timeout.as_secs_f64()),
            };
            attempt += 1;
            let wait = policy.backoff(attempt);
            log::warn(
                "kube: transient failure, retrying",
                json!({"op": what, "attempt": attempt, "backoffMs": wait.as_millis() as u64, "err": err}),
            );
            tokio::time::sleep(wait).await;
        }
    }
}

/// A request future of [`KubeClient::call_together`].
pub type TogetherFuture<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = Result<T, kube::Error>> + 'a>>;

/// One call of [`KubeClient::call_together`]: what it is (for messages and logs), and how to
/// make (again, on a retry) its request on a client.
pub struct Together<'a, T> {
    /// Operation and object.
    pub what: String,
    /// Makes the request.
    pub op: Box<dyn FnMut(kube::Client) -> TogetherFuture<'a, T> + 'a>,
}

impl KubeClient {
    /// The error of a call that failed for good: a refused certificate or credentials say which
    /// kubeconfig to fix, anything else is the API's answer.
    fn failed(&self, what: &str, class: ErrorClass, source: kube::Error) -> KubeError {
        let what = what.to_owned();
        let kubeconfig = self.kubeconfig.clone();
        match (class, refused_certificate(&source)) {
            (ErrorClass::Untrusted, Some(why)) => KubeError::Untrusted {
                what,
                kubeconfig,
                why: why.clone(),
            },
            (ErrorClass::Unauthenticated, _) => KubeError::Unauthenticated { what, kubeconfig },
            _ => KubeError::Api {
                what,
                class,
                source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> kube::Config {
        kube::Config::new(url.parse().unwrap())
    }

    #[test]
    fn a_host_name_is_resolved_by_getent_and_verified_by_name() {
        let mut c = config("https://localhost:6443/base");
        pin_server_address(&mut c).unwrap();
        let host = c
            .cluster_url
            .host()
            .unwrap()
            .trim_matches(['[', ']'])
            .to_owned();
        let ip: std::net::IpAddr = host.parse().unwrap();
        assert!(ip.is_loopback(), "{ip}");
        assert_eq!(c.cluster_url.port_u16(), Some(6443));
        assert_eq!(c.cluster_url.scheme_str(), Some("https"));
        assert_eq!(c.cluster_url.path(), "/base");
        assert_eq!(c.tls_server_name.as_deref(), Some("localhost"));
    }

    #[test]
    fn a_kubeconfig_tls_server_name_is_kept() {
        let mut c = config("https://localhost");
        c.tls_server_name = Some("api.cluster.example".into());
        pin_server_address(&mut c).unwrap();
        assert_eq!(c.cluster_url.port_u16(), None);
        assert_eq!(c.tls_server_name.as_deref(), Some("api.cluster.example"));
    }

    #[test]
    fn ip_literals_are_left_alone() {
        for url in [
            "https://10.96.0.1:443",
            "https://[fd00::1]:6443",
            "http://127.0.0.1:8080",
        ] {
            let mut c = config(url);
            pin_server_address(&mut c).unwrap();
            assert_eq!(c.cluster_url.to_string().trim_end_matches('/'), url);
            assert_eq!(c.tls_server_name, None);
        }
    }

    #[test]
    fn an_unresolvable_server_is_try_again_later() {
        let mut c = config("https://no-such-host.invalid:6443");
        let err = pin_server_address(&mut c).unwrap_err();
        assert!(err.to_string().contains("no-such-host.invalid"), "{err}");
        assert!(err.is_transient(), "DNS may come back: try again later");
    }
}
