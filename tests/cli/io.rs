//! Where output goes: stdout by default, `-o FILE` atomically (also over the input), nothing
//! with `--dry-run`; failures to write are exit 1 and leave no temporary file behind.

use crate::support::{
    at, fixture_text, fx, json_file, lcc_run, lcc_stdin, temp_files, tmp, with_text,
};

fn compacted_lossless() -> String {
    lcc_run(&[
        "compact",
        &fx("lossless.json"),
        "--preserve-recent",
        "0",
        "--quiet",
    ])
    .expect(0)
    .out()
}

#[test]
fn stdout_by_default_and_summary_on_stderr() {
    let r = lcc_run(&[
        "compact",
        &fx("spell-object-camel.json"),
        "--preserve-recent",
        "0",
    ])
    .expect(0);
    assert_eq!(
        r.out(),
        with_text(
            &fixture_text("spell-object-camel.json"),
            "tool_use_id",
            "call_a",
            "[identical output kept at call_b]"
        )
    );
    assert!(
        r.stderr.starts_with("lcc compact: tool calls\n"),
        "{}",
        r.stderr
    );
    let q = lcc_run(&["compact", &fx("spell-object-camel.json"), "--quiet"]).expect(0);
    assert_eq!(q.stderr, "", "--quiet prints nothing on stderr");
}

#[test]
fn a_dash_output_is_stdout() {
    let dir = tmp();
    let o = crate::support::run(
        crate::support::lcc()
            .current_dir(dir.path())
            .args(["compact", &fx("lossless.json"), "--preserve-recent", "0"])
            .args(["--quiet", "-o", "-"]),
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), compacted_lossless());
    assert!(
        !dir.path().join("-").exists(),
        "no file named '-' is written"
    );
}

#[test]
fn output_file_gets_what_stdout_would() {
    let dir = tmp();
    let out = at(dir.path(), "out.json");
    let r = lcc_run(&[
        "compact",
        &fx("lossless.json"),
        "--preserve-recent",
        "0",
        "--quiet",
        "-o",
        &out,
    ])
    .expect(0);
    assert!(r.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), compacted_lossless());
    assert!(temp_files(dir.path()).is_empty());
}

#[test]
fn stdin_to_output_file() {
    let dir = tmp();
    let out = at(dir.path(), "out.json");
    let src = fixture_text("lossless.json");
    lcc_stdin(
        &[
            "compact",
            "-",
            "--preserve-recent",
            "0",
            "--quiet",
            "-o",
            &out,
        ],
        src.as_bytes(),
    )
    .expect(0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), compacted_lossless());
}

#[test]
fn dry_run_writes_no_transcript_but_the_report() {
    let dir = tmp();
    let out = at(dir.path(), "out.json");
    let report = at(dir.path(), "report.json");
    let r = lcc_run(&[
        "compact",
        &fx("lossless.json"),
        "--preserve-recent",
        "0",
        "--dry-run",
        "-o",
        &out,
        "-r",
        &report,
    ])
    .expect(0);
    assert!(r.stdout.is_empty(), "no transcript on stdout");
    assert!(!std::path::Path::new(&out).exists(), "no transcript file");
    assert!(r.stderr.contains("--dry-run"), "{}", r.stderr);
    let v = json_file(&report);
    assert_eq!(
        v["tool_calls_deduped"], 5,
        "the report still says what would change"
    );

    let r = lcc_run(&["compact", &fx("lossless.json"), "--dry-run", "--quiet"]).expect(0);
    assert!(r.stdout.is_empty());
}

#[test]
fn output_may_overwrite_the_input_atomically() {
    let dir = tmp();
    let input = at(dir.path(), "session.json");
    std::fs::write(&input, fixture_text("lossless.json")).unwrap();
    lcc_run(&[
        "compact",
        &input,
        "--preserve-recent",
        "0",
        "--quiet",
        "-o",
        &input,
    ])
    .expect(0);
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        compacted_lossless()
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["session.json".to_string()], "no temp file left");
}

#[test]
fn writing_into_a_missing_directory_fails_cleanly() {
    let dir = tmp();
    let out = at(dir.path(), "missing/out.json");
    let r = lcc_run(&["compact", &fx("lossless.json"), "--quiet", "-o", &out]).expect(1);
    assert!(
        r.stderr
            .starts_with(&format!("error: could not write {out}: ")),
        "{}",
        r.stderr
    );
    assert!(temp_files(dir.path()).is_empty());
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());

    let report = at(dir.path(), "missing/report.json");
    let r = lcc_run(&[
        "compact",
        &fx("lossless.json"),
        "--quiet",
        "--dry-run",
        "-r",
        &report,
    ])
    .expect(1);
    assert!(r.stderr.contains("could not write"), "{}", r.stderr);
}

#[test]
fn a_failed_rename_removes_its_temporary_file_and_keeps_the_input() {
    // The target is a directory: the temporary file is created next to it, the rename fails,
    // and the temporary file must be removed.
    let dir = tmp();
    let input = at(dir.path(), "in.json");
    std::fs::write(&input, fixture_text("lossless.json")).unwrap();
    let target = at(dir.path(), "taken");
    std::fs::create_dir(&target).unwrap();
    let r = lcc_run(&[
        "compact",
        &input,
        "--preserve-recent",
        "0",
        "--quiet",
        "-o",
        &target,
    ])
    .expect(1);
    assert!(r.stderr.contains("could not write"), "{}", r.stderr);
    assert!(
        temp_files(dir.path()).is_empty(),
        "{:?}",
        temp_files(dir.path())
    );
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        fixture_text("lossless.json")
    );
}
