//! The CNI verbs. Each handler parses what it needs, does one store transaction at most, logs
//! the outcome and returns; codes are assigned in [`crate::error`].

use crate::config::{self, Context, IpamConfig, Mode, StoreSettings};
use crate::error::IpamError;
use crate::legacy;
use crate::request;
use crate::result;
use crate::store::{AttachmentKey, DelKey, GcScope, Store};
use galactic_core::cni::{CniResult, Plugin, Request};
use galactic_core::ip::Assignment;
use galactic_core::log;
use serde_json::json;
use std::collections::HashSet;

/// The galactic-ipam plugin.
#[derive(Debug, Default)]
pub struct IpamPlugin;

impl Plugin for IpamPlugin {
    type Error = IpamError;

    fn name(&self) -> &'static str {
        galactic_core::plugins::IPAM
    }

    fn add(&self, req: &Request) -> Result<CniResult, IpamError> {
        let cfg = parse(req)?;
        let key = attachment_key(req)?;
        let requested = request::requested(&req.env.args, &req.conf.raw)?;
        let (assigned, routes) = match &cfg.mode {
            Mode::Addresses(list) => (configured(list.clone(), &requested)?, true),
            Mode::Static(ip) => (configured(result::static_ip(*ip), &requested)?, false),
            Mode::Pools(pools) => {
                let wants = request::wants(pools, &requested)?;
                let store_settings = StoreSettings::of(&req.node);
                let mut store = open(&store_settings)?;
                let alloc = store.allocate_wants(&key, &wants, &store_settings.legacy_dir)?;
                log::info(
                    "ADD: allocation",
                    json!({
                        "new": alloc.created,
                        "addresses": alloc.leases.iter().map(|l| l.address.to_string()).collect::<Vec<_>>(),
                        "requested": requested.iter().map(ToString::to_string).collect::<Vec<_>>(),
                        "pools": pools.iter().map(|p| p.key()).collect::<Vec<_>>(),
                    }),
                );
                (alloc.leases.iter().map(Assignment::from).collect(), true)
            }
        };
        Ok(result::build(assigned, routes))
    }

    fn del(&self, req: &Request) -> Result<(), IpamError> {
        // DEL never depends on today's config beyond finding the store: what to release was
        // recorded at ADD. An invalid or undecodable config still releases.
        let settings = StoreSettings::of(&req.node);
        let key = del_key(req)?;
        let store = match Store::open_existing(&settings.data_dir, settings.lock_timeout)? {
            Some(store) => Some(store),
            // The first call on an upgraded node may be a DEL of a pod the Go chain attached:
            // import its records first, so its address is released now rather than imported as
            // taken by the next ADD.
            None if legacy::state_present(&settings.legacy_dir, &settings.data_dir) => {
                Some(open(&settings)?)
            }
            None => None,
        };
        let Some(mut store) = store else {
            log::debug(
                "DEL: no store yet; nothing to release",
                json!({"dataDir": settings.data_dir}),
            );
            return Ok(());
        };
        let released = store.release(&key, &settings.legacy_dir)?;
        log::info(
            "DEL: released",
            json!({"addresses": released.iter().map(|l| l.address.to_string()).collect::<Vec<_>>()}),
        );
        Ok(())
    }

    fn check(&self, req: &Request) -> Result<(), IpamError> {
        let cfg = parse(req)?;
        let key = attachment_key(req)?;
        let expected: Vec<Assignment> = match &cfg.mode {
            Mode::Addresses(list) => list.clone(),
            Mode::Static(ip) => result::static_ip(*ip),
            Mode::Pools(_) => recorded(&StoreSettings::of(&req.node), &key)?,
        };
        if let Some(prev) = req.conf.prev_result()? {
            let diffs = result::differences(&expected, &prev);
            if !diffs.is_empty() {
                return Err(IpamError::Mismatch(diffs));
            }
        }
        log::debug(
            "CHECK: allocation matches",
            json!({"addresses": expected.len()}),
        );
        Ok(())
    }

    fn status(&self, req: &Request) -> Result<(), IpamError> {
        let cfg = parse(req)?;
        if let Mode::Pools(pools) = &cfg.mode {
            let settings = StoreSettings::of(&req.node);
            Store::open_or_create(&settings.data_dir, settings.lock_timeout)
                .and_then(|mut store| store.probe(pools))
                .map_err(|e| IpamError::NotReady(Box::new(e.into())))?;
        }
        Ok(())
    }

    fn gc(&self, req: &Request) -> Result<(), IpamError> {
        let Some(valid) = req.conf.valid_attachments()? else {
            // A missing list is not an empty one: without the runtime's word on what is alive,
            // releasing anything could hand a live address out twice (C69; docs/ipam.md).
            log::info("GC: no valid-attachments list; nothing released", json!({}));
            return Ok(());
        };
        let valid: HashSet<(String, String)> = valid
            .into_iter()
            .map(|a| (a.container_id, a.ifname))
            .collect();
        // Pools only scope imported records; an invalid config still collects native ones.
        let pools = match parse(req) {
            Ok(IpamConfig {
                mode: Mode::Pools(pools),
                ..
            }) => pools,
            _ => Vec::new(),
        };
        let settings = StoreSettings::of(&req.node);
        let Some(mut store) = Store::open_existing(&settings.data_dir, settings.lock_timeout)?
        else {
            return Ok(());
        };
        let scope = GcScope {
            network: &req.conf.name,
            valid: &valid,
            pools: &pools,
        };
        let released = store.gc(&scope, &settings.legacy_dir)?;
        log::info(
            "GC: released stale allocations",
            json!({"count": released.len()}),
        );
        Ok(())
    }
}

