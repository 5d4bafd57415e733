//! SHA-256 as lower-case hex: the audit chain, capped argument values and tool pins use it.

use sha2::{Digest, Sha256};

/// Lower-case hex of the SHA-256 of `data` (64 characters).
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    hex_into(&mut out, bytes);
    // Only ASCII digits were pushed.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends the lower-case hex of `bytes` to `out`: the audit chain writes two hashes per record
/// this way, without a `String` each.
pub fn hex_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let start = out.len();
    // Sized once, then filled: a `push` per digit costs a capacity check each.
    out.resize(start + bytes.len() * 2, 0);
    for (pair, byte) in out[start..].chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0x0f)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_as_lower_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0, 0xff, 0x1a]), "00ff1a");
        let mut out = b"x".to_vec();
        hex_into(&mut out, &[0xab, 0x01]);
        assert_eq!(out, b"xab01");
    }
}
