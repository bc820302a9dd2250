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