/// Pre-decided addressing, provided every request names one of its addresses.
fn configured(
    assigned: Vec<Assignment>,
    requested: &[std::net::IpAddr],
) -> Result<Vec<Assignment>, IpamError> {
    request::check_configured(requested, &assigned)?;
    Ok(assigned)
}

fn parse(req: &Request) -> Result<IpamConfig, IpamError> {
    let env = std::env::var(config::ENABLE_LOCAL_IPAM_ENV).ok();
    let ctx = Context {
        enable_local_ipam: config::local_ipam_enabled(env.as_deref()),
    };
    Ok(config::parse(&req.conf.raw, ctx)?)
}

fn open(settings: &StoreSettings) -> Result<Store, IpamError> {
    Ok(Store::open_or_create(
        &settings.data_dir,
        settings.lock_timeout,
    )?)
}

fn attachment_key(req: &Request) -> Result<AttachmentKey, IpamError> {
    Ok(AttachmentKey {
        network: req.conf.name.clone(),
        container_id: req.env.container_id()?.as_str().to_owned(),
        ifname: req.env.ifname()?.as_str().to_owned(),
    })
}

/// The full key when the config decoded; otherwise container and interface alone, which still
/// name one attachment (an interface name is unique inside the container's namespace).
fn del_key(req: &Request) -> Result<DelKey, IpamError> {
    let key = attachment_key(req)?;
    Ok(if req.decode_error.is_none() && !key.network.is_empty() {
        DelKey::Exact(key)
    } else {
        DelKey::AnyNetwork {
            container_id: key.container_id,
            ifname: key.ifname,
        }
    })
}

fn recorded(settings: &StoreSettings, key: &AttachmentKey) -> Result<Vec<Assignment>, IpamError> {
    let missing = || IpamError::NoAllocation {
        network: key.network.clone(),
        container_id: key.container_id.clone(),
        ifname: key.ifname.clone(),
    };
    let mut store =
        Store::open_existing(&settings.data_dir, settings.lock_timeout)?.ok_or_else(missing)?;
    let leases = store.lookup(key)?.ok_or_else(missing)?;
    Ok(leases.iter().map(Assignment::from).collect())
}
