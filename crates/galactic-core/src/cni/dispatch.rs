//! Command dispatch: environment → stdin → version negotiation → the plugin's handler → stdout.
//!
//! stdout carries exactly one JSON value (the ADD result or a CNI error) or nothing (successful
//! DEL/CHECK/STATUS/GC); every diagnostic goes to the log file or stderr.

use super::conf::{decode_object, NetConf};
use super::env::{CniEnv, Command};
use super::error::{CniError, Code, ErrorCode};
use super::result::CniResult;
use super::version::{version_reply, SpecVersion};
use crate::config::{NodeConfig, Strictness};
use crate::log;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Instant;

/// What a plugin binary implements. Each handler gets a fully validated [`Request`] and returns
/// the plugin's own error type; its CNI code is taken here, once ([`ErrorCode`]).
pub trait Plugin {
    /// The plugin's error type.
    type Error: ErrorCode;
    /// The binary's name, as it appears in logs.
    fn name(&self) -> &'static str;
    /// ADD: attach, returning the result to print.
    fn add(&self, req: &Request) -> Result<CniResult, Self::Error>;
    /// DEL: detach. Errors are logged and DEL still succeeds, except code 11 (try again later),
    /// which reaches the runtime so that it retries instead of leaking state.
    fn del(&self, req: &Request) -> Result<(), Self::Error>;
    /// CHECK: verify the attachment described by `prevResult`.
    fn check(&self, req: &Request) -> Result<(), Self::Error>;
    /// STATUS: `Ok` when ready to service ADD; code 50/51 otherwise.
    fn status(&self, req: &Request) -> Result<(), Self::Error>;
    /// GC: release what belongs to attachments not in `cni.dev/valid-attachments`.
    fn gc(&self, req: &Request) -> Result<(), Self::Error>;
}

/// One validated invocation.
#[derive(Debug)]
pub struct Request {
    /// The validated `CNI_*` environment.
    pub env: CniEnv,
    /// The exact stdin bytes (passed unchanged to delegates).
    pub stdin: Vec<u8>,
    /// The decoded configuration envelope.
    pub conf: NetConf,
    /// The resolved node configuration.
    pub node: NodeConfig,
    /// Set on DEL only, when stdin could not be fully decoded: DEL still runs on what is known,
    /// so an unparseable config never skips a release.
    pub decode_error: Option<CniError>,
}

/// What the process prints and how it exits.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The JSON value for stdout, if any.
    pub stdout: Option<Value>,
    /// Whether the exit status is 0.
    pub success: bool,
}

/// The line `--version` prints: the binary, this release and the CNI versions it speaks.
pub fn version_line(name: &str) -> String {
    format!(
        "{name} {} (CNI {})",
        env!("CARGO_PKG_VERSION"),
        super::version::SUPPORTED_VERSIONS.join(", ")
    )
}

/// Answers `--version` (or `-V`) as the first argument, for operators checking which build a
/// node runs; `None` for any other command line. A runtime never passes arguments.
pub fn version_flag(name: &str) -> Option<ExitCode> {
    let first = std::env::args().nth(1)?;
    if first != "--version" && first != "-V" {
        return None;
    }
    let mut out = std::io::stdout().lock();
    Some(match writeln!(out, "{}", version_line(name)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    })
}

/// Runs `plugin` for this process: reads the environment and stdin, prints the reply.
pub fn run<P: Plugin>(plugin: &P) -> ExitCode {
    install_panic_hook();
    let reply = match read_stdin() {
        Ok(stdin) => execute(plugin, |k| std::env::var(k).ok(), stdin),
        Err(reply) => reply,
    };
    print_reply(&reply)
}

/// Longest network configuration ADD, CHECK, STATUS and GC accept (a NetworkAttachmentDefinition
/// is far smaller: Kubernetes objects are capped at 1.5 MiB, and a chain stanza is a few KiB).
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
/// What is read of stdin at most, whatever the verb: DEL reads past [`MAX_CONFIG_BYTES`] so it
/// can still release what a since-edited configuration names, but memory stays bounded.
const MAX_STDIN_BYTES: u64 = 16 * 1024 * 1024;

