//! A Podman of the tier's own: its configuration, storage, image and mount namespace, all under
//! `target/podman-tier/`, and every command run inside the host network namespace.
//!
//! Public for any tier that runs containers under Podman: [`Engine::start`] sets it up (the
//! private containers.conf and storage.conf, the mount namespace, the busybox image),
//! [`Engine::podman`] and [`Engine::ok`] run Podman inside the throwaway host's network
//! namespace and the mount namespace, [`Engine::teardown`] removes it all.
//!
//! ```text
//! target/podman-tier/
//!   containers.conf  storage.conf   what CONTAINERS_CONF / CONTAINERS_STORAGE_CONF name
//!   net.d/            the networks (conflists); [network] network_config_dir
//!   storage/ run/     graphroot and runroot (vfs)
//!   tmp/              [engine] tmp_dir (locks, exit files, events) and image_copy_tmp_dir
//!   home/             HOME: no per-user configuration of the machine's root is read
//!   image/            the busybox rootfs and its tarball
//!   ns/               bind-mounted onto itself, private: ns/mnt holds the mount namespace
//! ```
//!
//! A run that was killed leaves its containers running in its mount namespace; the next run
//! removes them, unmounts the namespace and starts afresh.

use crate::tier::kernel::provision;
use crate::tier::{Context, Result, Workspace};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The busybox image the containers run.
pub const IMAGE: &str = "localhost/galactic-busybox:tier";

/// Podman's default rlimits (1048576 open files) exceed what a process without
/// `CAP_SYS_RESOURCE` may set, and runc then fails to start any container.
const ULIMITS: &str = r#"["nofile=1024:1024", "nproc=1024:1024"]"#;

/// The tier's Podman: a configuration, storage and mount namespace of its own under the target
/// directory, run inside one throwaway host network namespace. Dropped without
/// [`Engine::teardown`], it still removes its containers and directory.
pub struct Engine {
    root: PathBuf,
    host_netns: String,
    cgroup_parent: String,
    torn_down: bool,
}

impl Engine {
    /// Sets Podman up for plugins in `bin_dir` with the node config `node_config`, in the
    /// network namespace `host_netns` (a name under `/run/netns`), under `workspace`'s target
    /// directory, and imports the image [`IMAGE`]. What a killed earlier run left is removed
    /// first.
    pub fn start(
        workspace: &Workspace,
        bin_dir: &Path,
        node_config: &Path,
        host_netns: &str,
    ) -> Result<Self> {
        let root = workspace.target_dir.join("podman-tier");
        clean_stale(&root)?;
        for dir in ["net.d", "storage", "run", "tmp", "home", "image", "ns"] {
            std::fs::create_dir_all(root.join(dir))
                .with_context(|| format!("create {}", root.join(dir).display()))?;
        }
        write_configs(&root, bin_dir, node_config)?;
        let engine = Self {
            root,
            host_netns: host_netns.to_owned(),
            cgroup_parent: format!("/galactic-podman-tier-{}", std::process::id()),
            torn_down: false,
        };
        engine.create_mount_namespace()?;
        engine.import_image(&workspace.target_dir)?;
        Ok(engine)
    }

