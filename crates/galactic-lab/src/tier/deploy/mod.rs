//! The deployment tier: the installer image built from `deploy/kubernetes/Dockerfile` and the
//! DaemonSet's containers run under Podman as `deploy/kubernetes/daemonset.yaml` says.

pub mod manifest;
