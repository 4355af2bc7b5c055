use super::*;
use serde_json::json;

// The sink is process-global, so everything that initialises it runs in this one test.
#[test]
fn lines_are_json_with_context_filtered_by_level_and_rotated_past_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("sub/galactic.log");
    let warnings = vec!["unknown log_level \"loud\"".to_owned()];
    let node = Settings {
        log_file: &log_file,
        log_level: Level::Info,
        log_max_bytes: 4096,
        warnings: &warnings,
    };
    init(
        "galactic-test",
        &node,
        json!({"command": "ADD", "containerID": "c1", "ifName": null}),
    );
    debug("hidden", Value::Null);
    info("ADD: done", json!({"durationMs": 1.5}));

    let (text, lines) = read_lines(&log_file);
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[1]["msg"], "ADD: done");
    assert_eq!(lines[1]["plugin"], "galactic-test");
    assert_eq!(lines[1]["containerID"], "c1");
    assert_eq!(lines[1]["durationMs"], 1.5);
    assert!(lines[1].get("ifName").is_none(), "null context is dropped");
    assert!(lines[1]["time"].as_str().unwrap().ends_with('Z'));

    for i in 0..100 {
        info("filler line to cross the cap", json!({"i": i}));
    }
    let rotated = dir.path().join("sub/galactic.log.1");
    assert!(rotated.exists(), "rotated file exists");
    assert!(std::fs::metadata(&log_file).unwrap().len() <= 4096 + 512);
    let all =
        std::fs::read_to_string(&rotated).unwrap() + &std::fs::read_to_string(&log_file).unwrap();
    assert!(
        all.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "no torn lines"
    );

    // One line per operation at info: its info records ride on the closing line; a warning is
    // written at once.
    std::fs::remove_file(&log_file).ok();
    std::fs::remove_file(&rotated).ok();
    reopen_log_file();
    begin_operation();
    info("ADD: allocation", json!({"new": true}));
    warn("an anomaly", json!({"what": "odd"}));
    info("ADD: routes installed", json!({"table": 1000}));
    finish_operation(Level::Info, "ADD: done", json!({"durationMs": 2.0}));
    info("after the operation", Value::Null);
    let (text, lines) = read_lines(&log_file);
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["msg"], "an anomaly");
    assert_eq!(lines[1]["msg"], "ADD: done");
    assert_eq!(lines[1]["durationMs"], 2.0);
    assert_eq!(
        lines[1]["events"],
        json!([{"msg": "ADD: allocation", "new": true}, {"msg": "ADD: routes installed", "table": 1000}])
    );
    assert_eq!(lines[2]["msg"], "after the operation");
    assert!(lines[2].get("events").is_none());
}

/// The log file's text and its lines, parsed.
fn read_lines(path: &Path) -> (String, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (text, lines)
}

/// Reopens the sink's file after a test removed it.
fn reopen_log_file() {
    let mut guard = SINK.lock().unwrap();
    let sink = guard.as_mut().unwrap();
    sink.file = open_append(&sink.path).ok();
}

#[test]
fn level_names_parse_case_insensitively() {
    assert_eq!(Level::parse(" WARNING "), Some(Level::Warn));
    assert_eq!(Level::parse("Debug"), Some(Level::Debug));
    assert_eq!(Level::parse("verbose"), None);
}
