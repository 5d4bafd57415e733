//! JWT checks against a test issuer whose P-256 key is generated here.

use super::*;
use base64::Engine;
use jsonwebtoken::{EncodingKey, Header, encode};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::json;

pub(in crate::http::auth) struct Issuer {
    pub(in crate::http::auth) encoding: EncodingKey,
    pub(in crate::http::auth) jwk: Value,
}

pub(in crate::http::auth) fn issuer(kid: &str) -> Issuer {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    Issuer {
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({"kty":"EC","crv":"P-256","kid":kid,"alg":"ES256","use":"sig",
            "x": b64(&point[1..33]), "y": b64(&point[33..65])}),
    }
}

pub(in crate::http::auth) fn settings() -> JwtSettings {
    JwtSettings {
        issuer: "https://issuer.test".into(),
        audience: vec!["http://127.0.0.1:8080/mcp".into()],
        keys: KeySource::Url("http://127.0.0.1:1/jwks".into()),
        required_scopes: vec!["mcp".into()],
        identity_claim: "sub".into(),
    }
}

pub(in crate::http::auth) fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

pub(in crate::http::auth) fn claims() -> Value {
    json!({"iss":"https://issuer.test","aud":"http://127.0.0.1:8080/mcp","sub":"alice",
        "exp": now() + 300, "scope": "mcp other"})
}

pub(in crate::http::auth) fn sign(issuer: &Issuer, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = kid.map(String::from);
    encode(&header, claims, &issuer.encoding).unwrap()
}

pub(in crate::http::auth) fn keys(issuers: &[&Issuer]) -> JwkSet {
    serde_json::from_value(
        json!({"keys": issuers.iter().map(|i| i.jwk.clone()).collect::<Vec<_>>()}),
    )
    .unwrap()
}

#[test]
fn a_good_token_names_its_subject_and_scopes() {
    let issuer = issuer("k1");
    let token = sign(&issuer, Some("k1"), &claims());
    assert_eq!(
        verify(&settings(), &keys(&[&issuer]), &token),
        Ok(Verified {
            subject: "alice".into(),
            scopes: vec!["mcp".into(), "other".into()]
        })
    );
}

#[test]
fn each_claim_is_checked() {
    let issuer = issuer("k1");
    let set = keys(&[&issuer]);
    let with = |key: &str, value: Value| {
        let mut claims = claims();
        claims[key] = value;
        sign(&issuer, Some("k1"), &claims)
    };
    let cases = [
        (with("exp", json!(now() - 3600)), JwtFailure::Expired),
        (
            with("aud", json!("https://elsewhere.test/mcp")),
            JwtFailure::Audience,
        ),
        (with("iss", json!("https://evil.test")), JwtFailure::Issuer),
        (with("scope", json!("other")), JwtFailure::InsufficientScope),
        (with("nbf", json!(now() + 3600)), JwtFailure::NotYetValid),
        (
            with("sub", json!(7)),
            JwtFailure::MissingClaim("sub".into()),
        ),
    ];
    for (token, failure) in cases {
        assert_eq!(verify(&settings(), &set, &token), Err(failure));
    }
    let mut no_exp = claims();
    no_exp.as_object_mut().unwrap().remove("exp");
    assert_eq!(
        verify(&settings(), &set, &sign(&issuer, Some("k1"), &no_exp)),
        Err(JwtFailure::MissingClaim("exp".into()))
    );
}

#[test]
fn scopes_may_come_as_a_list() {
    let issuer = issuer("k1");
    let mut claims = claims();
    claims.as_object_mut().unwrap().remove("scope");
    claims["scp"] = json!(["mcp"]);
    let token = sign(&issuer, Some("k1"), &claims);
    assert!(verify(&settings(), &keys(&[&issuer]), &token).is_ok());
}

#[test]
fn another_key_or_a_forged_signature_is_refused() {
    let (ours, theirs) = (issuer("k1"), issuer("k2"));
    let set = keys(&[&ours]);
    assert_eq!(
        verify(&settings(), &set, &sign(&theirs, Some("k2"), &claims())),
        Err(JwtFailure::UnknownKey)
    );
    // Their key, our kid: the signature does not verify.
    assert_eq!(
        verify(&settings(), &set, &sign(&theirs, Some("k1"), &claims())),
        Err(JwtFailure::Signature)
    );
    // No kid: fine with one key, refused when it could be either.
    assert!(verify(&settings(), &set, &sign(&ours, None, &claims())).is_ok());
    assert_eq!(
        verify(
            &settings(),
            &keys(&[&ours, &theirs]),
            &sign(&ours, None, &claims())
        ),
        Err(JwtFailure::UnknownKey)
    );
}

#[test]
fn symmetric_and_unsigned_tokens_are_refused() {
    let issuer = issuer("k1");
    let set = keys(&[&issuer]);
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let hs = encode(&header, &claims(), &EncodingKey::from_secret(b"public")).unwrap();
    assert_eq!(verify(&settings(), &set, &hs), Err(JwtFailure::Algorithm));
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg":"none","kid":"k1"})),
        b64(&claims())
    );
    assert!(verify(&settings(), &set, &none).is_err());
    assert_eq!(
        verify(&settings(), &set, "not-a-jwt"),
        Err(JwtFailure::Malformed)
    );
}

#[tokio::test]
async fn the_validator_reads_a_key_file() {
    let issuer = issuer("k1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, json!({"keys": [issuer.jwk.clone()]}).to_string()).unwrap();
    let validator = JwtValidator::new(JwtSettings {
        keys: KeySource::File(path),
        ..settings()
    });
    let token = sign(&issuer, Some("k1"), &claims());
    assert_eq!(
        validator.authenticate(&token).await.unwrap().subject,
        "alice"
    );
    let missing = JwtValidator::new(JwtSettings {
        keys: KeySource::File(dir.path().join("nope")),
        ..settings()
    });
    assert!(matches!(
        missing.authenticate(&token).await,
        Err(JwtFailure::Keys(_))
    ));
}