/// Stdin (at most [`MAX_STDIN_BYTES`]), or the error reply when it cannot be read.
fn read_stdin() -> Result<Vec<u8>, Reply> {
    let mut stdin = Vec::new();
    std::io::stdin()
        .take(MAX_STDIN_BYTES)
        .read_to_end(&mut stdin)
        .map(|_| stdin)
        .map_err(|e| {
            error_reply(
                SpecVersion::LATEST.as_str(),
                &CniError::io(format!("cannot read stdin: {e}")),
            )
        })
}

fn print_reply(reply: &Reply) -> ExitCode {
    if let Some(value) = &reply.stdout {
        let mut out = std::io::stdout().lock();
        // Nothing sensible can be done when stdout itself is gone; the exit code still tells.
        let _ = writeln!(out, "{value}").and_then(|()| out.flush());
    }
    if reply.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one step that a plugin performs for another one, which execs it with its own environment
/// and stdin plus arguments naming the step (the masters' `Delegate::call_step`). The
/// request is validated as the caller's was; success prints nothing, failure prints the CNI
/// error, so the caller passes it on unchanged. One log line per step, as per operation.
pub fn run_step<E: ErrorCode>(
    name: &'static str,
    step: &str,
    perform: impl FnOnce(&Request) -> Result<(), E>,
) -> ExitCode {
    install_panic_hook();
    let stdin = match read_stdin() {
        Ok(stdin) => stdin,
        Err(reply) => return print_reply(&reply),
    };
    let version = declared_version(&stdin);
    let lookup = |k: &str| std::env::var(k).ok();
    let command = lookup("CNI_COMMAND")
        .map(|raw| Command::parse(&raw))
        .unwrap_or_else(|| Err(CniError::invalid_env("CNI_COMMAND is not set")));
    let outcome = command
        .and_then(|command| prepare(name, command, &lookup, stdin))
        .and_then(|req| {
            let started = Instant::now();
            log::begin_operation();
            let outcome = perform(&req).map_err(|e| e.to_cni());
            let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
            match &outcome {
                Ok(()) => log::finish_operation(
                    log::Level::Info,
                    &format!("{step}: done"),
                    closing(elapsed_ms, json!({})),
                ),
                Err(e) => log::finish_operation(
                    log::Level::Error,
                    &format!("{step}: failed"),
                    closing(elapsed_ms, json!({"code": e.code, "err": e.to_string()})),
                ),
            }
            outcome
        });
    print_reply(&match outcome {
        Ok(()) => Reply {
            stdout: None,
            success: true,
        },
        Err(e) => error_reply(&version, &e),
    })
}

/// The fields of an operation's closing log line: its own time (`durationMs`), the directory
/// entries its listings of state files met (`filesListed`, `state::listed`), the kernel objects
/// it received over netlink (`netlinkReceived`, `net::netlink::received`: what it read of the
/// node, which cost guards and the node-fill bench compare across node sizes), then `extra`.
fn closing(elapsed_ms: f64, extra: serde_json::Value) -> serde_json::Value {
    let mut fields = json!({"durationMs": elapsed_ms, "filesListed": crate::state::listed()});
    #[cfg(feature = "net")]
    {
        fields["netlinkReceived"] = json!(crate::net::netlink::received());
    }
    if let (Some(fields), serde_json::Value::Object(extra)) = (fields.as_object_mut(), extra) {
        fields.extend(extra);
    }
    fields
}

/// The whole protocol as a function of the environment and stdin (testable without a process).
pub fn execute<P: Plugin>(
    plugin: &P,
    lookup: impl Fn(&str) -> Option<String>,
    stdin: Vec<u8>,
) -> Reply {
    let command = match lookup("CNI_COMMAND").filter(|c| !c.is_empty()) {
        None => {
            return error_reply(
                SpecVersion::LATEST.as_str(),
                &CniError::invalid_env(
                    "CNI_COMMAND is not set (ADD, DEL, CHECK, VERSION, STATUS or GC)",
                ),
            )
        }
        Some(raw) => match Command::parse(&raw) {
            Ok(command) => command,
            Err(e) => return error_reply(SpecVersion::LATEST.as_str(), &e),
        },
    };
    if command == Command::Version {
        return version(&stdin);
    }
    let version = declared_version(&stdin);
    match prepare(plugin.name(), command, &lookup, stdin) {
        Ok(req) => handle(plugin, req),
        // An input ADD refuses (an over-long container id, a missing variable) never created
        // anything to tear down: DEL answers success, so the runtime can finish the pod.
        Err(e) if command == Command::Del && e.code != Code::TRY_AGAIN_LATER => {
            log::stderr_warn(plugin.name(), &format!("DEL: nothing to do: {}", e.msg));
            Reply {
                stdout: None,
                success: true,
            }
        }
        Err(e) => error_reply(&version, &e),
    }
}

/// VERSION needs nothing but `CNI_COMMAND` and tolerates empty or odd stdin (C54, C56).
fn version(stdin: &[u8]) -> Reply {
    let requested = serde_json::from_slice::<Value>(stdin).ok();
    let requested = requested
        .as_ref()
        .and_then(|v| v.get("cniVersion"))
        .and_then(Value::as_str);
    Reply {
        stdout: Some(version_reply(requested)),
        success: true,
    }
}

/// The version an error reply should carry: the config's, when it is one we speak.
fn declared_version(stdin: &[u8]) -> String {
    serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|v| {
            v.get("cniVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .and_then(|v| SpecVersion::parse(Some(&v)).ok())
        .unwrap_or(SpecVersion::LATEST)
        .as_str()
        .to_owned()
}

/// Validates everything a handler may rely on.
fn prepare(
    name: &'static str,
    command: Command,
    lookup: &impl Fn(&str) -> Option<String>,
    stdin: Vec<u8>,
) -> Result<Request, CniError> {
    let env = CniEnv::from_lookup(command, lookup)?;
    if stdin.len() > MAX_CONFIG_BYTES && command != Command::Del {
        return Err(CniError::invalid_config(format!(
            "the network configuration is {} bytes; the limit is {MAX_CONFIG_BYTES} (1 MiB)",
            stdin.len()
        )));
    }
    let (conf, decode_error) = match NetConf::decode(&stdin) {
        Ok(conf) => (conf, None),
        Err(e) if command == Command::Del => (lenient_conf(&stdin), Some(e)),
        Err(e) => return Err(e),
    };
    if matches!(command, Command::Status | Command::Gc) && !conf.version.has_status_and_gc() {
        return Err(CniError::incompatible_version(format!(
            "{command} needs cniVersion 1.1.0; the configuration says {}",
            conf.version.as_str()
        )));
    }
    let node = node_config(name, command, &conf, lookup)?;
    let logging = log::Settings {
        log_file: &node.log_file,
        log_level: node.log_level,
        log_max_bytes: node.log_max_bytes,
        warnings: &node.warnings,
    };
    log::init(name, &logging, log_context(command, &env, &conf, &node));
    if let Some(e) = &decode_error {
        log::warn(
            "DEL: configuration not fully decoded; releasing what is known",
            json!({"err": e.to_string()}),
        );
    }
    log::debug(
        "configuration received",
        json!({"stdin": String::from_utf8_lossy(&stdin)}),
    );
    Ok(Request {
        env,
        stdin,
        conf,
        node,
        decode_error,
    })
}

/// The node config for this call ([`NodeConfig::resolve_with`]). DEL never stops on it: node
/// keys a stanza may not set are ignored, and a config that does not resolve gives the defaults
/// (with a warning on stderr: the log file is what the config names).
fn node_config(
    name: &'static str,
    command: Command,
    conf: &NetConf,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<NodeConfig, CniError> {
    let strictness = match command {
        Command::Del => Strictness::Ignore,
        _ => Strictness::Refuse,
    };
    match NodeConfig::resolve_with(&conf.raw, lookup, strictness) {
        Ok(node) => Ok(node),
        Err(e) if command == Command::Del => {
            log::stderr_warn(name, &format!("DEL continues with defaults: {e}"));
            Ok(NodeConfig::defaults())
        }
        Err(e) => Err(CniError::invalid_config(e.to_string())),
    }
}

/// The best-effort envelope DEL runs on when stdin does not decode.
fn lenient_conf(stdin: &[u8]) -> NetConf {
    let raw = decode_object(stdin).unwrap_or(Value::Object(Default::default()));
    let text = |key: &str| {
        raw.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    NetConf {
        version: SpecVersion::parse(raw.get("cniVersion").and_then(Value::as_str))
            .unwrap_or(SpecVersion::LATEST),
        name: text("name"),
        plugin_type: text("type"),
        raw,
    }
}

/// The keys operators filter on, on every line of the operation (upstream's names: `containerID`,
/// `netns`, `ifName`, `vpc`, `vpcAttachment`, `nodeName`; plus the network and the verb).
fn log_context(command: Command, env: &CniEnv, conf: &NetConf, node: &NodeConfig) -> Value {
    let mut context = json!({
        "command": command.as_str(),
        "containerID": env.container_id.as_ref().map(|c| c.as_str()),
        "netns": env.netns.as_ref().map(|p| p.display().to_string()),
        "ifName": env.ifname.as_ref().map(|i| i.as_str()),
        "network": conf.name,
        "vpc": conf.raw.get("vpc"),
        "vpcAttachment": conf.raw.get("vpcattachment"),
        "nodeName": node.node_name,
    });
    // A key without a value (no netns on this verb, no node name) is left out, not null.
    if let Some(map) = context.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    context
}

/// Runs the handler and turns its outcome into the reply; logs one line per operation.
fn handle<P: Plugin>(plugin: &P, req: Request) -> Reply {
    let started = Instant::now();
    log::begin_operation();
    let command = req.env.command;
    let version = req.conf.version.as_str();
    let outcome = match command {
        Command::Add => plugin.add(&req).map(|mut result| {
            result.cni_version = version.to_owned();
            Some(result)
        }),
        Command::Del => plugin.del(&req).map(|()| None),
        Command::Check => plugin.check(&req).map(|()| None),
        Command::Status => plugin.status(&req).map(|()| None),
        Command::Gc => plugin.gc(&req).map(|()| None),
        Command::Version => Ok(None),
    }
    .map_err(|e| e.to_cni());
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    match outcome {
        Ok(result) => {
            log::finish_operation(
                log::Level::Info,
                &format!("{command}: done"),
                closing(elapsed_ms, json!({})),
            );
            Reply {
                stdout: result.and_then(|r| serde_json::to_value(r).ok()),
                success: true,
            }
        }
        Err(e) if command == Command::Del && e.code != Code::TRY_AGAIN_LATER => {
            log::finish_operation(
                log::Level::Error,
                "DEL: step failed; reporting success so the runtime is not blocked",
                closing(elapsed_ms, json!({"code": e.code, "err": e.to_string()})),
            );
            Reply {
                stdout: None,
                success: true,
            }
        }
        Err(e) => {
            log::finish_operation(
                log::Level::Error,
                &format!("{command}: failed"),
                closing(elapsed_ms, json!({"code": e.code, "err": e.to_string()})),
            );
            error_reply(version, &e)
        }
    }
}

fn error_reply(version: &str, err: &CniError) -> Reply {
    Reply {
        stdout: Some(err.to_json(version)),
        success: false,
    }
}

/// A panic is a bug, but the runtime must still get one CNI error on stdout, not a torn stream.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let err = CniError::internal(format!("internal error (a bug; please report it): {info}"));
        eprintln!("{info}");
        println!("{}", err.to_json(SpecVersion::LATEST.as_str()));
    }));
}

#[cfg(test)]
mod tests;
