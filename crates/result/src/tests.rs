use super::*;

const SCHEMA_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema/result-v1.json");
const FIXTURE: &str = include_str!("../tests/fixtures/result-v1-sample.json");

#[test]
fn committed_schema_matches_types() {
    let generated = serde_json::to_string_pretty(&ResultDoc::json_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(SCHEMA_FILE, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(SCHEMA_FILE).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/schema/result-v1.json is out of date with the result types; \
         run `UPDATE_SCHEMA=1 cargo test -p headroom-result` and commit it"
    );
}

#[test]
fn stored_fixture_keeps_loading() {
    let doc = ResultDoc::from_json(FIXTURE).expect("the v1 fixture must always load");
    assert_eq!(doc.schema, SCHEMA);
    assert_eq!(doc.label.as_deref(), Some("before-10gbe"));
    assert_eq!(doc.probes.len(), 2);
    assert_eq!(doc.probes[0].kind(), ProbeKind::Disk);
    match &doc.probes[0].spec {
        ProbeSpec::Disk(d) => assert_eq!(d.block_size, 1_048_576),
        other => panic!("expected disk spec, got {other:?}"),
    }
    assert_eq!(doc.probes[1].kind(), ProbeKind::Net);
    assert!((doc.ceilings[0].bytes_per_sec - 117.69e6).abs() < 1.0);
    assert_eq!(doc.verdict.as_ref().unwrap().bottleneck, "link");
}

#[test]
fn round_trip_is_lossless() {
    let doc = ResultDoc::from_json(FIXTURE).unwrap();
    let again = ResultDoc::from_json(&doc.to_json()).unwrap();
    assert_eq!(doc, again);
    let v: serde_json::Value = serde_json::from_str(&doc.to_json()).unwrap();
    assert_eq!(v["probes"][0]["kind"], "disk");
    assert!(v["probes"][0]["spec"]["queue_depth"].is_number());
}

#[test]
fn wrong_documents_are_named() {
    assert!(matches!(ResultDoc::from_json("not json"), Err(LoadError::NotJson(_))));
    assert!(matches!(ResultDoc::from_json(r#"{"start":{"connected":[]}}"#), Err(LoadError::NoSchema)));
    let future = r#"{"schema":"headroom.result/v9"}"#;
    let err = ResultDoc::from_json(future).unwrap_err();
    assert!(err.to_string().contains("headroom.result/v9"), "{err}");
    let broken = r#"{"schema":"headroom.result/v1","tool":1}"#;
    assert!(matches!(ResultDoc::from_json(broken), Err(LoadError::Invalid(_))));
}

/// The stored fixture with one field replaced (a JSON pointer) by raw JSON text.
fn fixture_with(pointer: &str, raw: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
    *v.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer} in the fixture")) = serde_json::json!("__X__");
    v.to_string().replace("\"__X__\"", raw)
}

#[test]
fn impossible_figures_are_refused_with_the_field_path() {
    let cases = [
        ("/probes/0/summary/bytes_per_sec", "1e308", "probes[0].summary.bytes_per_sec"),
        ("/probes/1/summary/duration_s", "-3", "probes[1].summary.duration_s"),
        ("/probes/0/summary/latency_ns/p99", "-7450580596.92", "probes[0].summary.latency_ns.p99"),
        ("/ceilings/0/bytes_per_sec", "1e300", "ceilings[0].bytes_per_sec"),
        (
            "/probes/0/summary",
            r#"{"bytes_per_sec": 1, "duration_s": 1, "contention": {"other_busy_cores": -1, "window_s": 1}}"#,
            "probes[0].summary.contention.other_busy_cores",
        ),
    ];
    for (pointer, raw, path) in cases {
        let err = ResultDoc::from_json(&fixture_with(pointer, raw)).unwrap_err();
        assert!(matches!(err, LoadError::Impossible(_)), "{pointer}={raw}: {err}");
        assert!(err.to_string().contains(path), "{err}");
    }
    // A figure past f64 is not a number serde can read: refused as invalid content.
    assert!(ResultDoc::from_json(&fixture_with("/probes/0/summary/bytes_per_sec", "1e999")).is_err());
}

#[test]
fn a_stream_past_the_cap_is_refused_without_reading_it_all() {
    // An endless stream (like /dev/zero): refused after the cap, not read until memory runs out.
    let err = ResultDoc::from_reader(std::io::repeat(b' ')).unwrap_err();
    assert!(matches!(err, LoadError::TooLarge), "{err}");
    assert!(err.to_string().contains("64 MiB"), "{err}");
    assert!(ResultDoc::from_reader(FIXTURE.as_bytes()).is_ok());
    assert!(matches!(ResultDoc::from_reader(&[0xff, 0xfe][..]), Err(LoadError::NotUtf8)));
}

#[test]
fn an_input_file_is_capped_and_a_fifo_without_writer_does_not_block() {
    let err = crate::read_input_file(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(matches!(err, LoadError::TooLarge), "{err}");
    let fifo = std::env::temp_dir().join(format!("headroom-result-fifo-{}", std::process::id()));
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
    let (tx, rx) = std::sync::mpsc::channel();
    let at = fifo.clone();
    std::thread::spawn(move || tx.send(crate::read_input_file(&at).map(|b| b.len()).map_err(|e| e.to_string())));
    let read = rx.recv_timeout(std::time::Duration::from_secs(20));
    std::fs::remove_file(&fifo).unwrap();
    assert_eq!(read.expect("opening a FIFO nobody writes to blocked"), Ok(0));
}

#[test]
fn documents_that_are_not_objects_have_no_schema() {
    assert!(matches!(ResultDoc::from_json("[1, 2]"), Err(LoadError::NoSchema)));
    assert!(matches!(ResultDoc::from_json(r#"{"schema": 7}"#), Err(LoadError::NoSchema)));
    assert!(matches!(ResultDoc::from_json("{\"schema\": "), Err(LoadError::NotJson(_))));
}

#[test]
fn soak_events_may_precede_the_start() {
    // A vmkernel.log holds flaps from before the soak began: negative times are history.
    let mut doc = ResultDoc::from_json(FIXTURE).unwrap();
    let event = |t_s: f64| SoakEvent {
        t_s,
        end_s: Some(t_s + 5.0),
        kind: crate::SoakEventKind::Flap,
        source: "vmkernel_log".into(),
        device: None,
        message: "vusb0 down".into(),
    };
    doc.soak = Some(Soak { events: vec![event(-435_529.0)], ..Soak::default() });
    assert!(ResultDoc::from_json(&doc.to_json()).is_ok());
    doc.soak = Some(Soak { events: vec![event(-1e12)], ..Soak::default() });
    let err = ResultDoc::from_json(&doc.to_json()).unwrap_err();
    assert!(err.to_string().contains("soak.events[0].t_s"), "{err}");
}

/// Every stored result document of the workspace: this crate's sample and
/// analysis's fixtures, the annotated ones (with ceilings and typed verdicts) included.
fn stored_documents() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let dirs = ["result/tests/fixtures", "analysis/tests/fixtures", "analysis/tests/fixtures/annotated"];
    let mut docs = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if path.extension().is_some_and(|e| e == "json") && text.contains(SCHEMA) {
                docs.push((path.display().to_string(), text));
            }
        }
    }
    docs
}

/// JSON equality where a number is its value: a stored `300` is the `300.0`
/// an f64 field writes back.
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn every_stored_document_reserialises_to_the_same_json() {
    let docs = stored_documents();
    assert!(docs.len() >= 20, "found only {} stored documents", docs.len());
    let mut verdicts = 0;
    for (path, text) in docs {
        let doc = ResultDoc::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        verdicts += doc.verdict.as_ref().map_or(0, |v| v.directions.len());
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut again: serde_json::Value = serde_json::from_str(&doc.to_json()).unwrap();
        // Disk specs have written `fixedbufs` and `force_async` (false by
        // default) since they were added; documents stored before lack them.
        for (i, probe) in again["probes"].as_array_mut().into_iter().flatten().enumerate() {
            for key in ["fixedbufs", "force_async"] {
                if original["probes"][i]["spec"].get(key).is_none() && probe["spec"][key] == false {
                    probe["spec"].as_object_mut().unwrap().remove(key);
                }
            }
        }
        assert!(same(&original, &again), "{path} changed on the way through the types:\n{again:#}");
    }
    assert!(verdicts >= 15, "the annotated fixtures carry typed verdicts ({verdicts} directions)");
}

#[test]
fn started_at_is_rfc3339_utc_to_the_second() {
    let t = now_rfc3339();
    assert_eq!(t.len(), 20, "{t}");
    assert!(t.ends_with('Z') && t.starts_with("20") && t.as_bytes()[10] == b'T', "{t}");
}

#[test]
fn only_a_flag_other_than_o_direct_is_written() {
    let spec = |flag| DiskSpec {
        rw: "read".into(),
        block_size: 4096,
        queue_depth: 1,
        jobs: 1,
        direct: true,
        direct_flag: flag,
        sync: "none".into(),
        engine: "psync".into(),
        path: "x".into(),
        rwmix_read: None,
        size: None,
        filesystem: None,
        fio_equivalent: None,
        fixedbufs: false,
        force_async: false,
        protocol: None,
    };
    let linux = serde_json::to_value(spec(DirectFlag::ODirect)).unwrap();
    assert!(linux.get("direct_flag").is_none(), "{linux}");
    let windows = serde_json::to_value(spec(DirectFlag::FileFlagNoBuffering)).unwrap();
    assert_eq!(windows["direct_flag"], "file_flag_no_buffering");
    let back: DiskSpec = serde_json::from_value(windows).unwrap();
    assert_eq!(back.direct_flag.word(), "FILE_FLAG_NO_BUFFERING");
    let old: DiskSpec = serde_json::from_value(linux).unwrap();
    assert_eq!(old.direct_flag.word(), "O_DIRECT");
}
