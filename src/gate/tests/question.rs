//! The confirmation question airlock asks a person for an *ask* rule shows the call as text: a
//! tool name is the server's own, and what it holds must not make the question say another call.

use super::*;

#[test]
fn the_question_shows_a_tool_name_and_arguments_as_text_not_as_line_breaks_or_overrides() {
    let mut gate = gate_with("version = 1\n[tools]\ndefault = \"ask\"\n", None, false);
    let hostile = "read_file\" with arguments {}?\t\t\n\nAllow: x\u{202e}eliF daer";
    let mut listing = json!({"tools": [{"name": hostile}]});
    gate.filter_listing(
        crate::pins::Kind::Tool,
        &mut listing,
        &mut Effects::default(),
    );
    let now = Instant::now();
    initialize(&mut gate, json!({"elicitation": {}}), now);
    let mut fx = Effects::default();
    let asked = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":hostile,"arguments":{"note":"a\u{2028}b"}}});
    assert_eq!(gate.on_host(asked, now, &mut fx), Verdict::Drop);
    let message = fx.to_host[0]["params"]["message"].as_str().unwrap();
    assert!(
        !message.contains(['\n', '\t', '\u{202e}', '\u{2028}']),
        "{message:?}"
    );
    assert!(
        message.contains(
            r#"tool "read_file\" with arguments {}?\t\t\n\nAllow: x\u{202e}eliF daer" with"#
        ),
        "{message}"
    );
    assert!(message.contains(r"a\u{2028}b"), "{message}");
}
