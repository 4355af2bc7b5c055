//! `galactic-bgp export-annotations KUBECONFIG NAMESPACE OUT`: the node installer's export of
//! upstream's BGPAdvertisement annotations, so a node taken over from the Go chain imports the
//! allocations only those annotations recorded (the old in-memory allocator's) without a manual
//! step (decision 0061). OUT gets a `List` of every BGPAdvertisement of NAMESPACE with its name,
//! namespace and annotations (all that `galactic-ipam` reads), written to a temporary name and
//! renamed, so an importer never reads half of it.

use crate::store::kube::KubeStore;
use crate::store::{Kind, ObjectStore};
use galactic_kube::{ClientOptions, KubeClient};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Runs the export named by `args` (what follows `export-annotations`).
pub fn main(args: &[String]) -> ExitCode {
    let [kubeconfig, namespace, out] = args else {
        eprintln!("usage: galactic-bgp export-annotations KUBECONFIG NAMESPACE OUT");
        return ExitCode::from(2);
    };
    match export(Path::new(kubeconfig), namespace, Path::new(out)) {
        Ok(count) => {
            println!("exported the annotations of {count} BGPAdvertisements to {out}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("galactic-bgp export-annotations: {message}");
            ExitCode::FAILURE
        }
    }
}

fn export(kubeconfig: &Path, namespace: &str, out: &Path) -> Result<usize, String> {
    let client = KubeClient::from_kubeconfig(kubeconfig, ClientOptions::default())
        .map_err(|e| e.to_string())?;
    let items: Vec<Value> = KubeStore::new(client)
        .list(Kind::Advertisement, namespace)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|object| {
            json!({"metadata": {
                "name": object["metadata"]["name"],
                "namespace": object["metadata"]["namespace"],
                "annotations": object["metadata"]["annotations"],
            }})
        })
        .collect();
    let count = items.len();
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    write_atomic(out, text.as_bytes()).map_err(|e| format!("write {}: {e}", out.display()))?;
    Ok(count)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