    /// `podman ARGS` inside the tier's namespaces, with only the environment the tier gives
    /// Podman; a Podman that cannot be started is an output with status 127 and the reason as
    /// its stderr.
    pub fn podman(&self, args: &[&str]) -> Output {
        let mut cmd = self.enter();
        cmd.arg("podman").args(args);
        cmd.output().unwrap_or_else(|e| Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(127 << 8),
            stdout: Vec::new(),
            stderr: format!("cannot run podman: {e}").into_bytes(),
        })
    }

    /// `podman ARGS`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> Result<String> {
        let out = self.podman(args);
        if !out.status.success() {
            fail!(
                "podman {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// `podman run -d` of the image running `command`, attached as `flags` say; the cgroup
    /// parent is the tier's.
    pub fn run_args<'a>(
        &'a self,
        name: &'a str,
        flags: &[&'a str],
        command: &[&'a str],
    ) -> Vec<&'a str> {
        let mut args = vec![
            "run",
            "-d",
            "--name",
            name,
            "--cgroup-parent",
            &self.cgroup_parent,
        ];
        args.extend_from_slice(flags);
        args.push(IMAGE);
        args.extend_from_slice(command);
        args
    }

    /// The cgroup parent the tier's containers get (`--cgroup-parent`), removed at teardown.
    pub fn cgroup_parent(&self) -> &str {
        &self.cgroup_parent
    }

    /// A command (not Podman) inside the tier's namespaces, e.g. to list its `/run/netns`.
    pub fn inside(&self, argv: &[&str]) -> Result<String> {
        let out = self
            .enter()
            .args(argv)
            .output()
            .with_context(|| format!("run {}", argv.join(" ")))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The `status` of every event Podman logged for the container `name`, oldest first.
    pub fn events_of(&self, name: &str) -> Vec<String> {
        let log = std::fs::read_to_string(self.root.join("tmp/events.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["Name"] == name)
            .map(|e| e["Status"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Writes a network (a conflist) where Podman finds it (`net.d/<name>.conflist`).
    pub fn add_network(&self, conflist: &serde_json::Value) -> Result<()> {
        let name = conflist["name"].as_str().context("a conflist name")?;
        let path = self.root.join("net.d").join(format!("{name}.conflist"));
        std::fs::write(&path, serde_json::to_vec_pretty(conflist)?)
            .with_context(|| format!("write {}", path.display()))
    }

    /// Removes every container, the mount namespace, the cgroup parent and the tier directory;
    /// every part is attempted, the first failure is returned.
    pub fn teardown(mut self) -> Result<()> {
        self.torn_down = true;
        let removed = self.ok(&["rm", "--all", "--force", "--time", "0"]);
        let unmounted = unmount_namespace(&self.root);
        remove_cgroup_parents(&self.cgroup_parent);
        let deleted = std::fs::remove_dir_all(&self.root)
            .with_context(|| format!("remove {}", self.root.display()));
        removed.and(unmounted).and(deleted.map(drop))
    }

    /// `nsenter` into the mount namespace and the host network namespace, with only the
    /// environment the tier gives Podman.
    fn enter(&self) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--mount={}", self.mount_ns().display()))
            .arg(format!("--net=/run/netns/{}", self.host_netns))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.join("home"))
            .env("TMPDIR", self.root.join("tmp"))
            .env("CONTAINERS_CONF", self.root.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.root.join("storage.conf"));
        cmd
    }

    fn mount_ns(&self) -> PathBuf {
        self.root.join("ns").join("mnt")
    }

    /// A persistent mount namespace (bind-mounted onto `ns/mnt`) in which `/run` and
    /// `/var/lib` are empty tmpfs. The namespace file must live on a private mount.
    fn create_mount_namespace(&self) -> Result<()> {
        let ns_dir = self.root.join("ns");
        let dir = ns_dir.display().to_string();
        run("mount", &["--bind", &dir, &dir])?;
        run("mount", &["--make-private", &dir])?;
        std::fs::write(self.mount_ns(), b"")?;
        let file = format!("--mount={}", self.mount_ns().display());
        run(
            "unshare",
            &[
                &file,
                "--propagation",
                "private",
                "sh",
                "-c",
                "mount -t tmpfs -o mode=0755 tmpfs /run && mount -t tmpfs -o mode=0755 tmpfs /var/lib",
            ],
        )
    }

    /// A busybox rootfs (Debian's static busybox and a link per applet), imported as
    /// [`IMAGE`]: no registry is needed.
    fn import_image(&self, target_dir: &Path) -> Result<()> {
        let image = self.root.join("image");
        let bin = image.join("rootfs/bin");
        std::fs::create_dir_all(&bin)?;
        let busybox = provision::find_program("busybox", target_dir).context("busybox")?;
        // Debian's dynamically linked `busybox` package has the same path; its binary cannot
        // run in a rootfs without a libc.
        let ldd = Command::new("ldd")
            .arg(&busybox)
            .output()
            .context("run ldd")?;
        if ldd.status.success() {
            fail!(
                "{} is dynamically linked; the image needs Debian's busybox-static",
                busybox.display()
            );
        }
        std::fs::copy(&busybox, bin.join("busybox"))?;
        let applets = Command::new(&busybox).arg("--list").output()?;
        for applet in String::from_utf8_lossy(&applets.stdout).split_whitespace() {
            if applet != "busybox" {
                std::os::unix::fs::symlink("busybox", bin.join(applet))?;
            }
        }
        for dir in ["tmp", "etc", "proc", "sys", "dev"] {
            std::fs::create_dir_all(image.join("rootfs").join(dir))?;
        }
        let tarball = image.join("busybox.tar");
        let rootfs = image.join("rootfs");
        run(
            "tar",
            &[
                "-C",
                &rootfs.display().to_string(),
                "-cf",
                &tarball.display().to_string(),
                ".",
            ],
        )?;
        self.ok(&["import", "--quiet", &tarball.display().to_string(), IMAGE])
            .map(drop)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.torn_down {
            let _ = self.ok(&["rm", "--all", "--force", "--time", "0"]);
            let _ = unmount_namespace(&self.root);
            remove_cgroup_parents(&self.cgroup_parent);
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// `podman --version` of the machine, for the report. Not `podman version`: that one opens
/// the machine's container storage (creating it on first use) and writes its event log.
pub fn podman_version() -> Result<String> {
    let out = Command::new("podman").arg("--version").output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn write_configs(root: &Path, bin_dir: &Path, node_config: &Path) -> Result<()> {
    let p = |name: &str| root.join(name).display().to_string();
    let containers = format!(
        r#"# The Podman tier's own configuration (cargo xtask test-podman).
[containers]
default_ulimits = {ULIMITS}
# conmon stays in the caller's cgroup; containers get the tier's cgroup parent.
cgroups = "no-conmon"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{events}"
lock_type = "file"
tmp_dir = "{tmp}"
image_copy_tmp_dir = "{tmp}"
# The cleanup Podman that conmon starts when a container exits on its own gets this
# environment, not the caller's: the plugins need their node config there too.
env = ["GALACTIC_CNI_NODE_CONFIG={node}"]

[network]
network_backend = "cni"
cni_plugin_dirs = ["{bin}"]
network_config_dir = "{netd}"
"#,
        events = root.join("tmp/events.log").display(),
        tmp = p("tmp"),
        node = node_config.display(),
        bin = bin_dir.display(),
        netd = p("net.d"),
    );
    let storage = format!(
        "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
        p("storage"),
        p("run")
    );
    std::fs::write(root.join("containers.conf"), containers)?;
    std::fs::write(root.join("storage.conf"), storage)?;
    Ok(())
}

/// Removes what a killed earlier run left: its containers, its mount namespace, its directory.
fn clean_stale(root: &Path) -> Result<()> {
    if !root.exists() {
        return Ok(());
    }
    let ns = root.join("ns").join("mnt");
    if is_mount_point(&ns) && root.join("containers.conf").exists() {
        eprintln!("test-podman: removing what an earlier run left");
        let _ = Command::new("nsenter")
            .arg(format!("--mount={}", ns.display()))
            .args(["podman", "rm", "--all", "--force", "--time", "0"])
            .env("CONTAINERS_CONF", root.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", root.join("storage.conf"))
            .output();
    }
    unmount_namespace(root)?;
    std::fs::remove_dir_all(root).with_context(|| format!("remove {}", root.display()))
}

fn unmount_namespace(root: &Path) -> Result<()> {
    let ns_dir = root.join("ns");
    for path in [ns_dir.join("mnt"), ns_dir] {
        if is_mount_point(&path) {
            run("umount", &[&path.display().to_string()])?;
        }
    }
    Ok(())
}

fn is_mount_point(path: &Path) -> bool {
    let target = path.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| {
        info.lines()
            .any(|l| l.split_whitespace().nth(4) == Some(target.as_str()))
    })
}

/// Removes the cgroup parent (empty once its containers are gone) from every hierarchy.
fn remove_cgroup_parents(parent: &str) {
    let relative = parent.trim_start_matches('/');
    let root = Path::new("/sys/fs/cgroup");
    let mut candidates = vec![root.join(relative)];
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        candidates.push(entry.path().join(relative));
    }
    for dir in candidates.into_iter().filter(|d| d.is_dir()) {
        let _ = std::fs::remove_dir(&dir);
    }
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("run {program}"))?;
    if !out.status.success() {
        fail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
