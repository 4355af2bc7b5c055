//! The client's transport: HTTP/2 when the server offers it by ALPN (kube-apiserver does),
//! HTTP/1.1 otherwise, over the TLS the kubeconfig configures (its CA, its client certificate,
//! `tls-server-name`). The kube client's own stack speaks HTTP/1.1 only, where requests in flight
//! together each need a connection (a TCP and TLS handshake each); over HTTP/2 they are streams
//! of one connection. Authentication and the server URL are the kube client's own layers.

use kube::client::ConfigExt;

/// A kube client over an HTTP/2-capable transport for `config`.
pub fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let tls = config.rustls_client_config()?;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
            })?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    // Offers h2 and http/1.1 (ALPN): a server without HTTP/2 is spoken to as before.
    let https = builder.enable_all_versions().wrap_connector(http);
    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, kube::client::Body>(https);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}
