//! The cluster the DaemonSet's containers talk to: the test kit's loopback API server, listening
//! inside the simulated node's network namespace (the containers have the host's network), and
//! the service account the kubelet mounts into every container.
//!
//! Where the server's URL, CA and token come from is [`Api`], and nothing else in the tier
//! assumes them: the fixture serves HTTPS with a cluster CA of its own and requires one bearer
//! token, which the tier makes the service account's.

use crate::tier::{Context, Result};
use galactic_testkit::apiserver::FaultAction;
use galactic_testkit::apiserver::{ApiServer, Fixture};
use galactic_testkit::harness::Entered;
use galactic_testkit::privileged::TestNetns;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The simulated node's own address (its InternalIP), on an interface of its namespace.
pub const NODE_IP: &str = "192.0.2.10";

/// Gives the node's namespace its address: `eth0` with [`NODE_IP`], as a node's uplink has its
/// InternalIP (the init container has the host's network). A veth pair with both ends in the
/// namespace: the kernels this runs on do not all have the dummy driver.
pub fn node_address(netns: &TestNetns) -> Result<()> {
    for args in [
        &[
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0-peer",
        ][..],
        &["addr", "add", &format!("{NODE_IP}/24"), "dev", "eth0"],
        &["link", "set", "eth0", "up"],
    ] {
        let (ok, out) = netns.try_ip(args);
        if !ok {
            return Err(crate::tier::Error::failed(format!(
                "give the node its address (ip {}): {out}",
                args.join(" ")
            )));
        }
    }
    Ok(())
}

/// The service account token the API server requires (a projected token's shape).
pub const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.galactic-deploy-tier.first";

/// The API server of the simulated cluster.
pub struct Api {
    server: ApiServer,
    /// `KUBERNETES_SERVICE_HOST`.
    pub host: String,
    /// `KUBERNETES_SERVICE_PORT`.
    pub port: u16,
    /// The cluster CA's certificate, PEM (the service account's `ca.crt`).
    pub ca_pem: String,
    /// The service account token the server accepts.
    pub token: String,
}

impl Api {
    /// Serves `fixture` on a loopback port of `netns`: the listener is bound from this thread
    /// moved into the namespace, so it belongs to it (the server's own thread only accepts).
    pub fn start_in(netns: &TestNetns, fixture: Fixture) -> Result<Self> {
        let entered = Entered::new(netns).context("enter the node's network namespace")?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0");
        drop(entered);
        let listener = listener.context("bind the API server's port in the node's namespace")?;
        let server = ApiServer::builder()
            .fixture(fixture)
            .listener(listener)
            .token(TOKEN)
            .start()
            .context("start the API server")?;
        Ok(Self {
            host: server.addr().ip().to_string(),
            port: server.addr().port(),
            ca_pem: server.ca_pem().to_owned(),
            token: server.token().to_owned(),
            server,
        })
    }

    /// The fixture's state (objects, faults, requests seen).
    pub fn fixture(&self) -> &Fixture {
        self.server.fixture()
    }

    /// The Node object the kubelet registers: `name` with `internal_ip` as its InternalIP (what
    /// the installer's node-identity check compares with the host's addresses).
    pub fn register_node(&self, name: &str, internal_ip: &str) {
        let node = serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"addresses": [{"type": "InternalIP", "address": internal_ip},
                                     {"type": "Hostname", "address": name}]}});
        self.fixture().remove("nodes", None, name);
        self.fixture().insert(node);
    }

    /// The URL the containers reach, as the server reports it.
    pub fn url(&self) -> String {
        self.server.url()
    }
}

/// A service account volume as the kubelet writes it (its atomic writer): the files are links
/// to `..data/<file>`, `..data` a link to a timestamped directory, and a rotation writes a new
/// directory and renames `..data`.
pub struct ServiceAccount {
    dir: PathBuf,
    generation: u32,
}

impl ServiceAccount {
    /// The volume at `dir` with `token`, the CA (if any) and `namespace`.
    pub fn new(dir: PathBuf, token: &str, ca_pem: Option<&str>, namespace: &str) -> Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let mut sa = Self { dir, generation: 0 };
        sa.write(token, ca_pem, namespace)?;
        Ok(sa)
    }

    /// The volume's directory (what is mounted at the service account path).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new token, as a rotation of the projected token writes it (one rename).
    pub fn rotate(&mut self, token: &str) -> Result<()> {
        let ca = std::fs::read_to_string(self.dir.join("ca.crt")).ok();
        let namespace = std::fs::read_to_string(self.dir.join("namespace"))
            .context("read the service account's namespace".to_owned())?;
        self.write(token, ca.as_deref(), &namespace)
    }

    fn write(&mut self, token: &str, ca_pem: Option<&str>, namespace: &str) -> Result<()> {
        self.generation += 1;
        let data = format!("..{}", self.generation);
        let dir = self.dir.join(&data);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let mut files = vec![("token", token), ("namespace", namespace)];
        if let Some(ca) = ca_pem {
            files.push(("ca.crt", ca));
        }
        for (name, text) in &files {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                .with_context(|| format!("chmod {}", path.display()))?;
        }
        let staged = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&staged);
        std::os::unix::fs::symlink(&data, &staged).context("link ..data_tmp".to_owned())?;
        std::fs::rename(&staged, self.dir.join("..data")).context("rename ..data".to_owned())?;
        for (name, _) in &files {
            let link = self.dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("..data/{name}"), &link)
                    .with_context(|| format!("link {}", link.display()))?;
            }
        }
        if self.generation > 1 {
            let old = self.dir.join(format!("..{}", self.generation - 1));
            let _ = std::fs::remove_dir_all(old);
        }
        Ok(())
    }
}

/// How the API server fails during the export in (d).
#[derive(Debug, Clone, Copy)]
pub enum ApiFailure {
    /// Every LIST of BGPAdvertisements answers 500.
    Answers500,
    /// Every LIST of BGPAdvertisements is answered only after the client's deadline.
    TimesOut,
}

impl ApiFailure {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Answers500 => "500",
            Self::TimesOut => "timeout",
        }
    }

    pub(super) fn action(self) -> FaultAction {
        match self {
            Self::Answers500 => FaultAction::Status(500),
            // Well past the export client's 10 s per attempt.
            Self::TimesOut => FaultAction::Delay(Duration::from_secs(40)),
        }
    }

    /// Whether the failed install met this failure, not another one (a CA it could not read,
    /// a refused token).
    pub(super) fn met(self, api: &Api, seen_before: usize, stderr: &str) -> bool {
        match self {
            Self::Answers500 => api.fixture().requests()[seen_before..]
                .iter()
                .any(|r| r.path.contains("bgpadvertisements") && r.status == 500),
            // The fixture records a delayed request when it answers, after the client gave up:
            // the client's own words show it.
            Self::TimesOut => stderr.contains("no answer within"),
        }
    }
}
