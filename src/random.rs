//! Unpredictable bytes from the kernel (`getrandom(2)`): session ids, bearer tokens, the audit
//! log's session id. A secret never falls back to a weaker source: callers get the error.

use std::io;

/// Fills `buffer` from the kernel's CSPRNG, blocking only until it is seeded (once, at boot).
pub fn fill(buffer: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buffer.len() {
        let rest = &mut buffer[filled..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`, which is valid and
        // writable for that length.
        let got = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if got < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        filled += got as usize;
    }
    Ok(())
}

/// `N` random bytes as lower-case hex (`2 * N` characters).
pub fn hex_id<const N: usize>() -> io::Result<String> {
    let mut bytes = [0u8; N];
    fill(&mut bytes)?;
    Ok(crate::hash::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_of_the_asked_length_and_differ() {
        let a = hex_id::<16>().unwrap();
        let b = hex_id::<16>().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
