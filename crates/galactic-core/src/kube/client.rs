//! The client: built once per process from the resolved kubeconfig, with a current-thread runtime.

use super::error::KubeError;
use super::retry::{classify, ErrorClass, RetryPolicy};
use crate::log;
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
    setup: Duration,
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

impl KubeClient {
    /// Builds a client from the kubeconfig at `path` (its current context). `http://` servers
    /// are accepted, which is what the loopback test fixture serves.
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
            config.connect_timeout = Some(options.call_timeout);
            config.read_timeout = Some(options.call_timeout);
            config.write_timeout = Some(options.call_timeout);
            // One retry policy, ours: it knows every transient class, logs each retry and
            // lets probes (STATUS) make a single attempt.
            config.default_retry = false;
            kube::Client::try_from(config).map_err(|source| KubeError::Client {
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
            setup,
        })
    }

    /// A client over any HTTP service (the in-process test fixture), default namespace `default`.
    #[cfg(feature = "kube-fixture")]
    pub fn from_service<S, B>(service: S, options: ClientOptions) -> Result<Self, KubeError>
    where
        S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let runtime = runtime()?;
        // The client spawns its request buffer onto the current runtime.
        let client = runtime.block_on(async { kube::Client::new(service, "default") });
        Ok(Self {
            runtime,
            client,
            options,
            setup: started.elapsed(),
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

    /// How long building the client took (kubeconfig, TLS, runtime).
    pub fn setup_time(&self) -> Duration {
        self.setup
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
            let call = op(self.client.clone());
            // The timer must be created inside the runtime.
            let outcome = self
                .runtime
                .block_on(async { tokio::time::timeout(timeout, call).await });
            let err = match outcome {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(source)) => {
                    let class = classify(&source);
                    if class != ErrorClass::Transient || attempt >= attempts {
                        return Err(KubeError::Api {
                            what: what.to_owned(),
                            class,
                            source,
                        });
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
                Err(_elapsed) => format!("no answer within {timeout:?}"),
            };
            attempt += 1;
            let wait = policy.backoff(attempt);
            log::warn(
                "kube: transient failure, retrying",
                json!({"op": what, "attempt": attempt, "backoffMs": wait.as_millis() as u64, "err": err}),
            );
            std::thread::sleep(wait);
        }
    }
}
