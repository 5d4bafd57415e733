//! The `[audit]` rotation keys through the public `load`: defaults, and keeping less history
//! as loosening.

use std::path::PathBuf;

use super::*;

fn layer(layer: Layer, text: &str) -> LayerSource {
    LayerSource {
        layer,
        path: PathBuf::from(format!("/{layer:?}/policy.toml")),
        text: text.to_string(),
    }
}

#[test]
fn rotation_defaults_to_64_mib_and_eight_files_kept() {
    let policy = load(&[], &[]).unwrap();
    assert_eq!(
        (
            policy.audit.rotate_mb.value,
            policy.audit.keep_rotated.value
        ),
        (64, 8)
    );
}

#[test]
fn keeping_less_audit_history_is_loosening() {
    let locked = layer(
        Layer::Org,
        "version = 1\n[audit]\nlocked = true\nrotate_mb = 100\nkeep_rotated = 0\n",
    );
    for refused in [
        "version = 1\n[audit]\nkeep_rotated = 3\n",
        "version = 1\n[audit]\nrotate_mb = 10\n",
    ] {
        let err = load(&[locked.clone(), layer(Layer::User, refused)], &[]).unwrap_err();
        assert!(err.message.contains("locks"), "{refused}: {}", err.message);
    }
    // More history is never refused: a larger file, or never rotating.
    let policy = load(
        &[
            locked,
            layer(Layer::User, "version = 1\n[audit]\nrotate_mb = 0\n"),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(
        (
            policy.audit.rotate_mb.value,
            policy.audit.keep_rotated.value
        ),
        (0, 0)
    );
    // A project policy may not delete history sooner than the built-in default.
    let err = load(
        &[layer(
            Layer::Project,
            "version = 1\n[audit]\nkeep_rotated = 1\n",
        )],
        &[],
    )
    .unwrap_err();
    assert!(err.message.contains("keep_rotated"), "{}", err.message);
    // A user policy without a lock may.
    let policy = load(
        &[layer(
            Layer::User,
            "version = 1\n[audit]\nkeep_rotated = 1\n",
        )],
        &[],
    )
    .unwrap();
    assert_eq!(policy.audit.keep_rotated.value, 1);
}
